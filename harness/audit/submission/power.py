"""MLPerf Power in a submission tree: one scenario's `performance/{ranging,run_1,power}` checked as the round's
official checker does it, and its power metric computed the official way.

Sources, read at each round's tag of mlcommons/inference (v4.1, v5.0, v5.1; master for v6.0/v6.1):
`tools/submission/submission_checker.py` (check_power_dir, get_power_metric; on master the
submission_checker package's checks/power_check.py) and `tools/submission/power/power_checker.py`, which
the checker runs on every power result; the per-round facts (PTDaemon versions, analyzers, the power
client's and server's source checksums) are in rounds.py. The rules are written here from those sources;
none of their code is used.

What is verified, in the official order: the file lists of `run_1/`, `ranging/` (LoadGen's two logs and
`spl.txt`) and `power/` (client.json, client.log, ptd_logs.txt, server.json, server.log); then the power
checker's eleven checks: the client's and server's source checksums against the published list, PTDaemon's
version, analyzer and replies, the session's UUIDs and name, the client and server clocks agreeing within
0.8 s per phase, LoadGen's power window inside each phase, the testing run's average power not more than 5%
below the ranging run's, the client's and server's messages, the sha1 of every result file against both
session records, the PTD log's errors and warnings (uncertainty), the analyzer number, server debug off.

The metric: the testing run's `spl.txt` samples strictly inside LoadGen's power_begin..power_end with watts
above zero, averaged; Offline/Server report that average in watts and samples per joule (the performance
result over it); SingleStream/MultiStream report millijoules per query (average watts x window x 1000 /
queries; x 8 for a MultiStream result inferred from SingleStream) and samples per joule. Printed as the
checker prints them (`{:f}`, six decimals).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, cast

from harness.audit.submission import rounds
from harness.audit.submission.rounds import PowerRules
from harness.core import inbound
from harness.core.scenarios import Scenario
from harness.records import detail_log
from harness.records.readers import MAX_LOG_BYTES, Problem, read_json_object, read_text

__all__ = ["OPTIONAL", "POWER_FILES", "RUN_FILES", "PowerResult", "check", "has_power", "not_checked", "session_figure",
           "simulated"]

RUN_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "spl.txt")
POWER_FILES = ("client.json", "client.log", "ptd_logs.txt", "server.json", "server.log")
OPTIONAL = ("mlperf_log_accuracy.json", "mlperf_log_trace.json", "results.json", ".gitkeep")
SESSION_KEYS = ("version", "timezone", "modules", "sources", "messages", "uuid", "session_name", "results", "phases")
# the files whose sha1 the session records must hold (the power checker's RESULT_PATHS, less the two records)
HASHED = ("power/client.log", "power/ptd_logs.txt", "power/server.log",
          *(f"{run}/{name}" for run in ("ranging", "run_1") for name in (*RUN_FILES[:2], "spl.txt")))
TOLERANCE_S = 0.8        # TIME_DELTA_TOLERANCE: client/server clocks per phase
WARNING_SLACK_S = 800.0  # the same constant added to seconds where PTD warnings are placed in the load window
DST_S = 3600.0           # the checker's daylight-saving workaround: a window one hour off also fits
TIME = "%m-%d-%Y %H:%M:%S.%f"
PTD_TIME = re.compile(r"^\d\d-\d\d-\d\d\d\d \d\d:\d\d:\d\d.\d\d\d")
RANGING_ERRORS = ("Can't evaluate uncertainty of this sample!", "Bad watts reading nan from ",
                  "Bad amps reading nan from ", "Bad pf reading nan from ", "Bad volts reading nan from ",
                  "Current appears to be too high for set range")
TESTING_ACCEPTED_ERRORS = ("USB.",)
UNCERTAINTY_OVER = re.compile(r"Uncertainty \d+.\d+%, which is above 1.00% limit for the last sample!")
GO_REPLY = "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"
# the analyzer number whose configuration must name two channels (YokogawaWT330_multichannel)
MULTICHANNEL = 77


@dataclass(frozen=True)
class PowerResult:
    """One scenario's power result as the check found it."""

    where: str                  # the scenario folder
    status: str                 # "checked", "failed", "not checked" (a benchmark outside the appliance's)
    watts: float | None = None  # average system power over the testing run's window
    metric: float | None = None  # the official power metric: watts (Offline/Server) or millijoules per query
    unit: str = ""              # "Watts" or "millijoules"
    samples_per_joule: float | None = None

    def line(self) -> str:
        if self.metric is None or self.samples_per_joule is None:
            return f"{self.where}: {self.status}"
        if self.unit == "Watts":
            return f"{self.where}: {self.metric:f} W, {self.samples_per_joule:f} samples/J ({self.status})"
        return (f"{self.where}: {self.metric:f} mJ/query, {self.samples_per_joule:f} samples/J "
                f"(average {self.watts:f} W over the testing run; {self.status})")


def has_power(scenario_dir: Path) -> bool:
    """The official test of a power result: a `performance/power` folder."""
    return (scenario_dir / "performance" / "power").exists()


def not_checked(where: str) -> PowerResult:
    return PowerResult(where, "not checked (a benchmark outside this appliance's; its power files are not read)")


class _Failed(Exception):
    """One power-checker rule broken: the message is the problem line (naming the file)."""


def _files(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return []


def _file_lists(perf: Path, rel: Callable[[Path], str], problem: Problem) -> bool:
    ok = True
    for sub, names in (("run_1", (*RUN_FILES[:2], "spl.txt")), ("ranging", RUN_FILES), ("power", POWER_FILES)):
        folder = perf / sub
        if not folder.is_dir():
            problem(f"{rel(folder)}: missing folder (a power result needs ranging/, run_1/ and power/)")
            ok = False
            continue
        have = _files(folder)
        missing = [n for n in names if n not in have]
        extra = [n for n in have if n not in names and n not in OPTIONAL]
        if missing:
            problem(f"{rel(folder)}: missing {', '.join(missing)} (a power result's files)")
        if extra:
            problem(f"{rel(folder)}: files the round does not allow here: {', '.join(extra)}")
        ok = ok and not missing and not extra
    return ok


def _when(text: object, where: str) -> datetime:
    if not isinstance(text, str):
        raise _Failed(f"{where}: no timestamp")
    try:
        return datetime.strptime(text, TIME).replace(tzinfo=UTC)
    except ValueError:
        raise _Failed(f"{where}: timestamp {text[:40]!r} is not MM-DD-YYYY HH:MM:SS.fff") from None


def _window(run: Path, rel: Callable[[Path], str]) -> tuple[datetime, datetime, detail_log.Detail]:
    """LoadGen's power_begin and power_end in a run's detail log (UTC, as the checker reads them)."""
    where = rel(run / "mlperf_log_detail.txt")
    sink: list[str] = []
    d = detail_log.read(run / "mlperf_log_detail.txt", where, sink.append)
    if d is None:
        raise _Failed(sink[0] if sink else f"{where}: unreadable")
    for key in ("power_begin", "power_end"):
        if not d.has(key):
            raise _Failed(f"{where}: no {key} in it (LoadGen logs it when the power client runs it)")
    return _when(d.raw("power_begin"), where), _when(d.raw("power_end"), where), d


def _samples(spl: Path, begin: datetime, end: datetime, where: str) -> tuple[list[float], list[float]]:
    """Watts and power factors of the analyzer's samples strictly inside (begin, end), those above zero."""
    text = read_text(spl, where, _raise, limit=MAX_LOG_BYTES)
    watts, pfs = [], []
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.startswith("Time"):
            continue
        cols = line.split(",")
        try:
            stamp = datetime.strptime(cols[1], TIME).replace(tzinfo=UTC)
            if begin < stamp < end:
                w, pf = float(cols[3]), float(cols[9])
                if w > 0:
                    watts.append(w)
                if pf > 0:
                    pfs.append(pf)
        except (IndexError, ValueError):
            raise _Failed(f"{where}: line {number} is not an analyzer sample (Time,<when>,Watts,<w>,...,PF,<pf>)"
                          ) from None
    return watts, pfs


def _raise(text: str) -> None:
    raise _Failed(text)


def _metric(perf: Path, scenario: Scenario, rel: Callable[[Path], str]
            ) -> tuple[float, float, float]:
    """(average watts, the official metric, samples per joule) of the testing run."""
    run = perf / "run_1"
    begin, end, d = _window(run, rel)
    watts, _ = _samples(run / "spl.txt", begin, end, rel(run / "spl.txt"))
    if not watts:
        raise _Failed(f"{rel(run / 'spl.txt')}: no power samples inside LoadGen's power window {begin:%H:%M:%S}"
                      f"-{end:%H:%M:%S} (a spl.txt from another measurement?)")
    avg = sum(watts) / len(watts)
    logged = d.raw("effective_scenario")
    if scenario in (Scenario.OFFLINE, Scenario.SERVER):
        return avg, avg, _performance(d, scenario, logged, rel(run / "mlperf_log_detail.txt")) / avg
    queries = d.raw("result_query_count")
    if not isinstance(queries, int | float) or isinstance(queries, bool) or queries <= 0:
        raise _Failed(f"{rel(run / 'mlperf_log_detail.txt')}: result_query_count {queries!r} is not a count")
    seconds = (end - begin).total_seconds()
    per_query = 8 if scenario == Scenario.MULTI_STREAM else 1
    metric = avg * seconds * 1000 / int(queries)
    if scenario == Scenario.MULTI_STREAM and logged == Scenario.SINGLE_STREAM:
        metric = avg * seconds * per_query * 1000 / int(queries)
    return avg, metric, per_query * 1000 / metric


def _performance(d: detail_log.Detail, scenario: Scenario, logged: object, where: str) -> float:
    """The performance result the checker divides by the watts (inferred as it infers it)."""
    if scenario == Scenario.OFFLINE and logged == Scenario.SINGLE_STREAM:
        key = "result_qps_without_loadgen_overhead"
    elif scenario == Scenario.OFFLINE and logged == Scenario.MULTI_STREAM:
        spq, mean = d.raw("effective_samples_per_query"), d.raw("result_mean_query_latency_ns")
        if isinstance(spq, int | float) and isinstance(mean, int | float) and mean > 0:
            return float(spq) * 1000 / (mean / 1e6)
        raise _Failed(f"{where}: no samples per query or mean query latency to infer the Offline result from")
    else:
        key = rounds.RESULT_FIELDS[scenario]
    value = d.raw(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _Failed(f"{where}: {key} {value!r} is not a number")
    return float(value)


def simulated(perf: Path) -> bool:
    """A power session written by a stand-in (audit/submission/standin.py), which labels its records SIMULATED."""
    for name in ("client.json", "server.json"):
        data = read_json_object(perf / "power" / name, name, lambda _: None)
        if data is not None and "SIMULATED" in data:
            return True
    return False


def session_figure(session: Path, scenario: Scenario) -> PowerResult | None:
    """The official metric of a power session folder as the client leaves it (ranging/, run_1/, power/), for the
    report; None when it cannot be computed. Only `check` says whether the session passes the rules."""
    try:
        watts, metric, per_joule = _metric(session, scenario, str)
    except _Failed:
        return None
    unit = "Watts" if scenario in (Scenario.OFFLINE, Scenario.SERVER) else "millijoules"
    status = "SIMULATED" if simulated(session) else "MLPerf Power; `submission check` checks the session"
    return PowerResult(str(session), status, watts, metric, unit, per_joule)


def check(scenario_dir: Path, scenario: Scenario, power: PowerRules, rel: Callable[[Path], str],
          problem: Problem, synthetic: Problem) -> PowerResult:
    """Every power rule of the round on one scenario folder holding `performance/power`; problems reported.
    A SIMULATED session (a rehearsal's stand-in for the power client, server and analyzer) is said in one
    `synthetic` line, and so is what only a real session can have (the published sources, a real analyzer
    and PTDaemon); every other rule applies to it as to a real one."""
    perf = scenario_dir / "performance"
    where = rel(scenario_dir)
    before = problem
    found: list[str] = []

    def fail(text: str) -> None:
        found.append(text)
        before(text)

    unit = "Watts" if scenario in (Scenario.OFFLINE, Scenario.SERVER) else "millijoules"
    if not _file_lists(perf, rel, fail):
        return PowerResult(where, "failed", unit=unit)  # the missing file said once, not again by each rule
    watts = metric = per_joule = None
    try:
        watts, metric, per_joule = _metric(perf, scenario, rel)
    except _Failed as exc:
        fail(str(exc))
    fake = simulated(perf)
    if fake:
        synthetic(f"{where}: the power result is SIMULATED (a stand-in wrote the power client's, server's and "
                  f"analyzer's files from a constant power): a rehearsal, not an MLPerf Power measurement")
    _power_checker(perf, power, rel, fail, synthetic if fake else fail)
    status = "failed" if found else "simulated" if fake else "checked"
    return PowerResult(where, status, watts, metric, unit, per_joule)


class Message(TypedDict):
    """One exchange the power client logs (a command and the reply it got)."""
    cmd: str
    reply: str


class Analyzer(TypedDict):
    """The server's `ptd_config` for one analyzer: how PTDaemon was started."""
    device_type: int
    command: list[str]
    channel: list[int] | None


class Session(TypedDict, total=False):
    """client.json / server.json as mlcommons/power-dev's client and server write them (the files are others':
    each check catches the wrong shape of a field, as the official checker stops on its exception)."""
    version: str
    timezone: int
    modules: dict[str, str]
    sources: dict[str, str]
    messages: list[Message]
    uuid: dict[str, str]
    session_name: str
    results: dict[str, str]
    phases: dict[str, list[list[float]]]
    ptd_messages: list[Message]
    ptd_config: Analyzer | list[Analyzer]
    debug: bool


def _session(path: Path, rel: Callable[[Path], str], problem: Problem) -> Session | None:
    data = read_json_object(path, rel(path), problem)
    if data is None:
        return None
    missing = [k for k in SESSION_KEYS if k not in data]
    if missing:
        problem(f"{rel(path)}: missing {', '.join(missing)} (a power session record's fields)")
        return None
    return cast(Session, data)


def _power_checker(perf: Path, power: PowerRules, rel: Callable[[Path], str], problem: Problem,
                   real_only: Problem) -> None:
    """The power checker's checks, each reporting its own problem (as each is logged apart officially); what
    only a real session can pass (sources, analyzer, PTDaemon, the client's protocol) to `real_only`."""
    client_path, server_path = perf / "power" / "client.json", perf / "power" / "server.json"
    client = _session(client_path, rel, problem)
    server = _session(server_path, rel, problem)
    if client is None or server is None:
        return
    c, s = rel(client_path), rel(server_path)
    checks: list[tuple[Callable[[], None], Problem]] = [
        (lambda: _sources(client, c, power), real_only), (lambda: _sources(server, s, power), real_only),
        (lambda: _ptd_messages(server, s, power), real_only), (lambda: _uuids(client, server, c, s), problem),
        (lambda: _same_session(client, server, c, s), problem),
        (lambda: _phases(client, server, perf, c, s, rel), problem),
        (lambda: _messages(client, server, c, s), real_only),
        (lambda: _results(client, server, perf, c, s, rel), problem), (lambda: _ptd_log(server, perf, rel), problem),
        (lambda: _ptd_config(server, s, power), real_only), (lambda: _debug(server, s), problem),
    ]
    for one, report in checks:
        try:
            one()
        except _Failed as exc:
            report(str(exc))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            # a field of the wrong shape: the official checker stops that check on the exception too
            report(f"{rel(perf / 'power')}: a session record field is not what the power client writes "
                   f"({type(exc).__name__}: {str(exc)[:80]})")


def _sources(sd: Session, where: str, power: PowerRules) -> None:
    if sd["sources"] != dict(power.sources):
        got = sd["sources"] if isinstance(sd["sources"], dict) else {}
        changed = sorted(k for k in set(got) | set(power.sources) if got.get(k) != power.sources.get(k))
        raise _Failed(f"{where}: the power client/server sources are not the published ones (sources_checksums"
                      f".json): {', '.join(changed[:4]) or 'not a mapping'} differ")


def _reply(msgs: list[Message], command: str) -> str:
    return next((str(m["reply"]) for m in msgs if m["cmd"] == command), "")


def _ptd_messages(server: Session, where: str, power: PowerRules) -> None:
    msgs = server["ptd_messages"]
    identify = _reply(msgs, "Identify")
    if not identify:
        raise _Failed(f"{where}: no reply of PTDaemon to `Identify` in ptd_messages")
    model = identify.split(",")[0]
    version_m = re.search(r"(?<=version=)(.+?)-", identify)
    version = version_m.group(1) if version_m else ""
    if version not in power.ptd_versions:
        raise _Failed(f"{where}: PTDaemon version {version!r}; this round accepts {', '.join(power.ptd_versions)}")
    if model not in rounds.ANALYZERS:
        raise _Failed(f"{where}: power analyzer {model!r} is not one this round accepts "
                      f"({', '.join(rounds.ANALYZERS)})")
    _replies(msgs, where)
    _ranges_restored(msgs, where, power)


def _replies(msgs: list[Message], where: str) -> None:
    """PTDaemon's reply to each range, start and stop command (the third Stop finds nothing to stop)."""
    expected = (("SR,A", "Range A changed"), ("SR,V", "Range V changed"), ("Go,1000,", GO_REPLY),
                ("Stop", "Stopping untimed measurement"))
    for prefix, reply in expected:
        stops = 0
        for m in msgs:
            if not str(m["cmd"]).startswith(prefix):
                continue
            want = reply
            if m["cmd"] == "Stop":
                want = "Error: no measurement to stop" if stops == 2 else reply
                stops += 1
            if m["reply"] != want:
                raise _Failed(f"{where}: PTDaemon replied {m['reply']!r} to {m['cmd']!r}, not {want!r}")


def _ranges_restored(msgs: list[Message], where: str, power: PowerRules) -> None:
    """The analyzer's amps and volts ranges set back to the initial ones (from the reply to the 3rd message)."""
    ranges = str(msgs[2]["reply"]).split(",")

    def initial(i: int) -> str:
        try:
            return ranges[i + 1] if ranges[i] == "0" and float(ranges[i + 1]) > 0 else "Auto"
        except (ValueError, IndexError):
            raise _Failed(f"{where}: the analyzer's initial ranges cannot be read from {msgs[2]['reply']!r}"
                          ) from None

    def nth(prefix: str, n: int) -> str:
        hits = [str(m["cmd"]) for m in msgs if str(m["cmd"]).startswith(prefix)]
        if len(hits) < n:
            raise _Failed(f"{where}: no {prefix} command number {n} in ptd_messages (the ranges are not set back)")
        return hits[n - 1]

    amps, volts = initial(1), initial(3)
    # every one of them must exist (the checker looks each up before comparing), one must set the range back
    if f"SR,A,{amps}" not in [nth("SR,A", n) for n in power.amps_range_commands]:
        raise _Failed(f"{where}: the amps range is not set back to the initial SR,A,{amps}")
    if nth("SR,V", 3) != f"SR,V,{volts}":
        raise _Failed(f"{where}: the volts range is not set back to the initial SR,V,{volts}")


def _uuids(client: Session, server: Session, c: str, s: str) -> None:
    for side in ("client", "server"):
        try:
            same = uuid.UUID(str(client["uuid"][side])) == uuid.UUID(str(server["uuid"][side]))
        except ValueError:
            same = False
        if not same:
            raise _Failed(f"{s}: the {side} UUID differs from {c}'s (not one power session)")


def _same_session(client: Session, server: Session, c: str, s: str) -> None:
    if client["session_name"] != server["session_name"]:
        raise _Failed(f"{s}: session_name {server['session_name']!r} differs from {c}'s {client['session_name']!r}")


def _phases(client: Session, server: Session, perf: Path, c: str, s: str,
            rel: Callable[[Path], str]) -> None:
    for mode in ("ranging", "testing"):
        pc, ps = client["phases"][mode], server["phases"][mode]
        if len(pc) != len(ps):
            raise _Failed(f"{s}: {len(ps)} {mode} phases, {c} has {len(pc)}")
        for i, (a, b) in enumerate(zip(pc, ps, strict=True)):
            if abs(float(a[0]) - float(b[0])) > TOLERANCE_S:
                raise _Failed(f"{s}: {mode} phase {i + 1} is {abs(float(a[0]) - float(b[0])) * 1000:.0f} ms off "
                              f"{c}'s (limit {TOLERANCE_S * 1000:.0f} ms)")
    power_w = []
    for run, mode in (("ranging", "ranging"), ("run_1", "testing")):
        begin, end, _ = _window(perf / run, rel)
        ph = client["phases"][mode]
        lo, hi = float(ph[1][0]), float(ph[2][0])
        for stamp, what in ((begin.timestamp(), "begin"), (end.timestamp(), "end")):
            if not (lo < stamp < hi or lo < stamp - DST_S < hi):
                raise _Failed(f"{rel(perf / run / 'mlperf_log_detail.txt')}: LoadGen's power_{what} is outside the "
                              f"power client's {mode} phase ({c}): not the run the analyzer measured")
        watts, _ = _samples(perf / run / "spl.txt", begin, end, rel(perf / run / "spl.txt"))
        power_w.append(round(sum(watts) / len(watts), 5) if watts else -1.0)
    ranging, testing = power_w
    delta = round((testing / ranging - 1) * 100, 2) if ranging else -100.0
    if not delta > -5:
        raise _Failed(f"{rel(perf / 'run_1' / 'spl.txt')}: the testing run's average power {testing} W is {-delta}% "
                      f"below the ranging run's {ranging} W (limit 5%): the runs were not made with the same "
                      f"settings")


def _messages(client: Session, server: Session, c: str, s: str) -> None:
    mc, ms = client["messages"], server["messages"]
    if len(mc) != len(ms):
        raise _Failed(f"{s}: {len(ms)} messages, {c} has {len(mc)}")
    for a, b in zip(mc, ms, strict=True):
        if a["cmd"] != b["cmd"] or (a["cmd"] != "time" and a["reply"] != b["reply"]):
            raise _Failed(f"{s}: message {b['cmd']!r} differs from {c}'s")
    cv = re.search(r"mlcommons\/power client v(\d+)$", str(ms[0]["cmd"]))
    sv = re.search(r"mlcommons\/power server v(\d+)$", str(ms[0]["reply"]))
    if cv is None or sv is None or cv.group(1) != sv.group(1):
        raise _Failed(f"{s}: the power client's and server's protocol versions differ or are missing")


def _sha1(path: Path) -> str:
    with inbound.open_bounded(path, MAX_LOG_BYTES) as f:
        return hashlib.sha1(f.read()).hexdigest()


def _results(client: Session, server: Session, perf: Path, c: str, s: str,
             rel: Callable[[Path], str]) -> None:
    rc = {k: v for k, v in client["results"].items() if k in HASHED}
    rs = {k: v for k, v in server["results"].items() if k in HASHED}
    for k in sorted(set(rc) & set(rs)):
        if rc[k] != rs[k]:
            raise _Failed(f"{s}: the sha1 of {k} differs from {c}'s")
    recorded = {**rc, **rs}
    on_disk = {}
    for k in HASHED:
        if (perf / k).is_file():
            try:
                on_disk[k] = _sha1(perf / k)
            except (OSError, inbound.Refused) as exc:
                raise _Failed(f"{rel(perf / k)}: cannot read ({exc})") from None
    for k in HASHED:
        if k not in recorded:
            raise _Failed(f"{s}: no sha1 of {k} in the session records (not a file of this session)")
        if k not in on_disk:
            raise _Failed(f"{rel(perf / k)}: missing (the session records its sha1)")
        if recorded[k] != on_disk[k]:
            raise _Failed(f"{rel(perf / k)}: changed since the power session recorded it (sha1 {on_disk[k][:12]}, "
                          f"recorded {recorded[k][:12]})")


def _ptd_stamp(line: str, where: str) -> float:
    m = PTD_TIME.search(line)
    if m is None:
        raise _Failed(f"{where}: {line.strip()[:80]!r} has no timestamp")
    return datetime.strptime(m.group(0), TIME).replace(tzinfo=UTC).timestamp()


def _ptd_log(server: Session, perf: Path, rel: Callable[[Path], str]) -> None:
    """PTDaemon's log: uncertainty checking on before the ranging run, errors only where accepted. As the
    official checker, the first accepted warning ends the scan (it passes the check with a warning)."""
    path = perf / "power" / "ptd_logs.txt"
    where = rel(path)
    load_begin, load_end, _ = _window(perf / "run_1", rel)
    start_load, stop_load = load_begin.timestamp(), load_end.timestamp()
    text = read_text(path, where, _raise, limit=MAX_LOG_BYTES) or ""
    lines = text.splitlines()
    start, stop = _ranging_window(lines, f": Go with mark {str(server['session_name']) + '_ranging'!r}", where)
    activated = next((ln for ln in lines if re.search(r"Uncertainty checking for Yokogawa\S+ is activated", ln)), None)
    if activated is None:
        raise _Failed(f"{where}: no 'Uncertainty checking for Yokogawa... is activated' line")
    if not _ptd_stamp(activated, where) < start:
        raise _Failed(f"{where}: uncertainty checking was activated after the ranging run began")
    _scan(lines, (start, stop), (start_load, stop_load), where)


def _ranging_window(lines: list[str], mark: str, where: str) -> tuple[float, float]:
    """When PTDaemon started the ranging run (its `Go with mark '<session>_ranging'`) and completed it."""
    start = None
    for line in lines:
        m = PTD_TIME.search(line)
        msg = line[m.end():].strip() if m else line
        if start is None and msg == mark:
            start = _ptd_stamp(line, where)
        elif start is not None and msg == ": Completed test":
            return start, _ptd_stamp(line, where)
    raise _Failed(f"{where}: no ranging run in it (no {mark.strip(': ')!r} then ': Completed test')")


def _scan(lines: list[str], ranging: tuple[float, float], load: tuple[float, float], where: str) -> None:
    """PTDaemon's ERROR and WARNING lines in order, until the first one the checker accepts with a warning."""
    start, stop = ranging
    start_load, stop_load = load
    for line in lines:
        for tag, is_error in (("WARNING:", False), ("ERROR:", True)):
            m = re.search(f"(?<={tag}).+", line)
            if not m or not m.group(0):
                continue
            t = _ptd_stamp(line, where)
            body = m.group(0).strip()
            if is_error:
                if body in TESTING_ACCEPTED_ERRORS:
                    return  # accepted, with a warning, and the scan ends
                if not start < t < stop:
                    raise _Failed(f"{where}: PTDaemon error outside the ranging run: {line.strip()[:120]}")
                if not any(body.startswith(e) for e in RANGING_ERRORS):
                    return
            elif start_load + WARNING_SLACK_S < t < stop_load - WARNING_SLACK_S:
                if UNCERTAINTY_OVER.search(body):
                    raise _Failed(f"{where}: measurement uncertainty over the 1% limit during the testing run: "
                                  f"{line.strip()[:120]}")
                return


def _ptd_config(server: Session, where: str, power: PowerRules) -> None:
    config = server["ptd_config"]
    # one analyzer's object up to the round whose checker reads a list (PowerRules.ptd_config_list)
    analyzers = cast(list[Analyzer], config) if power.ptd_config_list else [cast(Analyzer, config)]
    numbers = sorted(set(rounds.ANALYZERS.values()))
    for a in analyzers:
        dev = a["device_type"]
        if dev not in numbers:
            raise _Failed(f"{where}: analyzer device number {dev!r} is not one this round accepts "
                          f"({', '.join(map(str, numbers))})")
        if dev == MULTICHANNEL:
            cmd = list(a["command"])
            channels = cmd[cmd.index("-c") + 1] if "-c" in cmd[:-1] else ""
            if len(channels.split(",")) != 2 or not a["channel"] or len(a["channel"]) != 2:
                raise _Failed(f"{where}: a multichannel analyzer run on one channel")


def _debug(server: Session, where: str) -> None:
    if server.get("debug", False) is not False:
        raise _Failed(f"{where}: the power server ran in debug mode")
