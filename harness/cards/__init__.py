"""Card backends: each card is a synchronous `Card` (`infer(batch, n) -> outputs`) or an `AsyncCard`
with several batches in flight (`submit` / `poll` / `wait`); harness/cards/base.py has both contracts.

Which backend makes the cards of a run is the only thing the harness asks of this package:
`make_card(spec, index, cpus)` on the card's own (pinned) worker thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cards.base import AsyncCard, Card

if TYPE_CHECKING:
    from harness.benchmarks import OutputQuant
    from harness.gpu import GpuRef

ONNXRUNTIME_BACKENDS = ("onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt", "onnxruntime-openvino")
GPU_BACKENDS = ("onnxruntime-cuda", "onnxruntime-tensorrt")  # NVIDIA GPUs, by CUDA ordinal (harness.gpu)
# "1": an openvino card runs in a worker process even alone (runs with several openvino cards always do)
PROCESS_ENV = "APPLIANCE_OPENVINO_PROCESS"
# "1": --backend onnxruntime runs the GPU cards' IO-binding data path on the CPU provider (the GPU check's rehearsal)
IO_BINDING_ENV = "APPLIANCE_IO_BINDING"
BACKENDS = (*ONNXRUNTIME_BACKENDS, "openvino", "null", "simulated")


@dataclass(frozen=True)
class BackendSpec:
    """What every card of a run is made from."""

    backend: str
    model_path: Path | None
    input_name: str
    outputs: tuple[str, ...]
    output_specs: tuple[tuple[tuple[int, ...], str], ...]
    profile: object | None = None  # simulated_card.Profile for backend "simulated"
    output_casts: tuple[OutputQuant | None, ...] = ()  # per output: the reduced precision a card returns
    processes: bool = False  # openvino: each card in a worker process of its own (runs with several cards)
    requests: int = 1  # openvino: infer requests (one stream each) per card, its depth; `appliance run --requests`
    inference_precision: str = "f32"  # what the runtime computes in: f32, or bf16 (openvino; harness.bf16)
    gpus: tuple[GpuRef, ...] = ()  # GPU backends: card i's GPU
    warm_batch: int = 1  # GPU backends: the run's batch size, run once at load so one that does not fit is refused
    benchmark: str = ""  # the benchmark's name (IO-binding card: its input mean, the outputs the host reads)
    precision: str = "fp32"  # the prepared model's precision (TensorRT's precision flags, its engine key)
    buckets: tuple[int, ...] = ()  # IO-binding card: the batch sizes it runs and warms (gpu_plan.run_buckets)
    io_binding: bool = False  # onnxruntime: the IO-binding card (harness.cards.gpu_iobinding); GPU backends always


def make_card(spec: BackendSpec, index: int, cpus: tuple[int, ...]) -> Card | AsyncCard:
    if spec.backend == "null":
        from harness.cards.null_card import NullCard

        return NullCard(index, spec.output_specs, cpus)
    if spec.backend == "simulated":
        from harness.cards.simulated_card import PipelinedSimulatedCard, Profile, SimulatedCard

        assert isinstance(spec.profile, Profile)
        if spec.profile.pipeline is not None:
            return PipelinedSimulatedCard(index, spec.profile, spec.output_specs, cpus)
        return SimulatedCard(index, spec.profile, spec.output_specs, cpus)
    if spec.backend == "openvino":
        assert spec.model_path is not None
        if spec.processes or os.environ.get(PROCESS_ENV) == "1":
            from harness.cards.openvino_process import OpenVinoProcessCard

            return OpenVinoProcessCard(index, spec.model_path, spec.input_name, spec.outputs, spec.output_specs, cpus,
                                       spec.requests, spec.inference_precision)
        from harness.cards.openvino_card import OpenVinoCard

        return OpenVinoCard(index, spec.model_path, spec.input_name, spec.outputs, cpus, spec.requests,
                            spec.inference_precision)
    from harness.cards.onnxruntime_card import OnnxRuntimeCard

    if spec.inference_precision != "f32":  # the plan refuses it first; a card never computes other than it says
        from harness.bf16 import check_backend

        check_backend(spec.backend)
    if spec.backend in GPU_BACKENDS or (spec.backend == "onnxruntime" and spec.io_binding):
        from harness.cards.gpu_iobinding import IoBindingCard

        return IoBindingCard(spec, index, cpus)
    return OnnxRuntimeCard(spec, index, cpus)
