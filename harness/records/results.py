"""Reading LoadGen's logs back: the detail log's `:::MLLOG` records and the scenario's metric."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# scenario -> (detail-log key, unit); SPEC §2
METRICS: dict[str, tuple[str, str]] = {
    "Offline": ("result_samples_per_second", "samples/s"),
    "Server": ("result_completed_samples_per_sec", "samples/s"),
    "SingleStream": ("early_stopping_latency_ss", "ms"),
    "MultiStream": ("early_stopping_latency_ms", "ms"),
}
# When too few queries ran for early stopping, LoadGen logs 0; show the plain percentile instead.
FALLBACK = {
    "SingleStream": "result_90.00_percentile_latency_ns",
    "MultiStream": "result_99.00_percentile_per_query_latency_ns",
}


def read_detail(path: Path) -> dict[str, Any]:
    """Last value of every key in an mlperf_log_detail.txt (errors collected under `_errors`)."""
    values: dict[str, Any] = {"_errors": []}
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith(":::MLLOG"):
                continue
            try:
                rec = json.loads(line[len(":::MLLOG"):])
            except json.JSONDecodeError:
                continue  # a run cut short by Ctrl-C can end in a partial line
            values[rec["key"]] = rec["value"]
            if rec.get("metadata", {}).get("is_error"):
                values["_errors"].append(f"{rec['key']}: {rec['value']}")
    return values


@dataclass(frozen=True)
class PerfResult:
    scenario: str
    metric: float | None
    unit: str
    valid: bool
    reasons: tuple[str, ...]
    estimate: str | None = None  # how a latency metric was obtained

    def metric_text(self) -> str:
        if self.metric is None:
            return "-"
        text = f"{self.metric:.2f} {self.unit}"
        return f"{text} ({self.estimate})" if self.estimate else text


def perf_result(detail: dict[str, Any], scenario: str) -> PerfResult:
    key, unit = METRICS[scenario]
    raw = detail.get(key)
    estimate = "early-stopping estimate" if unit == "ms" else None
    if not raw and scenario in FALLBACK:
        raw = detail.get(FALLBACK[scenario])
        estimate = FALLBACK[scenario].split("_")[1] + " percentile; too few queries for early stopping"
    metric = None if raw is None else float(raw)
    if metric is not None and unit == "ms":
        metric /= 1e6  # the early-stopping latencies are logged in ns
    reasons = []
    for k, what in (("result_min_duration_met", "min duration not met"),
                    ("result_min_queries_met", "min queries not met"),
                    ("early_stopping_met", "early stopping not met"),
                    ("result_perf_constraints_met", "latency constraint not met")):
        if detail.get(k) is False:
            reasons.append(what)
    return PerfResult(scenario, metric, unit, detail.get("result_validity") == "VALID", tuple(reasons), estimate)
