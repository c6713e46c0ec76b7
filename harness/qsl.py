"""LoadGen's query sample library: loads the samples LoadGen asks for into RAM and stages batches.

Loaded samples are gathered into one contiguous uint8 buffer (LoadGen's "performance buffer"), so
staging a batch is a gather plus the mean subtraction into a preallocated float32 buffer.
"""

from __future__ import annotations

import threading

import numpy as np

from harness.benchmarks import Benchmark
from harness.datasets.store import PreparedData


class SampleLibrary:
    def __init__(self, benchmark: Benchmark, data: PreparedData) -> None:
        self.benchmark = benchmark
        self.data = data
        self.mean = np.asarray(benchmark.input_mean, dtype=np.float32).reshape(-1, 1, 1)
        self.performance_sample_count = min(benchmark.performance_sample_count, data.count)
        self._slot = np.full(data.count, -1, dtype=np.int64)
        self._buffer = np.empty((0, *benchmark.input_shape), dtype=np.uint8)
        self._lock = threading.Lock()

    @property
    def total_sample_count(self) -> int:
        return self.data.count

    def load(self, indices: list[int]) -> None:
        """LoadGen callback: bring `indices` into RAM (sorted, so shard reads are sequential)."""
        order = np.unique(np.asarray(indices, dtype=np.int64))
        buffer = np.empty((len(order), *self.benchmark.input_shape), dtype=np.uint8)
        self.data.gather(order, buffer)
        with self._lock:
            self._buffer = buffer
            self._slot[:] = -1
            self._slot[order] = np.arange(len(order))

    def unload(self, indices: list[int]) -> None:
        with self._lock:
            self._slot[np.asarray(indices, dtype=np.int64)] = -1

    def stage(self, indices: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write mean-subtracted float32 samples `indices` into `out[:n]` and return that view."""
        n = len(indices)
        slots = self._slot[indices]
        if (slots < 0).any():
            raise RuntimeError(f"LoadGen issued samples that are not loaded: {indices[slots < 0][:5]}")
        view = out[:n]
        first = int(slots[0])
        if n > 1 and np.array_equal(slots, np.arange(first, first + n)):
            np.subtract(self._buffer[first:first + n], self.mean, out=view)  # contiguous: one pass
        else:
            for j, s in enumerate(slots):
                np.subtract(self._buffer[s], self.mean, out=view[j])
        return view
