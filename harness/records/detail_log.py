"""LoadGen's detail log (mlperf_log_detail.txt), read by one parser in two modes: `read` for trees other people's
tools wrote (every odd value a problem line through `Detail`'s typed getters, never an exception) and `values` for
a run's own log (a dict of the last value per key, LoadGen's error records under `_errors`); and the scenario's
metric read from it (`perf_result`)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.inbound import file_size
from harness.records.readers import MAX_LOG_BYTES, Problem, refused, unreadable

__all__ = ["METRICS", "PERCENTILE_FALLBACK", "Detail", "PerfResult", "perf_result", "read", "values"]

# scenario -> (detail-log key, unit): the metric LoadGen's summary reports per scenario
METRICS: dict[str, tuple[str, str]] = {
    "Offline": ("result_samples_per_second", "samples/s"),
    "Server": ("result_completed_samples_per_sec", "samples/s"),
    "SingleStream": ("early_stopping_latency_ss", "ms"),
    "MultiStream": ("early_stopping_latency_ms", "ms"),
}
# When too few queries ran for early stopping, LoadGen logs 0; show the plain percentile instead.
PERCENTILE_FALLBACK = {
    "SingleStream": "result_90.00_percentile_latency_ns",
    "MultiStream": "result_99.00_percentile_per_query_latency_ns",
}


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
    if not raw and scenario in PERCENTILE_FALLBACK:
        raw = detail.get(PERCENTILE_FALLBACK[scenario])
        estimate = PERCENTILE_FALLBACK[scenario].split("_")[1] + " percentile; too few queries for early stopping"
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


@dataclass
class Detail:
    """The values of one mlperf_log_detail.txt, read through typed getters."""

    where: str
    problem: Problem
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    garbled: bool = False  # a `:::MLLOG` line that is not a JSON record (reported once)

    def has(self, key: str) -> bool:
        return key in self.values

    def raw(self, key: str) -> Any:
        return self.values.get(key)

    def integer(self, key: str) -> int | None:
        """An integer value (LoadGen logs them as JSON numbers); anything else is a problem line."""
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                return int(v)
            self.problem(f"{self.where}: {key} is {_show(v)}, not an integer")
            return None
        return v

    def number(self, key: str) -> float | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.problem(f"{self.where}: {key} is {_show(v)}, not a number")
            return None
        return float(v)

    def text(self, key: str) -> str | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if not isinstance(v, str):
            self.problem(f"{self.where}: {key} is {_show(v)}, not a string")
            return None
        return v

    def flag(self, key: str) -> bool | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if not isinstance(v, bool):
            self.problem(f"{self.where}: {key} is {_show(v)}, not true/false")
            return None
        return v



def _show(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."



def read(path: Path, where: str, problem: Problem, within: Path | None = None) -> Detail | None:
    """Every `:::MLLOG` record of a LoadGen detail log (last value per key); None if unreadable, too big, not
    a regular file (a link to /dev/zero) or a link out of `within`."""
    size = file_size(path)
    if size is not None and size > MAX_LOG_BYTES:
        problem(f"{where}: {size} bytes, larger than the {MAX_LOG_BYTES // 2**20} MB a tree may hold per file")
        return None
    detail = Detail(where, problem)
    try:
        with inbound.open_bounded(path, MAX_LOG_BYTES, within=within) as f:
            for number, raw in enumerate(f, 1):
                if not raw.startswith(b":::MLLOG"):
                    continue
                try:
                    rec = json.loads(raw[len(b":::MLLOG"):].decode("utf-8", errors="replace"))
                except (ValueError, RecursionError):  # JSONDecodeError, and an integer past Python's digit limit
                    # the official checker's parser (strict) refuses such a log: a cut or edited record
                    if not detail.garbled:
                        problem(f"{where}: line {number} is not a whole LoadGen record (a truncated or edited log)")
                    detail.garbled = True
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                    continue
                detail.values[rec["key"]] = rec.get("value")
                meta = rec.get("metadata")
                if isinstance(meta, dict) and meta.get("is_error"):
                    detail.errors.append(f"{rec['key']}: {_show(rec.get('value'))}")
    except inbound.Refused as exc:
        problem(refused(where, exc))
        return None
    except OSError as exc:
        problem(unreadable(exc, where))
        return None
    return detail


# The kinds of the keys the appliance reads from a run's own log (`values`): a value of another kind is one line.
_NUMBER = re.compile(r"(result|early_stopping)_.*(_ns|_per_sec|_per_second|_latency_ss|_latency_ms)|effective_("
                     r"target_latency_ns|target_latency_percentile|min_duration_ms|max_duration_ms|target_qps|"
                     r".*_count|samples_per_query|.*_rng_seed)")
_FLAG = re.compile(r"(result|early_stopping)(_.*)?_met")
_VERDICTS = ("VALID", "INVALID")


def _checked(values: dict[str, Any], where: Path) -> None:
    """Each value the appliance reads is of its kind (a finite number >= 0, true/false, VALID/INVALID), or
    DataError naming the log and the key."""
    for key, v in values.items():
        if _FLAG.fullmatch(key):
            ok, what = isinstance(v, bool), "true or false"
        elif _NUMBER.fullmatch(key):
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 2**64
            what = "a number"
        elif key == "result_validity":
            ok, what = v in _VERDICTS, "VALID or INVALID"
        else:
            continue
        if not ok:
            raise DataError(f"{where}: {key} is {_show(v)}, not {what}: not a log LoadGen wrote; run it again")


def values(path: Path) -> dict[str, Any]:
    """A run's own detail log: the last value of every key, LoadGen's error records under `_errors`. A partial
    last line (a run cut short by Ctrl-C) is skipped as `read` skips it; a missing file raises as `open` does,
    one too large to be a log, or a value the appliance reads of the wrong kind, is DataError."""
    path.stat()
    problems: list[str] = []
    detail = read(path, str(path), problems.append)
    if detail is None:
        raise DataError(problems[0])
    _checked(detail.values, path)
    return {**detail.values, "_errors": detail.errors}
