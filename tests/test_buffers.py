"""harness/run/buffers.py: one depth rule, used by the worker that makes the staging buffers, the plan that sizes
them and the manifest that states them; the card protocol's `register_host_buffers` reaches every card."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLES

from harness.data import benchmarks
from harness.records import store
from harness.records.layout import Layout
from harness.run import buffers
from harness.run.cards.base import CardInfo, PageableHostBuffers
from harness.run.cards.simulated_card import Pipeline, PipelinedSimulatedCard, Profile
from harness.run.qsl import SampleLibrary, plan_replicas
from harness.run.sut import CardSlot, SystemUnderTest

BENCH = benchmarks.get("resnet50")
CPUS = tuple(sorted(os.sched_getaffinity(0)))


@pytest.mark.parametrize("depth", [1, 2, 5])
@pytest.mark.parametrize("dtype", ["uint8", "float32", None])
def test_the_depth_rule_makes_depth_plus_two_aligned_batch_buffers(depth, dtype):
    made = buffers.card_staging(depth, 8, BENCH.input_shape, dtype)
    assert len(made) == buffers.staging_count(depth) == depth + 2
    assert buffers.feeder_count(depth) == depth + 1  # the card thread's own is the last: OWN
    assert made[buffers.OWN] is made[-1]
    for b in made:
        if dtype is None:
            assert b is None
            continue
        assert b is not None and b.shape == (8, *BENCH.input_shape) and b.dtype == np.dtype(dtype)
        assert b.ctypes.data % buffers.ALIGN == 0 and b.flags.c_contiguous
    assert len({id(b) for b in made}) == len(made) or dtype is None  # each its own


def test_the_plan_counts_what_the_rule_makes():
    """`card_bytes` (the plan's refusal) is the staging buffers the rule makes, the padded copies and the outputs
    held, in the same counts: batch 8, 3 in flight, resnet50's float32 input."""
    sample_in = math.prod(BENCH.input_shape) * 4
    staged = sum(b.nbytes for b in buffers.card_staging(3, 8, BENCH.input_shape, "float32") if b is not None)
    assert buffers.card_bytes(8, sample_in, 0, 3, padded_copies=False) == staged
    assert buffers.card_bytes(8, sample_in, 100, 3, padded_copies=True) == staged + 8 * (sample_in * 3 + 100 * 4)
    assert buffers.STAGING_RULE.startswith("per card: batches in flight + 2 preallocated")


class _Recording(PageableHostBuffers):
    """A synchronous card that records the host buffers it is handed (through `Synchronous`)."""

    input_dtype = "uint8"

    def __init__(self, index: int) -> None:
        self.info = CardInfo(index, "fake", "fake", (CPUS[0],), emulated=True)
        self.handed: list[list[np.ndarray]] = []

    def register_host_buffers(self, host: list[np.ndarray]) -> None:
        self.handed.append(host)

    def infer(self, batch, n):
        return [np.zeros(n, np.int64), np.zeros((n, 1001), np.float32)]

    def close(self) -> None:
        pass


class _RecordingPipelined(PipelinedSimulatedCard):
    """An asynchronous card (several batches in flight) that records the host buffers it is handed."""

    def register_host_buffers(self, host: list[np.ndarray]) -> None:
        self.handed = [*getattr(self, "handed", []), host]


def _sut(data_dir: Path, cards: list[object]) -> SystemUnderTest:
    slots = [CardSlot(i, (CPUS[i % len(CPUS)],), 0) for i in range(len(cards))]
    plans = plan_replicas("none", [(s.index, s.node, s.cpus) for s in slots], {0: frozenset(CPUS)}, frozenset(CPUS))
    data = store.open_prepared(Layout(data_dir, BENCH).preprocessed, "prepare first")
    qsl = SampleLibrary(BENCH, data, plans, "none")
    qsl.load(list(range(SAMPLES)))
    return SystemUnderTest(BENCH, qsl, slots, lambda i, cpus: cards[i], 8)


def test_every_card_is_handed_the_staging_buffers_the_rule_makes_once(data_dir):
    pipe = Profile("test-pipe", "test card", Path("test.yaml"), 800.0, 8, "uint8", (), 0, Pipeline(3, 10.0, 1.0))
    sync, pipelined = _Recording(0), _RecordingPipelined(1, pipe, BENCH.output_specs, (CPUS[-1],))
    sut = _sut(data_dir, [sync, pipelined])
    sut.load_cards()
    try:
        for card, worker in zip((sync, pipelined), sut.workers, strict=True):
            (handed,) = card.handed
            assert len(handed) == buffers.staging_count(worker.depth)
            assert [b.ctypes.data for b in handed] == [b.ctypes.data for b in worker.buffers if b is not None]
            assert all(b.shape == (8, *BENCH.input_shape) and b.dtype == np.uint8 for b in handed)
        assert sut.workers[1].depth > 1  # the rule counted a pipelined card's batches in flight
    finally:
        sut.stop()
