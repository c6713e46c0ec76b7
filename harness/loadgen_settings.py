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
from harness.scenarios import SCENARIOS, Mode, Scenario, parse_mode, parse_scenario

SUBMISSION_MIN_DURATION_MS = 600_000


@dataclass(frozen=True)
class Requested:
    """The run as the user asked for it; None means "use mlperf.conf / the user.conf file".

    Scenario and mode given as text are parsed here (one line naming the choices when unknown)."""

    scenario: Scenario
    mode: Mode
    duration_ms: int | None = None
    count: int | None = None
    target_qps: float | None = None
    user_conf: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scenario", parse_scenario(self.scenario))
        object.__setattr__(self, "mode", parse_mode(self.mode))


# Offline: LoadGen issues 1.1 x min_duration x target_qps samples. A target of 1.1 x the measured rate
# makes the run last 1.21 D at that rate (shorter than D is INVALID, the min-duration check), so the SUT
# may turn out 20% faster or slower than calibrated.
OFFLINE_TARGET_PER_RATE = 1.1
# Server: the share of the measured (Offline) rate a Poisson arrival stream is served at within the
# latency bound. 16 simulated cards were VALID up to 0.86-0.95 of it on a quiet machine (BENCHMARKS.md
# §2); at 0.7 on a 2-core machine under a load of 8 one run in two missed the bound; at 0.5 none did.
SERVER_TARGET_PER_RATE = 0.5
# A short run (a smoke test: --duration-ms under SHORT_RUN_MS) lasts about as long as its calibration
# probes, so a load that comes or goes on a shared machine between probe and run moves the card set's
# rate by up to 2x (CI: 16 simulated cards ran an Offline test at 0.72x the probes' rate, and a Server
# test at 0.5 of it missed the bound). Wider margins cost seconds there: Offline lasts about 1.65 D at
# the measured rate (VALID unless the set turns 1.65x faster; 3.3 D if it runs half as fast), Server
# runs at 0.3 of it. A full-length run averages such swings over minutes and keeps the margins above.
SHORT_RUN_MS = 60_000
SHORT_OFFLINE_TARGET_PER_RATE = 1.5
SHORT_SERVER_TARGET_PER_RATE = 0.3


def target_per_rate(scenario: Scenario, duration_ms: int | None) -> float:
    """The calibrated rate's multiplier for a run's Offline / Server target (see the constants above)."""
    short = duration_ms is not None and duration_ms < SHORT_RUN_MS
    if scenario == Scenario.OFFLINE:
        return SHORT_OFFLINE_TARGET_PER_RATE if short else OFFLINE_TARGET_PER_RATE
    return SHORT_SERVER_TARGET_PER_RATE if short else SERVER_TARGET_PER_RATE


@dataclass(frozen=True)
class Calibration:
    """Measured before the test so LoadGen pre-generates enough queries for the requested duration."""

    samples_per_second: float       # at the run's batch size, all cards together (harness.calibration)
    single_latency_ms: float        # one sample on one card
    multistream_latency_ms: float   # eight samples on one card
    method: str = "warm-up timing, cards one at a time"
    server_qps: float | None = None  # what an ideal queue sustains within the bound (harness.queueing), if known


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


# The keys LoadGen's TestSettings::FromConfig looks up (loadgen/test_settings_internal.cc, LoadGen 6.0);
# FromConfig ignores any other key silently, so a misspelt one would change nothing without a word.
LOADGEN_KEYS = frozenset({
    "mode", "min_duration", "max_duration", "min_query_count", "max_query_count", "target_duration",
    "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "accuracy_log_rng_seed",
    "accuracy_log_probability", "accuracy_log_sampling_target", "print_timestamps",
    "performance_issue_unique", "performance_issue_same", "performance_issue_same_index",
    "performance_sample_count_override", "accuracy_sample_count_override", "sample_concatenate_permutation",
    "target_latency_percentile", "target_latency", "target_qps", "samples_per_query", "max_async_queries",
    "coalesce_queries", "server_num_issue_query_threads", "test05", "test05_qsl_rng_seed",
    "test05_sample_index_rng_seed", "test05_schedule_rng_seed", "use_token_latencies", "ttft_latency",
    "tpot_latency", "infer_token_latencies", "token_latency_scaling_factor",
})
CONF_SCENARIOS = frozenset({"*", *SCENARIOS})


@cache
def known_keys() -> frozenset[str]:
    """LOADGEN_KEYS and every key the installed LoadGen's own mlperf.conf sets."""
    conf = {line.split("=", 1)[0].strip().rsplit(".", 1)[-1] for line in embedded_mlperf_conf().splitlines()
            if "=" in line and not line.lstrip().startswith("#")}
    return LOADGEN_KEYS | conf


def read_user_conf(path: Path) -> str:
    """A user's user.conf, checked line by line the way LoadGen reads it; a problem is one line naming
    the user's own file and line (LoadGen would only log it, against the copy saved with the run)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ApplianceError(f"cannot read --user-conf {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ApplianceError(f"--user-conf {path} is not a text file (not UTF-8); a user.conf holds lines "
                             f"'model.scenario.key = value'") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"user.conf {path}, line {n} ({raw.strip()[:60]!r})"
        lhs, eq, value = line.partition("=")
        parts = lhs.strip().split(".")
        if not eq or len(parts) != 3 or not all(parts):
            raise ApplianceError(f"{where}: expected 'model.scenario.key = value', "
                                 f"e.g. resnet50.Offline.target_qps = 100")
        _, scenario, key = parts
        if scenario not in CONF_SCENARIOS:
            raise ApplianceError(f"{where}: unknown scenario {scenario!r}; use one of: "
                                 f"{', '.join(sorted(CONF_SCENARIOS))}")
        if key not in known_keys():
            raise ApplianceError(f"{where}: LoadGen does not know the key {key!r} and would ignore it; known "
                                 f"keys: {', '.join(sorted(known_keys()))}")
        try:
            float(value)
        except ValueError:
            what = "an empty value" if not value.strip() else f"the value {value.strip()!r} is not a number"
            raise ApplianceError(f"{where}: {what}; LoadGen takes a number, e.g. {lhs.strip()} = 100") from None
    return text


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
        base = read_user_conf(req.user_conf)
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
    if s == Scenario.SERVER:
        put("coalesce_queries", 1, "when the issue thread runs late, LoadGen hands every query already due to "
                                   "one IssueQuery call (as NVIDIA's harnesses do); latency still counts from "
                                   "each query's scheduled time")
    for scenario, key, value in bench.loadgen_conf:
        if scenario in ("*", s):
            put(key, value, f"{m}: the round's value, missing from LoadGen's built-in mlperf.conf")
    if cal is not None:
        put(*calibrated_setting(s, cal, req.duration_ms))
    return base.rstrip("\n") + ("\n" if base else "") + "\n".join(lines) + "\n"


def calibrated_setting(scenario: Scenario, cal: Calibration, duration_ms: int | None) -> tuple[str, float, str]:
    """(key, value, why) of the scenario's speed setting derived from a calibration, for `appliance run`
    (`duration_ms`: --duration-ms) and `appliance tune` (full length) alike. Offline and Server: see
    target_per_rate. Latencies are a little optimistic, so LoadGen pre-generates enough queries to fill
    the minimum duration (it stops issuing once duration and count are met)."""
    rate = f"{cal.samples_per_second:.1f} samples/s by {cal.method}"
    if scenario in (Scenario.OFFLINE, Scenario.SERVER):
        k = target_per_rate(scenario, duration_ms)
        why = (f"the run lasts about {1.1 * k:.2g} x min_duration" if scenario == Scenario.OFFLINE
               else "what the card set sustains within the bound")
        short = " (a short run: wider margin)" if k != target_per_rate(scenario, None) else ""
        rule = f"calibrated rate x {k}{short} ({rate}): {why}"
        if scenario == Scenario.SERVER and cal.server_qps is not None and cal.server_qps < cal.samples_per_second * k:
            return "target_qps", cal.server_qps, f"what an ideal queue sustains within the bound (less than {rule})"
        return "target_qps", round(cal.samples_per_second * k, 3), rule
    if scenario == Scenario.SINGLE_STREAM:
        return "target_latency", round(cal.single_latency_ms * 0.6, 3), "calibrated latency x 0.6, ms"
    return "target_latency", round(cal.multistream_latency_ms * 0.6, 3), "calibrated latency x 0.6, ms"


def test_settings(user_conf: Path, bench: Benchmark, scenario: Scenario, mode: Mode) -> lg.TestSettings:
    """mlperf.conf (built in) + `user_conf`, as the submission checker expects them to be loaded."""
    settings = lg.TestSettings()
    # conf_type 0 applies LoadGen's built-in mlperf.conf (seeds included); a user.conf is then read with
    # conf_type 2. conf_type 1 would do both, but only on a process's first call: later calls skip
    # mlperf.conf and log "Multiple conf files are used" as an error, which fails the official checker.
    if settings.FromConfig(str(user_conf), bench.loadgen_model, scenario, 0) != 0 \
            or settings.FromConfig(str(user_conf), bench.loadgen_model, scenario, 2) != 0:
        raise ApplianceError(f"LoadGen rejected {user_conf}; check its 'model.scenario.key = value' lines")
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.AccuracyOnly if mode == Mode.ACCURACY else lg.TestMode.PerformanceOnly
    return settings
