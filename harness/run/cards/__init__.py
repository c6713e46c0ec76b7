"""Card backends: each card is a synchronous `Card` (`infer(batch, n) -> outputs`) or an `AsyncCard`
with several batches in flight (`submit` / `poll` / `wait`); harness/run/cards/base.py has both contracts.

Which backend makes the cards of a run is the only thing the harness asks of this package:
`make_card(spec, index, cpus)` on the card's own (pinned) worker thread.
"""

from __future__ import annotations

import os

from harness.run.cards import backends
from harness.run.cards.backends import check_computes
from harness.run.cards.base import AsyncCard, Card
from harness.run.cards.spec import PROCESS_ENV, BackendSpec


def make_card(spec: BackendSpec, index: int, cpus: tuple[int, ...]) -> Card | AsyncCard:
    if spec.backend == "null":
        from harness.run.cards.null_card import NullCard

        return NullCard(index, spec.output_specs, cpus)
    if spec.backend == "simulated":
        from harness.run.cards.simulated_card import PipelinedSimulatedCard, Profile, SimulatedCard

        assert isinstance(spec.profile, Profile)
        if spec.profile.pipeline is not None:
            return PipelinedSimulatedCard(index, spec.profile, spec.output_specs, cpus)
        return SimulatedCard(index, spec.profile, spec.output_specs, cpus)
    if spec.backend == "openvino":
        assert spec.model_path is not None
        if spec.processes or os.environ.get(PROCESS_ENV) == "1":
            from harness.run.cards.openvino_process import OpenVinoProcessCard

            return OpenVinoProcessCard(index, spec.model_path, spec.input_name, spec.outputs, spec.output_specs, cpus,
                                       spec.requests, spec.inference_precision)
        from harness.run.cards.openvino_card import OpenVinoCard

        return OpenVinoCard(index, spec.model_path, spec.input_name, spec.outputs, cpus, spec.requests,
                            spec.inference_precision)
    from harness.run.cards.onnxruntime_card import OnnxRuntimeCard

    if spec.inference_precision != "f32":  # the plan refuses it first; a card never computes other than it says
        check_computes(spec.backend, "bf16")
    if backends.get(spec.backend).gpu or (spec.backend == "onnxruntime" and spec.io_binding):
        from harness.run.cards.gpu_iobinding import IoBindingCard

        return IoBindingCard(spec, index, cpus)
    return OnnxRuntimeCard(spec, index, cpus)

