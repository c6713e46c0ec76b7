"""The read breaks of issue 35, each as the trial ran it: every file the appliance did not just write goes
through harness.core.inbound, so a link to /dev/zero, a FIFO, a YAML alias bomb or a link out of the folder
given is one line, at once, with nothing left behind.

Commands that read without bound ran out of memory before (MemoryError after GBs): they run here in a child
process under an address-space limit and a timeout, so a regression fails the test, never the machine.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import appliance, linked_copy
from submission_fixtures import make_tree
from sysfs_fixtures import sparse_nodes, write_machine
from test_submission_tree import shared_runs

from harness.core.errors import DataError
from harness.data import benchmarks, concrete
from harness.data.accuracy import coco

LIMIT = 3_000_000 * 1024  # the trial's `ulimit -v 3000000`
RUN = ["run", "--backend", "null", "-q", "--duration-ms", "300"]


def _limited(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI in a child under the trial's memory limit; a child still reading at `timeout` fails the test."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit, stdin=subprocess.DEVNULL)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("appliance: error: "), proc.stderr
    assert "internal error" not in proc.stderr and "MemoryError" not in proc.stderr
    return lines[0]


def _to_dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


@pytest.fixture(scope="module")
def runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inbound-runs") / "r"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), root, symlinks=True)
    return root


def test_check_names_a_detail_log_linked_to_dev_zero(tmp_path: Path) -> None:
    sub = make_tree(tmp_path / "t", "v6.1")
    log = next(sub.rglob("performance/run_1/mlperf_log_detail.txt"))
    _to_dev_zero(log)
    proc = _limited("submission", "check", tmp_path / "t")
    assert proc.returncode == 1, proc.stderr
    assert "links leaving the tree: " in proc.stdout and "mlperf_log_detail.txt -> /dev/zero" in proc.stdout, \
        proc.stdout
    assert "MemoryError" not in proc.stderr


def test_report_refuses_a_run_whose_detail_log_is_dev_zero(runs: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(runs / "box" / "resnet50" / "Offline", results / "box" / "resnet50" / "Offline")
    _to_dev_zero(results / "box" / "resnet50" / "Offline" / "performance" / "run_1" / "mlperf_log_detail.txt")
    proc = _limited("report", results, "-o", tmp_path / "rep.html")
    assert proc.returncode == 2
    assert "mlperf_log_detail.txt: a character device, not a regular file" in _one_error_line(proc)
    assert not (tmp_path / "rep.html").exists()


def test_run_refuses_a_model_record_linked_to_dev_zero(data_dir: Path, tmp_path: Path) -> None:
    local = linked_copy(data_dir, tmp_path / "data")
    _to_dev_zero(local / "models" / "resnet50.json")
    proc = _limited(*RUN, "--data-dir", local, "--results", tmp_path / "r")
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "resnet50.json is damaged (is a character device, not a regular file" in line, line
    assert not (tmp_path / "r").exists()


def test_run_refuses_dev_zero_as_tuned_record(data_dir: Path, tmp_path: Path) -> None:
    proc = _limited(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r", "--tuned", "/dev/zero")
    assert proc.returncode == 2
    assert "tuned record /dev/zero is unreadable (is a character device" in _one_error_line(proc)
    assert not (tmp_path / "r").exists()


def test_build_refuses_dev_zero_as_system_overrides(runs: Path, tmp_path: Path) -> None:
    proc = _limited("submission", "build", "--submitter", "Org", "--system", "s", "--system-overrides",
                    "/dev/zero", runs, "-o", tmp_path / "sub")
    assert proc.returncode == 2
    assert "system overrides /dev/zero is a character device, not a regular file" in _one_error_line(proc)
    assert not (tmp_path / "sub").exists()


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def test_run_refuses_a_yaml_alias_bomb_as_card_map(data_dir: Path, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 600  # the trial's was 527 bytes: 9**9 strings once expanded
    proc = _limited(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r", "--cards", bomb, timeout=30)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "anchors and aliases (&name, *name) are not accepted" in line, line
    assert not (tmp_path / "r").exists()


def test_a_fifo_as_user_conf_is_refused_without_blocking(data_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "user.conf"
    os.mkfifo(fifo)
    proc = _limited(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r", "--user-conf", fifo, timeout=30)
    assert proc.returncode == 2
    assert "--user-conf" in (line := _one_error_line(proc)) and "is a FIFO (named pipe), not a regular file" in line
    assert not (tmp_path / "r").exists()


def test_build_refuses_a_run_file_linking_outside_and_copies_nothing(runs: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for publication\n")
    local = tmp_path / "r"
    shutil.copytree(runs, local, symlinks=True)
    golden = local / "box" / "resnet50" / "Offline" / "accuracy" / "accuracy_golden.txt"
    golden.unlink(missing_ok=True)
    golden.symlink_to(secret)
    out = tmp_path / "sub"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "s", local, "-o", out) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"accuracy_golden.txt links outside {local} (to {secret})" in line, line
    assert not out.exists()
    assert not any("not for publication" in p.read_text(errors="replace") for p in tmp_path.rglob("*.txt")
                   if p.is_file() and not p.is_symlink() and p != secret)


def test_check_reports_a_link_leaving_the_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sub = make_tree(tmp_path / "t", "v6.1")
    outside = tmp_path / "elsewhere.txt"
    readme = next(sub.rglob("README.md"))
    outside.write_text(readme.read_text())
    readme.unlink()
    readme.symlink_to(outside)
    assert appliance("submission", "check", tmp_path / "t") == 1
    out = capsys.readouterr().out
    assert f"links leaving the tree: {readme.relative_to(tmp_path / 't')} -> {outside}" in out, out


@pytest.mark.parametrize("text", ["null", "[]", "3"])
def test_annotations_of_the_wrong_kind_are_one_line(text: str, tmp_path: Path) -> None:
    """It was `internal error: TypeError` (the digest had been updated, so integrity passed)."""
    (tmp_path / "annotations.json").write_text(text)
    data = SimpleNamespace(root=tmp_path, manifest={"annotations": {"file": "annotations.json"}})
    kind = {"null": "null", "[]": "an array", "3": "a number"}[text]
    with pytest.raises(DataError, match=f"annotations .*annotations.json holds {kind}, not a JSON object"):
        concrete.for_prepared(benchmarks.get("yolo-99"), data)  # type: ignore[arg-type]
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text("[]")
    with pytest.raises(DataError, match=f"holds {kind}, not a JSON object"):
        coco.score(log, data, "dataset")  # type: ignore[arg-type]


def test_topology_of_sparse_node_ids_beyond_kernel_max(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """node/online 0-2,33-34,45,72-73 on 48 CPUs (kernel_max 47): node ids are bounded by the node limit."""
    root = write_machine(tmp_path / "sys-root", sparse_nodes())
    assert (root / "sys/devices/system/node/online").read_text().strip() == "0-2,33-34,45,72-73"
    assert appliance("topology", "detect", "--sysfs-root", root, "--format", "json") == 0
    nodes = json.loads(capsys.readouterr().out)["numa_nodes"]
    assert sorted(map(int, nodes)) == [0, 1, 2, 33, 34, 45, 72, 73]
