"""`appliance submission check` on trees shaped like real published ones, for every round on record."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import appliance
from submission_fixtures import PYCOCO, accuracy_values, make_tree, mllog, perf_values

from harness.audit.submission.check import check_tree
from harness.audit.submission.rounds import ROUNDS
from harness.core.errors import ApplianceError


def digests(root: Path) -> dict[str, tuple[int, float]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("version", list(ROUNDS))
def test_each_round_accepts_its_own_tree_and_says_which_round(tmp_path, version):
    make_tree(tmp_path, version)
    report = check_tree(tmp_path)
    assert report.problems == [], report.problems
    assert report.version == version
    assert any(f"round {version} detected" in n for n in report.notes)


@pytest.mark.parametrize("version", ["v4.1", "v5.1"])
def test_real_variants_lowercase_multiline_retinanet_empty_optional_fields(tmp_path, version):
    make_tree(tmp_path, version, system_type="datacenter", benchmarks={"retinanet": ("Server", "Offline")},
              lowercase=True)
    report = check_tree(tmp_path)
    assert report.problems == [], report.problems
    acc = next(tmp_path.rglob("offline/accuracy/accuracy.txt")).read_text()
    assert acc.startswith("loading annotations") and acc.splitlines().index("mAP=37.572%") > 20


def test_lowercase_scenario_contents_are_checked(tmp_path):
    sub = make_tree(tmp_path, "v5.1", lowercase=True)
    detail = sub / "results" / "sys1" / "resnet50" / "singlestream" / "performance" / "run_1" / "mlperf_log_detail.txt"
    values = perf_values("v5.1", "resnet", "SingleStream")
    values["effective_schedule_rng_seed"] = 42
    detail.write_text(mllog(values))
    problems = check_tree(tmp_path).problems
    assert problems == [f"closed/OrgA/results/sys1/resnet50/singlestream/performance/run_1/mlperf_log_detail.txt: "
                        f"schedule_rng_seed is 42, v5.1 needs {ROUNDS['v5.1'].seeds['schedule_rng_seed']}"]


def test_accuracy_below_target_found_anywhere_in_a_multiline_file(tmp_path):
    sub = make_tree(tmp_path, "v5.1", system_type="edge", benchmarks={"retinanet": ("SingleStream", "MultiStream",
                                                                                    "Offline")})
    acc = sub / "results" / "sys1" / "retinanet" / "Offline" / "accuracy" / "accuracy.txt"
    acc.write_text(PYCOCO + "mAP=30.000%\n" + acc.read_text().splitlines()[-1] + "\n")
    problems = check_tree(tmp_path).problems
    assert len(problems) == 1 and "mAP 30.000% below the target 37.17" in problems[0]


def test_v6_benchmarks_and_system_types(tmp_path):
    make_tree(tmp_path / "a", "v6.1", benchmarks={"yolo-95": ("SingleStream", "MultiStream", "Offline")})
    report = check_tree(tmp_path / "a")
    assert report.problems == [], report.problems
    make_tree(tmp_path / "b", "v6.1", benchmarks={"retinanet": ("SingleStream", "MultiStream", "Offline")})
    assert any("'retinanet' is not a benchmark v6.1 defines" in p for p in check_tree(tmp_path / "b").problems)
    make_tree(tmp_path / "c", "v6.1", system_type="datacenter", benchmarks={"resnet50": ("Server", "Offline")})
    assert any("a datacenter system cannot enter resnet in v6.1" in p for p in check_tree(tmp_path / "c").problems)


@pytest.mark.parametrize(("fault", "official_fails"), [
    (None, False), ({"qsl_reported_total_count": None}, False),
    ({"effective_accuracy_sample_count": None}, True), ({"effective_accuracy_sample_count": 1000}, True)])
def test_accuracy_sample_count_read_as_the_official_checker_reads_it(tmp_path, fault, official_fails):
    """`effective_accuracy_sample_count` whenever the log has it, else `qsl_reported_total_count` (the official
    checker, v6.0 at 6d0cf9dc and master). Checked against it on the five real v6.0 yolo trees (Dell, GATEOverflow)
    with these faults planted: both pass the unmodified trees and the null qsl count, both fail the others."""
    sub = make_tree(tmp_path, "v6.0", benchmarks={"yolo-95": ("SingleStream", "MultiStream", "Offline")})
    values = {**accuracy_values("v6.0", "yolo-95", "Offline"), **(fault or {})}
    (sub / "results" / "sys1" / "yolo-95" / "Offline" / "accuracy" / "mlperf_log_detail.txt").write_text(mllog(values))
    problems = check_tree(tmp_path).problems
    assert bool(problems) == official_fails, problems
    if fault and fault.get("effective_accuracy_sample_count") == 1000:
        assert problems == ["closed/OrgA/results/sys1/yolo-95/Offline/accuracy/mlperf_log_detail.txt: accuracy run "
                            "covers 1000 samples (effective_accuracy_sample_count), the official dataset has 1525"]


def test_official_required_vs_optional_fields(tmp_path):
    sub = make_tree(tmp_path, "v6.0")
    path = sub / "systems" / "sys1.json"
    data = json.loads(path.read_text())
    assert data["hw_notes"] == "" and data["accelerator_frequency"] == ""  # optional: may stay empty
    data["cooling"] = ""
    del data["sw_notes"]
    path.write_text(json.dumps(data))
    problems = check_tree(tmp_path).problems
    assert problems == ["closed/OrgA/systems/sys1.json: missing keys: sw_notes",
                        "closed/OrgA/systems/sys1.json: empty values (a numeric 0 counts as empty; write \"0\"): "
                        "cooling"]


def test_pre_v6_layout_forced_as_v61_is_one_line(tmp_path):
    make_tree(tmp_path, "v5.1")
    problems = check_tree(tmp_path, "v6.1").problems
    assert len(problems) == 1 and "the pre-v6.0 layout" in problems[0]


def test_round_without_record_mixed_rounds_no_systems(tmp_path):
    sub = make_tree(tmp_path / "x", "v5.1")
    for detail in sub.rglob("performance/run_1/mlperf_log_detail.txt"):
        values = perf_values("v5.1", "resnet", "Offline")
        values.update(effective_qsl_rng_seed=1, effective_sample_index_rng_seed=2, effective_schedule_rng_seed=3)
        detail.write_text(mllog(values))
    report = check_tree(tmp_path / "x")
    assert len(report.problems) == 1 and "cannot tell the round" in report.problems[0] and not report.ok
    with pytest.raises(ApplianceError, match=r"round 'v3\.1' has no record"):
        check_tree(tmp_path / "x", "v3.1")

    make_tree(tmp_path / "m", "v5.0")
    make_tree(tmp_path / "m", "v5.1", submitter="OrgB")
    problems = check_tree(tmp_path / "m").problems
    assert len(problems) == 1 and "several rounds in one tree: v5.0" in problems[0]

    sub = make_tree(tmp_path / "n", "v6.1")
    shutil.rmtree(sub / "systems")
    problems = check_tree(tmp_path / "n").problems
    assert "closed/OrgA/systems: missing folder" in problems
    assert "closed/OrgA/systems/sys1.json: missing system description" in problems


def test_symlink_loop_huge_log_unreadable_file_one_line_each(tmp_path):
    sub = make_tree(tmp_path, "v6.1")
    (sub / "results" / "sys1" / "loop").symlink_to(sub / "results" / "sys1" / "loop")
    log = sub / "results" / "sys1" / "resnet50" / "Offline" / "accuracy" / "mlperf_log_accuracy.json"
    with open(log, "r+b") as f:  # sparse: 2 GB on paper, nothing on disk
        f.truncate(2 * 1024 ** 3)
    conf = sub / "results" / "sys1" / "resnet50" / "SingleStream" / "user.conf"
    before = digests(tmp_path)
    rc_before = None
    if os.geteuid() != 0:
        conf.chmod(0)
        rc_before = True
    report = check_tree(tmp_path)
    text = "\n".join(report.problems)
    assert "broken or looping symbolic links: closed/OrgA/results/sys1/loop" in text
    assert "files over 50 MB: closed/OrgA/results/sys1/resnet50/Offline/accuracy/mlperf_log_accuracy.json" in text
    assert "mlperf_log_accuracy.json: 2147483648 bytes, not truncated" in text
    if rc_before:
        conf.chmod(0o644)
    assert digests(tmp_path) == before


def test_unreadable_detail_log(tmp_path, monkeypatch):
    """A file that cannot be opened (EACCES even for root, via a folder in its place) is one line."""
    sub = make_tree(tmp_path, "v6.1")
    detail = sub / "results" / "sys1" / "resnet50" / "Offline" / "performance" / "run_1" / "mlperf_log_detail.txt"
    detail.unlink()
    detail.mkdir()
    (detail / "x").write_text("x")
    problems = check_tree(tmp_path, "v6.1").problems
    assert any(p.endswith("Offline/performance/run_1: missing mlperf_log_detail.txt") for p in problems), problems


def test_cli_exit_codes_and_json(tmp_path, capsys):
    make_tree(tmp_path, "v4.1", lowercase=True)
    assert appliance("submission", "check", tmp_path, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["version"] == "v4.1"
    assert appliance("submission", "check", tmp_path, "--version", "v6.1") == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("FAIL (1 problem(s)) v6.1")
    assert appliance("submission", "check", tmp_path, "--version", "v9.9") == 2
    assert "has no record here" in capsys.readouterr().err


def test_open_division_relaxations_inferred_offline_and_accuracy_below_target(tmp_path):
    """An open tree whose Offline result is inferred from a SingleStream run and whose accuracy is below the
    closed target (as real open submissions are): notes, not problems, as the official checker treats them."""
    sub = make_tree(tmp_path, "v5.1", division="open", lowercase=True)
    off = sub / "results" / "sys1" / "resnet50" / "offline"
    values = perf_values("v5.1", "resnet", "SingleStream")
    (off / "performance" / "run_1" / "mlperf_log_detail.txt").write_text(mllog(values))
    acc = off / "accuracy" / "accuracy.txt"
    acc.write_text(acc.read_text().replace("accuracy=76.014%", "accuracy=75.468%"))
    report = check_tree(tmp_path)
    assert report.problems == [], report.problems
    notes = "\n".join(report.notes)
    assert "the Offline result is inferred from a SingleStream run" in notes
    assert "below the closed-division target 75.695%; the open division accepts it" in notes
    make_tree(tmp_path / "c", "v5.1", lowercase=True)
    closed_off = tmp_path / "c" / "closed" / "OrgA" / "results" / "sys1" / "resnet50" / "offline" / "accuracy"
    (closed_off / "accuracy.txt").write_text(acc.read_text())
    assert any("accuracy 75.468% below the target" in p for p in check_tree(tmp_path / "c").problems)
