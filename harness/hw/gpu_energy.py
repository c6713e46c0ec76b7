"""GPU energy during a performance run, from each GPU's own counter (NVML), beside the host's RAPL (harness.hw.energy).

`nvmlDeviceGetTotalEnergyConsumption` counts the millijoules a GPU (Volta and later) has used since the
driver loaded; read before and after the timed run, it gives the GPU's joules and average watts. Cards on
one GPU (`--cards cuda:allx4`) share that counter: each card's joules per sample is its GPU's joules over
the samples all its cards completed, and the manifest says so. Like RAPL this is informational: the
board's own sensor, not an MLPerf Power analyser.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.hw.gpu import GpuRef, bus_id

SOURCE = "NVML nvmlDeviceGetTotalEnergyConsumption: the GPU board's own energy counter (mJ since the driver loaded)"
NOTE = "GPU board energy from NVML; informational, not MLPerf Power"


def per_card(gpus: Sequence[GpuRef], samples: Sequence[int], joules: dict[str, float]) -> list[dict[str, Any]]:
    """Each card's joules per sample: its GPU's joules over the samples every card of that GPU completed."""
    on_gpu: dict[str, int] = {}
    for ref, n in zip(gpus, samples, strict=True):
        on_gpu[ref.pci] = on_gpu.get(ref.pci, 0) + n
    return [{"index": i, "gpu": ref.pci, "samples": n,
             "joules_per_sample": round(joules[ref.pci] / on_gpu[ref.pci], 6) if on_gpu[ref.pci] else None}
            for i, (ref, n) in enumerate(zip(gpus, samples, strict=True))]


class GpuEnergyMeter:
    """Start before the timed run, stop after; `result()` per GPU and per card. No GPUs, or no NVML: says why."""

    def __init__(self, gpus: Sequence[GpuRef], samples: Callable[[], list[int]]) -> None:
        self.gpus = tuple(gpus)
        self.samples = samples  # per card, samples completed so far
        self.why: str | None = None if self.gpus else "no GPU cards"
        self._start: dict[str, int] = {}
        self._end: dict[str, int] = {}
        self._counts0: list[int] = []
        self._counts1: list[int] = []
        self._t0 = self._t1 = 0.0
        self.names: dict[str, str] = {}

    def _read(self) -> dict[str, int]:
        import pynvml

        pynvml.nvmlInit()
        try:
            handles = {}
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                handles[bus_id(str(pynvml.nvmlDeviceGetPciInfo(handle).busId))] = handle
            out = {}
            for pci in dict.fromkeys(g.pci for g in self.gpus):
                if pci not in handles:
                    raise LookupError(f"NVML does not see {pci}")
                self.names[pci] = str(pynvml.nvmlDeviceGetName(handles[pci]))
                out[pci] = int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handles[pci]))
            return out
        finally:
            pynvml.nvmlShutdown()

    def _read_or_why(self) -> dict[str, int]:
        try:
            return self._read()
        except ImportError:
            self.why = "nvidia-ml-py is not installed"
        except Exception as exc:  # pynvml.NVMLError: NOT_SUPPORTED before Volta, no driver
            self.why = f"NVML: {exc}"
        return {}

    def start(self) -> None:
        if self.why is None:
            self._counts0, self._t0 = self.samples(), time.monotonic()
            self._start = self._read_or_why()

    def stop(self) -> None:
        if self.why is None and self._start:
            self._end, self._t1 = self._read_or_why(), time.monotonic()
            self._counts1 = self.samples()

    def result(self) -> dict[str, Any]:
        if self.why is not None:
            return {"available": False, "note": f"GPU energy not measured: {self.why}"}
        if not self._end:
            return {"available": False, "note": "GPU energy meter was not stopped"}
        seconds = max(self._t1 - self._t0, 1e-9)
        joules = {pci: (self._end[pci] - self._start[pci]) / 1000 for pci in self._end}
        samples = [b - a for a, b in zip(self._counts0, self._counts1, strict=True)]
        cards = per_card(self.gpus, samples, joules)
        gpus = [{"pci": pci, "name": self.names.get(pci), "joules": round(j, 3), "average_watts": round(j / seconds, 3),
                 "samples": sum(c["samples"] for c in cards if c["gpu"] == pci)} for pci, j in joules.items()]
        for g in gpus:
            g["joules_per_sample"] = round(g["joules"] / g["samples"], 6) if g["samples"] else None
        return {"available": True, "source": SOURCE, "seconds": round(seconds, 3), "gpus": gpus, "cards": cards,
                "per_card": "cards on one GPU share its counter: a card's joules per sample is its GPU's",
                "note": NOTE}
