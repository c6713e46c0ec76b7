"""null card: answers at once with zero-filled outputs, to measure the harness itself."""

from __future__ import annotations

import numpy as np

from harness.cards.base import CardInfo


class NullCard:
    """Returns outputs of the right shapes without computing anything.

    Results from it are meaningless by design; every summary of a null-card run says so.
    """

    def __init__(self, index: int, output_shapes: tuple[tuple[tuple[int, ...], str], ...],
                 cpus: tuple[int, ...]) -> None:
        self.output_shapes = output_shapes
        self.info = CardInfo(index=index, backend="null", device="none", cpus=cpus, emulated=True,
                             details={"note": "returns zeros at once; measures harness overhead only"})

    def infer(self, batch: np.ndarray) -> list[np.ndarray]:
        n = batch.shape[0]
        return [np.zeros((n, *shape), dtype=dtype) for shape, dtype in self.output_shapes]

    def close(self) -> None:
        pass
