"""LoadGen settings: the round's mlperf.conf (built into LoadGen) plus a user.conf we write and log.

Requested settings (what the user asked for) are kept apart from the effective user.conf derived
from them and from a short calibration of the cards; the effective file is saved with the run.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import mlperf_loadgen as lg

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.outbound import atomic_write_text, scratch_dir
from harness.core.scenarios import SCENARIOS, Mode, Scenario, parse_mode, parse_scenario
from harness.records.benchmark_record import Benchmark

__all__ = ["CONF_SCENARIOS", "KEY_RULES", "LOADGEN_KEYS", "MAX_CONF_BYTES", "MAX_DURATION_MS", "MIN_TARGET_QPS",
           "OFFLINE_TARGET_PER_RATE", "QUERY_BYTES", "SAMPLE_BYTES", "SERVER_TARGET_PER_RATE",
           "SHORT_OFFLINE_TARGET_PER_RATE", "SHORT_RUN_MS", "SHORT_SERVER_TARGET_PER_RATE",
           "SUBMISSION_MIN_DURATION_MS", "Calibration", "KeyRule", "Requested", "calibrated_setting", "check_conf_text",
           "check_load", "check_value", "effective_user_conf", "embedded_mlperf_conf", "known_keys", "loadgen_version",
           "preflight", "read_user_conf", "scheduled", "target_per_rate", "test_settings"]

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
        for option, key, value in (("--duration-ms", "min_duration", self.duration_ms),
                                   ("--count", "min_query_count", self.count),
                                   ("--target-qps", "target_qps", self.target_qps)):
            problem = None if value is None else check_value(self.scenario, key, repr(value))
            if problem is not None:  # the same rule as a user.conf line (the option becomes one)
                raise ApplianceError(f"{option} {value}: {problem}")


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

    samples_per_second: float       # at the run's batch size, all cards together (harness.run.calibration)
    single_latency_ms: float        # one sample on one card
    multistream_latency_ms: float   # eight samples on one card
    method: str = "warm-up timing, cards one at a time"
    server_qps: float | None = None  # what an ideal queue sustains within the bound (harness.core.queueing), if known


@cache
def embedded_mlperf_conf() -> str:
    """The mlperf.conf compiled into the installed LoadGen: the file its FromConfig really applies."""
    import glob

    so = glob.glob(str(Path(lg.__file__).parent / "mlperf_loadgen*.so")) if not lg.__file__.endswith(".so") \
        else [lg.__file__]
    blob = inbound.read_bytes(so[0], inbound.ARRAY)
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


MAX_CONF_BYTES = 1 << 20  # a user.conf is a few lines; a larger file (or /dev/zero) is not one
MAX_DURATION_MS = 7 * 24 * 3600 * 1000  # a week: durations and latencies above it are a slip of the keyboard
_COUNT = 2**53          # counts: any whole number a double holds exactly; the memory they need is checked
_U64 = 2**64 - 1        # seeds: LoadGen's uint64
MIN_TARGET_QPS = 1e-3   # below it LoadGen's schedule (a query every 1/target_qps s) overflows: 1e-320 was bad_alloc
_I32 = 2**31 - 1        # LoadGen casts these to int


@dataclass(frozen=True)
class KeyRule:
    """How LoadGen's FromConfig reads a key (strtoull for whole numbers, strtod for the rest) and the
    values that mean something: a value outside them is refused before LoadGen reads it (strtoull wraps
    -5 to 2^64-5 and LoadGen then allocates for it; a negative or nan target_qps is replaced by 1)."""

    whole: bool
    lo: float
    hi: float
    lo_open: bool = False  # lo itself excluded (a rate, a latency: 0 means nothing)
    unit: str = ""


_BOOL = KeyRule(True, 0, 1, unit="0 or 1")
KEY_RULES: dict[str, KeyRule] = {
    "mode": KeyRule(True, 0, 3, unit="0-3"),
    **{k: KeyRule(True, 0, MAX_DURATION_MS, unit="ms") for k in
       ("min_duration", "max_duration", "target_duration", "ttft_latency", "tpot_latency")},
    **{k: KeyRule(True, 0, _COUNT) for k in
       ("min_query_count", "max_query_count", "performance_sample_count_override", "accuracy_sample_count_override",
        "accuracy_log_sampling_target", "performance_issue_same_index", "token_latency_scaling_factor")},
    **{k: KeyRule(True, 0, _U64) for k in
       ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "accuracy_log_rng_seed",
        "test05_qsl_rng_seed", "test05_sample_index_rng_seed", "test05_schedule_rng_seed")},
    **{k: _BOOL for k in
       ("print_timestamps", "performance_issue_unique", "performance_issue_same", "sample_concatenate_permutation",
        "coalesce_queries", "test05", "use_token_latencies", "infer_token_latencies")},
    "samples_per_query": KeyRule(True, 1, _I32),
    "max_async_queries": KeyRule(True, 0, _I32),
    "server_num_issue_query_threads": KeyRule(True, 0, _I32),
    "target_qps": KeyRule(False, MIN_TARGET_QPS, float("inf"), unit="queries/s"),
    "target_latency": KeyRule(False, 0, MAX_DURATION_MS, lo_open=True, unit="ms"),
    "target_latency_percentile": KeyRule(False, 0, 100, lo_open=True, unit="percent"),
    "accuracy_log_probability": KeyRule(False, 0, 100, unit="percent"),
}
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE = re.compile(r"\+?[0-9]+")
_C_SPACE = re.compile(r"[ \t\n\v\f\r]+")


def check_value(scenario: str, key: str, value: str) -> str | None:
    """What is wrong with `value` for `key` as LoadGen would read it (None: nothing)."""
    rule = KEY_RULES.get(key, KeyRule(False, float("-inf"), float("inf")))
    text = value.strip()
    shown = text if len(text) <= 40 else text[:37] + "..."
    whole = rule.whole or (key == "target_latency" and scenario in ("*", Scenario.SERVER))  # Server: strtoull
    special = text.lower().lstrip("+-") in ("nan", "inf", "infinity")
    if special:
        return f"{key} = {shown}: not a finite number"
    if not _DECIMAL.fullmatch(text):
        return f"the value {shown!r} is not a number"
    if whole and re.fullmatch(r"-0*[1-9][0-9]*", text):
        return (f"{key} = {shown} is out of range: it must be at least {rule.lo:g} (LoadGen's strtoull would read "
                f"it as {_strtoull(text)})")
    if whole and not _WHOLE.fullmatch(text.lstrip("-")):
        return f"{key} takes a whole number: LoadGen (strtoull) would read {shown!r} as {_strtoull(text)}"
    if whole and len(text.lstrip("+-")) > 1 and text.lstrip("+-").startswith("0"):
        return f"{key} = {shown}: LoadGen reads a leading 0 as octal; write the number without it"
    digits = text.lstrip("+-")
    number: float = (int(digits) if len(digits) <= 40 else math.inf) if whole else float(text)
    low = number <= rule.lo if rule.lo_open else number < rule.lo
    span = f"{'above' if rule.lo_open else 'at least'} {rule.lo:g}" + \
        (f" and at most {rule.hi:g}" if math.isfinite(rule.hi) else " and finite")
    unit = f" ({rule.unit})" if rule.unit else ""
    if low or number > rule.hi or not math.isfinite(number):
        return f"{key} = {shown} is out of range: it must be {span}{unit}"
    if number != 0 and abs(number) < sys.float_info.min:
        return (f"{key} = {shown} is too small to compute with (a denormal number, below {sys.float_info.min:.3g}); "
                f"it must be {span}{unit}")
    return None


def _strtoull(text: str) -> int:
    """What C's strtoull makes of `text`: its leading whole number, a minus sign wrapping it around,
    ULLONG_MAX when it does not fit."""
    m = re.match(r"\s*([+-]?)([0-9]*)", text)
    digits = m[2] if m else ""
    if len(digits) > 20 or (digits and int(digits) > _U64):
        return _U64
    n = int(digits or "0")
    return (-n) % 2**64 if m and m[1] == "-" else n


def check_conf_text(text: str, where: str) -> None:
    """Every line of a user.conf as LoadGen's FromConfig tokenises it (whitespace-separated `key = value`,
    a comment only as a lone '#' token first), every key known to LoadGen and every value in its range;
    a problem is one line naming `where` and the line (LoadGen would only log it, or read something else)."""
    for n, raw in enumerate(text.split("\n"), 1):  # std::getline: lines end at \n only
        tokens = [t for t in _C_SPACE.split(raw) if t]  # operator>>: C's isspace, not Python's wider set
        if not tokens or tokens[0] == "#" or (len(tokens) == 1 and tokens[0].startswith("#")):
            continue
        at = f"{where}, line {n} ({raw.strip()[:60]!r})"
        if tokens[0].startswith("#"):
            raise ApplianceError(f"{at}: LoadGen reads a comment only after a lone '#' ('# text'); "
                                 f"'#text' is read as a key")
        if "#" in raw:
            raise ApplianceError(f"{at}: LoadGen takes no comment after a value; put it on its own line")
        parts = tokens[0].split(".")
        if len(tokens) != 3 or tokens[1] != "=" or len(parts) != 3 or not all(parts):
            empty = len(tokens) == 2 and tokens[1] == "=" and len(parts) == 3 and all(parts)
            if empty:
                raise ApplianceError(f"{at}: an empty value; LoadGen takes a number, e.g. {tokens[0]} = 100")
            raise ApplianceError(f"{at}: expected 'model.scenario.key = value' (spaces around '='), "
                                 f"e.g. resnet50.Offline.target_qps = 100")
        _, scenario, key = parts
        if scenario not in CONF_SCENARIOS:
            raise ApplianceError(f"{at}: unknown scenario {scenario!r}; use one of: "
                                 f"{', '.join(sorted(CONF_SCENARIOS))}")
        if key not in known_keys():
            raise ApplianceError(f"{at}: LoadGen does not know the key {key!r} and would ignore it; known "
                                 f"keys: {', '.join(sorted(known_keys()))}")
        problem = check_value(scenario, key, tokens[2])
        if problem is not None:
            example = f"; LoadGen takes a number, e.g. {tokens[0]} = 100" if "not a number" in problem else ""
            raise ApplianceError(f"{at}: {problem}{example}")


def read_user_conf(path: Path, what: str = "--user-conf", fix: str = "") -> str:
    """A user.conf (a user's, `what` names where it came from), checked line by line the way LoadGen reads it
    (check_conf_text); `fix` ends each error line."""
    try:
        raw = inbound.read_bytes(path, MAX_CONF_BYTES, what=what)
    except inbound.Refused as exc:
        raise ApplianceError(f"{exc}; a user.conf is a text file of 'model.scenario.key = value' lines{fix}") from None
    except OSError as exc:
        raise ApplianceError(f"cannot read {what} {path}: {exc.strerror}{fix}") from None
    try:
        text = raw.decode("utf-8-sig")  # a leading BOM dropped: LoadGen would read it as part of the first key
    except UnicodeDecodeError:
        raise ApplianceError(f"{what} {path} is not a text file (not UTF-8); a user.conf holds lines "
                             f"'model.scenario.key = value'{fix}") from None
    check_conf_text(text, f"user.conf {path}")
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
            if cal.server_qps > 0:
                return "target_qps", cal.server_qps, f"what an ideal queue sustains within the bound (less than {rule})"
            # LoadGen needs a positive target: keep the rate rule, and say that the bound cannot be met
            rule += "; not even an ideal queue keeps p99 within the bound with these cards"
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


# What LoadGen and the SUT's intake keep per query and per sample LoadGen schedules, measured with null
# cards (peak RSS over a small run): a Server query of one sample about 380 B, an Offline sample about
# 134 B (4 M samples); rounded up.
QUERY_BYTES = 512
SAMPLE_BYTES = 160


def scheduled(settings: lg.TestSettings, scenario: Scenario) -> tuple[float, float, str]:
    """(queries, samples, how) LoadGen will schedule for a performance run with `settings` (its own rules:
    Offline one query of max(min_query_count, 1.1 x min_duration x target_qps) samples; the others
    enough queries at their target rate to fill min_duration, min_query_count at the least)."""
    seconds = settings.min_duration_ms / 1000
    count = float(settings.min_query_count)
    if scenario == Scenario.OFFLINE:
        samples = max(count, 1.1 * seconds * settings.offline_expected_qps)
        return 1, samples, (f"max(min_query_count {count:g}, 1.1 x min_duration {seconds:g} s x target_qps "
                            f"{settings.offline_expected_qps:g})")
    if scenario == Scenario.SERVER:
        rate, what = settings.server_target_qps, f"target_qps {settings.server_target_qps:g}"
    else:
        ns = settings.single_stream_expected_latency_ns if scenario == Scenario.SINGLE_STREAM \
            else settings.multi_stream_expected_latency_ns
        rate, what = 1e9 / max(ns, 1), f"target_latency {ns / 1e6:g} ms"
    queries = max(count, 1.1 * seconds * rate)
    if settings.max_query_count:
        queries = min(queries, float(settings.max_query_count))
    per_query = settings.multi_stream_samples_per_query if scenario == Scenario.MULTI_STREAM else 1
    return queries, queries * per_query, f"max(min_query_count {count:g}, min_duration {seconds:g} s at {what})"


def check_load(settings: lg.TestSettings, scenario: Scenario, mode: Mode, dataset_count: int) -> None:
    """Refuse, in one line, settings whose query schedule would not fit in memory, and sample-count
    overrides beyond the prepared dataset (LoadGen would ask for samples that are not there)."""
    from harness.hw.system import gb, memory_available

    for key, value in (("performance_sample_count_override", settings.performance_sample_count_override),
                       ("accuracy_sample_count_override", settings.accuracy_sample_count_override)):
        if value > dataset_count:
            raise ApplianceError(f"{key} {value} is more than the {dataset_count} samples prepared; lower it, or "
                                 f"prepare more samples (appliance prepare --samples N)")
    if mode == Mode.ACCURACY:
        return  # every sample once: the dataset's size
    queries, samples, how = scheduled(settings, scenario)
    need = queries * QUERY_BYTES + samples * SAMPLE_BYTES
    free, source = memory_available()
    if need > free:
        what = "one query" if queries == 1 else f"about {queries:.3g} queries"
        raise ApplianceError(f"LoadGen would schedule {what} of {samples:.3g} samples in all "
                             f"({how}): about {gb(need)} for their records, and {gb(free)} is free ({source}); "
                             f"lower --count / --duration-ms / --target-qps or the user.conf's values")


def preflight(bench: Benchmark, req: Requested, dataset_count: int, cards: int) -> None:
    """The run's settings as LoadGen will read them (its mlperf.conf, the user.conf, the options; the
    calibrated speed is not known yet), checked before anything starts: the runner checks them again
    with the calibrated speed before LoadGen runs."""
    text = effective_user_conf(bench, req, None, dataset_count, cards)
    check_conf_text(text, "the run's user.conf")
    with scratch_dir("appliance-settings-") as tmp:
        conf = tmp / "user.conf"
        atomic_write_text(conf, text)
        settings = test_settings(conf, bench, req.scenario, req.mode)
    check_load(settings, req.scenario, req.mode, dataset_count)
