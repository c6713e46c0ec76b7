"""A card worker's input: a batch's samples staged into a staging buffer (or found in the replica, for a card that
copies from there itself), handed to the card, and the buffer given back once the card has read it.

Which thread: the feeder stages into the buffers it takes from `free`; the card thread stages into its own (OWN)
and hands every batch to the card. The staging buffers are made by harness.run.buffers (how many:
`buffers.staging_count`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.run.buffers import OWN
from harness.run.cards.base import AsyncCard
from harness.run.qsl import ReplicaRows
from harness.run.sut.messages import Batch, Staged
from harness.run.sut.worker.state import Input, WorkerState


@dataclass(slots=True)
class InFlight:
    """A batch on the card: the staging buffer it holds until the card is done with it, when it was submitted."""

    batch: Batch
    buf: int
    submitted: float


class Staging(WorkerState):
    """Staging a batch, handing it to the card, freeing its buffer."""

    def _stage(self, samples: Batch, buf: int) -> Staged:
        """Stage a batch into staging buffer `buf` (or find its rows in the replica, for a card that copies
        from there itself); an error is this card's failure, raised where the card would have run the batch."""
        try:
            return Staged(samples, buf, self.card_input(samples.indices, self.buffers[buf]), None)
        except Exception as exc:
            return Staged(samples, buf, None, exc)

    def card_input(self, indices: np.ndarray, out: np.ndarray | None) -> Input:
        """The feeder or card thread (`WarmUpCard.input` too): samples `indices` as this card reads them, staged
        into `out` (None: a card that reads no input) or, while it copies from the replica, their rows there."""
        replica = self.qsl.replica_for(self.slot.index)
        if self.from_replica:
            return self.qsl.rows(indices, replica)
        return None if out is None else self.qsl.stage(indices, out, replica)

    def _hand(self, card: AsyncCard, batch: Input, n: int) -> None:
        """Submit a batch: staged (or nothing) through `submit`, rows of the replica through the reader."""
        if isinstance(batch, ReplicaRows):
            assert self.reader is not None  # rows only while the reader reads the replica (`from_replica`)
            self.reader.submit_rows(batch)
        else:
            card.submit(batch, n)

    def warm_hand(self, card: AsyncCard, batch: Input, n: int) -> None:
        """The card thread, warming up (`WarmUpCard`): hand a batch, counted in `warmup_batches`."""
        self._hand(card, batch, n)
        self.warmup_batches += 1

    def _release(self, buf: int) -> None:
        if buf != OWN:
            self.free.put(buf)  # only now: the card has read it

    def _replica_loaded(self, replica: np.ndarray | None, node: int | None) -> None:
        """The qsl's watch (on the loading thread, nothing in flight): the reader page-locks the replica
        loaded now and says whether it copies its batches from there; if not, they are staged."""
        assert self.reader is not None
        self.from_replica = self.reader.reader.replica_loaded(replica, node)
