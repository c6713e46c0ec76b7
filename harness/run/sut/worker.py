"""A card worker: the threads of one card (feeder, card thread, optional completer) and its counters.

It knows dispatch only through `Dispatcher` (four calls), and dispatch knows it only through the methods under
"called by dispatch" and "called by the SUT" below: each says which thread calls it and what it touches. Nothing
outside this module writes a worker's attributes (tests/test_worker_encapsulation.py). Its staging buffers are
made by harness.run.buffers (how many: `buffers.staging_count`).
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

import numpy as np

from harness.run import buffers
from harness.run.buffers import OWN
from harness.run.cards.base import AsyncCard, Card, CardInfo, FromReplica, Outputs, as_async
from harness.run.qsl import ReplicaRows, SampleLibrary
from harness.run.sut.messages import READY, STOP, Batch, Call, CardMessage, CardSlot, CardStats, Ready, Staged, Stop
from harness.run.sut.respond import Respond
from harness.run.sut.window import name_os_thread

CardFactory = Callable[[int, tuple[int, ...]], Card | AsyncCard]
Input = np.ndarray | ReplicaRows | None  # what a card is handed: a staged batch, its rows in the replica, nothing
T = TypeVar("T")
CANNOT_TAKE = float("inf")  # `routing_load` of a card that takes no batch now


class Dispatcher(Protocol):
    """What a card worker may ask of dispatch, from any of its threads. Each call is thread-safe and never waits
    for a card."""

    stopped: threading.Event  # set once the SUT stops: a failed card's threads may end then

    def redispatch(self, batch: Batch) -> None:
        """A failed card's thread: run a batch this card cannot on the other cards, or complete it empty. Takes
        dispatch's lock."""

    def card_failed(self, worker: CardWorker, why: str) -> None:
        """A failing card's thread: mark this card failed (once, `mark_dead`), recorded as `why`. Takes dispatch's
        lock."""

    def card_has_room(self) -> None:
        """The completing thread: this card can take a batch at once, an overdue partial Server batch may come.
        Lock-free (a flag read, a poke of the native intake)."""

    def take_backlog(self) -> Batch | None:
        """The taking thread (feeder, or a direct card's thread), holding its own `cv`: one batch from the shared
        backlog, or None. Lock-free (`deque.popleft`, atomic)."""


@dataclass(slots=True)
class _InFlight:
    batch: Batch
    buf: int
    submitted: float


class WarmUpCard:
    """The card as warm-up sees it: `infer` one batch at once (submit, wait), each counted."""

    def __init__(self, worker: CardWorker, card: AsyncCard) -> None:
        self.worker, self.card = worker, card
        self.info: CardInfo = card.info
        self.input_dtype = card.input_dtype

    @property
    def depth(self) -> int:
        return self.worker.depth

    def input(self, indices: np.ndarray, out: np.ndarray | None) -> Input:
        """Samples `indices` as this card reads them: staged into `out`, or its rows in the replica."""
        return self.worker._input(indices, out)

    def infer(self, batch: Input, n: int) -> Outputs:
        self.worker._hand(self.card, batch, n)
        self.worker.warmup_batches += 1
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
                self.worker._hand(self.card, batch, n)
                self.worker.warmup_batches += 1
            outputs = self.card.wait()
            latencies.append(time.perf_counter() - started.popleft())
            complete(outputs)
        return (time.perf_counter() - start) / batches, statistics.median(latencies)


class CardWorker:
    """One card's threads: `c<i>.feed` stages, `c<i>.card` submits, polls and completes, `c<i>.done`
    (NMS benchmarks only) completes pipelined with the card."""

    def __init__(self, slot: CardSlot, factory: CardFactory, qsl: SampleLibrary, batch_size: int,
                 server: bool, respond: Respond, host_postprocess: bool, dispatch: Dispatcher) -> None:
        self.slot = slot
        self.factory = factory
        self.qsl = qsl
        self.batch_size = batch_size
        self.server = server
        self.respond = respond
        self.dispatch = dispatch
        # read by dispatch through the methods below (each written by one thread, named here)
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
        self.waiting = False
        self.stopping = False
        self.ready = threading.Event()
        self.info: CardInfo | None = None
        self.startup_error: BaseException | None = None
        self.buffers: list[np.ndarray | None] = []  # card thread, before `ready`: harness.run.buffers.card_staging
        self.reader: FromReplica | None = None  # a card that can copy its batches from the replica itself
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
        self.free: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self.card_thread = self._thread(self._card_loop, "card")
        self.feeder: threading.Thread | None = None  # started by the card thread once it knows the card
        self.completer = None if self.to_done is None else self._thread(self._done_loop, "done")

    # called by dispatch ------------------------------------------------------------------------
    # The intake thread (and a card thread re-dispatching a failed card's batches) under dispatch's lock, except
    # `has_room`. They read counters other threads write (`finished`, `on_card`, `busy_until`, `service_s`,
    # `stolen`: one attribute store each, by one thread) without a lock: a stale read makes one routing choice
    # slightly worse, never loses a batch. They write only `dispatched`, `queue`, `to_card` and `alive`.
    @property
    def in_hand(self) -> int:
        """Batches given to or taken by this card and not yet back from it (any thread; a lock-free read)."""
        return self.dispatched + self.stolen - self.finished

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

    def mark_dead(self) -> bool:
        """Dispatch, under its lock (`card_failed`, on the failing card's own thread, which then wakes its taking
        thread: `_fail`): this card takes no more batches. False if it was marked already. Writes `alive`."""
        if not self.alive:
            return False
        self.alive = False
        return True

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

    # helpers ------------------------------------------------------------------------------------
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

    # taking batches (feeder, or the card thread of a direct card) ------------------------------
    def _take(self) -> Batch | Call | None:
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

    def _stage(self, samples: Batch, buf: int) -> Staged:
        """Stage a batch into staging buffer `buf` (or find its rows in the replica, for a card that copies
        from there itself); an error is this card's failure, raised where the card would have run the batch."""
        try:
            return Staged(samples, buf, self._input(samples.indices, self.buffers[buf]), None)
        except Exception as exc:
            return Staged(samples, buf, None, exc)

    def _input(self, indices: np.ndarray, out: np.ndarray | None) -> Input:
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

    def _replica_loaded(self, replica: np.ndarray | None, node: int | None) -> None:
        """The qsl's watch (on the loading thread, nothing in flight): the reader page-locks the replica
        loaded now and says whether it copies its batches from there; if not, they are staged."""
        assert self.reader is not None
        self.from_replica = self.reader.reader.replica_loaded(replica, node)

    # feeder -------------------------------------------------------------------------------------
    def _feed_loop(self) -> None:
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

    # card ---------------------------------------------------------------------------------------
    def _card_loop(self) -> None:
        self._pin("card")
        try:
            card = as_async(self.factory(self.slot.index, self.slot.cpus))
            card.set_ready_callback(lambda: self.to_card.put(READY))
            self.reader = card if isinstance(card, FromReplica) else None
            self.info = card.info
            self.depth = max(1, int(card.depth))
            self.direct = card.input_dtype is None and self.depth == 1
            # The depth rule (harness.run.buffers): the feeder's, then the card thread's own (OWN). A card that
            # copies from the replica itself uses them only if it cannot (their pages are touched only then).
            self.buffers = buffers.card_staging(self.depth, self.batch_size, self.qsl.benchmark.input_shape,
                                                card.input_dtype)
            card.register_host_buffers([b for b in self.buffers if b is not None])  # a GPU card page-locks them
            if self.reader is not None:  # it page-locks each replica loaded (now too, if one is)
                self.qsl.watch(self.qsl.replica_for(self.slot.index), self._replica_loaded)
        except BaseException as exc:  # reported by SystemUnderTest.start on the main thread
            self.startup_error = exc
            self.ready.set()
            return
        if self.completer is not None:
            self.completer.start()
        if not self.direct:
            for b in range(buffers.feeder_count(self.depth)):
                self.free.put(b)
            self.feeder = self._thread(self._feed_loop, "feed")
            self.feeder.start()
        self.ready.set()
        try:
            if self.direct:
                self._take_and_run(card)
            else:
                self._run_staged(card)
        finally:
            if self.reader is not None:
                self.qsl.unwatch(self._replica_loaded)
            card.close()
            if self.to_done is not None:
                self.to_done.put(None)

    def _run_staged(self, card: AsyncCard) -> None:
        """Take messages, keep up to `depth` batches on the card, complete each as it comes back."""
        pending: deque[Staged] = deque()  # staged, waiting for a slot on the card
        flight: deque[_InFlight] = deque()
        view = WarmUpCard(self, card)
        while True:
            msg = self.to_card.get()
            if isinstance(msg, Stop):
                break
            if isinstance(msg, Call):
                msg.run(view)
                continue
            if isinstance(msg, Batch):  # dispatched to this card while idle: staged here, no feeder hop
                pending.append(self._stage(msg, OWN))
            elif isinstance(msg, Staged):
                pending.append(msg)
            else:
                assert isinstance(msg, Ready)
            self._drive(card, pending, flight)
            if self.server and self.depth == 1 and flight and self.alive and self.to_card.empty():
                self._wait_here(card, pending, flight)
        for item in pending:
            self._release(item.buf)
        while flight and self.alive:  # the run is over: let the card finish what it reads, drop the outputs
            try:
                card.wait()
            except Exception:
                break
            self._release(flight.popleft().buf)

    def _wait_here(self, card: AsyncCard, pending: deque[Staged], flight: deque[_InFlight]) -> None:
        """Server, a card of depth 1 holding its batch, nothing else to do: wait for it on this thread (GIL
        released) rather than sleep until the card's ready signal wakes it, one thread wake-up fewer per
        batch, which at low load on an idle CPU is most of the harness's tail (BENCHMARKS.md, real CPU
        Server). The ready signal still comes and finds nothing to collect."""
        try:
            outputs = card.wait()
        except Exception as exc:
            self._fail_holding(exc, [], flight)
            return
        self._landed(flight.popleft(), outputs)
        self._drive(card, pending, flight)

    def _drive(self, card: AsyncCard, pending: deque[Staged], flight: deque[_InFlight]) -> None:
        """Collect what the card has finished, then submit pending batches while it has room."""
        while True:
            while flight:
                try:
                    outputs = card.poll()
                except Exception as exc:
                    self._fail_holding(exc, [], flight)
                    break
                if outputs is None:
                    break
                self._landed(flight.popleft(), outputs)
            if not pending or (len(flight) >= self.depth and self.alive):
                return
            item = pending.popleft()
            if not self.alive:  # failed earlier: staged batches go back to dispatch
                self._release(item.buf)
                self.dispatch.redispatch(item.batch)
                continue
            start = time.perf_counter() if self.server else 0.0  # before: a synchronous card runs in submit
            try:
                if item.error is not None:
                    raise item.error
                self._submit(card, item.staged, len(item.batch), start)
            except Exception as exc:
                self._release(item.buf)
                self._fail_holding(exc, [item.batch], flight)
                continue
            flight.append(_InFlight(item.batch, item.buf, start))

    def _submit(self, card: AsyncCard, staged: Input, n: int, start: float) -> None:
        if self.server and not self.on_card:
            self.busy_until = start + self.service_s
        self.on_card += 1
        try:
            self._hand(card, staged, n)
        except BaseException:
            self.on_card -= 1
            raise
        self.accepted += 1

    def _landed(self, done: _InFlight, outputs: Outputs) -> None:
        """A batch back from the card: its buffer is free, its time feeds the Server estimate, then finish."""
        self._release(done.buf)
        self.on_card -= 1
        if self.server:
            now = time.perf_counter()
            took = now - done.submitted
            self.service_s = took if not self.service_s else self.service_s + 0.125 * (took - self.service_s)
            self.busy_until = now + self.service_s  # the next oldest: at most one batch time from now
        self._finish(done.batch, outputs)

    def _release(self, buf: int) -> None:
        if buf != OWN:
            self.free.put(buf)  # only now: the card has read it

    def _take_and_run(self, card: AsyncCard) -> None:
        """A card without input, one batch at a time: take, run and complete on this one thread."""
        view = WarmUpCard(self, card)
        while (item := self._take()) is not None:
            if isinstance(item, Call):
                item.run(view)
                continue
            try:
                start = time.perf_counter() if self.server else 0.0
                self._submit(card, None, len(item), start)
                outputs = card.wait()
            except Exception as exc:
                self._fail(exc, [item])
                break
            self._landed(_InFlight(item, OWN, start), outputs)
        if not self.alive:
            self._give_back_queue()

    def _finish(self, samples: Batch, outputs: Outputs) -> None:
        """Count the batch, let an overdue Server batch come if this card now has room, then complete
        here or hand the outputs to the NMS thread."""
        self.finished += 1
        if self.in_hand < self.depth:
            self.dispatch.card_has_room()
        if self.to_done is None:
            self._complete(samples, outputs)
        else:
            self.to_done.put((samples, outputs))

    def _fail_holding(self, exc: BaseException, batches: list[Batch], flight: deque[_InFlight]) -> None:
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

    # completion ---------------------------------------------------------------------------------
    def _complete(self, samples: Batch, outputs: Outputs) -> None:
        """Encode a batch's outputs and complete all its samples in one QuerySamplesComplete call."""
        self.respond(samples, outputs)
        self.completed += len(samples)
        self.batches += 1

    def _done_loop(self) -> None:
        self._pin("done")
        assert self.to_done is not None
        clock = time.thread_time_ns  # this thread's CPU time: what host NMS costs, not the time it waits
        while (item := self.to_done.get()) is not None:
            before = clock()
            self._complete(*item)
            self.complete_cpu_ns += clock() - before
