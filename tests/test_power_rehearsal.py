"""Issue 42's rehearsal: two real short `appliance run` performance runs (null backend), a SIMULATED power session
from them (harness/audit/submission/standin.py, a constant power), `submission build` laying it out, and
`submission check` checking everything and naming the power result simulated (a `synthetic:` finding)."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import appliance, appliance_subprocess
from test_submission_tree import shared_runs

from harness.audit.submission import standin
from harness.audit.submission.check import check_tree
from harness.core.errors import DataError

pytestmark = pytest.mark.slow


def test_simulated_power_session_built_and_checked(data_dir, tmp_path_factory, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), results)
    off = results / "box" / "resnet50" / "Offline"
    with pytest.raises(DataError, match="1 complete performance run"):
        standin.simulate(off, 250.0)
    done = appliance_subprocess("run", "-s", "Offline", "--mode", "performance", "--backend", "null", "--data-dir",
                                data_dir, "--results", results, "--duration-ms", 300, "--system", "box", "-q")
    assert done.returncode == 0, done.stderr
    session = standin.simulate(off, 250.0)
    written = [p for p in session.rglob("*") if p.is_file() and p.name not in standin.LOGS]
    assert written and all(b"SIMULATED" in p.read_bytes() for p in written)  # every file it wrote says so
    server = json.loads((session / "power" / "server.json").read_text())
    assert list(server["sources"]) == ["harness/audit/submission/standin.py"]  # no checksum it did not compute

    assert appliance("report", results, "-o", tmp_path / "report.html") == 0
    page = (tmp_path / "report.html").read_text()
    assert "MLPerf Power 250.000000 W, " in page and "samples/J (SIMULATED)" in page  # the testing run's row

    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "edge1", results, "-o", out) == 0
    perf = out / "closed" / "Org" / "results" / "edge1" / "resnet50" / "Offline" / "performance"
    assert sorted(p.name for p in (perf / "run_1").iterdir()) == sorted([*standin.LOGS, "spl.txt"])
    assert (perf / "appliance" / "manifest.json").is_file()
    rep = check_tree(out, "v6.1")
    [p] = rep.power
    assert p.status == "simulated" and p.metric == pytest.approx(250.0)
    assert any("power result is SIMULATED" in s for s in rep.synthetic)
    # the rest of the power result is checked and passes (the short runs' duration and sample count are problems)
    assert not [x for x in rep.problems if any(k in x for k in ("/ranging", "/power", "spl.txt"))], rep.problems
    (perf / "ranging" / "spl.txt").write_text("edited\n")  # and a real rule still applies to it
    assert any("ranging/spl.txt" in x for x in check_tree(out, "v6.1").problems)
