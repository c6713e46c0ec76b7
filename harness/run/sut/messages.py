"""The values that cross the SUT's threads: batches, the card thread's typed messages, the frozen batching
policy and the frozen statistics the runner writes to the manifest."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.scenarios import Scenario

if TYPE_CHECKING:
    from harness.run.qsl import ReplicaRows

QUEUE_DEPTH = 8  # batches per card queue, as KRAI's KILT


class Batch:
    """Samples that travel together: LoadGen's response ids and the QSL indices, in the same order."""

    __slots__ = ("ids", "indices")

    def __init__(self, ids: list[int], indices: np.ndarray) -> None:
        self.ids = ids
        self.indices = indices

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class CardSlot:
    """Where a card's threads run: its index, the host CPUs given to it and their NUMA node."""

    index: int
    cpus: tuple[int, ...]
    node: int | None = None


@dataclass(frozen=True)
class Batching:
    """How intake cuts and routes batches, fixed before the intake thread starts and never changed.

    `max_wait_s`: Server only, how long the oldest sample of a partial batch may wait for the rest
    (0 elsewhere: batches go as samples come)."""

    scenario: Scenario
    batch_size: int
    max_wait_s: float
    queue_depth: int = QUEUE_DEPTH

    @property
    def server(self) -> bool:
        return self.scenario == Scenario.SERVER


# What the card thread's queue carries besides a plain `Batch` (`CardMessage` below names all five):


@dataclass(frozen=True, slots=True)
class Staged:
    """A batch the feeder has staged into staging buffer `buf` (`error`: staging failed, the card's failure), or,
    for a card that copies from the replica itself, found there (`staged` is then its `ReplicaRows`)."""

    batch: Batch
    buf: int
    staged: np.ndarray | ReplicaRows | None
    error: Exception | None


class Ready:
    """The card finished a batch (its ready callback): poll it. Carries nothing; one shared instance."""


class Stop:
    """No more messages: drain the card and end the card thread. One shared instance."""


@dataclass
class Call:
    """Work run on a card's own thread (warm-up): cards are single-threaded."""

    fn: Callable[[Any], object]  # worker.warm_up.WarmUpCard -> result
    box: list[object] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self, card: object) -> None:
        try:
            self.box.append(self.fn(card))
        except BaseException as exc:
            self.box.append(exc)
        self.done.set()


READY = Ready()
STOP = Stop()

# A plain `Batch` on the card queue: dispatched to a card with nothing in hand, staged by the card thread itself.
CardMessage = Batch | Staged | Ready | Stop | Call


@dataclass(frozen=True)
class CardStats:
    """One card's share of a run, for the manifest."""

    index: int
    samples_completed: int
    batches: int          # batches completed in the timed run
    warmup_batches: int   # batches the card ran during warm-up / calibration
    depth: int            # batches it held in flight at most


@dataclass(frozen=True)
class SutStats:
    """What dispatch did in a run, read once after `stop()`: the manifest's `dispatch` and per-card counts."""

    batching: Batching | None
    backlogged: int
    redispatched: int
    card_failures: tuple[str, ...]
    failure: str | None
    cards: tuple[CardStats, ...]
