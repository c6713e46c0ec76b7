"""The native batch assembly (harness/_copy.cpp): same bytes as numpy, every sample checked first."""

from __future__ import annotations

import numpy as np
import pytest

from harness import _copy

ROWS, SHAPE = 40, (3, 5, 7)


@pytest.fixture
def src():
    return np.random.default_rng(0).integers(0, 256, size=(ROWS, *SHAPE), dtype=np.uint8)


@pytest.mark.parametrize("order", [[4, 5, 6, 7], [9, 3, 3, 0, 39], [1, 2, 10, 11, 12, 30], [17]])
def test_gather_matches_numpy_and_writes_only_its_rows(src, order):
    slot_of = np.arange(ROWS, dtype=np.int64)[::-1].copy()  # sample i lives in row ROWS-1-i
    indices = np.asarray(order, np.int64)
    dst = np.full((8, *SHAPE), 7, np.uint8)
    _copy.gather(src, slot_of, indices, dst)
    n = len(order)
    assert np.array_equal(dst[:n], src[slot_of[indices]])
    assert (dst[n:] == 7).all()


def test_bad_samples_copy_nothing(src):
    slot_of = np.arange(ROWS, dtype=np.int64)
    slot_of[5] = -1  # not loaded
    dst = np.zeros((4, *SHAPE), np.uint8)
    with pytest.raises(LookupError, match="5"):
        _copy.gather(src, slot_of, np.array([1, 2, 5], np.int64), dst)
    with pytest.raises(IndexError, match="outside"):
        _copy.gather(src, slot_of, np.array([1, ROWS], np.int64), dst)
    with pytest.raises(IndexError):
        _copy.gather(src, slot_of, np.array([-1], np.int64), dst)
    assert not dst.any()  # checked before any byte moved
    with pytest.raises(ValueError, match="dst holds"):
        _copy.gather(src, slot_of, np.arange(5, dtype=np.int64), dst)
    with pytest.raises(TypeError, match="8-byte"):
        _copy.gather(src, slot_of, np.array([1, 2], np.int32), dst)
    with pytest.raises(ValueError, match="contiguous"):
        _copy.gather(src, slot_of, np.array([1, 2], np.int64), dst[:, ::2])
