"""The disagreements with the official checker found on real trees (issue 42), decided from the rules at each
round's tag, on self-made trees of the same shape (tests/submission_fixtures.py): a `mobilenet` folder, a system
JSON with no results, a compliance performance run INVALID, a non-numeric accelerators_per_node."""

from __future__ import annotations

import json

import pytest

from harness.audit.submission.check import check_tree
from tests.submission_fixtures import make_tree, mllog, perf_values


@pytest.mark.parametrize("version", ["v4.1", "v5.1", "v6.1"])
def test_a_mobilenet_folder_is_read_as_resnet_as_every_round_guesses(tmp_path, version):
    make_tree(tmp_path, version, benchmarks={"mobilenet": ("Offline", "SingleStream", "MultiStream")})
    rep = check_tree(tmp_path, version)
    assert rep.ok, rep.problems


def test_a_system_json_without_results_is_a_warning_only(tmp_path):
    sub = make_tree(tmp_path, "v5.1")
    (sub / "systems" / "spare.json").write_text("{}")
    rep = check_tree(tmp_path, "v5.1")
    assert rep.ok, rep.problems
    assert any(n.startswith("warning: closed/OrgA/systems/spare.json: a system with no results") for n in rep.notes)


def test_a_compliance_performance_run_invalid_is_a_warning_the_main_run_a_problem(tmp_path):
    sub = make_tree(tmp_path, "v5.1")
    t01 = sub / "compliance" / "sys1" / "resnet50" / "Offline" / "TEST01" / "performance" / "run_1"
    (t01 / "mlperf_log_detail.txt").write_text(mllog({**perf_values("v5.1", "resnet", "Offline"),
                                                      "result_validity": "INVALID"}))
    rep = check_tree(tmp_path, "v5.1")
    assert rep.ok, rep.problems
    assert any(n.startswith("warning: ") and "TEST01" in n and "INVALID" in n for n in rep.notes)
    main = sub / "results" / "sys1" / "resnet50" / "Offline" / "performance" / "run_1" / "mlperf_log_detail.txt"
    main.write_text(mllog({**perf_values("v5.1", "resnet", "Offline"), "result_validity": "INVALID"}))
    assert [p for p in check_tree(tmp_path, "v5.1").problems if "LoadGen result is INVALID" in p]


@pytest.mark.parametrize(("version", "problems"), [("v6.1", 1), ("v5.1", 0)])
def test_accelerators_per_node_two_is_one_line_where_the_checker_multiplies_it(tmp_path, version, problems):
    sub = make_tree(tmp_path, version)
    path = sub / "systems" / "sys1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "accelerators_per_node": "two"}))
    rep = check_tree(tmp_path, version)
    assert len(rep.problems) == problems, rep.problems
    if problems:
        assert rep.problems[0].startswith("closed/OrgA/systems/sys1.json: accelerators_per_node 'two' is not")
