"""The asynchronous card contract (harness/run/cards/base.py) and the SUT that drives it (harness/run/sut/):
depth respected and used, the synchronous adapter, the pipelined simulated card's stage model on a
clock the test controls, the frozen batching policy and stats, and a failing card's counts."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import mlperf_loadgen as lg
import numpy as np
import pytest
from helpers import SAMPLES

from harness.data import benchmarks
from harness.records import store
from harness.records.layout import Layout
from harness.run.cards.base import AsyncCard, CardInfo, PageableHostBuffers, Synchronous, ZeroOutputs, as_async
from harness.run.cards.simulated_card import Pipeline, PipelinedSimulatedCard, Profile, SimulatedCard
from harness.run.qsl import SampleLibrary, plan_replicas
from harness.run.sut import CardSlot, SystemUnderTest

BENCH = benchmarks.get("resnet50")
CPUS = tuple(sorted(os.sched_getaffinity(0)))
SHAPES = BENCH.output_specs


def _profile(sps: float = 800.0, activations: int | None = 2, fail_after: int | None = None) -> Profile:
    pipe = None if activations is None else Pipeline(activations, 10.0, 1.0)
    return Profile("test-pipe", "test card", Path("test.yaml"), sps, 8, "uint8",
                   (0,) if fail_after is not None else (), fail_after or 0, pipe)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Completions:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[int] = []

    def __call__(self, responses: list[lg.QuerySampleResponse]) -> None:
        with self.lock:
            self.ids += [r.id for r in responses]

    def wait_for(self, n: int, timeout: float = 60.0) -> int:
        end = time.monotonic() + timeout
        while len(self.ids) < n and time.monotonic() < end:
            time.sleep(0.01)
        return len(self.ids)


@pytest.fixture
def completions(monkeypatch: pytest.MonkeyPatch) -> Completions:
    c = Completions()
    monkeypatch.setattr(lg, "QuerySamplesComplete", c)
    return c


def _sut(data_dir, cards, scenario="Offline", max_wait_s=None) -> SystemUnderTest:
    slots = [CardSlot(i, (CPUS[i % len(CPUS)],), 0) for i in range(len(cards))]
    plans = plan_replicas("none", [(s.index, s.node, s.cpus) for s in slots], {0: frozenset(CPUS)}, frozenset(CPUS))
    data = store.open_prepared(Layout(data_dir, BENCH).preprocessed, "prepare first")
    qsl = SampleLibrary(BENCH, data, plans, "none")
    qsl.load(list(range(SAMPLES)))
    return SystemUnderTest(BENCH, qsl, slots, lambda i, cpus: cards[i], 8, scenario, max_wait_s)


def _issue(sut: SystemUnderTest, n: int, first: int = 0) -> None:
    ids = np.arange(first, first + n, dtype=np.uint64)
    sut.intake.push(ids, (ids % SAMPLES).astype(np.int64))


def test_pipeline_stages_overlap_on_the_cards_clock():
    """Batch k's due time follows DMA in -> first free activation -> DMA out, each stage serial."""
    clock = Clock()
    card = PipelinedSimulatedCard(0, _profile(sps=800, activations=2), SHAPES, CPUS, clock=clock)
    try:
        assert isinstance(card, AsyncCard) and card.depth == 3
        compute = 2 * 8 / 800  # each activation: activations * batch / rate = 20 ms
        for _ in range(3):
            card.submit(None, 8)
        dues = [due - 100.0 for due, _ in card._flight]
        # in: 80 us each, serial; compute on activation 0, 1, then 0 again; out: 8 us after compute
        assert dues[0] == pytest.approx(80e-6 + compute + 8e-6)
        assert dues[1] == pytest.approx(160e-6 + compute + 8e-6)
        assert dues[2] == pytest.approx(80e-6 + 2 * compute + 8e-6)
        with pytest.raises(RuntimeError, match="in flight"):
            card.submit(None, 8)  # more than depth: refused
        assert card.poll() is None  # nothing due yet
        clock.t += dues[1] + 1e-9
        assert [o[0].shape[0] for o in (card.poll(), card.poll())] == [8, 8]
        assert card.poll() is None
        clock.t = 100.0 + dues[2]
        assert card.poll() is not None and card.poll() is None
    finally:
        card.close()


def test_synchronous_adapter_is_depth_one_and_done_at_submit():
    card = SimulatedCard(0, _profile(sps=80_000, activations=None), SHAPES, CPUS)
    driven = as_async(card)
    assert isinstance(driven, Synchronous) and driven.depth == 1
    driven.submit(None, 3)
    out = driven.poll()
    assert out is not None and out[0].shape[0] == 3 and driven.poll() is None
    assert as_async(driven) is driven


def test_harness_keeps_depth_batches_on_a_pipelined_card(data_dir, completions):
    """Offline with a backlog: the card holds `depth` batches at once (never more), every sample completes,
    completion runs on the card's thread, and the stats say how many batches in flight."""
    card = PipelinedSimulatedCard(0, _profile(sps=4000, activations=3), SHAPES, (CPUS[0],))
    sut = _sut(data_dir, [card])
    sut.start()
    _issue(sut, 8 * 40)
    assert completions.wait_for(320) == 320
    sut.stop()
    assert sorted(completions.ids) == list(range(320))
    assert card.max_in_flight == card.depth == 4
    stats = sut.stats()
    assert stats.cards[0].depth == 4 and stats.cards[0].samples_completed == 320 and stats.cards[0].batches == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.backlogged = 0  # type: ignore[misc]


def test_server_needs_its_deadline_before_start_and_it_is_frozen(data_dir, completions):
    card = SimulatedCard(0, _profile(sps=80_000, activations=None), SHAPES, (CPUS[0],))
    sut = _sut(data_dir, [card], scenario="Server")
    with pytest.raises(ValueError, match="deadline"):
        sut.start()
    sut.start(0.05)
    assert sut.batching is not None and sut.batching.max_wait_s == 0.05 and sut.batching.server
    with pytest.raises(dataclasses.FrozenInstanceError):
        sut.batching.max_wait_s = 1.0  # type: ignore[misc]
    _issue(sut, 3)
    assert completions.wait_for(3) == 3  # a partial batch went at its deadline
    sut.stop()


def test_failing_pipelined_card_redispatches_and_counts_agree(data_dir, completions):
    """The failure line counts the same batches as the card's own message (warm-up included)."""
    failing = PipelinedSimulatedCard(0, _profile(sps=4000, activations=2, fail_after=5), SHAPES, (CPUS[0],))
    other = SimulatedCard(1, _profile(sps=8000, activations=None), SHAPES, (CPUS[-1],))
    sut = _sut(data_dir, [failing, other])
    sut.load_cards()
    sut.warm_up(timed=False)
    sut.qsl.load(list(range(SAMPLES)))  # warm-up loads its own few samples, as LoadGen's load replaces them
    sut.start()
    _issue(sut, 8 * 30)
    assert completions.wait_for(240) == 240
    sut.stop()
    assert sorted(completions.ids) == list(range(240))
    failures = sut.stats().card_failures
    assert len(failures) == 1, failures
    why = failures[0]
    ran = re.search(r"failed after (\d+) batches \((\d+) of them warm-up\)", why)
    injected = re.search(r"injected failure after (\d+) batches", why)
    assert ran and injected and ran.group(1) == injected.group(1) == "5" and ran.group(2) == "1", why
    assert sut.stats().redispatched > 0 and sut.failure is None


class _Gated(PageableHostBuffers):
    """A synchronous card that reports which thread ran it (completion must stay on the card thread)."""

    def __init__(self, index: int, cpus: tuple[int, ...]) -> None:
        self.info = CardInfo(index, "fake", "fake", cpus, emulated=True)
        self.input_dtype = "uint8"
        self.threads: set[str] = set()

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        self.threads.add(threading.current_thread().name)
        return [np.zeros(n, np.int64), np.zeros((n, 1001), np.float32)]

    def close(self) -> None:
        pass


def test_a_synchronous_card_runs_on_its_card_thread(data_dir, completions):
    card = _Gated(0, (CPUS[0],))
    sut = _sut(data_dir, [card])
    sut.start()
    _issue(sut, 64)
    assert completions.wait_for(64) == 64
    sut.stop()
    assert card.threads == {"c0.card"}


def test_calibration_times_a_pipelined_card_kept_full(data_dir):
    """Warm-up timing of a card with batches in flight gives its rate (a batch every 10 ms here), not the
    40 ms one batch takes through it alone: the runner's Offline target and Server deadline come from it."""
    card = PipelinedSimulatedCard(0, _profile(sps=800, activations=4), SHAPES, (CPUS[0],))
    sut = _sut(data_dir, [card])
    sut.load_cards()
    try:
        ((_, per_batch),) = sut.warm_up(timed=True)
    finally:
        sut.stop()
    latency = 4 * 8 / 800
    assert per_batch < latency / 2, per_batch
    assert per_batch > 8 / 800 * 0.9  # never faster than the profile's rate


def test_server_prefers_an_idle_card_to_a_busy_one_with_room(data_dir, completions):
    """A pipelined card with room for a batch may still be computing: a Server batch put there waits for
    it, so dispatch prefers an idle card even when round-robin comes to the busy one first."""
    slow = PipelinedSimulatedCard(0, _profile(sps=8 / 6.0, activations=1), SHAPES, (CPUS[0],))  # 6 s a batch
    fast = PipelinedSimulatedCard(1, _profile(sps=8000, activations=1), SHAPES, (CPUS[-1],))
    sut = _sut(data_dir, [slow, fast], scenario="Server", max_wait_s=5.0)
    sut.start()
    _issue(sut, 8)  # to the slow card (round-robin starts at card 0); it has room for one more
    _issue(sut, 8, first=8)  # to the fast card, the next in turn
    assert completions.wait_for(8) == 8 and sorted(completions.ids) == list(range(8, 16))
    _issue(sut, 8, first=16)  # round-robin comes to the slow card: busy with room, the fast one idle
    assert completions.wait_for(24) == 24
    sut.stop()
    assert (slow.batches, fast.batches) == (1, 2)


class DepthOneCard(PageableHostBuffers):
    """An asynchronous card holding one batch at a time (OpenVINO with one infer request), done after
    `seconds` on a thread of its own, which then calls the ready callback. Notes which thread waits."""

    depth = 1
    input_dtype = "uint8"

    def __init__(self, index: int, seconds: float) -> None:
        self.info = CardInfo(index, "test", "depth-one", (CPUS[0],), emulated=True)
        self.seconds, self.zeros = seconds, ZeroOutputs(SHAPES)
        self.flight: list[tuple[threading.Event, int]] = []
        self.submitters: set[str] = set()
        self.waiters: set[str] = set()
        self.ready: Callable[[], None] = lambda: None

    def set_ready_callback(self, ready: Callable[[], None]) -> None:
        self.ready = ready

    def submit(self, batch: np.ndarray | None, n: int) -> None:
        assert not self.flight, "more than depth batches in flight"
        self.submitters.add(threading.current_thread().name)
        done = threading.Event()
        self.flight.append((done, n))

        def finish() -> None:
            done.set()
            self.ready()

        threading.Timer(self.seconds, finish).start()

    def poll(self) -> list[np.ndarray] | None:
        if not self.flight or not self.flight[0][0].is_set():
            return None
        return self.zeros(self.flight.pop(0)[1])

    def wait(self) -> list[np.ndarray]:
        self.waiters.add(threading.current_thread().name)
        done, n = self.flight[0]
        done.wait()
        self.flight.pop(0)
        return self.zeros(n)

    def close(self) -> None:
        pass


def test_server_card_thread_waits_on_a_depth_one_card_itself(data_dir, completions):
    """Server, depth 1, nothing else to do: the card thread waits for the batch itself (one wake-up fewer
    than the ready signal), and every sample still completes once."""
    card = DepthOneCard(0, seconds=0.05)
    sut = _sut(data_dir, [card], scenario="Server", max_wait_s=0.001)
    sut.start()
    for k in range(6):
        _issue(sut, 8, first=8 * k)
        time.sleep(0.02)
    assert completions.wait_for(48) == 48
    sut.stop()
    assert sorted(completions.ids) == list(range(48))
    assert card.waiters and card.waiters <= card.submitters  # waited on by the card's own thread
