"""Multi-card harness: replicas, staging, batching and dispatch (correctness only, no timing asserts)."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass

import mlperf_loadgen as lg
import numpy as np
import pytest
from helpers import SAMPLES, appliance

from harness.data import benchmarks
from harness.records import store
from harness.records.layout import Layout
from harness.run.buffers import ALIGN
from harness.run.cards.base import CardInfo, PageableHostBuffers
from harness.run.qsl import SampleLibrary, plan_replicas
from harness.run.sut import CardSlot, SystemUnderTest

BENCH = benchmarks.get("resnet50")
CPUS = tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class Sample:
    id: int
    index: int


def _issue(sut: SystemUnderTest, samples: list[Sample]) -> None:
    """Issue samples into the SUT's native intake, as LoadGen's IssueQuery does."""
    sut.intake.push(np.asarray([s.id for s in samples], np.uint64), np.asarray([s.index for s in samples], np.int64))


def _data(data_dir):
    return store.open_prepared(Layout(data_dir, BENCH).preprocessed, "prepare first")


class FakeCard(PageableHostBuffers):
    """Returns each sample's first staged byte as its 'class', so a response tells what was staged."""

    def __init__(self, index, cpus, fail_after=None, gate=None, seconds=0.0):
        self.input_dtype = "uint8"
        self.info = CardInfo(index, "fake", "fake", cpus, emulated=True)
        self.fail_after, self.gate, self.seconds, self.batches, self.sizes = fail_after, gate, seconds, 0, []
        self.seen: list[np.ndarray] = []  # first byte of every sample staged for it

    def infer(self, batch, n):
        if self.gate is not None:
            self.gate.wait()
        time.sleep(self.seconds)
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise RuntimeError("boom")
        self.batches += 1
        self.sizes.append(n)
        self.seen.append(batch[:n, 0, 0, 0].copy())
        return [batch[:, 0, 0, 0].astype(np.int64) + 1, np.zeros((n, 1001), np.float32)]

    def close(self):
        pass


class Completions:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[list[tuple[int, int]]] = []

    def __call__(self, responses):
        with self.lock:
            self.calls.append([(r.id, r.size) for r in responses])

    def ids(self):
        with self.lock:
            return [i for call in self.calls for i, _ in call]

    def wait_for(self, n, timeout=20.0):
        end = time.monotonic() + timeout
        while len(self.ids()) < n and time.monotonic() < end:
            time.sleep(0.005)
        return len(self.ids())


@pytest.fixture
def completions(monkeypatch):
    c = Completions()
    monkeypatch.setattr(lg, "QuerySamplesComplete", c)
    return c


def _sut(data_dir, cards, scenario="Offline", max_wait_s=None, depth=8, replicate="none"):
    slots = [CardSlot(i, (CPUS[i % len(CPUS)],), 0) for i in range(len(cards))]
    plans = plan_replicas(replicate, [(s.index, s.node, s.cpus) for s in slots], {0: frozenset(CPUS)},
                          frozenset(CPUS))
    qsl = SampleLibrary(BENCH, _data(data_dir), plans, replicate)
    qsl.load(list(range(SAMPLES)))
    sut = SystemUnderTest(BENCH, qsl, slots, lambda i, cpus: cards[i], 8, scenario, max_wait_s, depth)
    sut.start()
    return sut


def test_card_replicas_are_distinct_and_filled_on_their_cards_cpus(data_dir):
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs")
    plans = plan_replicas("card", [(0, 0, (CPUS[0],)), (1, 0, (CPUS[1],))], {0: frozenset(CPUS)}, frozenset(CPUS))
    qsl = SampleLibrary(BENCH, _data(data_dir), plans, "card")
    qsl.load(list(range(SAMPLES)))
    a, b = qsl.replicas
    assert not np.shares_memory(a.buffer, b.buffer)
    assert a.filled_on_cpus == (CPUS[0],) and b.filled_on_cpus == (CPUS[1],)
    assert np.array_equal(a.buffer, b.buffer)
    assert a.buffer.ctypes.data % ALIGN == 0 and b.buffer.ctypes.data % ALIGN == 0
    assert qsl.replica_for(0) == 0 and qsl.replica_for(1) == 1
    assert sum(a.pages_on_nodes.values()) > 0  # where the pages are, as the kernel says


def test_node_replication_groups_cards_by_node():
    plans = plan_replicas("node", [(0, 0, (0,)), (1, 1, (2,)), (2, 0, (1,)), (3, None, (3,))],
                          {0: frozenset({0, 1}), 1: frozenset({2, 3})}, frozenset(range(4)))
    assert [(p.node, p.cards, p.cpus) for p in plans] == [(0, (0, 2), (0, 1)), (1, (1,), (2, 3)), (None, (3,), (3,))]
    assert plan_replicas("none", [(0, 0, (0,)), (1, 1, (2,))], {}, frozenset())[0].cpus == ()


def test_staging_is_aligned_and_both_paths_agree(data_dir):
    qsl = SampleLibrary(BENCH, _data(data_dir))
    qsl.load(list(range(SAMPLES)))
    buf = qsl.staging_buffer(8, "uint8")
    assert buf.ctypes.data % ALIGN == 0 and buf.flags.c_contiguous
    contiguous = qsl.stage(np.arange(3, 11), buf).copy()
    expected = np.empty_like(contiguous)
    _data(data_dir).gather(np.arange(3, 11), expected)
    assert np.array_equal(contiguous, expected)
    order = np.array([9, 3, 40, 7, 7, 0, 47, 12])
    gathered = qsl.stage(order, buf)
    _data(data_dir).gather(np.sort(order), expected)
    assert np.array_equal(gathered[np.argsort(order, kind="stable")], expected)
    f32 = qsl.staging_buffer(8, "float32")
    assert f32.ctypes.data % ALIGN == 0
    staged = qsl.stage(np.arange(3, 11), f32)
    assert np.allclose(staged, contiguous.astype(np.float32) - qsl.mean)
    assert np.allclose(qsl.stage(order, f32)[2], qsl.replicas[0].buffer[40] - qsl.mean)
    qsl.unload([40])
    for out in (buf, f32):
        with pytest.raises(RuntimeError, match="not loaded"):
            qsl.stage(order, out)


def test_offline_issue_never_blocks_and_every_sample_completes(data_dir, completions):
    gate = threading.Event()
    cards = [FakeCard(0, (CPUS[0],), gate=gate), FakeCard(1, (CPUS[-1],), gate=gate)]
    sut = _sut(data_dir, cards, depth=2)
    samples = [Sample(i, i % SAMPLES) for i in range(400)]
    t0 = time.monotonic()
    _issue(sut, samples)  # 50 batches; the cards are blocked, queues hold 2 each
    assert time.monotonic() - t0 < 5
    while sut.backlogged == 0 and time.monotonic() - t0 < 5:  # the intake thread dispatches them
        time.sleep(0.01)
    assert all(len(w.queue) <= 2 for w in sut.workers) and sut.backlogged > 0
    gate.set()
    assert completions.wait_for(400) == 400
    sut.stop()
    assert sorted(completions.ids()) == list(range(400))
    assert all(len(call) <= 8 for call in completions.calls)  # completed in batches
    assert cards[0].batches > 0 and cards[1].batches > 0


def test_idle_and_busy_card_paths_stage_the_right_samples(data_dir, completions):
    """The first batch reaches the idle card straight (its card thread stages it), the next ones wait in
    its queue and the feeder stages them: every sample the card reads is the one LoadGen asked for."""
    gate = threading.Event()
    cards = [FakeCard(0, (CPUS[0],), gate=gate)]
    sut = _sut(data_dir, cards)
    order = [(7 * i + 3) % SAMPLES for i in range(32)]
    _issue(sut, [Sample(i, k) for i, k in enumerate(order)])  # 4 batches: 1 on the card, 3 queued
    gate.set()
    assert completions.wait_for(32) == 32
    sut.stop()
    first = np.empty((SAMPLES, *BENCH.input_shape), np.uint8)
    _data(data_dir).gather(np.arange(SAMPLES), first)
    assert np.array_equal(np.concatenate(cards[0].seen), first[order, 0, 0, 0])


def test_server_batches_wait_for_the_deadline_or_a_full_batch(data_dir, completions):
    cards = [FakeCard(0, (CPUS[0],))]
    deadline = 3.0  # long beside the stalls of a loaded machine, which the looks below must not mistake
    sut = _sut(data_dir, cards, scenario="Server", max_wait_s=deadline)
    t0 = time.monotonic()
    for i in range(3):
        _issue(sut, [Sample(i, i)])
    time.sleep(0.05)
    if time.monotonic() - t0 < deadline * 0.9:
        assert completions.ids() == []  # still waiting for more samples
    assert completions.wait_for(3) == 3 and cards[0].sizes == [3]  # flushed at the deadline as one batch
    assert time.monotonic() - t0 >= deadline
    t0 = time.monotonic()
    for i in range(3, 11):
        _issue(sut, [Sample(i, i)])
    assert completions.wait_for(11) == 11
    assert cards[0].sizes == [3, 8] and time.monotonic() - t0 < deadline  # the full batch went at once
    sut.stop()


def test_server_sends_a_batch_to_the_card_that_frees_first(data_dir, completions):
    """With every card busy, a Server batch goes to the card expected back first (the rest of its batch
    plus its batch time per batch in hand), not round-robin: a slow card would hold it a whole batch."""
    cards = [FakeCard(0, (CPUS[0],), seconds=0.4), FakeCard(1, (CPUS[-1],), seconds=0.04)]
    sut = _sut(data_dir, cards, scenario="Server", max_wait_s=5.0)
    for k in range(2):  # one batch each, one after the other: each card learns its batch time
        _issue(sut, [Sample(8 * k + i, i) for i in range(8)])
        assert completions.wait_for(8 * (k + 1)) == 8 * (k + 1)
    assert [c.batches for c in cards] == [1, 1]
    _issue(sut, [Sample(16 + i, i % SAMPLES) for i in range(24)])  # one to each idle card, then both busy
    assert completions.wait_for(40) == 40
    sut.stop()
    assert [c.batches for c in cards] == [2, 3]  # round-robin would have queued the third on the slow card


def test_failed_card_redispatches_to_the_others(data_dir, completions):
    cards = [FakeCard(0, (CPUS[0],), fail_after=2), FakeCard(1, (CPUS[-1],))]
    sut = _sut(data_dir, cards, depth=3)
    _issue(sut, [Sample(i, i % SAMPLES) for i in range(200)])
    assert completions.wait_for(200) == 200
    sut.stop()
    assert sorted(completions.ids()) == list(range(200))
    assert all(size > 0 for call in completions.calls for _, size in call)  # none answered empty
    assert len(sut.card_failures) == 1 and sut.failure is None and sut.redispatched > 0


def test_all_cards_failing_completes_everything_empty(data_dir, completions):
    cards = [FakeCard(0, (CPUS[0],), fail_after=1), FakeCard(1, (CPUS[-1],), fail_after=0)]
    sut = _sut(data_dir, cards)
    _issue(sut, [Sample(i, i % SAMPLES) for i in range(120)])
    assert completions.wait_for(120) == 120
    _issue(sut, [Sample(1000, 0)])  # after the last card died: answered at once
    assert completions.wait_for(121) == 121
    sut.stop()
    assert sut.failure and "every card failed" in sut.failure


@pytest.mark.slow
def test_sixteen_simulated_cards_on_this_machine(data_dir, tmp_path, capsys):
    profile = tmp_path / "slow-card.yaml"
    profile.write_text("version: 1\nname: slow-card\nmodel: test card (simulated)\nsource: test\n"
                       "benchmarks:\n  resnet50: {samples_per_second: 200, batch: 8}\n")
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--cards", f"simulate:{profile}:16",
                   "--duration-ms", 300, "-q")
    out = capsys.readouterr().out
    assert rc == 0
    run = next(tmp_path.glob("*_16xSIMULATED-slow-card/resnet50/Offline/performance/run_1"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["cards"]) == 16 and all(c["simulated"] for c in manifest["cards"])
    assert {tuple(c["cpus"]) for c in manifest["cards"]} <= {(cpu,) for cpu in CPUS} | {CPUS}
    assert "SIMULATED" in manifest["synthetic"]["cards"] and "SIMULATED" in out
    assert (run / "SIMULATED.txt").is_file() and "SIMULATED" in (run / "user.conf").read_text()


def test_cloud_ai_100_profile_accuracy_run_and_card_replicas(data_dir, tmp_path):
    assert appliance("run", "--mode", "accuracy", "--data-dir", data_dir, "--results", tmp_path, "--cards",
                     "simulate:cloud-ai-100:2", "--replicate", "card", "-q") == 0
    manifest = json.loads(next(tmp_path.glob("*/resnet50/Offline/accuracy/manifest.json")).read_text())
    assert manifest["cards"][0]["samples_per_second"] == 22667 and manifest["cards"][0]["batch"] == 8
    replicas = manifest["sample_buffers"]["replicas"]
    assert len(replicas) == 2 and replicas[0]["address"] != replicas[1]["address"]
    for r in replicas:
        assert r["filled_on_cpus"] == r["fill_cpus"] == manifest["cards"][r["cards"][0]]["cpus"]


@pytest.mark.parametrize("spec", ["simulate:nope:2", "simulate:cloud-ai-100", "emulate:0"])
def test_bad_cards_spec_is_one_line(spec, data_dir, tmp_path, capsys):
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--cards", spec, "-q") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("--cards" in err[0] or "profile" in err[0]), err


@pytest.mark.parametrize("batch", [2, 4, 8])
def test_default_server_deadline_fills_99_percent_of_batches(batch):
    """The default deadline is the 99th percentile of a batch's fill time under Poisson arrivals
    (checked against 200,000 seeded simulated batches), capped at a tenth of the latency bound."""
    from harness.run.runner import default_max_wait_s

    qps = 50_000.0  # high enough that the cap does not bind
    deadline = default_max_wait_s(BENCH, batch, qps)
    assert deadline < BENCH.server_latency_ms / 1000 / 10
    fill = np.random.default_rng(batch).exponential(1 / qps, (200_000, batch - 1)).sum(axis=1)
    assert 0.985 < (fill <= deadline).mean() < 0.995
    assert default_max_wait_s(BENCH, 1, qps) == 0.0  # a batch of one never waits
    assert default_max_wait_s(BENCH, batch, 1.0) == BENCH.server_latency_ms / 1000 / 10
