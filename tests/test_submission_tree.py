"""`appliance submission build`: a v6.1 tree from real short runs (null backend), inputs never touched."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import appliance, appliance_subprocess

from harness.audit.submission import tree
from harness.audit.submission.rounds import SYSTEM_REQUIRED
from harness.audit.submission.truncate import truncate_accuracy_log

SCENARIOS = ("Offline", "SingleStream", "MultiStream")


def make_runs(data_dir: Path, root: Path) -> Path:
    """One process per run, as a user runs them (LoadGen logs an error for a second config in one process)."""
    for scenario in SCENARIOS:
        for mode in ("performance", "accuracy"):
            done = appliance_subprocess("run", "-s", scenario, "--mode", mode, "--backend", "null", "--data-dir",
                                        data_dir, "--results", root, "--duration-ms", 300, "--system", "box", "-q")
            assert done.returncode == 0, done.stderr
    return root


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def add_compliance(scenario_dir: Path, verdict: str = "TEST PASS") -> None:
    """TEST01/TEST04 folders shaped like `appliance run --mode TEST0x` writes them."""
    perf = scenario_dir / "performance" / "run_1"
    for test in ("TEST01", "TEST04"):
        t = scenario_dir / test
        shutil.copytree(perf, t / "performance" / "run_1")
        (t / "performance" / "run_1" / "audit.config").write_text("# audit\n")
        (t / "verify_performance.txt").write_text(f"reference score = 1\ntest score = 1\n{verdict}\n")
    (scenario_dir / "TEST01" / "verify_accuracy.txt").write_text(f"{verdict}\n")
    (scenario_dir / "TEST01" / "accuracy").mkdir()
    shutil.copy(scenario_dir / "accuracy" / "mlperf_log_accuracy.json", scenario_dir / "TEST01" / "accuracy")


_SHARED: dict[str, Path] = {}


def shared_runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One set of short runs per test session, copied by each module that changes them."""
    if "runs" not in _SHARED:
        _SHARED["runs"] = make_runs(data_dir, tmp_path_factory.mktemp("shared-runs"))
    return _SHARED["runs"]


@pytest.fixture(scope="module")
def runs(data_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs") / "r"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), root)
    off = root / "box" / "resnet50" / "Offline"
    shutil.copytree(off / "performance" / "run_1", off / "performance" / "run_2")  # the latest complete run
    (off / "performance" / "run_2" / "mlperf_log_summary.txt").write_text("run 2\n")
    shutil.copytree(off / "performance" / "run_1", off / "performance" / "run_3.incomplete")
    (off / "performance" / "run_3.incomplete" / "INCOMPLETE.txt").write_text("interrupted\n")
    add_compliance(off)
    return root


def test_build_writes_the_v61_layout(runs, tmp_path, capsys):
    before = digests(runs)
    out = tmp_path / "sub"
    overrides = tmp_path / "sys.yaml"
    overrides.write_text("status: rdi\ncooling: air\nhost_network_card_count: 0\nsystem_type: edge\n")
    assert appliance("submission", "build", "--submitter", "Org", "--system", "edge1", "--system-overrides",
                     overrides, runs, "-o", out) == 0
    assert digests(runs) == before  # the inputs are only read
    printed = capsys.readouterr().out
    assert "not detectable here" in printed and "cooling" not in printed.split("not detectable here")[1]
    sub = out / "closed" / "Org"
    system = json.loads((sub / "systems" / "edge1.json").read_text())
    assert set(SYSTEM_REQUIRED) <= set(system) and len(SYSTEM_REQUIRED) == 35
    assert all(system[k] not in ("", None, 0) for k in SYSTEM_REQUIRED)
    assert system["status"] == "rdi" and system["cooling"] == "air" and system["host_network_card_count"] == "0"
    # null-backend runs inferred nothing: the system JSON says so (issue 26 item 11: it said "CPU-emulated card",
    # framework onnxruntime)
    assert system["accelerators_per_node"] == 1
    assert system["accelerator_model_name"] == "null card: no inference was done"
    assert system["framework"] == "none: null cards, no inference was done"
    assert "mlcommons-loadgen" in system["other_software_stack"]
    assert "SYNTHETIC" in system["sw_notes"]
    assert (sub / "src" / "resnet50" / "README.md").is_file()
    for scenario in SCENARIOS:
        d = sub / "results" / "edge1" / "resnet50" / scenario
        for name in ("README.md", "user.conf", "mlperf.conf", "measurements.json", "performance/run_1/manifest.json",
                     "performance/run_1/mlperf_log_summary.txt", "performance/run_1/mlperf_log_detail.txt",
                     "accuracy/accuracy.txt", "accuracy/mlperf_log_accuracy.json", "accuracy/mlperf_log_detail.txt",
                     "accuracy/mlperf_log_summary.txt"):
            assert (d / name).is_file(), f"{scenario}/{name}"
        m = json.loads((d / "measurements.json").read_text())
        assert all(m[k] for k in ("input_data_types", "retraining", "starting_weights_filename",
                                  "weight_data_types", "weight_transformations"))
        assert "SYNTHETIC" in m["starting_weights_filename"]
        full = runs / "box" / "resnet50" / scenario / "accuracy" / "mlperf_log_accuracy.json"
        lines = (d / "accuracy" / "accuracy.txt").read_text().splitlines()
        assert lines[0].startswith("accuracy=")
        assert lines[-1] == "hash=" + hashlib.sha256(full.read_bytes()).hexdigest()
        assert (d / "accuracy" / "mlperf_log_accuracy.json").stat().st_size <= 10240
    off = sub / "results" / "edge1" / "resnet50" / "Offline"
    assert (off / "performance" / "run_1" / "mlperf_log_summary.txt").read_text() == "run 2\n"
    assert not list(off.rglob("INCOMPLETE.txt"))
    assert {p.name for p in (off / "TEST01" / "performance" / "run_1").iterdir()} <= {
        "mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"}
    assert (off / "TEST01" / "appliance" / "manifest.json").is_file()
    assert (off / "TEST01" / "accuracy" / "accuracy.txt").read_text().startswith("hash=")
    assert (off / "TEST04" / "verify_performance.txt").read_text().endswith("TEST PASS\n")
    assert not list(out.parent.glob(".sub.*"))  # no staging folder left behind


def test_existing_output_is_never_overwritten(runs, tmp_path, capsys):
    out = tmp_path / "sub"
    out.mkdir()
    (out / "keep").write_text("mine")
    rc = appliance("submission", "build", "--submitter", "Org", "--system", "s", runs, "-o", out)
    err = capsys.readouterr().err
    assert rc == 2 and "already exists" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_bad_inputs_one_line_each_and_nothing_written(runs, tmp_path, capsys):
    partial = tmp_path / "partial"
    shutil.copytree(runs / "box" / "resnet50" / "Offline" / "performance",
                    partial / "box" / "resnet50" / "Offline" / "performance")
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = appliance("submission", "build", "--submitter", "Org", "--system", "s", partial, empty, "-o", tmp_path / "o")
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "o").exists()
    assert "Offline: no complete accuracy run" in err and f"{empty}: no <benchmark>/<Scenario>" in err
    assert not list(tmp_path.glob(".o.*"))


def test_truncation_is_the_official_one(tmp_path):
    src = tmp_path / "log.json"
    src.write_text("[\n" + ",\n".join(f'{{"seq_id": {i}, "qsl_idx": {i}, "data": "00AB"}}' for i in range(2000)))
    digest = truncate_accuracy_log(src, tmp_path / "t.json")
    data = src.read_bytes()
    assert digest == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "t.json").read_bytes() == data[:4096] + b"\n\n...\n\n" + data[-4096:]
    small = tmp_path / "small.json"
    small.write_text("[]")
    truncate_accuracy_log(small, tmp_path / "s.json")
    assert (tmp_path / "s.json").read_text() == "[]"


def test_two_builds_into_one_folder_one_wins(runs, tmp_path, capsys, monkeypatch):
    """Issue 35: two `submission build` at once into one -o ended `internal error: OSError: [Errno 39]
    Directory not empty`; the one that finishes second now says so in one line and removes its own tree."""
    out = tmp_path / "sub"
    real = tree._write_scenario

    def other_build_finishes_first(*args):
        if not out.exists():
            (out / "closed").mkdir(parents=True)
            (out / "closed" / "theirs").write_text("the other build's tree")
        real(*args)

    monkeypatch.setattr(tree, "_write_scenario", other_build_finishes_first)
    rc = appliance("submission", "build", "--submitter", "Org", "--system", "s", runs, "-o", out)
    err = capsys.readouterr().err
    assert rc == 2 and "appeared while this command was writing" in err and "internal error" not in err, err
    assert [p.name for p in out.rglob("*")] == ["closed", "theirs"] and sorted(tmp_path.iterdir()) == [out]
