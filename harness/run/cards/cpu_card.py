"""The onnxruntime CPU backend's cards (its record's `card`): the plain onnxruntime card, or with
APPLIANCE_IO_BINDING=1 the GPU cards' IO-binding data path on CPU OrtValues (the GPU check's rehearsal). A module of
its own: it imports both card modules, which import each other one way only."""

from __future__ import annotations

from harness.run.cards.gpu_iobinding import IoBindingCard
from harness.run.cards.onnxruntime_card import OnnxRuntimeCard
from harness.run.cards.spec import BackendSpec

__all__ = ["from_spec"]


def from_spec(spec: BackendSpec, index: int, cpus: tuple[int, ...]) -> OnnxRuntimeCard:
    return IoBindingCard(spec, index, cpus) if spec.io_binding else OnnxRuntimeCard(spec, index, cpus)
