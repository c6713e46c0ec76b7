"""The native intake (harness/_intake.cpp): LoadGen's SystemUnderTest whose IssueQuery only queues samples.

LoadGen itself drives it in every run test (the runner hands `SystemUnderTest.handle` to StartTest);
these tests pin down what the intake thread relies on: order, whole batches, the Server deadline,
flush, poke, close and timeouts, and clear errors for wrong buffers."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from harness._intake import Intake


def _push(intake: Intake, ids: range) -> None:
    intake.push(np.asarray(ids, np.uint64), np.asarray([i % 7 for i in ids], np.int64))


def _buffers(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n, np.uint64), np.zeros(n, np.int64)


def test_take_returns_what_was_issued_in_order():
    intake = Intake()
    _push(intake, range(10, 15))
    _push(intake, range(15, 30))
    assert intake.issued == 20 and intake.waiting == 20
    ids, idx = _buffers(64)
    assert intake.take(ids, idx, 1, 0.0, 1.0) == 20
    assert ids[:20].tolist() == list(range(10, 30)) and idx[:20].tolist() == [i % 7 for i in range(10, 30)]
    assert intake.waiting == 0 and intake.issued == 20


def test_take_is_capped_by_the_buffers_and_keeps_the_rest():
    intake = Intake()
    _push(intake, range(100))
    ids, idx = _buffers(32)
    got = []
    while (n := intake.take(ids, idx, 1, 0.0, 0.01)):
        got += ids[:n].tolist()
    assert got == list(range(100))


def test_full_batches_only_until_the_deadline():
    intake = Intake()
    _push(intake, range(20))
    ids, idx = _buffers(64)
    assert intake.take(ids, idx, 8, 10.0, 1.0) == 16  # whole batches of 8, the 4 left wait
    assert intake.waiting == 4
    t0 = time.monotonic()
    assert intake.take(ids, idx, 8, 0.2, 5.0) == 4  # a partial batch once its oldest sample is 0.2 s old
    assert 0.15 < time.monotonic() - t0 < 3


def test_timeout_with_nothing_ready_leaves_the_samples():
    intake = Intake()
    _push(intake, range(3))
    ids, idx = _buffers(8)
    t0 = time.monotonic()
    assert intake.take(ids, idx, 8, 60.0, 0.05) == 0
    assert time.monotonic() - t0 < 3 and intake.waiting == 3


def test_flush_lets_a_partial_batch_out_at_once():
    intake = Intake()
    _push(intake, range(3))
    intake.flush()
    ids, idx = _buffers(8)
    assert intake.take(ids, idx, 8, 60.0, 1.0) == 3


def test_a_waiting_take_wakes_for_samples_poke_and_close():
    intake = Intake()
    ids, idx = _buffers(8)
    box: list[int] = []

    def taker(*args) -> threading.Thread:
        t = threading.Thread(target=lambda: box.append(intake.take(ids, idx, *args)))
        t.start()
        time.sleep(0.05)
        return t

    t = taker(2, 60.0, 30.0)       # woken by a full batch arriving
    _push(intake, range(2))
    t.join(5)
    assert box == [2]
    t = taker(8, 60.0, 30.0, True)  # pokeable: woken by a poke with what is there (nothing)
    intake.poke()
    t.join(5)
    assert box == [2, 0]
    intake.poke()                   # a plain take ignores pokes; unpoke forgets them
    intake.unpoke()
    t = taker(8, 60.0, 30.0)
    intake.close()                  # close wakes it for good
    t.join(5)
    assert box == [2, 0, 0] and not t.is_alive()


@pytest.mark.parametrize("ids, idx, error", [
    (np.zeros(4, np.uint32), np.zeros(4, np.int64), TypeError),
    (np.zeros(4, np.uint64), np.zeros(3, np.int64), ValueError),
])
def test_push_refuses_wrong_buffers(ids, idx, error):
    with pytest.raises(error):
        Intake().push(ids, idx)


def test_take_needs_writable_buffers():
    ro = np.zeros(4, np.uint64)
    ro.setflags(write=False)
    with pytest.raises((BufferError, TypeError, ValueError)):
        Intake().take(ro, np.zeros(4, np.int64), 1, 0.0, 0.0)
