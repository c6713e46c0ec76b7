"""The card as warm-up and the timed bursts see it (`SystemUnderTest.warm_up`, `time_under_load`): run on the
card's own thread (a posted `Call`), one batch at a time or with the card kept full, each batch counted."""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from harness.run.cards.base import AsyncCard, CardInfo, Outputs
from harness.run.sut.worker.staging import Staging
from harness.run.sut.worker.state import Input


class WarmUpCard:
    """The card as warm-up sees it: `infer` one batch at once (submit, wait), each counted."""

    def __init__(self, worker: Staging, card: AsyncCard) -> None:
        self.worker, self.card = worker, card
        self.info: CardInfo = card.info
        self.input_dtype = card.input_dtype

    @property
    def depth(self) -> int:
        return self.worker.depth

    def input(self, indices: np.ndarray, out: np.ndarray | None) -> Input:
        """Samples `indices` as this card reads them: staged into `out`, or its rows in the replica."""
        return self.worker.card_input(indices, out)

    def infer(self, batch: Input, n: int) -> Outputs:
        self.worker.warm_hand(self.card, batch, n)
        return self.card.wait()

    def burst(self, batch: Input, n: int, batches: int,
              complete: Callable[[Outputs], object] = lambda _: None) -> tuple[float, float]:
        """`batches` batches with the card kept full (`depth` in flight: the next one submitted as the
        oldest comes back). Returns the seconds per batch (first submit to last back, over `batches`:
        a card's fill and drain are in it, so a short burst errs on the slow side) and the median batch
        latency under that load (submit to back: a batch waits for the card's other work); `complete`
        runs on each batch back (the host's encoding), before the next submit, as on the card thread in
        a run. A pipelined card's rate, which one batch at a time (its latency) understates."""
        started: deque[float] = deque()
        latencies: list[float] = []
        start = time.perf_counter()
        while len(latencies) < batches:
            while len(started) < self.depth and len(latencies) + len(started) < batches:
                started.append(time.perf_counter())
                self.worker.warm_hand(self.card, batch, n)
            outputs = self.card.wait()
            latencies.append(time.perf_counter() - started.popleft())
            complete(outputs)
        return (time.perf_counter() - start) / batches, statistics.median(latencies)
