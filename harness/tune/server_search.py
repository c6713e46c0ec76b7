"""`appliance tune --server-search`: the Server choice confirmed by short LoadGen Server runs.

The ideal queue (harness.core.queueing) says what the chosen candidate's own latency allows; the harness and
the host take some of it. A bisection on target_qps, starting at the ideal queue's figure and bounded by the
candidate's Offline rate, finds the highest target a short real run keeps VALID; the tuned record keeps both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.core.outbound import scratch_dir
from harness.core.scenarios import Mode, Scenario
from harness.run.loadgen_settings import Requested
from harness.run.options import RunOptions
from harness.run.runner import run

STEPS = 3           # bisection steps after the first run: to within 1/16 of the first's range
DURATION_MS = 3000  # each run's min duration: short, a confirmation, not a submission


def bisect(valid_at: Callable[[float], bool], ideal: float, rate: float,
           steps: int = STEPS) -> tuple[float, list[tuple[float, bool]]]:
    """The highest target QPS `valid_at` accepts, between 0 and `rate`, starting at `ideal`; and what it tried."""
    first = min(ideal, rate)
    tried = [(round(first, 1), valid_at(first))]
    lo, hi = (first, rate) if tried[0][1] else (0.0, first)
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = valid_at(mid)
        tried.append((round(mid, 1), ok))
        lo, hi = (mid, hi) if ok else (lo, mid)
    return round(lo, 1), tried


def confirm(options_at: Callable[[Requested, Path], RunOptions], ideal: float,
            rate: float) -> tuple[float, list[tuple[float, bool]]]:
    """Short Server runs of one candidate (`options_at(requested, results folder)`), each in a results folder of
    its own that is then removed: the highest VALID target QPS and the tries."""
    def valid_at(qps: float) -> bool:
        with scratch_dir("appliance-server-search-") as results:
            requested = Requested(Scenario.SERVER, Mode.PERFORMANCE, duration_ms=DURATION_MS, target_qps=qps)
            outcome = run(options_at(requested, results), echo=lambda _: None)
        return outcome.perf is not None and outcome.perf.valid

    return bisect(valid_at, ideal, rate)
