"""Intake and dispatch: LoadGen's queries in, batches out to the card workers, never waiting for a card.

Intake (native, `harness._intake`): LoadGen is handed a C++ SystemUnderTest whose IssueQuery only
queues the samples, so LoadGen's issue thread never takes the GIL or makes a Python object; the
`intake` thread takes them out in bulk as two flat arrays (ids, QSL indices), the GIL released while
it waits. Without this, the issue thread had to win the GIL back from the card threads for every
query and fell behind the Server schedule long before the cards were busy.

Dispatch (the intake thread): samples are cut into batches (Offline, SingleStream, MultiStream: as
they come; Server: they wait in the intake until a batch is full or the oldest has waited `max_wait_s`
and some card has room — a partial batch is never sent to cards that are all busy, where it would
only wait while capacity is lost to its empty rows; it keeps filling until a card has room).
A batch goes round-robin to the next idle card, or else to the card with the most room for batches on
it (a pipelined card with room may still have every activation busy: a batch put there waits, while
a card with more room starts it at once), or else, among the cards whose bounded queue has room, to
the one with the fewest batches in hand (Offline) or the one
expected to be free first (Server: the rest of the oldest batch on the card plus a moving-average
batch time per batch in hand, so a batch does not wait a whole batch time on one card while another
is about to finish); when every queue is full it goes to a shared backlog that idle cards drain.

The batching policy (`Batching`: scenario, batch size, Server deadline, queue depth) is frozen when
the intake starts (`start(max_wait_s)`), after the cards are loaded and calibrated (the default
deadline needs the calibrated rate) and before LoadGen issues anything; nothing changes it later.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np

from harness._intake import Intake
from harness.core.scenarios import Scenario
from harness.records.benchmark_record import Benchmark
from harness.run.cards.base import CardInfo
from harness.run.qsl import SampleLibrary
from harness.run.sut.messages import QUEUE_DEPTH, Batch, Batching, CardSlot, SutStats
from harness.run.sut.respond import complete_empty, responder
from harness.run.sut.window import name_os_thread
from harness.run.sut.worker import CANNOT_TAKE, CardFactory, CardWorker, WarmUpCard, WorkerState

INTAKE_CHUNK = 1 << 16  # samples the intake thread takes at a time outside Server (an Offline query: in chunks)
BURST_PER_DEPTH = 4  # a timed burst keeps a card full for this many batches per batch it holds in flight
UNDER_LOAD_ROUNDS = 2  # `time_under_load` keeps the best of this many bursts of every card at once
ROWS_SEED = 43  # the warm-up's and the timed bursts' rows: the same for every card and every tune candidate
SERVER_TAKE_BATCHES = 64  # Server: full batches the intake thread takes at a time when LoadGen runs ahead
STOP_GRACE_S = 10.0  # a stop waits this long for the cards' threads, then leaves them (daemons) to the exit


def timed_rows(batch: int, loaded: int) -> np.ndarray:
    """The samples of a warm-up or timed batch: `batch` of the `loaded` (rows 0..loaded-1) in a random order, as
    LoadGen issues an Offline query (the performance set shuffled), so a card that copies from the replica makes
    about one copy per sample as in a run (the H100: 508.5 copies a batch of 512), not the one or two runs of
    consecutive rows it would time otherwise."""
    rng = np.random.default_rng(ROWS_SEED)
    return (rng.permutation(max(batch, loaded))[:batch] % loaded).astype(np.int64)


@dataclass(frozen=True)
class UnderLoad:
    """Every card kept full at once: per card (seconds per batch, median batch latency), and the card set's rate."""

    cards: list[tuple[float, float]]
    samples_per_second: float


class SystemUnderTest:
    """Routes LoadGen queries to card workers and completes them in batches.

    Life: `load_cards()` (card threads up, cards made), `warm_up()`, `start(max_wait_s)` (batching frozen,
    intake open), LoadGen's test on `handle`, `stop()`, `stats()`. `start` loads the cards if needed."""

    def __init__(self, benchmark: Benchmark, qsl: SampleLibrary, slots: list[CardSlot],
                 factory: CardFactory, batch_size: int, scenario: Scenario = Scenario.OFFLINE,
                 max_wait_s: float | None = None, queue_depth: int = QUEUE_DEPTH) -> None:
        self.benchmark = benchmark
        self.qsl = qsl
        self.batch_size = batch_size
        self.scenario = scenario
        self.server = scenario == Scenario.SERVER
        self.queue_depth = queue_depth
        self._requested_wait_s = max_wait_s
        self.batching: Batching | None = None  # frozen by start()
        self.backlog: deque[Batch] = deque()
        self._next = 0
        self._dispatch_lock = threading.Lock()
        self.failure: str | None = None
        self.card_failures: list[str] = []
        self.redispatched = 0
        self.backlogged = 0
        self.intake = Intake()
        self._overdue = False  # a Server batch is past its deadline, waiting for a card with room
        self._stopping = False
        self._loaded = False
        self.stopped = threading.Event()  # set by stop(): the card threads of a failed card may end then
        self._intake_thread: threading.Thread | None = None
        self._completed_offset = 0
        self.workers = [CardWorker(s, factory, qsl, batch_size, self.server,
                                   responder(benchmark.encode_response, batch_size), benchmark.host_postprocess,
                                   self) for s in slots]

    @property
    def cards(self) -> list[CardInfo]:
        return [w.info for w in self.workers if w.info is not None]

    @property
    def handle(self) -> int:
        """The SUT LoadGen's StartTest takes (owned by `intake`: never lg.DestroySUT it)."""
        return int(self.intake.handle)

    @property
    def completed(self) -> int:
        return sum(w.completed for w in self.workers) - self._completed_offset

    def load_cards(self) -> None:
        """Start every card's threads and wait until its card is loaded; re-raise a loading error."""
        if self._loaded:
            return
        self._loaded = True
        for w in self.workers:
            w.load()  # its card thread starts the card's other threads once the card is loaded
        errors = [e for e in [w.loaded() for w in self.workers] if e is not None]
        if errors:
            self.stop()
            raise errors[0]

    def start(self, max_wait_s: float | None = None) -> None:
        """Freeze the batching policy and open the intake (loading the cards first if needed). Server
        needs its deadline here (`max_wait_s`, or the one given at construction)."""
        wait = self._requested_wait_s if max_wait_s is None else max_wait_s
        if self.server and wait is None:
            raise ValueError("a Server SUT needs its batching deadline (max_wait_s) before it starts")
        self.load_cards()
        self.batching = Batching(self.scenario, self.batch_size, (wait or 0.0) if self.server else 0.0,
                                 self.queue_depth)
        self._intake_thread = threading.Thread(target=self._intake_loop, args=(self.batching,), name="intake",
                                               daemon=True)
        self._intake_thread.start()

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """LoadGen tests before the run's batching is frozen (calibration's probes, harness.run.calibration):
        an intake thread that cuts Offline batches, ended before `start` opens the run's own. Progress
        counts from 0 again afterwards."""
        if self._intake_thread is not None:
            raise RuntimeError("probing() after start(): the run's batching is already frozen")
        self.load_cards()
        done = threading.Event()
        offline = Batching(Scenario.OFFLINE, self.batch_size, 0.0, self.queue_depth)
        probe = threading.Thread(target=self._intake_loop, name="intake", args=(offline, done), daemon=True)
        probe.start()
        try:
            yield
        finally:
            done.set()
            probe.join()
            self._completed_offset = sum(w.completed for w in self.workers)

    def stop(self) -> None:
        self._stopping = True
        self.intake.close()
        if self._intake_thread is not None and self._intake_thread.is_alive():
            self._intake_thread.join()
        self.stopped.set()
        with self._dispatch_lock:
            self.backlog.clear()
        for w in self.workers:
            w.stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for w in self.workers:
            w.join(deadline)

    def stats(self) -> SutStats:
        """What dispatch and each card did, frozen (read after `stop()`)."""
        return SutStats(self.batching, self.backlogged, self.redispatched, tuple(self.card_failures), self.failure,
                        tuple(w.stats() for w in self.workers if w.info is not None))

    def warm_up(self, timed: bool) -> list[tuple[float, float]]:
        """Warm every card up through the real stage / infer / encode path; if `timed`, return per card
        the seconds for one sample and for one full batch, completions built but not sent. A card with
        several batches in flight gives its seconds per full batch when kept full (its rate), so the
        calibrated samples/s is what the run will see."""
        self.load_cards()
        n = min(self.batch_size, self.qsl.total_sample_count)
        self.qsl.load(list(range(n)))  # LoadGen replaces this with its own load before the test
        indices = timed_rows(self.batch_size, n)

        def measure(card: WarmUpCard) -> tuple[float, float]:
            stage = self.qsl.staging_buffer(self.batch_size, card.input_dtype)

            def run(k: int) -> None:
                self.benchmark.encode_response(card.infer(card.input(indices[:k], stage), k), indices[:k])

            run(self.batch_size)
            if not timed:
                return (0.0, 0.0)
            run(1)
            per_batch = _best_of(2, lambda: run(self.batch_size))
            if card.depth > 1:
                staged = card.input(indices, stage)
                per_batch = min(per_batch, card.burst(staged, self.batch_size, BURST_PER_DEPTH * card.depth)[0])
            return (_best_of(2, lambda: run(1)), per_batch)

        timings = [w.call(measure) for w in self.workers]
        self._completed_offset = sum(w.completed for w in self.workers)
        return timings

    def time_under_load(self) -> UnderLoad:
        """After `warm_up`: every card kept full at the same time (`depth` batches in flight, a burst of
        BURST_PER_DEPTH x depth each, all started together), as in a run. Cards that share a device (several
        sessions on one GPU) share its throughput, so the rate is every card's samples over the time from
        the first start to the last finish, never the sum of cards timed alone (issue 36: 4 cards on one
        H100 timed one at a time were predicted at 4.1x the run). Per card: seconds per full batch and the
        median latency of a batch under that load, each batch's outputs encoded as it comes back. Depth 1
        is timed the same way (batches back to back), so `appliance tune` compares every candidate alike.
        The best of UNDER_LOAD_ROUNDS bursts: a busy machine's stall in one costs it, not the figure."""
        n = min(self.batch_size, self.qsl.total_sample_count)
        indices = timed_rows(self.batch_size, n)
        together = threading.Barrier(len(self.workers))

        def measure(card: WarmUpCard) -> list[tuple[float, float, float, float]]:
            try:
                staged = card.input(indices, self.qsl.staging_buffer(self.batch_size, card.input_dtype))
            except BaseException:
                together.abort()  # the other cards stop waiting for this one (BrokenBarrierError)
                raise
            rounds = []
            for _ in range(UNDER_LOAD_ROUNDS):
                together.wait()
                start = time.perf_counter()
                per_batch, latency = card.burst(staged, self.batch_size, BURST_PER_DEPTH * card.depth,
                                                lambda outputs: self.benchmark.encode_response(outputs, indices))
                rounds.append((per_batch, latency, start, time.perf_counter()))
            return rounds

        posted = [w.post(measure) for w in self.workers]
        timed = [cast(list[tuple[float, float, float, float]], CardWorker.result(t)) for t in posted]
        samples = sum(BURST_PER_DEPTH * w.depth for w in self.workers) * self.batch_size
        best = max((UnderLoad([(per_batch, latency) for per_batch, latency, *_ in cards],
                               samples / (max(end for *_, end in cards) - min(start for _, _, start, _ in cards)))
                    for cards in zip(*timed, strict=True)), key=lambda u: u.samples_per_second)
        return best

    # intake (the intake thread) -------------------------------------------------------------------
    def _intake_loop(self, batching: Batching, done: threading.Event | None = None) -> None:
        """Take what LoadGen issued, cut it into batches and dispatch them (Server: see `_overdue_fill`);
        until the SUT stops (or `done` is set: the probes' intake)."""
        name_os_thread("intake")
        b = batching.batch_size
        server = batching.server
        ids = np.empty(b * SERVER_TAKE_BATCHES if server else INTAKE_CHUNK, np.uint64)
        indices = np.empty_like(ids, dtype=np.int64)
        min_n = b if server else 1
        take = self.intake.take
        wait = batching.max_wait_s
        room = batching.queue_depth * len(self.workers)  # more than this can only go to the backlog
        while not self._stopping and not (done is not None and done.is_set()):
            n = take(ids, indices, min_n, wait, 0.1)
            if n and server and n < b:
                n = self._overdue_fill(ids, indices, n)
            if not n or self._stopping:
                continue
            id_list, idx = ids[:n].tolist(), indices[:n].copy()
            batches = [Batch(id_list[i:i + b], idx[i:i + b]) for i in range(0, n, b)]
            with self._dispatch_lock:
                for batch in batches[:room]:
                    self._dispatch(batch)
                if len(batches) > room:  # an Offline query: the rest in one step, cards take from it
                    self._backlog_all(batches[room:])

    def _overdue_fill(self, ids: np.ndarray, indices: np.ndarray, n: int) -> int:
        """A partial Server batch past its deadline: keep filling it until a card has room."""
        self.intake.unpoke()
        self._overdue = True  # before looking: a card that gets room after the look pokes the intake
        while n < self.batch_size and not self._stopping and not self._card_with_room():
            n += self.intake.take(ids[n:], indices[n:], self.batch_size - n, 3600.0, 0.1, True)
        self._overdue = False
        return n

    def _card_with_room(self) -> bool:
        """A card with room for a batch on it (or no card left, so the batch goes out and completes empty)."""
        return not any(w.alive for w in self.workers) or any(w.has_room() for w in self.workers)

    # dispatch (the intake thread, and card threads re-dispatching; all under _dispatch_lock) --------------
    def _dispatch(self, batch: Batch) -> None:
        """Round-robin from the card after the last one used, to the first idle card, else the one with the
        most room on it, else the one whose queue has room with the fewest batches in hand (Server: the
        least work ahead: `routing_load`, harness/run/sut/worker/routing.py); else the backlog. Never waits.
        Hold _dispatch_lock."""
        workers, n = self.workers, len(self.workers)
        best, best_k, best_load = None, 0, CANNOT_TAKE
        depth = self.queue_depth
        now = time.perf_counter() if self.server else 0.0
        for k in range(n):
            w = workers[(self._next + k) % n]
            load = w.routing_load(now, depth)
            if load < best_load:
                best, best_k, best_load = w, k, load
                if w.idle():  # an idle card: none is better (a card with room may be computing)
                    break
        if best is not None:
            self._next = (self._next + best_k + 1) % n
            best.take(batch)
            return
        self._backlog_all([batch])

    def _backlog_all(self, batches: list[Batch]) -> None:
        """Batches no card queue has room for, for idle cards to take. Hold _dispatch_lock."""
        if not any(w.alive for w in self.workers):
            for batch in batches:
                complete_empty(batch)
            return
        self.backlog.extend(batches)
        self.backlogged += len(batches)
        for w in self.workers:
            if w.alive:
                w.wake()

    # the Dispatcher interface the card workers see (which thread calls each: `Dispatcher`) -------------
    def take_backlog(self) -> Batch | None:
        try:
            return self.backlog.popleft()  # deque.popleft is atomic under the GIL: no lock needed
        except IndexError:
            return None

    def card_has_room(self) -> None:
        """Called by a card that can take a batch at once: an overdue partial batch can go to it."""
        if self._overdue:
            self.intake.poke()

    def redispatch(self, batch: Batch) -> None:
        """Samples of a failed card: to the other cards, or completed empty when none is left."""
        with self._dispatch_lock:
            self.redispatched += len(batch)
            self._dispatch(batch)

    def card_failed(self, worker: WorkerState, why: str) -> None:
        """The failing card's own thread, which wakes its taking thread next (`_fail`: sut/worker/failing.py)."""
        with self._dispatch_lock:
            if not worker.mark_dead():
                return
            self.card_failures.append(why)
            if not any(w.alive for w in self.workers):
                self.failure = f"every card failed (last: {why})"
                while self.backlog:
                    complete_empty(self.backlog.popleft())
        self.card_has_room()  # an overdue batch waiting for this card goes elsewhere (or completes empty)


def _best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
