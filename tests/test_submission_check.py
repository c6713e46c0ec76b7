"""`appliance submission check`: real problems vs synthetic-data findings, on trees built from short runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import appliance
from test_submission_tree import SCENARIOS, add_compliance, digests, shared_runs

from harness.audit.submission.check import check_tree

FULL_LENGTH = {"effective_min_duration_ms": 600000, "effective_samples_per_query": 24576,
               "early_stopping_met": True, "result_validity": "VALID"}


def rewrite_detail(path: Path, **values) -> None:
    """Set LoadGen detail-log keys, as a full-length run would have logged them."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG"):
            rec = json.loads(line[len(":::MLLOG"):])
            if rec["key"] in values:
                rec["value"] = values[rec["key"]]
                line = ":::MLLOG " + json.dumps(rec)
        out.append(line)
    path.write_text("\n".join(out) + "\n")


@pytest.fixture(scope="module")
def short_tree(data_dir, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("check")
    runs = base / "runs"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), runs)
    for scenario in SCENARIOS:
        add_compliance(runs / "box" / "resnet50" / scenario)
    assert appliance("submission", "build", "--submitter", "Org", "--system", "edge1", runs, "-o", base / "tree") == 0
    return base / "tree"


@pytest.fixture
def full_tree(short_tree, tmp_path) -> Path:
    """The short-run tree with its performance logs rewritten to full-length values."""
    tree = tmp_path / "tree"
    shutil.copytree(short_tree, tree)
    for detail in (tree / "closed").rglob("performance/run_1/mlperf_log_detail.txt"):
        rewrite_detail(detail, **FULL_LENGTH)
    return tree


def test_short_runs_are_real_problems(short_tree, capsys):
    rc = appliance("submission", "check", short_tree)
    out = capsys.readouterr().out
    assert rc == 1
    problems = [line for line in out.splitlines() if line.startswith("problem:")]
    for scenario in SCENARIOS:
        assert any(f"{scenario}/performance/run_1/" in p and "effective_min_duration_ms 300 < 600000" in p
                   for p in problems), scenario
    assert not any("synthetic" in p for p in problems)
    assert "accuracy run covers 48 samples (effective_accuracy_sample_count), the official dataset has 50000" in out
    assert out.splitlines()[-1].startswith("FAIL (")


def test_full_length_tree_passes_with_only_synthetic_findings(full_tree, capsys):
    before = digests(full_tree)
    assert appliance("submission", "check", full_tree, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["problems"] == [] and report["version"] == "v6.1"
    syn = report["synthetic"]
    assert any("below the target 75.695%" in s and "synthetic weights" in s for s in syn)
    assert any("performance_sample_count 48 < 1024" in s and "synthetic data" in s for s in syn)
    assert any("official dataset has 50000" in s for s in syn)
    assert digests(full_tree) == before


def test_bad_trees_one_line_per_problem_tree_untouched(full_tree):
    sub = full_tree / "closed" / "Org"
    system_file = sub / "systems" / "edge1.json"
    system = json.loads(system_file.read_text())
    del system["cooling"]
    system["host_network_card_count"] = 0
    system_file.write_text(json.dumps(system))
    off = sub / "results" / "edge1" / "resnet50" / "Offline"
    rewrite_detail(off / "performance" / "run_1" / "mlperf_log_detail.txt", effective_qsl_rng_seed=1,
                   effective_sample_index_rng_seed=2, effective_schedule_rng_seed=3)
    (off / "measurements.json").write_text(json.dumps({"retraining": "No"}))
    (off / "TEST04" / "verify_performance.txt").write_text("TEST FAIL\n")
    (sub / "results" / "edge1" / "resnet50" / "SingleStream" / "accuracy" / "accuracy.txt").write_text("accuracy=1%\n")
    shutil.rmtree(sub / "results" / "edge1" / "resnet50" / "MultiStream" / "TEST01")
    before = digests(full_tree)
    report = check_tree(full_tree)
    assert digests(full_tree) == before
    text = "\n".join(report.problems)
    assert "missing keys: cooling" in text
    assert "empty values" in text and "host_network_card_count" in text
    assert "results from another round" in text
    assert "measurements.json: missing or empty: input_data_types" in text
    assert "TEST04/verify_performance.txt: no TEST PASS line" in text
    assert "no `hash=" in text
    assert "MultiStream/TEST01: missing compliance test TEST01" in text
    assert len(report.problems) == 7, report.problems


def test_not_a_tree(tmp_path, capsys):
    assert appliance("submission", "check", tmp_path / "nope") == 2
    assert "is not a folder" in capsys.readouterr().err
    assert appliance("submission", "check", tmp_path) == 1
    assert "no closed/ or open/ folder" in capsys.readouterr().out
