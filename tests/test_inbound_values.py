"""The value breaks of issue 35: every number from outside checked in the type and range LoadGen and the
harness use (denormals, huge, non-ASCII digits), a user.conf's BOM dropped so its first line counts, and the
submission checker's scope: benchmarks outside the appliance's named and not counted, no traceback under
--debug for a failed check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import appliance
from submission_fixtures import make_tree

from harness.records import detail_log
from harness.run.loadgen_settings import check_value, read_user_conf


def _cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("scenario", "key"), [("Server", "target_qps"), ("SingleStream", "target_latency"),
                                               ("Server", "target_latency_percentile")])
def test_a_denormal_value_is_refused_with_its_range(scenario: str, key: str) -> None:
    problem = check_value(scenario, key, "1e-320")
    assert problem is not None and "it must be" in problem, problem


def test_a_denormal_target_qps_is_refused_before_the_run(data_dir: Path, tmp_path: Path) -> None:
    """It passed the checks ("LoadGen will run about inf s"), then std::bad_alloc, exit 134."""
    conf = tmp_path / "den.conf"
    conf.write_text("*.Server.target_qps = 1e-320\n")
    proc = _cli("run", "--data-dir", data_dir, "--results", tmp_path / "r", "-s", "Server", "--user-conf", conf,
                "--backend", "null", "--duration-ms", "300", "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "target_qps = 1e-320 is out of range: it must be at least 0.001 and finite (queries/s)" in line, line
    assert not (tmp_path / "r").exists()


def test_a_bom_is_dropped_and_the_users_target_qps_kept(data_dir: Path, tmp_path: Path) -> None:
    """The line after the BOM was read as the key '\\ufeff*.Offline.target_qps' and the calibrated rate
    replaced the user's 50 without a word."""
    conf = tmp_path / "bom.conf"
    conf.write_bytes("\ufeff*.Offline.target_qps = 50\n".encode())
    assert read_user_conf(conf) == "*.Offline.target_qps = 50\n"
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--user-conf", conf, "--backend", "null",
                     "--duration-ms", "300", "-q") == 0
    (run,) = results.glob("*/resnet50/Offline/performance/run_1")
    assert detail_log.values(run / "mlperf_log_detail.txt")["effective_target_qps"] == 50
    assert not (run / "user.conf").read_bytes().startswith(b"\xef\xbb\xbf")


@pytest.mark.parametrize(("args", "why"), [
    (("run", "--max-wait-us", "18446744073709551616"), "'--max-wait-us': 18446744073709551616 is not in the range"),
    (("run", "--cards", "emulate:\u0663"), "--cards 'emulate:\u0663' is not understood"),
    (("run", "--cards", "simulate:cloud-ai-100:\u0663"), "is not understood"),
    (("run", "--duration-ms", "\u0663\u0660\u0660"), "is not a number in ASCII digits"),
    (("run", "--target-qps", "1e-320"), "--target-qps 1e-320: target_qps = 1e-320 is out of range: it must be at least "
                                        "0.001 and finite (queries/s)"),
    (("prepare", "--samples", "\u0663"), "'--samples': '\u0663' is not a number in ASCII digits"),
])
def test_numbers_from_outside_are_checked_in_type_and_range(args: tuple[str, ...], why: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert appliance(*args, "--data-dir", tmp_path / "none") == 2
    err = capsys.readouterr().err
    assert why in err, err


def _with_llama(root: Path) -> Path:
    """A v6.0 tree the checker passes, plus an llama2-70b-99 folder (MiTAC's tree holds one)."""
    sub = make_tree(root, "v6.0")
    results = sub / "results" / "sys1"
    shutil.copytree(results / "resnet50" / "Offline", results / "llama2-70b-99" / "Offline")
    return sub


def test_benchmarks_outside_the_appliance_are_named_not_counted(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _with_llama(tmp_path / "t")
    assert appliance("submission", "check", tmp_path / "t") == 0
    out = capsys.readouterr().out
    assert "note: closed/OrgA/results/sys1/llama2-70b-99: not checked (outside this appliance's benchmarks" in out
    assert out.strip().splitlines()[-1].startswith("PASS v6.0"), out


def test_an_unknown_benchmark_folder_is_still_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sub = make_tree(tmp_path / "t", "v6.0")
    results = sub / "results" / "sys1"
    shutil.copytree(results / "resnet50" / "Offline", results / "resnet51" / "Offline")
    assert appliance("submission", "check", tmp_path / "t") == 1
    assert "'resnet51' is not a benchmark v6.0 defines here" in capsys.readouterr().out


def test_debug_on_a_failed_check_prints_no_traceback(tmp_path: Path) -> None:
    sub = make_tree(tmp_path / "t", "v6.1")
    next(sub.rglob("accuracy.txt")).unlink()
    proc = _cli("--debug", "submission", "check", tmp_path / "t")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "CheckFailed" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == f"appliance: error: 1 problem(s) in {tmp_path / 't'}"
