"""Whether the host keeps up with the cards: the CPU time host NMS takes during the timed run.

A detection benchmark's outputs are decoded and NMS'd on each card's `done` thread, pipelined with the
card (harness/run/sut/worker/completing.py). That thread counts its own CPU time (`time.thread_time_ns`, so waiting
for the next batch costs nothing); read before and after the timed run, as the energy meters are, it
gives per card the milliseconds of host work an image takes and the share of the run its done thread
was busy. A done thread busy near 100% is the bottleneck: the card waits for the host. Summed per GPU
(cards on one GPU share its local cores) it is the cores that GPU needs for its NMS.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypedDict

from harness.hw.gpu import GpuRef

WHAT = ("host NMS and completion on each card's done thread: its CPU time (thread_time) over the timed run, "
        "so waiting costs nothing")
BUSY_LIMIT = 0.9  # a done thread busier than this is at the edge: the host may hold the card back


class CardShare(TypedDict):
    """One card's done thread over the timed run."""
    index: int
    samples: int
    cpu_s: float
    ms_per_sample: float | None
    done_thread_busy: float
    cpus: int


class _GpuSum(TypedDict):
    """The cards of one GPU added up (its local cores counted as a set until the end)."""
    gpu: str
    cards: int
    cores_busy: float
    local_cpus: set[int]


class CompletionMeter:
    """Start before the timed run, stop after; `result()` per card and per GPU (None: no done threads)."""

    def __init__(self, read: Callable[[], list[tuple[int, int]]], cpus: Sequence[Sequence[int]],
                 gpus: Sequence[GpuRef] = ()) -> None:
        self.read = read  # per card: (samples completed, done thread's CPU ns)
        self.cpus = [tuple(c) for c in cpus]
        self.gpus = tuple(gpus)
        self._a: list[tuple[int, int]] = []
        self._b: list[tuple[int, int]] = []
        self._t0 = self._t1 = 0.0

    def start(self) -> None:
        self._a, self._t0 = self.read(), time.monotonic()

    def stop(self) -> None:
        self._b, self._t1 = self.read(), time.monotonic()

    def result(self) -> dict[str, object] | None:
        """The manifest's `host_postprocess` section (a JSON document: report.measured reads it back)."""
        if not self._a or not self._b:
            return None
        return share(self._a, self._b, self._t1 - self._t0, self.cpus, self.gpus)


def share(before: Sequence[tuple[int, int]], after: Sequence[tuple[int, int]], seconds: float,
          cpus: Sequence[Sequence[int]], gpus: Sequence[GpuRef] = ()) -> dict[str, object]:
    """Per card and overall: ms of host work per sample, the done thread's busy share; per GPU the cores."""
    seconds = max(seconds, 1e-9)
    cards: list[CardShare] = []
    for i, ((n0, ns0), (n1, ns1), own) in enumerate(zip(before, after, cpus, strict=True)):
        n, cpu_s = n1 - n0, (ns1 - ns0) / 1e9
        cards.append({"index": i, "samples": n, "cpu_s": round(cpu_s, 4),
                      "ms_per_sample": round(1000 * cpu_s / n, 4) if n else None,
                      "done_thread_busy": round(cpu_s / seconds, 4), "cpus": len(own)})
    samples, cpu_s = sum(c["samples"] for c in cards), sum(c["cpu_s"] for c in cards)
    busiest = max(cards, key=lambda c: c["done_thread_busy"]) if cards else None
    out: dict[str, object] = {
        "what": WHAT, "seconds": round(seconds, 3), "samples": samples,
        "ms_per_sample": round(1000 * cpu_s / samples, 4) if samples else None,
        "cores_busy": round(cpu_s / seconds, 3),
        "busiest_done_thread": busiest["done_thread_busy"] if busiest else None,
        "keeps_up": busiest is None or busiest["done_thread_busy"] < BUSY_LIMIT,
        "cards": cards}
    if gpus:
        per: dict[str, _GpuSum] = {}
        for ref, card, own in zip(gpus, cards, cpus, strict=True):
            g = per.setdefault(ref.pci, {"gpu": ref.pci, "cards": 0, "cores_busy": 0.0, "local_cpus": set()})
            g["cards"] += 1
            g["cores_busy"] += card["cpu_s"] / seconds
            g["local_cpus"].update(own)
        out["gpus"] = [{**g, "cores_busy": round(g["cores_busy"], 3), "local_cpus": len(g["local_cpus"])}
                       for g in per.values()]
    return out

