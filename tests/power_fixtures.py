"""SIMULATED MLPerf Power files for tests: what the power client and server would leave in a scenario's
`performance/` folder (ranging/, run_1/ with spl.txt, power/), written here from the shapes of the published
trees (nobody's logs copied). Every file says SIMULATED; the analyzer's samples are a constant power.

`add_power(scenario_dir, version, scenario)` turns a scenario folder of `make_tree` into a power result the
round's checker accepts; the tests then break one thing at a time.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.audit.submission.rounds import ROUNDS
from tests.submission_fixtures import mllog, perf_values

SESSION = "2026-01-05_10-00-00"
CLIENT_UUID, SERVER_UUID = "5a1c0e2b-0000-4000-8000-00000000c11e", "5a1c0e2b-0000-4000-8000-0000000005e7"
T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
WATTS = 250.0
QUERIES = 600
RUN_S = 1800  # each LoadGen run's power window (the checker looks at PTD warnings only 800 s inside it)


def _ts(t: datetime) -> str:
    return t.strftime("%m-%d-%Y %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def at_testing(seconds: float) -> str:
    """A PTD log timestamp `seconds` into the testing run's power window."""
    return _ts(T0 + timedelta(seconds=RUN_S + 90 + seconds))


def _run(d: Path, version: str, scenario: str, begin: datetime, watts: float, mark: str) -> None:
    values = {**perf_values(version, "resnet", scenario), "power_begin": _ts(begin),
              "power_end": _ts(begin + timedelta(seconds=RUN_S)), "result_query_count": QUERIES}
    d.mkdir(parents=True, exist_ok=True)
    (d / "mlperf_log_detail.txt").write_text(mllog(values))
    (d / "mlperf_log_summary.txt").write_text("SIMULATED\nMLPerf Results Summary\nResult is : VALID\n")
    lines = [f"Time,{_ts(begin + timedelta(seconds=s - 5))},Watts,{watts:f},Volts,230.000000,Amps,1.100000,"
             f"PF,0.950000,Mark,{mark}" for s in range(RUN_S + 10)]
    (d / "spl.txt").write_text("\n".join(lines) + "\n")


def _sha1(p: Path) -> str:
    return hashlib.sha1(p.read_bytes()).hexdigest()


def add_power(scen: Path, version: str, scenario: str, ranging_watts: float = WATTS) -> Path:
    """SIMULATED ranging/, run_1/ and power/ under `scen`/performance; returns that performance folder."""
    rnd = ROUNDS[version]
    perf = scen / "performance"
    r0, t0 = T0 + timedelta(seconds=30), T0 + timedelta(seconds=RUN_S + 90)
    _run(perf / "ranging", version, scenario, r0, ranging_watts, f"{SESSION}_ranging")
    _run(perf / "run_1", version, scenario, t0, WATTS, f"{SESSION}_testing")
    power = perf / "power"
    power.mkdir(parents=True, exist_ok=True)
    ptd = [
        "SIMULATED PTDaemon log (tests/power_fixtures.py)",
        f"{_ts(T0)}: Uncertainty checking for YokogawaWT310 is activated",
        f"{_ts(r0 - timedelta(seconds=2))}: Go with mark '{SESSION}_ranging'",
        f"{_ts(r0 - timedelta(seconds=1))}: ERROR: Can't evaluate uncertainty of this sample!",
        f"{_ts(r0 + timedelta(seconds=RUN_S + 5))}: Completed test",
        f"{_ts(t0 - timedelta(seconds=2))}: Go with mark '{SESSION}_testing'",
        f"{_ts(t0 + timedelta(seconds=RUN_S + 5))}: Completed test",
    ]
    (power / "ptd_logs.txt").write_text("\n".join(ptd) + "\n")
    (power / "client.log").write_text("SIMULATED power client log\n")
    (power / "server.log").write_text("SIMULATED power server log\n")

    def phases(start: datetime) -> list[list[float]]:
        return [[(start + timedelta(seconds=s)).timestamp(), 1000.0 + s] for s in (-20, -10, RUN_S + 20, RUN_S + 30)]

    hashed = {f"{run}/{n}": _sha1(perf / run / n) for run in ("ranging", "run_1")
              for n in ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt")}
    messages = [{"cmd": "mlcommons/power client v3", "reply": "mlcommons/power server v3"},
                {"cmd": "time", "reply": "1767607200.0"},
                {"cmd": f"new,,{CLIENT_UUID}", "reply": f"OK {SESSION},{SERVER_UUID}"}]
    version_ptd = rnd.power.ptd_versions[0]
    ptd_messages = [
        {"cmd": "Hello", "reply": "Hello, PTDaemon here!"},
        {"cmd": "Identify", "reply": f"YokogawaWT310,1000,1,1,1,1,0,0,1,version={version_ptd}-0000,SIMULATED"},
        {"cmd": "RR", "reply": "Ranges,0,10.000000,0,300.000000"},
        {"cmd": "SR,V,Auto", "reply": "Range V changed"}, {"cmd": "SR,A,Auto", "reply": "Range A changed"},
        *([{"cmd": "SR,A,Auto", "reply": "Range A changed"}] if 4 in rnd.power.amps_range_commands else []),
        {"cmd": f"Go,1000,0,{SESSION}_ranging", "reply": GO},
        {"cmd": "Stop", "reply": "Stopping untimed measurement"},
        {"cmd": "SR,V,300.000000", "reply": "Range V changed"}, {"cmd": "SR,A,10.000000", "reply": "Range A changed"},
        {"cmd": f"Go,1000,0,{SESSION}_testing", "reply": GO},
        {"cmd": "Stop", "reply": "Stopping untimed measurement"},
        {"cmd": "SR,V,300.000000", "reply": "Range V changed"}, {"cmd": "SR,A,10.000000", "reply": "Range A changed"},
        {"cmd": "Stop", "reply": "Error: no measurement to stop"},
    ]
    config: Any = {"command": ["ptd", "-p", "8888", "49", "/dev/ttyUSB0"], "device_type": 49, "channel": None}
    common = {"version": "1.0", "timezone": 0, "modules": {}, "sources": dict(rnd.power.sources),
              "messages": messages, "uuid": {"client": CLIENT_UUID, "server": SERVER_UUID},
              "session_name": SESSION, "phases": {"ranging": phases(r0), "testing": phases(t0)},
              "fixture": "SIMULATED: written by tests/power_fixtures.py, not by the MLCommons power client or server"}
    client = {**common, "results": {**hashed, "power/client.log": _sha1(power / "client.log")}}
    server = {**common, "results": {**hashed, "power/ptd_logs.txt": _sha1(power / "ptd_logs.txt"),
                                    "power/server.log": _sha1(power / "server.log")},
              "ptd_messages": ptd_messages, "ptd_config": [config] if rnd.power.ptd_config_list else config}
    (power / "client.json").write_text(json.dumps(client, indent=1))
    (power / "server.json").write_text(json.dumps(server, indent=1))
    if rnd.layout == "separate":
        meas = scen.parents[3] / "measurements" / scen.relative_to(scen.parents[2])
        (meas / "analyzer_table.md").write_text("SIMULATED analyzer: YokogawaWT310\n")
        (meas / "power_settings.md").write_text("SIMULATED power settings\n")
    return perf


GO = "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"


def rehash(perf: Path, name: str) -> None:
    """Record `name`'s new sha1 in both session records (a fault planted *before* the session was recorded)."""
    digest = _sha1(perf / name)
    for rec in ("client.json", "server.json"):
        data = json.loads((perf / "power" / rec).read_text())
        if name in data["results"] or rec == "server.json":
            data["results"][name] = digest
        (perf / "power" / rec).write_text(json.dumps(data, indent=1))
