"""A card worker's attributes, each with the one thread that writes it, and what every piece of it shares.

The worker is one object whose methods are split by job over the modules of this package (harness/run/sut/worker/
__init__.py lists them); they all read and write the attributes declared here and no others
(tests/test_worker_encapsulation.py). One object, not several, so the hot path reads a counter in one attribute
lookup, as before the split.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np

from harness.run.cards.base import AsyncCard, Card, CardInfo, FromReplica, Outputs
from harness.run.qsl import ReplicaRows, SampleLibrary
from harness.run.sut.messages import Batch, Call, CardMessage, CardSlot
from harness.run.sut.respond import Respond
from harness.run.sut.window import name_os_thread

CardFactory = Callable[[int, tuple[int, ...]], Card | AsyncCard]
Input = np.ndarray | ReplicaRows | None  # what a card is handed: a staged batch, its rows in the replica, nothing


class Dispatcher(Protocol):
    """What a card worker may ask of dispatch, from any of its threads. Each call is thread-safe and never waits
    for a card."""

    stopped: threading.Event  # set once the SUT stops: a failed card's threads may end then

    def redispatch(self, batch: Batch) -> None:
        """A failed card's thread: run a batch this card cannot on the other cards, or complete it empty. Takes
        dispatch's lock."""

    def card_failed(self, worker: WorkerState, why: str) -> None:
        """A failing card's thread: mark this card failed (once, `mark_dead`), recorded as `why`. Takes dispatch's
        lock."""

    def card_has_room(self) -> None:
        """The completing thread: this card can take a batch at once, an overdue partial Server batch may come.
        Lock-free (a flag read, a poke of the native intake)."""

    def take_backlog(self) -> Batch | None:
        """The taking thread (feeder, or a direct card's thread), holding its own `cv`: one batch from the shared
        backlog, or None. Lock-free (`deque.popleft`, atomic)."""


class WorkerState:
    """One card's attributes: who writes each is named beside it (sut/__init__.py: the threads and what they own)."""

    card_thread: threading.Thread  # made by the worker (harness.run.sut.worker.card_worker) once it has its loops
    completer: threading.Thread | None  # the done thread, NMS benchmarks only (likewise)

    def __init__(self, slot: CardSlot, factory: CardFactory, qsl: SampleLibrary, batch_size: int,
                 server: bool, respond: Respond, host_postprocess: bool, dispatch: Dispatcher) -> None:
        self.slot = slot
        self.factory = factory
        self.qsl = qsl
        self.batch_size = batch_size
        self.server = server
        self.respond = respond
        self.dispatch = dispatch
        # read by dispatch through the worker's routing methods (each written by one thread, named here)
        self.queue: deque[Batch] = deque()  # appended by `take`, taken under `cv`
        self.alive = True    # `mark_dead` (under dispatch's lock) makes it False, once
        self.direct = False  # card thread, before `ready`: the card reads no input and takes one batch at a time
        self.depth = 1       # card thread, before `ready`: batches the card holds in flight
        self.dispatched = 0  # `take` (under dispatch's lock): batches given to this card
        self.stolen = 0      # the taking thread: batches it took from the backlog
        self.finished = 0    # card thread: batches back from the card (or handed back when it failed)
        self.on_card = 0     # card thread: batches in flight on the card now
        self.busy_until = 0.0  # card thread, Server: perf_counter when the oldest batch in flight is due
        self.service_s = 0.0   # card thread, Server: a batch's time on the card, a moving average
        # the worker's own
        self.calls: deque[Call] = deque()  # warm-up work for a direct card thread
        self.cv = threading.Condition()
        self.waiting = False   # the taking thread, under `cv`
        self.stopping = False  # the main thread (`stop`), under `cv`
        self.ready = threading.Event()
        self.info: CardInfo | None = None  # card thread, before `ready`
        self.startup_error: BaseException | None = None  # card thread, before `ready`
        self.buffers: list[np.ndarray | None] = []  # card thread, before `ready`: harness.run.buffers.card_staging
        self.reader: FromReplica | None = None  # card thread, before `ready`: a card that copies its batches from
        #                                         the replica itself
        self.from_replica = False  # it does, for the replica loaded now (written by the loading thread, nothing
        #                            in flight then: `_replica_loaded`)
        self.completed = 0       # completing thread: samples completed
        self.batches = 0         # completing thread: batches completed
        self.complete_cpu_ns = 0  # done thread: its CPU time encoding (NMS) and completing, the host's share
        self.warmup_batches = 0  # card thread: batches the card accepted during warm-up
        self.accepted = 0        # card thread: batches the card accepted in the run
        self.to_card: queue.SimpleQueue[CardMessage] = queue.SimpleQueue()
        self.to_done: queue.SimpleQueue[tuple[Batch, Outputs] | None] | None = \
            queue.SimpleQueue() if host_postprocess else None
        self.free: queue.SimpleQueue[int | None] = queue.SimpleQueue()  # staging buffers the feeder may fill
        self.feeder: threading.Thread | None = None  # card thread, before `ready`, once it knows the card

    @property
    def in_hand(self) -> int:
        """Batches given to or taken by this card and not yet back from it (any thread; a lock-free read)."""
        return self.dispatched + self.stolen - self.finished

    def mark_dead(self) -> bool:
        """Dispatch, under its lock (`card_failed`, on the failing card's own thread, which then wakes its taking
        thread: `_fail`): this card takes no more batches. False if it was marked already. Writes `alive`."""
        if not self.alive:
            return False
        self.alive = False
        return True

    def _thread(self, loop: Callable[[], None], role: str) -> threading.Thread:
        """A thread of this card that, once its loop ends (a failed card), lingers until the SUT stops.
        LoadGen keeps a log buffer for every thread that has completed queries; a thread that exits
        while the test runs leaves it to be torn down under LoadGen's logging thread, which crashed
        (SIGSEGV in TlsLogger::SwapBuffers, seen in the all-cards-failed test)."""
        def run() -> None:
            try:
                loop()
            finally:
                self.dispatch.stopped.wait()

        return threading.Thread(target=run, name=f"c{self.slot.index}.{role}", daemon=True)

    def _pin(self, role: str) -> None:
        name_os_thread(f"c{self.slot.index}.{role}")
        if self.slot.cpus:
            os.sched_setaffinity(0, self.slot.cpus)  # this thread, and threads it starts later

    def _label(self) -> str:
        return self.info.label() if self.info else f"card {self.slot.index}"
