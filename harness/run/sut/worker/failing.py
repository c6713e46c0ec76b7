"""A card that fails mid-run: it is marked failed (dispatch's `card_failed`), its taking thread woken to stop, and
every batch it holds (on the card, staged, queued) goes back to dispatch to run on the other cards.
"""

from __future__ import annotations

from collections import deque

from harness.run.sut.messages import Batch
from harness.run.sut.worker.staging import InFlight
from harness.run.sut.worker.taking import Taking


class Failing(Taking):
    """A failed card's batches handed back, on its card thread."""

    def _fail_holding(self, exc: BaseException, batches: list[Batch], flight: deque[InFlight]) -> None:
        """The card raised: every batch it holds is untrustworthy and goes back to dispatch too."""
        for f in flight:
            self._release(f.buf)
        self.on_card = 0
        self._fail(exc, [*batches, *(f.batch for f in flight)])
        flight.clear()

    def _fail(self, exc: BaseException, batches: list[Batch]) -> None:
        took = self.accepted + self.warmup_batches
        self.dispatch.card_failed(self, f"{self._label()} failed after {took} batches ({self.warmup_batches} of "
                                        f"them warm-up): {type(exc).__name__}: {exc}")
        with self.cv:
            self.cv.notify_all()
        for batch in batches:
            self.dispatch.redispatch(batch)
