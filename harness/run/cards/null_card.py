"""null card: answers at once with zero-filled outputs, to measure the harness itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from harness.run.cards.base import CardInfo, PageableHostBuffers, ZeroOutputs

if TYPE_CHECKING:
    from harness.run.cards.spec import BackendSpec


class NullCard(PageableHostBuffers):
    """Returns outputs of the right shapes without computing anything or reading its input.

    It declares no input (`input_dtype = None`), so the harness stages nothing for it: a null run
    measures queues, batching, threads and completions. Staging speed is measured on its own
    (tools/bench_copy.py). Results from it are meaningless by design; every summary says so.
    """

    input_dtype = None

    def __init__(self, index: int, output_shapes: tuple[tuple[tuple[int, ...], str], ...],
                 cpus: tuple[int, ...]) -> None:
        self._zeros = ZeroOutputs(output_shapes)
        self.info = CardInfo(index=index, backend="null", device="none", cpus=cpus, emulated=True,
                             details={"note": "returns zeros at once; measures harness overhead only"})

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        return self._zeros(n)

    def close(self) -> None:
        pass


def from_spec(spec: BackendSpec[None], index: int, cpus: tuple[int, ...]) -> NullCard:
    """The null backend's cards (its record's `card`)."""
    return NullCard(index, spec.output_specs, cpus)
