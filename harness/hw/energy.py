"""Host energy during a performance run, from RAPL counters in sysfs (informational, not MLPerf Power).

RAPL (`/sys/class/powercap/intel-rapl:N`, package domains; AMD exposes the same interface) counts
microjoules in a register that wraps at `max_energy_range_uj`. Reading it before and after a run gives
average watts and samples per joule of the CPU packages; accelerators' own power (NVML) is out of
scope here and said so. MLPerf Power needs an external, calibrated power analyser: these figures are
never presented as MLPerf Power results.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import environment, inbound
from harness.core.sysfs import Sysfs

POWERCAP = Path("sys/class/powercap")
NOTE_NOT_MLPERF = "host CPU package energy from RAPL; informational, not MLPerf Power"
ROOT_ENV = "APPLIANCE_POWERCAP_ROOT"  # a copied /-like tree holding sys/class/powercap (tests, dry runs)


@dataclass(frozen=True)
class Domain:
    name: str
    path: Path
    max_uj: int


def rapl_domains(root: Path = Path("/")) -> list[Domain]:
    """Top-level package domains (`intel-rapl:N`, not their `:N:M` sub-zones) that can be read."""
    fs, domains = Sysfs(root), []
    for zone in fs.listdir(str(POWERCAP)):
        if not zone.startswith("intel-rapl:") or zone.count(":") != 1:
            continue
        rel = f"{POWERCAP}/{zone}"
        name, max_uj = fs.text(f"{rel}/name"), fs.integer(f"{rel}/max_energy_range_uj")
        if name is None or max_uj is None or fs.integer(f"{rel}/energy_uj") is None:
            continue  # unreadable (non-root on recent kernels): treated as absent
        if not 0 < max_uj < 2**64:
            continue  # a range no counter has (-1 divided by zero after the run): not a RAPL counter
        domains.append(Domain(name, fs.path(f"{rel}/energy_uj"), max_uj))
    return domains


class EnergyMeter:
    """Start before the timed part, stop after; `result(samples)` gives watts and samples per joule."""

    def __init__(self, root: Path | None = None) -> None:
        self.domains = rapl_domains(root or environment.folder(ROOT_ENV) or Path("/"))
        self._start: list[int] = []
        self._t0 = self._t1 = 0.0
        self._end: list[int] = []

    @property
    def available(self) -> bool:
        return bool(self.domains)

    def _read(self) -> list[int]:
        values = [int(inbound.read_bytes(d.path, inbound.SYSFS)) for d in self.domains]
        if any(not 0 <= v <= d.max_uj for v, d in zip(values, self.domains, strict=True)):
            raise ValueError("an energy counter outside its range")  # ends the measurement (_read_or_give_up)
        return values

    def start(self) -> None:
        if self.available:
            self._start, self._t0 = self._read_or_give_up(), time.monotonic()

    def stop(self) -> None:
        if self.available and self._start:
            self._end, self._t1 = self._read_or_give_up(), time.monotonic()

    def _read_or_give_up(self) -> list[int]:
        """A counter that stops being readable ends the measurement, never the benchmark run."""
        try:
            return self._read()
        except (OSError, ValueError, inbound.Refused):  # gone, garbage, or a FIFO / device put in its place
            self.domains = []
            return []

    def result(self, samples: int) -> dict[str, Any]:
        if not self.available:
            return {"available": False, "note": "no readable RAPL counters on this machine (and no NVML path); "
                                                "energy not measured"}
        if not self._end:
            return {"available": False, "note": "energy meter was not stopped"}
        joules = sum(((e - s) % (d.max_uj + 1)) / 1e6 for d, s, e in zip(self.domains, self._start, self._end,
                                                                           strict=True))
        seconds = max(self._t1 - self._t0, 1e-9)
        return {"available": True, "domains": [d.name for d in self.domains], "joules": round(joules, 3),
                "seconds": round(seconds, 3), "average_watts": round(joules / seconds, 3),
                "samples_per_joule": round(samples / joules, 4) if joules > 0 else None,
                "note": NOTE_NOT_MLPERF}
