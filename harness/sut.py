"""LoadGen's system under test: queries in, batches to card workers, completions back to LoadGen.

Intake (native, `harness._intake`): LoadGen is handed a C++ SystemUnderTest whose IssueQuery only
queues the samples, so LoadGen's issue thread never takes the GIL or makes a Python object; the
`intake` thread takes them out in bulk as two flat arrays (ids, QSL indices), the GIL released while
it waits. Without this, the issue thread had to win the GIL back from the card threads for every
query and fell behind the Server schedule long before the cards were busy.

Dispatch (the intake thread): samples are cut into batches (Offline, SingleStream, MultiStream: as
they come; Server: they wait in the intake until a batch is full or the oldest has waited `max_wait`
and some card has nothing in hand — a partial batch is never sent to cards that are all busy, where it
would only wait while capacity is lost to its empty rows; it keeps filling until a card runs dry).
A batch goes round-robin to the next card with nothing in hand, or else,
among the cards whose bounded queue has room, to the one with the fewest batches in hand (Offline)
or the one expected to be free first (Server: the rest of the batch on the card plus a moving-average
batch time per batch in hand, so a batch does not wait a whole batch time on one card while another
is about to finish); when every queue is full it goes to a shared backlog that idle cards drain.
Nothing on the issue path waits for a card.

Each card has up to three threads, all pinned to the card's CPUs before the card is created (threads
they start, such as onnxruntime's intra-op pool, inherit the affinity and the name):

    c<i>.feed   takes a batch (own queue first, then the backlog) and stages it from the card's
                replica into one of two preallocated staging buffers, while the card works on the other;
                a batch dispatched to an idle card skips it (there is nothing to overlap with): the card
                thread stages that one itself, one thread wake-up instead of two (16% less CPU with 16
                simulated cards in Server); a card that reads no input (null) has no feeder, its card
                thread takes batches itself
    c<i>.card   creates the card, runs `infer` on staged batches, and completes each batch itself
                (encode + one QuerySamplesComplete): on a few CPUs every hand-off between Python
                threads costs a wake-up and a GIL transfer, more than the completion itself
    c<i>.done   only for benchmarks whose host post-processing is heavy (`Benchmark.host_postprocess`,
                NMS): it encodes and completes, pipelined with the card working on the next batch

A card that raises is marked failed: its batch in hand, its staged batches and its queue go back to
dispatch and run on the other cards, and the failure is recorded (`card_failures`). When no card is
left, every outstanding sample is completed empty so LoadGen never hangs, and `failure` says why;
the runner then ends the run INVALID with that one line.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mlperf_loadgen as lg
import numpy as np

from harness._intake import Intake
from harness.benchmarks import Benchmark, Encoder, FixedWidth
from harness.cards.base import Card, CardInfo
from harness.qsl import SampleLibrary

CardFactory = Callable[[int, tuple[int, ...]], Card]
QUEUE_DEPTH = 8  # batches per card queue, as KRAI's KILT
STAGING_BUFFERS = 2  # per card: one being filled while the card reads the other
INTAKE_CHUNK = 1 << 16  # samples the intake thread takes at a time outside Server (an Offline query: in chunks)
SERVER_TAKE_BATCHES = 64  # Server: full batches the intake thread takes at a time when LoadGen runs ahead

_libc = ctypes.CDLL(None, use_errno=True)


def name_os_thread(name: str) -> None:
    """Give the calling thread a kernel name (/proc/<pid>/task/<tid>/comm), inherited by threads it starts."""
    with contextlib.suppress(AttributeError, OSError):
        _libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


SWITCH_INTERVAL_S = 0.0005  # the GIL hand-over interval in LoadGen's window (Python's default: 5 ms)


@contextlib.contextmanager
def loadgen_window() -> Iterator[None]:
    """The interpreter set for LoadGen's timed window: cyclic garbage collector off, GIL handed over
    every 0.5 ms instead of every 5 ms.

    A full collection walks every object the process holds (onnxruntime, numpy, the QSL) and stops the
    thread that triggered it: 26 to 31 ms measured with null cards at 40,000 QPS, so the harness stalls
    and the Server p99 misses its bound. The per-query path makes no reference cycles
    (tests/test_runs.py checks), so reference counting frees everything it allocates meanwhile. One
    collection before, and the collector back as it was after.

    The harness's threads (intake, feeders, cards) take turns on the GIL; one that runs Python for long
    keeps the others waiting up to the switch interval, which at 5 ms is a third of ResNet50's 15 ms
    Server bound. LoadGen's own threads never wait for it (the intake is native).
    """
    enabled = gc.isenabled()
    interval = sys.getswitchinterval()
    gc.collect()
    gc.disable()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        if enabled:
            gc.enable()


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


@dataclass
class _Call:
    """Work run on a card's own thread (warm-up): cards are single-threaded."""

    fn: Callable[[Card], object]
    box: list
    done: threading.Event

    def run(self, card: Card) -> None:
        try:
            self.box.append(self.fn(card))
        except BaseException as exc:
            self.box.append(exc)
        self.done.set()


class _Worker:
    def __init__(self, sut: SystemUnderTest, slot: CardSlot, factory: CardFactory) -> None:
        self.sut = sut
        self.slot = slot
        self.factory = factory
        self.queue: deque[Batch] = deque()
        self.calls: deque[_Call] = deque()  # work for a card thread that takes batches itself
        self.cv = threading.Condition()
        self.waiting = False
        self.alive = True
        self.stopping = False
        self.ready = threading.Event()
        self.info: CardInfo | None = None
        self.startup_error: BaseException | None = None
        self.direct = False  # the card reads no input: its card thread takes batches, no feeder
        self.completed = 0
        self.batches = 0
        # batches this card holds (queued, staged or on the card), each counter written by one thread only
        self.dispatched = 0  # dispatcher (under the SUT's dispatch lock)
        self.stolen = 0      # the thread that takes batches: those it took from the backlog
        self.finished = 0    # card thread
        # Server dispatch's estimate of the work ahead of a new batch (card thread writes, dispatcher reads)
        self.running = False  # a batch is on the card now
        self.busy_until = 0.0  # perf_counter when the batch on the card is expected back
        self.service_s = 0.0  # batch time on the card, a moving average
        self.to_card: queue.SimpleQueue = queue.SimpleQueue()
        self.to_done: queue.SimpleQueue | None = queue.SimpleQueue() if sut.benchmark.host_postprocess else None
        self.free: queue.SimpleQueue = queue.SimpleQueue()
        self.card_thread = self._thread(self._card_loop, "card")
        self.feeder: threading.Thread | None = None  # started by the card thread once it knows the card
        self.completer = None if self.to_done is None else self._thread(self._done_loop, "done")
        self.respond = _responder(sut.benchmark.encode_response, sut.batch_size)

    @property
    def in_hand(self) -> int:
        return self.dispatched + self.stolen - self.finished

    def work_ahead(self, now: float) -> float:
        """Seconds until a batch queued here now would reach the card: the rest of the batch on the card,
        then one batch time for each batch in hand that has not started. 0 only for a card with nothing
        in hand; before the first batch time is known, busy cards compare by batches in hand."""
        in_hand = self.in_hand
        if in_hand <= 0:
            return 0.0
        running = self.running
        rest = max(self.busy_until - now, 1e-6) if running else 0.0  # an overdue batch: back any moment
        return rest + max(self.service_s, 1e-6) * (in_hand - running)

    def _infer(self, card: Card, staged: np.ndarray | None, n: int) -> list[np.ndarray]:
        """`card.infer`; in Server timed for `work_ahead` (nothing else reads the times)."""
        if not self.sut.server:
            return card.infer(staged, n)
        start = time.perf_counter()
        self.busy_until = start + self.service_s
        self.running = True
        try:
            return card.infer(staged, n)
        finally:
            self.running = False
            took = time.perf_counter() - start
            self.service_s = took if not self.service_s else self.service_s + 0.125 * (took - self.service_s)

    @property
    def threads(self) -> list[threading.Thread]:
        return [t for t in (self.card_thread, self.feeder, self.completer) if t is not None]

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
                self.sut.stopped.wait()

        return threading.Thread(target=run, name=f"c{self.slot.index}.{role}", daemon=True)

    def _pin(self, role: str) -> None:
        name_os_thread(f"c{self.slot.index}.{role}")
        if self.slot.cpus:
            os.sched_setaffinity(0, self.slot.cpus)  # this thread, and threads it starts later

    def wake(self) -> None:
        if self.waiting:
            with self.cv:
                self.cv.notify()

    def stop(self) -> None:
        """Finish the batch in hand, drop what is still queued (LoadGen has stopped waiting), exit."""
        with self.cv:
            self.stopping = True
            self.queue.clear()
            self.sut.backlog.clear()
            self.cv.notify_all()
        self.free.put(None)

    def call(self, fn: Callable[[Card], object]) -> object:
        """Run `fn(card)` on this card's own thread (cards are single-threaded) and return its result."""
        task = _Call(fn, [], threading.Event())
        if self.direct:
            with self.cv:
                self.calls.append(task)
                self.cv.notify()
        else:
            self.to_card.put(task)
        task.done.wait()
        if isinstance(task.box[0], BaseException):
            raise task.box[0]
        return task.box[0]

    # taking batches (feeder, or the card thread of a card without input) -------------------------
    def _take(self) -> Batch | _Call | None:
        backlog = self.sut.backlog
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
                if backlog:
                    try:
                        batch = backlog.popleft()
                        self.waiting = False
                        self.stolen += 1
                        return batch
                    except IndexError:
                        pass
                self.cv.wait()

    def _give_back_queue(self) -> None:
        """A failed card: what is still queued here runs elsewhere."""
        with self.cv:
            left = list(self.queue)
            self.queue.clear()
        for batch in left:
            self.sut.redispatch(batch)

    def _stage(self, samples: Batch, buf: int, replica: int) -> tuple[np.ndarray | None, Exception | None]:
        """Stage a batch into staging buffer `buf`; an error is this card's failure, raised where the
        card would have run the batch."""
        try:
            return self.sut.qsl.stage(samples.indices, self.buffers[buf], replica), None
        except Exception as exc:
            return None, exc

    def _feed_loop(self) -> None:
        self._pin("feed")
        sut = self.sut
        replica = sut.qsl.replica_for(self.slot.index)
        while (buf := self.free.get()) is not None:
            samples = self._take()
            if samples is None:
                break
            if not self.alive:
                sut.redispatch(samples)
                break
            self.to_card.put((buf, samples, *self._stage(samples, buf, replica)))
        if not self.alive:
            self._give_back_queue()
        self.to_card.put(None)

    # card ---------------------------------------------------------------------------------------
    def _card_loop(self) -> None:
        self._pin("card")
        try:
            card = self.factory(self.slot.index, self.slot.cpus)
            self.info = card.info
            self.direct = card.input_dtype is None
            # the feeder's, plus one the card thread stages into when a batch comes to it straight
            self.buffers = [self.sut.qsl.staging_buffer(self.sut.batch_size, card.input_dtype)
                            for _ in range(STAGING_BUFFERS + 1)]
        except BaseException as exc:  # reported by SystemUnderTest.start on the main thread
            self.startup_error = exc
            self.ready.set()
            return
        if self.completer is not None:
            self.completer.start()
        if not self.direct:
            for b in range(STAGING_BUFFERS):
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
            card.close()
            if self.to_done is not None:
                self.to_done.put(None)

    def _run_staged(self, card: Card) -> None:
        sut = self.sut
        replica = sut.qsl.replica_for(self.slot.index)
        own = STAGING_BUFFERS  # the card thread's own buffer, never on `free`
        while (item := self.to_card.get()) is not None:
            if isinstance(item, _Call):
                item.run(card)
                continue
            if isinstance(item, Batch):  # dispatched to this card while idle: staged here, no feeder hop
                buf, samples = own, item
                staged, error = self._stage(samples, own, replica) if self.alive else (None, None)
            else:
                buf, samples, staged, error = item
            outputs = None
            if not self.alive:  # failed earlier: staged batches go back to dispatch
                sut.redispatch(samples)
            else:
                try:
                    if error is not None:
                        raise error
                    outputs = self._infer(card, staged, len(samples))
                except Exception as exc:
                    self._fail(exc, samples)
            if buf != own:
                self.free.put(buf)  # only now: the card has read it
            if outputs is not None:
                self._finish(samples, outputs)

    def _take_and_run(self, card: Card) -> None:
        """A card without input: take, infer and complete on this one thread, no hand-off at all."""
        while (item := self._take()) is not None:
            if isinstance(item, _Call):
                item.run(card)
                continue
            try:
                outputs = self._infer(card, None, len(item))
            except Exception as exc:
                self._fail(exc, item)
                break
            self._finish(item, outputs)
        if not self.alive:
            self._give_back_queue()

    def _finish(self, samples: Batch, outputs: list[np.ndarray]) -> None:
        """A batch off the card: count it, let an overdue Server batch come if this card is now dry, then
        complete here or hand the outputs to the NMS thread."""
        self.finished += 1
        if self.in_hand <= 0:
            self.sut.card_ran_dry()
        if self.to_done is None:
            self._complete(samples, outputs)
        else:
            self.to_done.put((samples, outputs))

    def _fail(self, exc: BaseException, samples: Batch) -> None:
        self.sut.card_failed(self, f"{self.info.label() if self.info else f'card {self.slot.index}'} failed "
                                   f"after {self.batches} batches: {type(exc).__name__}: {exc}")
        with self.cv:
            self.cv.notify_all()
        self.sut.redispatch(samples)

    # completion ---------------------------------------------------------------------------------
    def _complete(self, samples: Batch, outputs: list[np.ndarray]) -> None:
        """Encode a batch's outputs and complete all its samples in one QuerySamplesComplete call."""
        self.respond(samples, outputs)
        self.completed += len(samples)
        self.batches += 1

    def _done_loop(self) -> None:
        self._pin("done")
        assert self.to_done is not None
        while (item := self.to_done.get()) is not None:
            self._complete(*item)


Respond = Callable[[Batch, list[np.ndarray]], None]


def _responder(encode: Encoder, batch_size: int) -> Respond:
    """How a card's thread completes a batch: `(samples, outputs) -> None`, one QuerySamplesComplete.
    LoadGen copies the bytes it logs before QuerySamplesComplete returns, so payloads can be reused."""
    def encoded(samples: Batch, outputs: list[np.ndarray]) -> None:
        payload, offsets = encode(outputs, samples.indices)  # sample j: payload[at[j]:at[j+1]]
        payload = np.ascontiguousarray(payload, dtype=np.float32)
        addr = payload.ctypes.data
        at = offsets.tolist()  # plain lists over numpy calls for a handful of items
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, addr + 4 * at[j], 4 * (at[j + 1] - at[j]))
                                 for j, i in enumerate(samples.ids)])

    return _FixedWidthResponder(encode, batch_size, encoded) if isinstance(encode, FixedWidth) else encoded


class _FixedWidthResponder:
    """Fixed-width responses (ResNet50's class id) from one preallocated payload per card, its per-sample
    addresses and per-size views computed once: cheaper than encoding a new payload every batch."""

    def __init__(self, fixed: FixedWidth, batch_size: int, larger: Respond) -> None:
        w = fixed.width
        self.into = fixed.into
        self.payload = np.zeros(batch_size * w, np.float32)
        self.views = [self.payload[:n * w] for n in range(batch_size + 1)]
        # the responses themselves are reused too (only the id changes): setting an id costs a third of
        # making a QuerySampleResponse, and LoadGen copies what it needs before QuerySamplesComplete returns
        responses = [lg.QuerySampleResponse(0, self.payload.ctypes.data + 4 * w * j, 4 * w) for j in range(batch_size)]
        self.responses = [responses[:n] for n in range(batch_size + 1)]
        self.larger = larger  # a batch beyond the batch size (none is dispatched) takes the encoded path

    def __call__(self, samples: Batch, outputs: list[np.ndarray]) -> None:
        n = len(samples)
        if n >= len(self.responses):
            self.larger(samples, outputs)
            return
        self.into(outputs, self.views[n])
        responses = self.responses[n]
        for r, i in zip(responses, samples.ids, strict=True):
            r.id = i
        lg.QuerySamplesComplete(responses)


class SystemUnderTest:
    """Routes LoadGen queries to card workers and completes them in batches."""

    def __init__(self, benchmark: Benchmark, qsl: SampleLibrary, slots: list[CardSlot],
                 factory: CardFactory, batch_size: int, scenario: str = "Offline",
                 max_wait_s: float | None = None, queue_depth: int = QUEUE_DEPTH) -> None:
        self.benchmark = benchmark
        self.qsl = qsl
        self.batch_size = batch_size
        self.scenario = scenario
        self.server = scenario == "Server"
        self.max_wait_s = max_wait_s
        self.queue_depth = queue_depth
        self.workers = [_Worker(self, s, factory) for s in slots]
        self.backlog: deque[Batch] = deque()
        self._next = 0
        self._dispatch_lock = threading.Lock()
        self.failure: str | None = None
        self.card_failures: list[str] = []
        self.redispatched = 0
        self.backlogged = 0
        self.intake = Intake()
        self._overdue = False  # a Server batch is past its deadline, waiting for a card with nothing in hand
        self._stopping = False
        self.stopped = threading.Event()  # set by stop(): the card threads of a failed card may end then
        self._intake_thread = threading.Thread(target=self._intake_loop, name="intake", daemon=True)
        self._completed_offset = 0

    @property
    def cards(self) -> list[CardInfo]:
        return [w.info for w in self.workers if w.info is not None]

    @property
    def handle(self) -> int:
        """The SUT LoadGen's StartTest takes (owned by `intake`: never lg.DestroySUT it)."""
        return self.intake.handle

    @property
    def completed(self) -> int:
        return sum(w.completed for w in self.workers) - self._completed_offset

    def start(self) -> None:
        """Start every card's threads and wait until its card is loaded; re-raise a loading error."""
        for w in self.workers:
            w.card_thread.start()  # it starts the card's other threads once the card is loaded
        for w in self.workers:
            w.ready.wait()
        errors = [w.startup_error for w in self.workers if w.startup_error is not None]
        if errors:
            self.stop()
            raise errors[0]
        self._intake_thread.start()

    def stop(self) -> None:
        self._stopping = True
        self.intake.close()
        if self._intake_thread.is_alive():
            self._intake_thread.join()
        self.stopped.set()
        for w in self.workers:
            w.stop()
        for w in self.workers:
            for t in w.threads:
                if t.is_alive():
                    t.join()

    def warm_up(self, timed: bool) -> list[tuple[float, float]]:
        """Warm every card up through the real stage / infer / encode path; if `timed`, return per card
        the seconds for one sample and for one full batch, completions built but not sent."""
        n = min(self.batch_size, self.qsl.total_sample_count)
        self.qsl.load(list(range(n)))  # LoadGen replaces this with its own load before the test
        indices = np.arange(self.batch_size, dtype=np.int64) % n

        def measure(card: Card) -> tuple[float, float]:
            stage = self.qsl.staging_buffer(self.batch_size, card.input_dtype)
            replica = self.qsl.replica_for(card.info.index)

            def run(k: int) -> None:
                staged = None if stage is None else self.qsl.stage(indices[:k], stage, replica)
                self.benchmark.encode_response(card.infer(staged, k), indices[:k])

            run(self.batch_size)
            if not timed:
                return (0.0, 0.0)
            run(1)
            return (_best_of(2, lambda: run(1)), _best_of(2, lambda: run(self.batch_size)))

        timings = [w.call(measure) for w in self.workers]
        self._completed_offset = sum(w.completed for w in self.workers)
        return timings  # type: ignore[return-value]

    # dispatch ------------------------------------------------------------------------------------
    def _intake_loop(self) -> None:
        """Take what LoadGen issued, cut it into batches and dispatch them (Server: see `_overdue_fill`)."""
        name_os_thread("intake")
        b = self.batch_size
        server = self.server
        ids = np.empty(b * SERVER_TAKE_BATCHES if server else INTAKE_CHUNK, np.uint64)
        indices = np.empty_like(ids, dtype=np.int64)
        min_n = b if server else 1
        take = self.intake.take
        while not self._stopping:
            n = take(ids, indices, min_n, (self.max_wait_s or 0.0) if server else 0.0, 0.1)  # set after start
            if n and server and n < b:
                n = self._overdue_fill(ids, indices, n)
            if not n or self._stopping:
                continue
            id_list, idx = ids[:n].tolist(), indices[:n].copy()
            batches = [Batch(id_list[i:i + b], idx[i:i + b]) for i in range(0, n, b)]
            room = self.queue_depth * len(self.workers)  # more than this can only go to the backlog
            with self._dispatch_lock:
                for batch in batches[:room]:
                    self._dispatch(batch)
                if len(batches) > room:  # an Offline query: the rest in one step, cards take from it
                    self._backlog_all(batches[room:])

    def _overdue_fill(self, ids: np.ndarray, indices: np.ndarray, n: int) -> int:
        """A partial Server batch past its deadline: keep filling it until a card has nothing in hand."""
        self.intake.unpoke()
        self._overdue = True  # before looking: a card that runs dry after the look pokes the intake
        while n < self.batch_size and not self._stopping and not self._idle_card():
            n += self.intake.take(ids[n:], indices[n:], self.batch_size - n, 3600.0, 0.1, True)
        self._overdue = False
        return n

    def _idle_card(self) -> bool:
        """A card with nothing in hand (or no card left, so the batch goes out and completes empty)."""
        alive = [w for w in self.workers if w.alive]
        return not alive or any(w.in_hand <= 0 for w in alive)

    def card_ran_dry(self) -> None:
        """Called by a card that finished its last batch in hand: an overdue partial batch can go to it."""
        if self._overdue:
            self.intake.poke()

    def _dispatch(self, batch: Batch) -> None:
        """Round-robin from the card after the last one used, to the first card with nothing in hand, else
        the one whose queue has room with the fewest batches in hand (Server: the least work ahead); else
        the backlog. Never waits. Hold _dispatch_lock."""
        workers, n = self.workers, len(self.workers)
        best, best_k, best_load = None, 0, float("inf")
        server = self.server
        now = time.perf_counter() if server else 0.0
        for k in range(n):
            w = workers[(self._next + k) % n]
            if not w.alive or len(w.queue) >= self.queue_depth:
                continue
            load = w.work_ahead(now) if server else w.in_hand
            if load < best_load:
                best, best_k, best_load = w, k, load
                if load <= 0:
                    break
        if best is not None:
            best.dispatched += 1
            self._next = (self._next + best_k + 1) % n
            if best_load <= 0 and not best.direct:
                best.to_card.put(batch)  # an idle card stages it on its own thread: one hop, not two
            else:
                best.queue.append(batch)
                best.wake()
            return
        self._backlog_all([batch])

    def _backlog_all(self, batches: list[Batch]) -> None:
        """Batches no card queue has room for, for idle cards to take. Hold _dispatch_lock."""
        if not any(w.alive for w in self.workers):
            for batch in batches:
                _complete_empty(batch)
            return
        self.backlog.extend(batches)
        self.backlogged += len(batches)
        for w in self.workers:
            if w.alive:
                w.wake()

    def redispatch(self, batch: Batch) -> None:
        """Samples of a failed card: to the other cards, or completed empty when none is left."""
        with self._dispatch_lock:
            self.redispatched += len(batch)
            self._dispatch(batch)

    def card_failed(self, worker: _Worker, why: str) -> None:
        with self._dispatch_lock:
            if not worker.alive:
                return
            worker.alive = False
            self.card_failures.append(why)
            if not any(w.alive for w in self.workers):
                self.failure = f"every card failed (last: {why})"
                while self.backlog:
                    _complete_empty(self.backlog.popleft())
        with worker.cv:
            worker.cv.notify()
        self.card_ran_dry()  # an overdue batch waiting for this card goes elsewhere (or completes empty)


def _complete_empty(batch: Batch) -> None:
    lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in batch.ids])


def _best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
