"""Issue 41, fields inside documents: a run's manifest and detail log read field by field, so a wrong kind, a
non-finite or endless number, or a list of a million CPUs deep inside them is one line naming the file and the
field, never an internal error, a false reason, or gigabytes (each case below is one the trial ran on ba66a6a).

The runs are copies of real short runs (tests/test_submission_tree.py's shared null-backend runs) with one field
edited, as the trial made them.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import appliance
from test_submission_tree import shared_runs

OFFLINE = Path("box/resnet50/Offline")
SERVER = Path("box/resnet50/Server")


@pytest.fixture(scope="module")
def source(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared runs, and a short Server run of the null backend beside them."""
    root = tmp_path_factory.mktemp("fields") / "r"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), root)
    assert appliance("run", "-s", "Server", "--target-qps", 300, "--backend", "null", "--data-dir", data_dir,
                     "--results", root, "--duration-ms", 300, "--system", "box", "-q") == 0
    return root


def _copy(source: Path, to: Path, *scenarios: Path) -> Path:
    for s in scenarios or (OFFLINE,):
        shutil.copytree(source / s, to / s)
    return to


def _edit_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _edit_detail(path: Path, key: str, raw: str) -> None:
    """One detail-log value replaced by `raw` (JSON text, written as it is)."""
    text, n = re.subn(rf'("key": "{re.escape(key)}", "value": )[^,]*,', lambda m: m.group(1) + raw + ",",
                      path.read_text())
    assert n == 1, key
    path.write_text(text)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    (line,) = err.splitlines()
    assert line.startswith("appliance: error: ") and "internal error" not in line, err
    return line


MANIFEST_BREAKS = [
    ("performance/run_1", lambda d: d.update(cards="abc"), "cards is 'abc', not a list"),
    ("performance/run_1", lambda d: d.update(cards=[1, 2]), "cards[0] is 1, not an object"),
    ("performance/run_1", lambda d: d.update(synthetic="yes"), "synthetic is 'yes', not an object"),
    ("performance/run_1", lambda d: d.update(notes=5), "notes is 5, not a list"),
    ("accuracy", lambda d: d["result"].update(top1="x"), "result.top1 is 'x', not a number"),
    ("performance/run_1", lambda d: d["cards"][0].update(cpus=[[1]]), "cards[0].cpus[0] is [1], not an integer"),
    ("performance/run_1", lambda d: d["result"].update(metric=float("nan")), "result.metric is nan, not a finite"),
]


@pytest.mark.parametrize(("run", "change", "said"), MANIFEST_BREAKS)
def test_report_names_the_manifest_field(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         run: str, change: Callable[[dict[str, object]], None], said: str) -> None:
    results = _copy(source, tmp_path / "r")
    for other in {"performance/run_1", "accuracy"} - {run}:
        shutil.rmtree(results / OFFLINE / other)
    _edit_json(results / OFFLINE / run / "manifest.json", change)
    assert appliance("report", results, "-o", tmp_path / "rep.html") == 2
    line = _one_line(capsys)
    assert f"{OFFLINE / run / 'manifest.json'}: {said}" in line, line
    assert not (tmp_path / "rep.html").exists()


def test_report_of_a_manifest_listing_a_million_cpus_is_one_line_in_bounded_memory(source: Path,
                                                                                   tmp_path: Path) -> None:
    """A 9.7 MB manifest listing 1.2 million CPUs took 1.7 GB and was still drawing at 180 s: in a child under
    the trial's 3 GB address-space limit and a 120 s timeout, so a regression fails the test, not the machine."""
    results = _copy(source, tmp_path / "r")
    shutil.rmtree(results / OFFLINE / "accuracy")
    _edit_json(results / OFFLINE / "performance/run_1/manifest.json",
               lambda d: d["cards"][0].update(cpus=list(range(1_200_000))))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3_000_000 * 1024, 3_000_000 * 1024))

    proc = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(results), "-o", str(tmp_path / "o.html")],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "manifest.json: cards[0].cpus holds 1200000 entries, more than the 8192 it may hold" in line, line


def test_report_beside_a_good_run_leaves_the_damaged_one_out_saying_why(source: Path, tmp_path: Path) -> None:
    results = _copy(source, tmp_path / "r")
    _edit_json(results / OFFLINE / "accuracy" / "manifest.json", lambda d: d.update(synthetic="yes"))
    assert appliance("report", results, "-o", tmp_path / "rep.html") == 0
    left = (tmp_path / "rep.html").read_text().split('<h2 id="left-out">')[1]
    assert "accuracy/manifest.json: synthetic is &#x27;yes&#x27;, not an object" in left, left[:400]


@pytest.mark.parametrize(("scenario", "key", "raw"), [
    (OFFLINE, "result_samples_per_second", '"abc"'),
    (SERVER, "effective_target_latency_ns", '"x"'),
    (OFFLINE, "result_90.00_percentile_latency_ns", "NaN"),
    (OFFLINE, "result_validity", "5"),
])
def test_report_names_the_detail_log_value(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           scenario: Path, key: str, raw: str) -> None:
    results = _copy(source, tmp_path / "r", scenario)
    _edit_detail(results / scenario / "performance" / "run_1" / "mlperf_log_detail.txt", key, raw)
    assert appliance("report", results, "-o", tmp_path / "rep.html") == 2
    line = _one_line(capsys)
    assert f"mlperf_log_detail.txt: {key} is " in line, line


@pytest.mark.parametrize(("run", "change", "said"), MANIFEST_BREAKS[:3])
def test_build_names_the_manifest_field_and_writes_nothing(source: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str], run: str,
                                                           change: Callable[[dict[str, object]], None],
                                                           said: str) -> None:
    """It was `internal error: AttributeError: 'str' object has no attribute 'get'`."""
    results = _copy(source, tmp_path / "r")
    _edit_json(results / OFFLINE / run / "manifest.json", change)
    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "box", results, "-o", out) == 2
    line = _one_line(capsys)
    assert f"{results / OFFLINE / run / 'manifest.json'}: {said}" in line, line
    assert not out.exists()


def test_check_of_a_detail_value_of_5000_digits_is_a_problem_line(source: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """It was `ValueError: Exceeds the limit (4300 digits)`: Python's int limit is not a JSONDecodeError."""
    results = _copy(source, tmp_path / "r")
    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "box", results, "-o", out) == 0
    (log,) = out.rglob("Offline/performance/run_1/mlperf_log_detail.txt")
    _edit_detail(log, "result_samples_per_second", "9" * 5000)
    capsys.readouterr()
    assert appliance("submission", "check", out) == 1
    captured = capsys.readouterr()
    assert "is not a whole LoadGen record" in captured.out and "internal error" not in captured.err, captured


def test_check_names_a_damaged_manifest_field(source: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    results = _copy(source, tmp_path / "r")
    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "box", results, "-o", out) == 0
    (manifest,) = out.rglob("Offline/performance/run_1/manifest.json")
    _edit_json(manifest, lambda d: d["dataset"].update(count="many"))
    capsys.readouterr()
    assert appliance("submission", "check", out) == 1
    assert "manifest.json: dataset.count is 'many', not an integer" in capsys.readouterr().out


def _reproduce_rows(tree: Path, data_dir: Path, out: Path) -> dict[str, dict[str, object]]:
    assert appliance("reproduce", tree, "--data-dir", data_dir, "-o", out) == 1
    return {r["kind"]: r for r in json.loads((out / "reproduce_report.json").read_text())["rows"]}


def test_reproduce_says_a_malformed_synthetic_is_damage_not_real_weights(source: Path, data_dir: Path,
                                                                          tmp_path: Path) -> None:
    """It wrote "the local model has synthetic (seeded) weights, the tree's run used real ones"."""
    results = _copy(source, tmp_path / "r")
    for run in ("performance/run_1", "accuracy"):
        _edit_json(results / OFFLINE / run / "manifest.json", lambda d: d.update(synthetic="yes"))
    rows = _reproduce_rows(results, data_dir, tmp_path / "audit")
    for row in rows.values():
        assert row["verdict"] == "NOT REPRODUCIBLE"
        (reason,) = row["reasons"]
        assert "the tree's run manifest is damaged (" in reason and "synthetic is 'yes', not an object" in reason
        assert "used real ones" not in reason
    assert not (tmp_path / "audit" / "runs").exists()


def test_reproduce_says_the_trees_log_is_unreadable_not_that_the_rerun_failed(source: Path, data_dir: Path,
                                                                               tmp_path: Path) -> None:
    """It wrote "re-run failed (ValueError: Exceeds the limit (4300 digits) ...)"."""
    results = _copy(source, tmp_path / "r")
    log = results / OFFLINE / "performance" / "run_1" / "mlperf_log_detail.txt"
    _edit_detail(log, "result_samples_per_second", "9" * 5000)
    rows = _reproduce_rows(results, data_dir, tmp_path / "audit")
    reasons = rows["performance"]["reasons"]
    assert any("is not a whole LoadGen record" in r for r in reasons), reasons
    assert not any("re-run failed" in r for r in reasons), reasons
