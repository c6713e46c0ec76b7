"""LoadGen's query sample library: loads the samples LoadGen asks for into RAM and stages batches.

Loaded samples live in replicas: one per NUMA node (default), one per card, or one shared
(`--replicate node|card|none`). Each replica is allocated *and filled* by a thread pinned to the CPUs
of its node (or card), so the kernel's first-touch policy puts its pages in that node's memory; where
the pages really are is read back with move_pages(2) and recorded. Within a replica the loaded
samples are contiguous in index order, so a batch of consecutive samples is one block.

Staging writes a batch into one of a card's preallocated, 256-byte-aligned, batch-contiguous buffers: for an
8-bit card (`uint8`) a plain copy (one copy for a contiguous batch, a row gather otherwise), for an
FP32 model (`float32`) the mean subtraction fused with the copy. How many buffers there are, their sizes and
how long they live: harness.run.buffers, which makes them and the replicas.

A card that copies its samples from the replica itself (a GPU card, by DMA from the replica it page-locked:
harness/run/cards/gpu_iobinding.py) is not staged for: `rows` gives a batch as runs of consecutive rows of the
replica (`ReplicaRows`), and `watch` tells the card whenever its replica is loaded again or emptied.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from harness import _copy
from harness.core import syscalls
from harness.records.benchmark import Benchmark
from harness.records.store import PreparedData
from harness.run import buffers

REPLICATE = ("node", "card", "none")


@dataclass(frozen=True)
class ReplicaPlan:
    """One replica: the node it belongs to, the cards that read it, the CPUs that fill it."""

    node: int | None
    cards: tuple[int, ...]
    cpus: tuple[int, ...]  # () = not pinned (--replicate none)


def plan_replicas(mode: str, cards: list[tuple[int, int | None, tuple[int, ...]]],
                  node_cpus: dict[int, frozenset[int]], allowed: frozenset[int]) -> list[ReplicaPlan]:
    """Replicas for `cards` = [(index, numa node, cpus)]: per node, per card, or one shared."""
    if mode == "none":
        return [ReplicaPlan(None, tuple(c for c, _, _ in cards), ())]
    if mode == "card":
        return [ReplicaPlan(node, (index,), cpus) for index, node, cpus in cards]
    if mode != "node":
        raise ValueError(f"replicate mode {mode!r}; choose one of {REPLICATE}")
    plans = []
    for node in sorted({n for _, n, _ in cards}, key=lambda n: (n is None, n or 0)):
        members = [(i, c) for i, n, c in cards if n == node]
        cpus = node_cpus.get(node, frozenset()) & allowed if node is not None else frozenset()
        if not cpus:  # unknown node: the union of its cards' CPUs
            cpus = frozenset(cpu for _, c in members for cpu in c)
        plans.append(ReplicaPlan(node, tuple(i for i, _ in members), tuple(sorted(cpus))))
    return plans


@dataclass
class Replica:
    plan: ReplicaPlan
    buffer: np.ndarray
    filled_on_cpus: tuple[int, ...]      # the filling thread's affinity, read inside it
    pages_on_nodes: dict[str, int] = field(default_factory=dict)  # sampled pages per node (move_pages)

    def describe(self) -> dict[str, object]:
        return {"node": self.plan.node, "cards": list(self.plan.cards), "fill_cpus": list(self.plan.cpus),
                "filled_on_cpus": list(self.filled_on_cpus), "address": hex(self.buffer.ctypes.data),
                "bytes": int(self.buffer.nbytes), "pages_on_nodes": self.pages_on_nodes}


@dataclass(frozen=True, slots=True)
class ReplicaRows:
    """A batch left where it was loaded: the replica ([rows, *sample shape], uint8 as stored) and the batch's
    samples as runs of consecutive rows there, (first row in the replica, first row in the batch, rows), in batch
    order (`row_runs`): one copy per run puts the batch together, `n` rows."""

    replica: np.ndarray
    runs: list[tuple[int, int, int]]
    n: int


def row_runs(rows: np.ndarray) -> list[tuple[int, int, int]]:
    """`rows` (each sample's row in a replica, in batch order) coalesced into runs of consecutive rows:
    (first row in the replica, first row in the batch, rows) for each, in batch order; a repeated or earlier row
    starts a new run. The plan of `_copy.gather`'s loop, for a card that makes the copies itself."""
    n = len(rows)
    if n == 0:
        return []
    firsts = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.concatenate(([0], firsts))
    lengths = np.diff(np.concatenate((starts, [n])))
    return list(zip(rows[starts].tolist(), starts.tolist(), lengths.tolist(), strict=True))


ReplicaWatch = Callable[[np.ndarray | None, int | None], None]  # (the replica, None once emptied; its node)


class SampleLibrary:
    def __init__(self, benchmark: Benchmark, data: PreparedData, replicas: list[ReplicaPlan] | None = None,
                 mode: str = "none") -> None:
        self.benchmark = benchmark
        self.data = data
        self.mode = mode
        self.mean = np.asarray(benchmark.input_mean, dtype=np.float32).reshape(-1, 1, 1)
        self.performance_sample_count = min(benchmark.performance_sample_count, data.count)
        self.plans = replicas or [ReplicaPlan(None, (), ())]
        self._replica_of_card = {c: r for r, p in enumerate(self.plans) for c in p.cards}
        self._slot = np.full(data.count, -1, dtype=np.int64)
        empty = np.empty((0, *benchmark.input_shape), dtype=np.uint8)
        self.replicas = [Replica(p, empty, ()) for p in self.plans]
        self._lock = threading.Lock()
        self._watches: list[tuple[int, ReplicaWatch]] = []

    @property
    def total_sample_count(self) -> int:
        return self.data.count

    def replica_for(self, card: int) -> int:
        return self._replica_of_card.get(card, 0)

    def load(self, indices: list[int]) -> None:
        """LoadGen callback: bring `indices` into RAM, once per replica, each filled on its own CPUs."""
        order = np.unique(np.asarray(indices, dtype=np.int64))
        made: list[Replica | BaseException | None] = [None] * len(self.plans)

        def fill(r: int, plan: ReplicaPlan) -> None:
            try:
                if plan.cpus:
                    os.sched_setaffinity(0, plan.cpus)
                buf = buffers.replica(len(order), self.benchmark.input_shape)  # first touch below
                self.data.gather(order, buf)
                made[r] = Replica(plan, buf, tuple(sorted(os.sched_getaffinity(0))), page_nodes(buf))
            except BaseException as exc:
                made[r] = exc

        threads = [threading.Thread(target=fill, args=(r, p), name=f"qsl-fill{r}") for r, p in enumerate(self.plans)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for m in made:
            if isinstance(m, BaseException):
                raise m
        with self._lock:
            self.replicas = made  # type: ignore[assignment]
            self._slot[:] = -1
            self._slot[order] = np.arange(len(order))
            watches = list(self._watches)
        for r, watch in watches:  # a card that reads its replica itself page-locks the new one
            watch(self.replicas[r].buffer, self.plans[r].node)

    def unload(self, indices: list[int]) -> None:
        with self._lock:
            self._slot[np.asarray(indices, dtype=np.int64)] = -1
            emptied = not (self._slot >= 0).any()
            watches = list(self._watches) if emptied else []
        for r, watch in watches:  # nothing left to read: the card lets go of its replica
            watch(None, self.plans[r].node)

    def watch(self, replica: int, watch: ReplicaWatch) -> None:
        """Call `watch(buffer, node)` with replica `replica` whenever it is loaded (and now, if samples are
        loaded), `watch(None, node)` once every sample is unloaded; on the loading thread (LoadGen's), when no
        batch is in flight. The callback must not raise: LoadGen's load callback is where it runs."""
        with self._lock:
            self._watches.append((replica, watch))
            loaded = bool((self._slot >= 0).any())
        if loaded:
            watch(self.replicas[replica].buffer, self.plans[replica].node)

    def unwatch(self, watch: ReplicaWatch) -> None:
        with self._lock:
            self._watches = [(r, w) for r, w in self._watches if w != watch]  # a bound method: equal, not the same

    def staging_buffer(self, batch: int, dtype: str | None) -> np.ndarray | None:
        """A staging buffer for this library's samples (None: the card reads nothing): harness.run.buffers."""
        return buffers.staging_buffer(batch, self.benchmark.input_shape, dtype)

    def stage(self, indices: np.ndarray, out: np.ndarray, replica: int = 0) -> np.ndarray:
        """Write samples `indices` from `replica` into `out[:n]` (a copy for uint8, mean-subtracted for
        float32) and return that view. uint8: one native call (`harness/_copy.cpp`) that looks up, checks
        and copies with the GIL released, one memcpy per run of consecutive rows."""
        n = len(indices)
        buf = self.replicas[replica].buffer
        view = out[:n]
        if out.dtype == np.uint8:
            try:
                _copy.gather(buf, self._slot, indices, out)
            except LookupError as exc:
                raise RuntimeError(f"LoadGen issued samples that are not loaded: {exc}") from None
            return view
        slots = self._slot[indices]
        found = slots.tolist()  # a few Python ints: cheaper to check than more numpy calls per batch
        if min(found) < 0:
            raise RuntimeError(f"LoadGen issued samples that are not loaded: {indices[slots < 0][:5]}")
        first = found[0]
        contiguous = found[-1] - first == n - 1 and all(v == first + j for j, v in enumerate(found))
        if contiguous:
            np.subtract(buf[first:first + n], self.mean, out=view)  # conversion fused with the copy
        else:
            for j, s in enumerate(slots):
                np.subtract(buf[s], self.mean, out=view[j])
        return view

    def rows(self, indices: np.ndarray, replica: int = 0) -> ReplicaRows:
        """Samples `indices` where `replica` holds them, as runs of consecutive rows, nothing copied (for a card
        that copies from the replica itself); the same checks as `stage`."""
        n = len(indices)
        if n and (int(indices.min()) < 0 or int(indices.max()) >= len(self._slot)):
            raise IndexError(f"sample index outside the sample library ({len(self._slot)} samples)")
        slots = self._slot[indices]
        if n and int(slots.min()) < 0:
            raise RuntimeError(f"LoadGen issued samples that are not loaded: {indices[slots < 0][:5]}")
        return ReplicaRows(self.replicas[replica].buffer, row_runs(slots), n)


def page_nodes(arr: np.ndarray, samples: int = 64) -> dict[str, int]:
    """NUMA node of up to `samples` pages spread over `arr`, counted per node (move_pages(2) query mode)."""
    if syscalls.number("move_pages") is None or arr.nbytes == 0:
        return {}
    page = os.sysconf("SC_PAGE_SIZE")
    start = arr.ctypes.data - arr.ctypes.data % page
    count = max(1, min(samples, arr.nbytes // page))
    step = max(page, (arr.nbytes // count) // page * page)
    addrs = (ctypes.c_void_p * count)(*[start + page + i * step if start + page + i * step
                                        < arr.ctypes.data + arr.nbytes else arr.ctypes.data for i in range(count)])
    status = (ctypes.c_int * count)()
    result = syscalls.call("move_pages", 0, ctypes.c_ulong(count), addrs, None, status, 0)
    if result is None or result[0] != 0:
        return {}
    out: dict[str, int] = {}
    for s in status:
        key = str(s) if s >= 0 else "not-present" if s == -14 else f"error{s}"
        out[key] = out.get(key, 0) + 1
    return out
