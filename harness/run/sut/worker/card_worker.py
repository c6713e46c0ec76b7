"""A card worker: the threads of one card (feeder, card thread, optional completer) and its counters, put together
from the pieces of this package, and what the SUT asks of it on the main thread.

It knows dispatch only through `Dispatcher` (four calls), and dispatch knows it only through `Routing`'s methods
and the ones below: each says which thread calls it and what it touches. Nothing outside this package writes a
worker's attributes (tests/test_worker_encapsulation.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar, cast

from harness.run.qsl import SampleLibrary
from harness.run.sut.messages import Call, CardSlot, CardStats
from harness.run.sut.respond import Respond
from harness.run.sut.worker.card_thread import CardThread
from harness.run.sut.worker.routing import Routing
from harness.run.sut.worker.state import CardFactory, Dispatcher
from harness.run.sut.worker.warm_up import WarmUpCard

T = TypeVar("T")


class CardWorker(CardThread, Routing):
    """One card's threads: `c<i>.feed` stages, `c<i>.card` submits, polls and completes, `c<i>.done`
    (NMS benchmarks only) completes pipelined with the card."""

    def __init__(self, slot: CardSlot, factory: CardFactory, qsl: SampleLibrary, batch_size: int,
                 server: bool, respond: Respond, host_postprocess: bool, dispatch: Dispatcher) -> None:
        super().__init__(slot, factory, qsl, batch_size, server, respond, host_postprocess, dispatch)
        self.card_thread = self._thread(self._card_loop, "card")
        self.completer = None if self.to_done is None else self._thread(self._done_loop, "done")

    # called by the SUT (the main thread) -------------------------------------------------------------
    def load(self) -> None:
        """The main thread, once: start the card thread, which makes the card and then starts the others."""
        self.card_thread.start()

    def loaded(self) -> BaseException | None:
        """The main thread, after `load`: wait until the card is made; the error that stopped it, if one did."""
        self.ready.wait()
        return self.startup_error

    def stats(self) -> CardStats:
        """The main thread, after `stop`: this card's share of the run, frozen."""
        return CardStats(self.slot.index, self.completed, self.batches, self.warmup_batches, self.depth)

    @property
    def threads(self) -> list[threading.Thread]:
        """Any thread: this card's threads made so far (the feeder once the card is made). Reads only."""
        return [t for t in (self.card_thread, self.feeder, self.completer) if t is not None]

    def join(self, deadline: float) -> None:
        """The main thread, after `stop`: wait for this card's threads to end, until `deadline` (time.monotonic):
        a batch that takes longer (a card hung, a simulated card of 0.001 samples/s) is left to its daemon
        thread, so a stop is never longer than the grace."""
        for t in self.threads:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """The main thread: finish the batches in flight, drop what is still queued (LoadGen has stopped waiting),
        exit. Writes `stopping` and `queue` under `cv`."""
        with self.cv:
            self.stopping = True
            self.queue.clear()
            self.cv.notify_all()
        self.free.put(None)

    def call(self, fn: Callable[[WarmUpCard], T]) -> T:
        """The main thread: run `fn(card)` on this card's own thread (cards are single-threaded) and return its
        result. Only before intake starts (warm-up): nothing is in flight then."""
        return cast(T, self.result(self.post(fn)))

    def post(self, fn: Callable[[WarmUpCard], T]) -> Call:
        """The main thread: start `fn(card)` on this card's own thread and return at once; `result` waits for it
        (several cards timed at the same time: `SystemUnderTest.time_under_load`)."""
        task = Call(fn)
        if self.direct:
            with self.cv:
                self.calls.append(task)
                self.cv.notify()
        else:
            self.to_card.put(task)
        return task

    @staticmethod
    def result(task: Call) -> object:
        """The main thread: what a posted call returned, once it has; its exception re-raised."""
        task.done.wait()
        if isinstance(task.box[0], BaseException):
            raise task.box[0]
        return task.box[0]
