"""Taking work off a card's queue: the taking thread (the feeder, or the card thread of a direct card) takes the
next batch (its own queue first, then the shared backlog) or warm-up call, and the feeder stages each batch for
the card thread.
"""

from __future__ import annotations

from harness.run.sut.messages import STOP, Batch, Call
from harness.run.sut.worker.staging import Staging


class Taking(Staging):
    """The taking thread's side of the card queue, and the feeder's loop."""

    def _take(self) -> Batch | Call | None:
        """The next warm-up call or batch (own queue, then the backlog), waiting on `cv`; None once the worker
        stops or its card has failed."""
        with self.cv:
            while True:
                if self.calls:
                    return self.calls.popleft()
                if self.stopping or not self.alive:
                    self.waiting = False
                    return None
                self.waiting = True  # before looking, so a dispatcher that adds after the look notifies
                if self.queue:
                    self.waiting = False
                    return self.queue.popleft()
                batch = self.dispatch.take_backlog()
                if batch is not None:
                    self.waiting = False
                    self.stolen += 1
                    return batch
                self.cv.wait()

    def _give_back_queue(self) -> None:
        """A failed card: what is still queued here runs elsewhere."""
        with self.cv:
            left = list(self.queue)
            self.queue.clear()
        for batch in left:
            self.dispatch.redispatch(batch)

    def _feed_loop(self) -> None:
        """The feeder (`c<i>.feed`): for each free staging buffer, take a batch and stage it into that buffer."""
        self._pin("feed")
        while (buf := self.free.get()) is not None:
            samples = self._take()
            if samples is None:
                break
            assert isinstance(samples, Batch)  # calls go to the card queue when there is a feeder
            if not self.alive:
                self.dispatch.redispatch(samples)
                break
            self.to_card.put(self._stage(samples, buf))
        if not self.alive:
            self._give_back_queue()
        self.to_card.put(STOP)
