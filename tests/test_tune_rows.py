"""Issue 43, finding 7: tune's bursts (and the warm-up's calibration) copy the rows of each batch as LoadGen orders
them in a run: a random order, so a card that copies from the replica makes about one copy per sample (the H100's
run: 508.5 copies a batch of 512), where tune used to time one or two runs of consecutive rows a batch."""

from __future__ import annotations

import os

import numpy as np
from test_gpu_iobinding import BENCH, _qsl, _spec

from harness.run.cards import make_card
from harness.run.qsl import row_runs
from harness.run.sut import CardSlot, SystemUnderTest
from harness.run.sut.dispatch import timed_rows


def test_timed_rows_are_a_fixed_random_draw_of_the_loaded_samples():
    rows = timed_rows(512, 512)
    assert sorted(rows.tolist()) == list(range(512))  # each loaded sample once
    assert len(row_runs(rows)) > 480  # about one copy per sample, as LoadGen's order gives
    assert np.array_equal(rows, timed_rows(512, 512))  # every candidate timed on the same rows
    few = timed_rows(8, 3)
    assert len(few) == 8 and set(few.tolist()) <= {0, 1, 2}


def test_a_burst_copies_about_one_run_per_sample(data_dir):
    """The IO-binding card on the CPU provider, kept full as tune times it: its copies per batch counted."""
    card = make_card(_spec(data_dir, batch=4, buckets=(4,)), 0, (0,))
    qsl = _qsl(data_dir, 4)
    sut = SystemUnderTest(BENCH, qsl, [CardSlot(0, tuple(sorted(os.sched_getaffinity(0)))[:1], 0)],
                          lambda i, cpus: card, 4)
    sut.load_cards()
    try:
        sut.warm_up(timed=False)
        sut.time_under_load()
    finally:
        sut.stop()
    assert card.rows_batches >= 8  # the warm-up's batch and the bursts'
    runs = len(row_runs(timed_rows(4, 4)))
    assert runs >= 3 and card.rows_copies == runs * card.rows_batches, (card.rows_copies, card.rows_batches)
