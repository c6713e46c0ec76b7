"""One line each for what a run measured beside LoadGen: energy per sample and the host's NMS share.

Read from a manifest's `energy` (RAPL, and NVML under "gpu": harness.hw.energy, harness.hw.gpu_energy) and
`host_postprocess` (harness.run.completion_meter) sections, for the end-of-run summary and the HTML report.
Manifests may come from other trees: anything missing or malformed gives None (nothing said), never an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.audit.submission import power, standin
from harness.core import inbound
from harness.core.scenarios import SCENARIOS, Scenario

__all__ = ["ENERGY_NOTE", "energy_text", "gpu_energy", "host_energy", "nms_text", "power_text"]

# what the energy figures are, said wherever they are shown: the official figure is MLPerf Power's (docs/power.md)
ENERGY_NOTE = ("energy: measured inside the system (RAPL counters, NVML), not MLPerf Power: no power analyzer "
               "at the wall; docs/power.md")


def _num(d: Any, key: str) -> float | None:
    v = d.get(key) if isinstance(d, dict) else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def _dicts(d: Any, key: str) -> list[dict[str, Any]]:
    v = d.get(key) if isinstance(d, dict) else None
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _span(values: list[float]) -> str:
    """'0.5', or '0.25-0.5' where the values differ in three significant digits."""
    lo, hi = f"{min(values):.3g}", f"{max(values):.3g}"
    return lo if lo == hi else f"{lo}-{hi}"


def gpu_energy(energy: Any, each_card: bool = False) -> str | None:
    """'GPU 0.523 J/sample per card (NVML, 1 GPU, 310 W)'; a span where the GPUs differ, and with `each_card`
    then each card's figure too."""
    gpu = energy.get("gpu") if isinstance(energy, dict) else None
    if not isinstance(gpu, dict) or gpu.get("available") is not True:
        return None
    per_card = [v for c in _dicts(gpu, "cards") if (v := _num(c, "joules_per_sample")) is not None]
    if not per_card:
        return None
    n_gpus = len(_dicts(gpu, "gpus"))
    watts = [v for g in _dicts(gpu, "gpus") if (v := _num(g, "average_watts")) is not None]
    power = f", {sum(watts):.0f} W" if watts else ""
    cards = ""
    if each_card and len(set(per_card)) > 1:
        cards = ": " + ", ".join(f"card {i} {v:.3g}" for i, v in enumerate(per_card))
    return (f"GPU {_span(per_card)} J/sample per card (NVML, {n_gpus} GPU{'s' if n_gpus != 1 else ''}"
            f"{power}){cards}")


def host_energy(energy: Any) -> str | None:
    """'host 0.81 J/sample (RAPL, 250 W)': the CPU packages' counter."""
    if not isinstance(energy, dict) or energy.get("available") is not True:
        return None
    per_joule, watts = _num(energy, "samples_per_joule"), _num(energy, "average_watts")
    if not per_joule or per_joule <= 0:
        return None
    return f"host {1 / per_joule:.3g} J/sample (RAPL{f', {watts:.0f} W' if watts is not None else ''})"


def energy_text(energy: Any, each_card: bool = False) -> str | None:
    """The GPU's figure then the host's, '; '-joined; None when neither was measured."""
    parts = [t for t in (gpu_energy(energy, each_card), host_energy(energy)) if t]
    return "; ".join(parts) or None


def nms_text(host: Any) -> str | None:
    """'host NMS 1.90 ms an image; busiest done thread 42% busy; 1.30 cores per GPU at most (of 8 local)'."""
    per_image, busiest = _num(host, "ms_per_sample"), _num(host, "busiest_done_thread")
    if per_image is None or busiest is None:
        return None
    line = f"host NMS {per_image:.3f} ms an image; busiest done thread {100 * busiest:.1f}% busy"
    gpus = [(c, _num(g, "local_cpus")) for g in _dicts(host, "gpus") if (c := _num(g, "cores_busy")) is not None]
    cores = _num(host, "cores_busy")
    if gpus:
        top, local = max(gpus, key=lambda g: g[0])
        line += f"; {top:.3f} cores per GPU at most" + (f" (of {local:.0f} local)" if local is not None else "")
    elif cores is not None:
        line += f"; {cores:.3f} cores in all"
    return line + ("" if host.get("keeps_up") is not False else ": the host holds the cards back")


def power_text(run: Path, scenario: str) -> str | None:
    """'MLPerf Power 250.000000 W, 4.938000 samples/J (SIMULATED)' for the performance run a power session of its
    scenario folder measured (the session's run_1 holds this run's detail log), else None."""
    session = run.parent.parent / standin.SESSION_FOLDER
    if scenario not in SCENARIOS or not (session / "run_1" / "mlperf_log_detail.txt").is_file():
        return None
    try:
        same = inbound.read_bytes(session / "run_1" / "mlperf_log_detail.txt", inbound.LOG) == \
            inbound.read_bytes(run / "mlperf_log_detail.txt", inbound.LOG)
    except (OSError, inbound.Refused):
        return None
    figure = power.session_figure(session, Scenario(scenario)) if same else None
    if figure is None or figure.metric is None or figure.samples_per_joule is None:
        return None
    unit = "W" if figure.unit == "Watts" else "mJ/query"
    return f"MLPerf Power {figure.metric:f} {unit}, {figure.samples_per_joule:f} samples/J ({figure.status})"
