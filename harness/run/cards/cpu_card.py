"""The onnxruntime CPU backend's cards and settings (its record's `card` and `settings`): the plain onnxruntime card,
or with APPLIANCE_IO_BINDING=1 the GPU cards' IO-binding data path on CPU OrtValues (the GPU check's rehearsal).

The switch is the CPU backend's own choice, so it is read here, by its record's `settings`; what it makes are the
IO-binding card's settings (`IoBindingSettings` without a GPU), as it is that card that runs. A module of its own: it
imports both card modules, which import each other one way only."""

from __future__ import annotations

from harness.core import environment
from harness.hw import gpu_plan
from harness.run.cards.backends import Planned
from harness.run.cards.gpu_iobinding import IoBindingCard, IoBindingSettings
from harness.run.cards.onnxruntime_card import OnnxRuntimeCard
from harness.run.cards.spec import BackendSpec

__all__ = ["IO_BINDING_ENV", "from_spec", "settings"]

# "1": --backend onnxruntime runs the GPU cards' IO-binding data path on the CPU provider (the GPU check's rehearsal)
IO_BINDING_ENV = "APPLIANCE_IO_BINDING"


def settings(planned: Planned) -> IoBindingSettings | None:
    """The IO-binding card's settings with APPLIANCE_IO_BINDING=1 (the run's batch and buckets); None: the plain
    card, which takes none."""
    if not environment.switch(IO_BINDING_ENV):
        return None
    return IoBindingSettings(planned.batch, gpu_plan.run_buckets(planned.scenario, planned.batch), planned.benchmark)


def from_spec(spec: BackendSpec[IoBindingSettings | None], index: int, cpus: tuple[int, ...]) -> OnnxRuntimeCard:
    return OnnxRuntimeCard(spec, index, cpus) if spec.settings is None else IoBindingCard(spec, index, cpus)
