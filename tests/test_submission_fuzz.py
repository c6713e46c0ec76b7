"""No value crashes `submission check`: values of real-shaped logs and JSONs mutated by hypothesis.

Each mutation puts a value the round cannot accept (null, a string, a list, a truncated file, …) into one
place of an otherwise accepted tree: the check must end normally and name the file in a problem line.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submission_fixtures import make_tree

from harness.audit.submission.check import check_tree
from harness.audit.submission.rounds import SYSTEM_MEANINGFUL

JSON_SCALARS = st.none() | st.booleans() | st.text(max_size=12) | st.floats(allow_nan=False).filter(
    lambda f: not f.is_integer())
JSON_ANY = st.recursive(JSON_SCALARS | st.integers(), lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
NOT_A_NUMBER = JSON_ANY.filter(lambda v: isinstance(v, bool) or not isinstance(v, int | float))
INT_KEYS = ("effective_min_duration_ms", "effective_performance_sample_count", "effective_samples_per_query",
            "effective_min_query_count", "effective_qsl_rng_seed", "effective_sample_index_rng_seed",
            "effective_schedule_rng_seed")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", params=["v5.1", "v6.1"])
def base(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    make_tree(root, request.param, lowercase=request.param == "v5.1")
    assert check_tree(root).problems == []
    return root


def _offline(root: Path) -> Path:
    return next(p for p in (root / "closed" / "OrgA" / "results" / "sys1" / "resnet50").iterdir()
                if p.name.lower() == "offline")


def _set_detail(path: Path, key: str, value: object) -> None:
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line[len(":::MLLOG"):])
        if rec["key"] == key:
            rec["value"] = value
        out.append(":::MLLOG " + json.dumps(rec))
    path.write_text("\n".join(out) + "\n")


def _check_mutated(base: Path, mutate, expect_in: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        shutil.copytree(base, root, symlinks=True)
        mutate(root)
        report = check_tree(root)  # never raises
        assert report.problems, "mutation went unnoticed"
        assert any(expect_in in p for p in report.problems), report.problems


@SETTINGS
@given(key=st.sampled_from(INT_KEYS), value=NOT_A_NUMBER)
def test_detail_integer_keys(base, key, value):
    def mutate(root: Path) -> None:
        _set_detail(_offline(root) / "performance" / "run_1" / "mlperf_log_detail.txt", key, value)
    _check_mutated(base, mutate, "performance/run_1/mlperf_log_detail.txt")


@SETTINGS
@given(key=st.sampled_from(("result_validity", "effective_scenario", "result_samples_per_second")),
       value=JSON_ANY.filter(lambda v: v not in ("VALID", "Offline") and (isinstance(v, bool)
                                                                          or not isinstance(v, int | float))))
def test_detail_text_and_metric_keys(base, key, value):
    def mutate(root: Path) -> None:
        _set_detail(_offline(root) / "performance" / "run_1" / "mlperf_log_detail.txt", key, value)
    _check_mutated(base, mutate, "performance/run_1/mlperf_log_detail.txt")


@SETTINGS
@given(key=st.sampled_from(SYSTEM_MEANINGFUL), value=st.sampled_from([None, "", 0, [], {}, False]))
def test_system_json_meaningful_fields(base, key, value):
    def mutate(root: Path) -> None:
        path = root / "closed" / "OrgA" / "systems" / "sys1.json"
        data = json.loads(path.read_text())
        data[key] = value
        path.write_text(json.dumps(data))
    _check_mutated(base, mutate, "systems/sys1.json")


@SETTINGS
@given(key=st.sampled_from(("status", "system_type", "division", "submitter")),
       value=JSON_ANY.filter(lambda v: not isinstance(v, str) or v.lower() not in (
           "available", "preview", "rdi", "edge", "closed", "orga")))
def test_system_json_checked_values(base, key, value):
    def mutate(root: Path) -> None:
        path = root / "closed" / "OrgA" / "systems" / "sys1.json"
        data = json.loads(path.read_text())
        data[key] = value
        path.write_text(json.dumps(data))
    _check_mutated(base, mutate, "systems/sys1.json")


@SETTINGS
@given(which=st.sampled_from(("detail", "system", "accuracy", "summary_json")), cut=st.floats(0, 1))
def test_truncated_files(base, which, cut):
    def mutate(root: Path) -> None:
        off = _offline(root)
        path, keep_tail = {
            "detail": (off / "performance" / "run_1" / "mlperf_log_detail.txt", 5),
            "system": (root / "closed" / "OrgA" / "systems" / "sys1.json", 2),
            "accuracy": (off / "accuracy" / "accuracy.txt", 2),
            "summary_json": (off / "accuracy" / "mlperf_log_detail.txt", 5),
        }[which]
        data = path.read_bytes()
        path.write_bytes(data[:int(cut * (len(data) - keep_tail))])
    expect = {"detail": "performance/run_1/mlperf_log_detail.txt", "system": "systems/sys1.json",
              "accuracy": "accuracy/accuracy.txt", "summary_json": "accuracy/mlperf_log_detail.txt"}[which]
    _check_mutated(base, mutate, expect)


@SETTINGS
@given(garbage=st.binary(max_size=200))
def test_garbage_lines_never_crash(base, garbage):
    def mutate(root: Path) -> None:
        path = _offline(root) / "performance" / "run_1" / "mlperf_log_detail.txt"
        path.write_bytes(path.read_bytes() + b":::MLLOG " + garbage + b"\n" + garbage)
        sys_json = root / "closed" / "OrgA" / "systems" / "sys1.json"
        sys_json.write_bytes(garbage)
    _check_mutated(base, mutate, "systems/sys1.json")
