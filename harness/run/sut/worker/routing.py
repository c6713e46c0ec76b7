"""What dispatch asks of a card worker: how loaded it is for one more batch, and the batch itself.

The intake thread (and a card thread re-dispatching a failed card's batches) calls these under dispatch's lock,
except `has_room`. They read counters other threads write (`finished`, `on_card`, `busy_until`, `service_s`,
`stolen`: one attribute store each, by one thread) without a lock: a stale read makes one routing choice slightly
worse, never loses a batch. They write only `dispatched`, `queue`, `to_card` (and `mark_dead`, `alive`).
"""

from __future__ import annotations

from harness.run.sut.messages import Batch
from harness.run.sut.worker.state import WorkerState

CANNOT_TAKE = float("inf")  # `routing_load` of a card that takes no batch now


class Routing(WorkerState):
    """A card as dispatch sees it: its load, whether it is idle or has room, a batch given to it."""

    def routing_load(self, now: float, queue_depth: int) -> float:
        """Dispatch, under its lock: how loaded this card is for one more batch, lower first: at most 0 with room on
        the card (less the more room), else Server's `work_ahead(now)` or Offline's batches in hand past the card's
        room; `CANNOT_TAKE` for a failed card or one whose queue holds `queue_depth` batches. Reads only."""
        if not self.alive or len(self.queue) >= queue_depth:
            return CANNOT_TAKE
        if self.server:
            return self.work_ahead(now)
        return self.in_hand - self.depth + 1

    def idle(self) -> bool:
        """Dispatch, under its lock: nothing in hand (a card with room may still be computing). Reads only."""
        return self.in_hand <= 0

    def has_room(self) -> bool:
        """The intake thread, no lock (an overdue Server batch looking for a card): alive, with room for a batch on
        the card. Reads only."""
        return self.alive and self.in_hand < self.depth

    def take(self, batch: Batch) -> None:
        """Dispatch, under its lock: one more batch for this card, counted in `dispatched` (written only here). An
        idle card with a feeder gets it on its card thread's queue (`to_card`: staged there, one hop, not two);
        otherwise it goes on this card's `queue` and the taking thread is woken if it waits."""
        idle = self.idle()
        self.dispatched += 1
        if idle and not self.direct:
            self.to_card.put(batch)
        else:
            self.queue.append(batch)
            self.wake()

    def wake(self) -> None:
        """Dispatch, under its lock (`take`, and a backlog to drain): wake the taking thread if it waits on `cv`."""
        if self.waiting:
            with self.cv:
                self.cv.notify()

    def work_ahead(self, now: float) -> float:
        """Seconds until a batch queued here now would reach the card: the rest of the oldest batch on
        the card, then a batch time (divided among the card's `depth` slots) for each batch in hand not
        yet on it. At most 0 for a card with room for another batch (less the more room it has);
        before the first batch time is known, busy cards compare by batches in hand. Reads only."""
        in_hand = self.in_hand
        if in_hand < self.depth:
            return float(in_hand - self.depth + 1)
        on_card = self.on_card
        rest = max(self.busy_until - now, 1e-6) if on_card else 0.0  # an overdue batch: back any moment
        return rest + max(self.service_s, 1e-6) / self.depth * (in_hand - on_card)
