"""`submission build --fleet`: several systems in one tree from RESULTS/<system>/<node>/ (issue 44), from real short
runs on simulated cards whose speed is their profile's: one node of a system at half its rate."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import STEADY_PROFILE, appliance, appliance_subprocess
from test_submission_tree import digests

from harness.audit.submission.check import check_tree

pytestmark = pytest.mark.slow  # LoadGen runs

# The same card model (what a system's hardware is) at half the rate: a node whose card runs slow.
HALF_PROFILE = STEADY_PROFILE.replace("name: steady-10ms", "name: steady-10ms-half").replace(
    "resnet50: {samples_per_second: 800", "resnet50: {samples_per_second: 400")


def node_runs(data_dir: Path, results: Path, profile: Path) -> Path:
    """A node's results folder: one Offline performance run and one accuracy run, as the fleet task makes them."""
    for mode in ("performance", "accuracy"):
        done = appliance_subprocess("run", "-s", "Offline", "--mode", mode, "--cards", f"simulate:{profile}:1",
                                    "--data-dir", data_dir, "--results", results, "--duration-ms", 300,
                                    "--target-qps", 1000, "-q")
        assert done.returncode == 0, done.stderr
    return results


@pytest.fixture(scope="module")
def nodes(data_dir, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fleet-nodes")
    (root / "steady.yaml").write_text(STEADY_PROFILE)
    (root / "half.yaml").write_text(HALF_PROFILE)
    return {"fast": node_runs(data_dir, root / "fast", root / "steady.yaml"),
            "slow": node_runs(data_dir, root / "slow", root / "half.yaml")}


def fleet(root: Path, nodes: dict[str, Path], layout: dict[str, str]) -> Path:
    """RESULTS/<system>/<node>/ from `layout` ({"alpha/a1": "fast", "beta/b1": "slow", "gamma/g1": "empty"})."""
    for where, kind in layout.items():
        if kind == "empty":
            (root / where).mkdir(parents=True)
        else:
            shutil.copytree(nodes[kind], root / where)
    return root


def _problems(tree: Path, system: str) -> list[str]:
    return sorted(re.sub(rf"results/{system}/", "results/SYS/", p) for p in check_tree(tree).problems)


def test_three_systems_in_one_tree(nodes, tmp_path, capsys):
    results = fleet(tmp_path / "RESULTS", nodes, {"alpha/a1": "fast", "alpha/a2": "fast", "alpha/a3": "slow",
                                                  "beta/b1": "fast", "beta/b2": "empty", "gamma/g1": "slow"})
    shutil.rmtree(next((results / "beta" / "b1").glob("*/resnet50/Offline/accuracy")))
    shutil.copytree(nodes["slow"], results / "beta" / "b3")
    before = digests(results)
    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--fleet", results, "-o", out) == 0
    printed = capsys.readouterr().out
    assert digests(results) == before  # the inputs are only read
    sub = out / "closed" / "Org"
    assert sorted(p.name for p in (sub / "systems").iterdir()) == ["alpha.json", "beta.json", "gamma.json"]
    assert sorted(p.name for p in (sub / "results").iterdir()) == ["alpha", "beta", "gamma"]
    for system in ("alpha", "beta", "gamma"):
        assert json.loads((sub / "systems" / f"{system}.json").read_text())["system_name"] == system
    # alpha's result is a full-rate node's (the median of three), never the slow unit's
    perf = json.loads((sub / "results" / "alpha" / "resnet50" / "Offline" / "performance" / "run_1"
                       / "manifest.json").read_text())
    assert perf["cards"][0]["profile"] == "steady-10ms"
    assert "system alpha: node a1 (the median of 3 complete node(s))" in printed
    assert "node beta/b1: no complete run, not taken (resnet50/Offline: no complete accuracy run" in printed
    assert "node beta/b2: no complete run, not taken" in printed and "system beta: node b3" in printed
    # the checker finds in each system of the fleet's tree what it finds in a one-system tree of the same runs
    one = tmp_path / "one"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "alpha", results / "alpha" / "a1",
                     "-o", one) == 0
    single = _problems(one, "alpha")
    assert single and all(("min_duration" in p or "samples_per_query" in p or "TEST0" in p or "scenarios" in p)
                          for p in single), single  # short runs: no full-length run, no compliance tests
    together = check_tree(out).problems
    for system in ("alpha", "beta", "gamma"):
        assert sorted(re.sub(rf"results/{system}/", "results/SYS/", p) for p in together
                      if f"results/{system}/" in p) == single
    assert len(together) == 3 * len(single)  # nothing else: no problem of the tree as a whole


def test_same_system_different_hardware_refused(nodes, tmp_path, capsys):
    results = fleet(tmp_path / "RESULTS", nodes, {"alpha/a1": "fast", "alpha/a2": "fast"})
    for m in (results / "alpha" / "a2").rglob("manifest.json"):
        data = json.loads(m.read_text())
        data["host"]["cpu_model"] = "AMD EPYC 9654 96-Core Processor"
        m.write_text(json.dumps(data))
    assert appliance("submission", "build", "--submitter", "Org", "--fleet", results, "-o", tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "system alpha: its nodes differ in detected hardware (CPU model:" in err
    assert "'AMD EPYC 9654 96-Core Processor' on a2" in err and "on a1" in err
    assert not (tmp_path / "o").exists()


def test_nothing_to_build_is_one_line(nodes, tmp_path, capsys):
    empty = tmp_path / "RESULTS"
    empty.mkdir()
    assert appliance("submission", "build", "--submitter", "Org", "--fleet", empty, "-o", tmp_path / "o") == 2
    assert "no system folders in it" in capsys.readouterr().err
    fleet(empty, nodes, {"alpha/a1": "empty", "beta/b1": "empty"})
    assert appliance("submission", "build", "--submitter", "Org", "--fleet", empty, "-o", tmp_path / "o") == 2
    captured = capsys.readouterr()
    assert "no node of any system has a complete run" in captured.err and len(captured.err.splitlines()) == 1
    assert "node alpha/a1: no complete run" in captured.out and not (tmp_path / "o").exists()
    assert appliance("submission", "build", "--submitter", "Org", "--fleet", empty, "--system", "x",
                     "-o", tmp_path / "o") == 2
    assert "--fleet takes the whole RESULTS folder" in capsys.readouterr().err


def test_fleet_report_flags_the_slow_node_names_failed_and_missing(nodes, tmp_path, capsys):
    results = fleet(tmp_path / "RESULTS", nodes, {"alpha/a1": "fast", "alpha/a2": "fast", "alpha/a3": "slow",
                                                  "beta/b1": "slow", "beta/b2": "empty"})
    node_map = tmp_path / "nodes.txt"
    node_map.write_text("# node system\na1 alpha\na2 alpha\na3 alpha\na4 alpha\nb1 beta\nb2 beta\n")
    html = tmp_path / "fleet.html"
    assert appliance("fleet", results, "--node-map", node_map, "--threshold", "0.8", "-o", html, "--json") == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [(f["system"], f["node"]) for f in report["flagged"]] == [("alpha", "a3")]
    assert 0.3 < report["flagged"][0]["ratio"] < 0.7  # the profile's half rate, whatever the machine's load
    differs = report["flagged"][0]["differs"]
    assert differs["card rate (samples/s; a simulated card's clock)"] == "1 x 400.0 (the others: 1 x 800.0)"
    assert list(report["failed"]) == ["beta/b2"] and report["missing"] == ["alpha/a4"]
    beta = next(r for r in report["rows"] if r["system"] == "beta")
    assert [n["ratio"] for n in beta["nodes"]] == [1.0]  # a slow card alone in its system is its own median
    assert "1 flagged, 1 failed, 1 missing" in captured.err and len(captured.err.splitlines()) == 1
    page = html.read_text()
    assert page.count("<tr class=slow>") == 1 and page.count("data:image/png;base64,") == 2
    assert appliance("fleet", results / "beta" / "b2") == 2  # not a fleet's RESULTS: one line
    assert "no node folders in it" in capsys.readouterr().err


def test_fleet_report_names_a_gpu_clock_difference(nodes, tmp_path, capsys):
    """A node whose GPUs run at lowered application clocks (node_facts' gpu_clocks, as nvidia-smi gives it; no GPU
    here, so the fact is written into the copied manifests): the flagged node's clocks are named."""
    results = fleet(tmp_path / "RESULTS", nodes, {"alpha/a1": "fast", "alpha/a2": "fast", "alpha/a3": "slow"})
    for node, clocks in (("a1", 1755), ("a2", 1755), ("a3", 1410)):
        for path in (results / "alpha" / node).rglob("manifest.json"):
            manifest = json.loads(path.read_text())
            manifest["host"]["node"]["gpu_clocks"] = (f"8 x applications {clocks}/2619 MHz (graphics/memory), "
                                                      "max SM 1980 MHz")
            path.write_text(json.dumps(manifest))
    assert appliance("fleet", results, "--threshold", "0.8", "--json") == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["system"], f["node"]) for f in report["flagged"]] == [("alpha", "a3")]
    assert report["flagged"][0]["differs"]["GPU clocks (nvidia-smi)"] == (
        "8 x applications 1410/2619 MHz (graphics/memory), max SM 1980 MHz (the others: 8 x applications 1755/2619 "
        "MHz (graphics/memory), max SM 1980 MHz)")
