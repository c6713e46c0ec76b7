"""The fleet on a real SLURM (issue 44): compose/slurm/submit.sh submits the job array (one task per node, six
slurmd on this machine, each its own node name) and the collect job; three systems of simulated cards, one node
of alpha at half its card's rate, one task of beta cancelled with scancel mid-run.

Simulated cards make the speeds the profiles' (a 400 ms batch; the slow node's 800 ms), so the verdict is a
ratio with a wide margin (about 0.5 against a 0.8 threshold), not the busy machine's timing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import cluster, missing
from test_submission_tree import digests

from harness.audit.submission.check import check_tree

pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "compose" / "slurm"
CARD = """version: 1
name: {name}
model: fleet test card
source: tests
input_dtype: uint8
benchmarks:
  resnet50: {{samples_per_second: {rate}, batch: {batch}}}
"""
NODES = {"a1": ("alpha", "steady"), "a2": ("alpha", "steady"), "a3": ("alpha", "half"),
         "b1": ("beta", "steady"), "b2": ("beta", "crawl"), "c1": ("gamma", "steady")}
RUN_ARGS = "--duration-ms 1000 --target-qps 40"
SHORT_RUN = ("min_duration", "samples_per_query", "TEST01", "TEST04", "needs scenarios")


def env(tmp: Path, results: Path, data_dir: Path, node_map: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "RESULTS": str(results), "DATA": str(data_dir), "NODE_MAP": str(node_map), "SUBMITTER": "Org",
            "APPLIANCE_RUN_ARGS": RUN_ARGS, "FLEET_THRESHOLD": "0.8", "COLLECT_DIR": str(tmp / "collect"),
            "FLEET_DIR": str(SLURM)}


@pytest.fixture(scope="module")
def fleet_run(data_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    for name, rate, batch in (("steady", 40, 16), ("half", 20, 16), ("crawl", 2, 1)):
        (tmp / f"{name}.yaml").write_text(CARD.format(name=f"fleet-{name}", rate=rate, batch=batch))
    node_map = tmp / "nodes.txt"
    node_map.write_text("# node system cards\n" + "".join(f"{n} {s} simulate:{tmp / p}.yaml:1\n"
                                                          for n, (s, p) in NODES.items()))
    results = tmp / "RESULTS"
    with cluster(tmp / "slurm", list(NODES)) as c:
        c.env.update(env(tmp, results, data_dir, node_map))
        done = c.run(str(SLURM / "submit.sh"), "-D", str(tmp))
        collect = re.findall(r"job (\d+)", done.stdout)[1]
        # b2's card takes 22 s for the run's 44 samples: cancel its task once LoadGen runs (its detail log begun
        # in the run's staging folder; cancelled before, the run keeps nothing, as LoadGen had not started)
        perf = results / "beta" / "b2"
        c.wait_until("b2's LoadGen started", lambda: any(
            perf.glob("*/resnet50/Offline/performance/.run_1.staging-*/mlperf_log_detail.txt")))
        task = next(line.split()[0] for line in c.jobs() if line.endswith(" b2"))
        c.run("scancel", task)
        c.wait_until("the collect job done", lambda: not any(line.startswith(collect) for line in c.jobs()),
                     timeout=110)
        out = (tmp / f"appliance-fleet-collect-{collect}.out").read_text()
    return tmp, results, out, env(tmp, results, data_dir, node_map)


def test_the_fleet_built_the_slow_node_flagged_the_cancelled_one_named(fleet_run):
    tmp, results, collect_log, _ = fleet_run
    sub = tmp / "collect" / "submission" / "closed" / "Org"
    assert sorted(p.name for p in (sub / "systems").iterdir()) == ["alpha.json", "beta.json", "gamma.json"], \
        collect_log
    # submission check: nothing but what short runs and synthetic data cause (no full-length runs in a test)
    problems = check_tree(tmp / "collect" / "submission").problems
    assert problems and all(any(k in p for k in SHORT_RUN) for p in problems), problems
    report = json.loads((tmp / "collect" / "fleet.json").read_text())
    flagged = [(f["system"], f["node"]) for f in report["flagged"]]
    assert flagged == [("alpha", "a3")], report
    differs = report["flagged"][0]["differs"]
    assert differs["card rate (samples/s; a simulated card's clock)"] == "1 x 20.0 (the others: 1 x 40.0)"
    assert 0.3 < report["flagged"][0]["ratio"] < 0.7
    assert list(report["failed"]) == ["beta/b2"] and report["missing"] == []
    assert "failed: beta/b2: no complete run" in collect_log or "node beta/b2: no complete run" in collect_log
    # the cancelled run: kept unfinished, never taken (beta's result is b1's)
    runs = sorted(p.name for p in (results / "beta" / "b2").glob("*/resnet50/Offline/performance/*"))
    assert runs == ["run_1.incomplete"], runs
    beta = json.loads((sub / "results" / "beta" / "resnet50" / "Offline" / "performance" / "run_1"
                       / "manifest.json").read_text())
    assert beta["cards"][0]["profile"] == "fleet-steady"
    assert (tmp / "collect" / "fleet.html").read_text().count("<tr class=slow>") == 1


def test_the_array_again_overwrites_nothing(fleet_run):
    """One node's task again into the same RESULTS (the task script as SLURM runs it): a run_2 beside run_1."""
    _, results, _, e = fleet_run
    before = digests(results / "gamma")
    done = subprocess.run(["bash", str(SLURM / "fleet-task.sh")], env={**e, "FLEET_NODE": "c1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    after = digests(results / "gamma")
    assert {k: after[k] for k in before} == before
    new = set(after) - set(before)
    assert any("/performance/run_2/" in k for k in new) and any("/accuracy_" in k for k in new), sorted(new)


def test_collect_with_no_results_is_one_line(tmp_path):
    (tmp_path / "RESULTS").mkdir()
    e = {**os.environ, "RESULTS": str(tmp_path / "RESULTS"), "SUBMITTER": "Org", "FLEET_DIR": str(SLURM),
         "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(SLURM / "collect.sh")], env=e, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "collect: no results in" in done.stderr, done.stderr
