"""LoadGen's system under test: queries in, batches to card workers, completions back to LoadGen.

`issue_query` never blocks: it appends samples to per-card queues (round-robin in batch-sized
chunks) and returns. Each card has one worker thread, pinned to the card's CPUs, that takes up to a
batch of waiting samples, stages them, runs the card and completes the whole batch in one call.
A card that raises is recorded and its samples are completed empty so LoadGen never hangs; the
runner then reports the run as failed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import mlperf_loadgen as lg
import numpy as np

from harness.benchmarks import Benchmark
from harness.cards.base import Card, CardInfo
from harness.qsl import SampleLibrary

CardFactory = Callable[[int, tuple[int, ...]], Card]


@dataclass(frozen=True)
class CardSlot:
    """Where a card's worker runs: its index and the host CPUs given to it."""

    index: int
    cpus: tuple[int, ...]


class _Worker:
    def __init__(self, sut: SystemUnderTest, slot: CardSlot, factory: CardFactory) -> None:
        self.sut = sut
        self.slot = slot
        self.factory = factory
        self.pending: deque[lg.QuerySample] = deque()
        self.tasks: deque[tuple[Callable[[Card], object], list[object], threading.Event]] = deque()
        self.cv = threading.Condition()
        self.stopping = False
        self.ready = threading.Event()
        self.info: CardInfo | None = None
        self.startup_error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"card{slot.index}", daemon=True)

    def submit(self, samples: list[lg.QuerySample]) -> None:
        with self.cv:
            self.pending.extend(samples)
            self.cv.notify()

    def stop(self) -> None:
        """Finish the batch in hand, drop what is still queued (LoadGen has stopped waiting), exit."""
        with self.cv:
            self.stopping = True
            self.pending.clear()
            self.cv.notify()

    def call(self, fn: Callable[[Card], object]) -> object:
        """Run `fn(card)` on this card's own thread (cards are single-threaded) and return its result."""
        box: list[object] = []
        done = threading.Event()
        with self.cv:
            self.tasks.append((fn, box, done))
            self.cv.notify()
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _take(self, card: Card, batch: int) -> list[lg.QuerySample] | None:
        while True:
            with self.cv:
                while not self.pending and not self.stopping and not self.tasks:
                    self.cv.wait()
                task = self.tasks.popleft() if self.tasks else None
                if task is None:
                    if not self.pending:
                        return None
                    n = min(batch, len(self.pending))
                    return [self.pending.popleft() for _ in range(n)]
            fn, box, done = task
            try:
                box.append(fn(card))
            except BaseException as exc:
                box.append(exc)
            done.set()

    def _run(self) -> None:
        try:
            if self.slot.cpus:
                os.sched_setaffinity(0, self.slot.cpus)  # this thread, and threads it starts later
            card = self.factory(self.slot.index, self.slot.cpus)
            self.info = card.info
        except BaseException as exc:  # reported by SystemUnderTest.start on the main thread
            self.startup_error = exc
            self.ready.set()
            return
        self.ready.set()
        bench = self.sut.benchmark
        stage = np.empty((self.sut.batch_size, *bench.input_shape), dtype=np.float32)
        try:
            while (samples := self._take(card, self.sut.batch_size)) is not None:
                self.sut.process(card, samples, stage)
        finally:
            card.close()


class SystemUnderTest:
    """Routes LoadGen queries to card workers and completes them in batches."""

    def __init__(self, benchmark: Benchmark, qsl: SampleLibrary, slots: list[CardSlot],
                 factory: CardFactory, batch_size: int) -> None:
        self.benchmark = benchmark
        self.qsl = qsl
        self.batch_size = batch_size
        self.workers = [_Worker(self, s, factory) for s in slots]
        self._next = 0
        self.completed = 0
        self.failure: str | None = None
        self._count_lock = threading.Lock()

    @property
    def cards(self) -> list[CardInfo]:
        return [w.info for w in self.workers if w.info is not None]

    def start(self) -> None:
        """Start every card worker and wait until its card is loaded; re-raise a loading error."""
        for w in self.workers:
            w.thread.start()
        for w in self.workers:
            w.ready.wait()
        errors = [w.startup_error for w in self.workers if w.startup_error is not None]
        if errors:
            self.stop()
            raise errors[0]

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        for w in self.workers:
            if w.thread.is_alive():
                w.thread.join()

    def warm_up(self, timed: bool) -> list[tuple[float, float]]:
        """Warm every card up through the real batch path; if `timed`, return per card the seconds for
        one sample and for one full batch, completions built but not sent to LoadGen."""
        n = min(self.batch_size, self.qsl.total_sample_count)
        self.qsl.load(list(range(n)))  # LoadGen replaces this with its own load before the test
        batch = [_Probe(i, i % n) for i in range(self.batch_size)]

        def measure(card: Card) -> tuple[float, float]:
            stage = np.empty((self.batch_size, *self.benchmark.input_shape), dtype=np.float32)
            run = lambda samples: self.process(card, samples, stage, complete=_discard)  # noqa: E731
            run(batch)
            if not timed:
                return (0.0, 0.0)
            run(batch[:1])
            return (_best_of(2, lambda: run(batch[:1])), _best_of(2, lambda: run(batch)))

        timings = [w.call(measure) for w in self.workers]
        self.completed = 0
        return timings  # type: ignore[return-value]

    # LoadGen callbacks -------------------------------------------------------------------------
    def issue_query(self, samples: list[lg.QuerySample]) -> None:
        b, n = self.batch_size, len(self.workers)
        for start in range(0, len(samples), b):
            self.workers[self._next].submit(samples[start:start + b])
            self._next = (self._next + 1) % n

    def flush_queries(self) -> None:
        pass

    # Card worker side --------------------------------------------------------------------------
    def process(self, card: Card, samples: list[lg.QuerySample], stage: np.ndarray,
                complete: Callable[[list[lg.QuerySampleResponse]], None] = lg.QuerySamplesComplete) -> None:
        indices = np.fromiter((s.index for s in samples), dtype=np.int64, count=len(samples))
        payload = None
        if self.failure is None:
            try:
                outputs = card.infer(self.qsl.stage(indices, stage))
                payload = np.ascontiguousarray(self.benchmark.encode_response(outputs), dtype=np.float32)
            except Exception as exc:  # a failing card must not hang LoadGen
                self.failure = f"{card.info.label()} failed: {type(exc).__name__}: {exc}"
        if payload is None:
            responses = [lg.QuerySampleResponse(s.id, 0, 0) for s in samples]
        else:
            addr = payload.ctypes.data  # LoadGen copies the bytes it logs before returning
            row = payload.shape[1] * 4
            responses = [lg.QuerySampleResponse(s.id, addr + j * row, row) for j, s in enumerate(samples)]
        complete(responses)
        with self._count_lock:
            self.completed += len(samples)


@dataclass(frozen=True)
class _Probe:
    """Stands in for a LoadGen sample during warm-up."""

    id: int
    index: int


def _discard(responses: list[lg.QuerySampleResponse]) -> None:
    pass


def _best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
