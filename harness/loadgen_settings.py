"""LoadGen settings: the round's mlperf.conf (built into LoadGen) plus a user.conf we write and log.

Requested settings (what the user asked for) are kept apart from the effective user.conf derived
from them and from a short calibration of the cards; the effective file is saved with the run.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import mlperf_loadgen as lg

from harness.benchmarks import Benchmark
from harness.errors import ApplianceError

MODES = ("performance", "accuracy")
SUBMISSION_MIN_DURATION_MS = 600_000


@dataclass(frozen=True)
class Requested:
    """The run as the user asked for it; None means "use mlperf.conf / the user.conf file"."""

    scenario: str
    mode: str
    duration_ms: int | None = None
    count: int | None = None
    target_qps: float | None = None
    user_conf: Path | None = None


@dataclass(frozen=True)
class Calibration:
    """Measured before the test so LoadGen pre-generates enough queries for the requested duration."""

    samples_per_second: float       # at the run's batch size, all cards together
    single_latency_ms: float        # one sample on one card
    multistream_latency_ms: float   # eight samples on one card


@cache
def embedded_mlperf_conf() -> str:
    """The mlperf.conf compiled into the installed LoadGen: the file its FromConfig really applies."""
    import glob

    so = glob.glob(str(Path(lg.__file__).parent / "mlperf_loadgen*.so")) if not lg.__file__.endswith(".so") \
        else [lg.__file__]
    blob = Path(so[0]).read_bytes()
    anchor = blob.find(b"*.*.qsl_rng_seed")
    if anchor < 0:
        raise ApplianceError("the installed LoadGen carries no mlperf.conf; reinstall mlcommons-loadgen")
    start = blob.rfind(b"\x00", 0, anchor) + 1
    end = blob.find(b"\x00", anchor)
    return blob[start:end].decode()


def loadgen_version() -> str:
    return importlib.metadata.version("mlcommons-loadgen")


def _user_conf_keys(text: str, model: str, scenario: str) -> set[str]:
    """Keys a user.conf sets for this model and scenario (wildcards included)."""
    keys = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        lhs = line.split("=", 1)[0].strip().split(".")
        if len(lhs) == 3 and lhs[0] in ("*", model) and lhs[1] in ("*", scenario):
            keys.add(lhs[2])
    return keys


def effective_user_conf(bench: Benchmark, req: Requested, cal: Calibration | None,
                        dataset_count: int, cards: int) -> str:
    """The user.conf the run uses: the user's file, then our derived lines (later lines win)."""
    base = ""
    if req.user_conf is not None:
        try:
            base = req.user_conf.read_text()
        except OSError as exc:
            raise ApplianceError(f"cannot read --user-conf {req.user_conf}: {exc.strerror}") from None
    given = _user_conf_keys(base, bench.loadgen_model, req.scenario)
    m, s = bench.loadgen_model, req.scenario
    lines = [f"# derived by appliance run ({cards} card(s))"]

    def put(key: str, value: object, why: str, override: bool = False) -> None:
        if override or key not in given:
            lines.extend((f"# {why}", f"{m}.{s}.{key} = {value}"))  # LoadGen takes no trailing comments
            given.add(key)

    if dataset_count < bench.performance_sample_count:
        put("performance_sample_count_override", dataset_count,
            f"dataset holds {dataset_count} < {bench.performance_sample_count} samples")
    if req.duration_ms is not None:
        put("min_duration", req.duration_ms, "--duration-ms", override=True)
    if req.count is not None:
        put("min_query_count", req.count, "--count", override=True)
    elif req.duration_ms is not None:
        put("min_query_count", 1, "--duration-ms without --count: the duration alone sets the length")
    if req.target_qps is not None:
        put("target_qps", req.target_qps, "--target-qps", override=True)
    if s == "Server":
        put("coalesce_queries", 1, "when the issue thread runs late, LoadGen hands every query already due to "
                                   "one IssueQuery call (as NVIDIA's harnesses do); latency still counts from "
                                   "each query's scheduled time")
    for scenario, key, value in bench.loadgen_conf:
        if scenario in ("*", s):
            put(key, value, f"{m}: the round's value, missing from LoadGen's built-in mlperf.conf")
    if cal is not None:
        put(*calibrated_setting(s, cal))
    return base.rstrip("\n") + ("\n" if base else "") + "\n".join(lines) + "\n"


def calibrated_setting(scenario: str, cal: Calibration) -> tuple[str, float, str]:
    """(key, value, why) of the scenario's speed setting derived from a calibration, for `appliance run`
    and `appliance tune` alike. Expected speeds are a little optimistic, so LoadGen pre-generates
    enough queries to fill the minimum duration (it stops issuing once duration and count are met)."""
    if scenario == "Offline":
        return "target_qps", round(cal.samples_per_second * 2, 3), "calibrated expected QPS x 2"
    if scenario == "Server":
        return "target_qps", round(cal.samples_per_second * 0.5, 3), "calibrated capacity x 0.5"
    if scenario == "SingleStream":
        return "target_latency", round(cal.single_latency_ms * 0.6, 3), "calibrated latency x 0.6, ms"
    return "target_latency", round(cal.multistream_latency_ms * 0.6, 3), "calibrated latency x 0.6, ms"


def test_settings(user_conf: Path, bench: Benchmark, scenario: str, mode: str) -> lg.TestSettings:
    """mlperf.conf (built in) + `user_conf`, as the submission checker expects them to be loaded."""
    settings = lg.TestSettings()
    # conf_type 0 applies LoadGen's built-in mlperf.conf (seeds included); a user.conf is then read with
    # conf_type 2. conf_type 1 would do both, but only on a process's first call: later calls skip
    # mlperf.conf and log "Multiple conf files are used" as an error, which fails the official checker.
    if settings.FromConfig(str(user_conf), bench.loadgen_model, scenario, 0) != 0 \
            or settings.FromConfig(str(user_conf), bench.loadgen_model, scenario, 2) != 0:
        raise ApplianceError(f"LoadGen rejected {user_conf}; check its 'model.scenario.key = value' lines")
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly
    return settings
