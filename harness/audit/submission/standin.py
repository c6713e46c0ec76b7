"""A SIMULATED power session, for rehearsing MLPerf Power end to end on a machine with no power analyzer.

The real session is the MLCommons power client (on the system under test) running `appliance run` twice,
ranging then testing, while the power server drives PTDaemon and the analyzer; it leaves `ranging/`,
`run_1/` (LoadGen's logs and the analyzer's `spl.txt`) and `power/` (client.json, client.log,
ptd_logs.txt, server.json, server.log). This stand-in writes the same folders from two finished
`appliance run` performance runs and a constant power, so that `submission build` and `submission check`
can be rehearsed. LoadGen's logs are copied byte for byte; every file it writes itself says SIMULATED, and
the only source checksum it records is its own file's sha1, which it computes (never the published
client's and server's): `submission check` names such a power result simulated, a `synthetic:` finding.
The real client and PTDaemon are the user's (docs/power.md); nothing here stands in for them in a
submission.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.outbound import atomic_write_json, atomic_write_text, copy_file, staged_new_dir
from harness.records import detail_log

__all__ = ["SESSION_FOLDER", "simulate"]

SESSION_FOLDER = "power_session"  # beside performance/ in a scenario folder; `submission build` lays it out
LOGS = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
TIME = "%m-%d-%Y %H:%M:%S.%f"
LABEL = "SIMULATED by harness/audit/submission/standin.py: no power analyzer, no MLCommons power client or server"


def _stamp(t: datetime) -> str:
    return t.strftime("%m-%d-%Y %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _window(run: Path) -> tuple[datetime, datetime]:
    values = detail_log.values(run / "mlperf_log_detail.txt")
    try:
        return (datetime.strptime(str(values["power_begin"]), TIME).replace(tzinfo=UTC),
                datetime.strptime(str(values["power_end"]), TIME).replace(tzinfo=UTC))
    except (KeyError, ValueError):
        raise DataError(f"{run}: no LoadGen power_begin/power_end in its detail log (not a LoadGen performance "
                        f"run?)") from None


def _sha1(path: Path) -> str:
    return hashlib.sha1(inbound.read_bytes(path, inbound.LOG)).hexdigest()


def _spl(begin: datetime, end: datetime, watts: float, mark: str) -> str:
    """The analyzer's samples: a constant power, 1 per second (10 per window in a run under 10 s), from 2
    samples before the window to 2 after."""
    step = min(1.0, (end - begin).total_seconds() / 10) or 0.1
    lines = [f"# {LABEL}: constant {watts:f} W"]
    t = begin - timedelta(seconds=2 * step)
    while t <= end + timedelta(seconds=2 * step):
        lines.append(f"Time,{_stamp(t)},Watts,{watts:f},Volts,230.000000,Amps,{watts / 230 / 0.95:f},PF,0.950000,"
                     f"Mark,SIMULATED_{mark}")
        t += timedelta(seconds=step)
    return "\n".join(lines) + "\n"


def simulate(scenario_dir: Path, watts: float) -> Path:
    """`scenario_dir/power_session/` from its two latest complete performance runs (ranging, then testing)."""
    if watts <= 0:
        raise DataError(f"--watts {watts}: give the constant power to simulate, above 0 (e.g. 250)")
    runs = sorted((r for r in (scenario_dir / "performance").glob("run_*")
                   if all((r / n).is_file() for n in LOGS) and not r.name.endswith(".incomplete")),
                  key=lambda r: _window(r)[0])
    if len(runs) < 2:
        raise DataError(f"{scenario_dir}: {len(runs)} complete performance run(s); the power client runs the "
                        f"benchmark twice (ranging, then testing): make two `appliance run` performance runs")
    ranging_run, testing_run = runs[-2], runs[-1]
    session = datetime.now(UTC).strftime("%Y-%m-%d_%H-%M-%S")
    client_id, server_id = str(uuid.uuid4()), str(uuid.uuid4())
    windows = {"ranging": _window(ranging_run), "run_1": _window(testing_run)}
    out = scenario_dir / SESSION_FOLDER
    with staged_new_dir(out, f"the simulated power session {out}") as tmp:
        for name, run in (("ranging", ranging_run), ("run_1", testing_run)):
            for log in LOGS:
                copy_file(run / log, tmp / name / log)
            begin, end = windows[name]
            atomic_write_text(tmp / name / "spl.txt", _spl(begin, end, watts, f"{session}_{name}"))
        r0, r1 = windows["ranging"]
        t0, t1 = windows["run_1"]
        atomic_write_text(tmp / "power" / "ptd_logs.txt", "\n".join([
            LABEL,
            f"{_stamp(r0 - timedelta(seconds=3))}: Uncertainty checking for YokogawaSIMULATED is activated",
            f"{_stamp(r0 - timedelta(seconds=2))}: Go with mark '{session}_ranging'",
            f"{_stamp(r1 + timedelta(seconds=1))}: Completed test",
            f"{_stamp(t0 - timedelta(seconds=2))}: Go with mark '{session}_testing'",
            f"{_stamp(t1 + timedelta(seconds=1))}: Completed test"]) + "\n")
        for side in ("client", "server"):
            atomic_write_text(tmp / "power" / f"{side}.log", f"{LABEL}\n")
        results = {f"{run}/{n}": _sha1(tmp / run / n) for run in ("ranging", "run_1") for n in (*LOGS, "spl.txt")}

        def phases(begin: datetime, end: datetime) -> list[list[float]]:
            return [[t.timestamp(), 0.0] for t in (begin - timedelta(seconds=3), begin - timedelta(seconds=1),
                                                   end + timedelta(seconds=1), end + timedelta(seconds=2))]

        common = {
            "SIMULATED": LABEL, "version": "SIMULATED", "timezone": 0, "modules": {},
            "sources": {"harness/audit/submission/standin.py": _sha1(Path(__file__))},
            "messages": [{"cmd": "SIMULATED power client", "reply": "SIMULATED power server"}],
            "uuid": {"client": client_id, "server": server_id}, "session_name": session,
            "phases": {"ranging": phases(r0, r1), "testing": phases(t0, t1)},
        }
        atomic_write_json(tmp / "power" / "client.json", {**common, "results": results | {
            "power/client.log": _sha1(tmp / "power" / "client.log")}})
        atomic_write_json(tmp / "power" / "server.json", {**common, "results": results | {
            "power/server.log": _sha1(tmp / "power" / "server.log"),
            "power/ptd_logs.txt": _sha1(tmp / "power" / "ptd_logs.txt")},
            "ptd_messages": [{"cmd": "Identify", "reply": "SIMULATED,no analyzer,version=SIMULATED-0"}],
            "ptd_config": [{"device_type": "SIMULATED", "command": [], "channel": None}]})
    return out
