"""`appliance prepare` and faults of the machine: a disk too small is refused before anything is
written, a disk that fills mid-prepare ends in one line with nothing half-written, and the temporaries
a SIGKILLed prepare left are removed by the next prepare, which says so."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import appliance

from harness.core import leftovers
from harness.records import store


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def _with_model(data_dir: Path, dest: Path) -> Path:
    """A data dir holding only the session's seeded ResNet50 model and its record (saves building it)."""
    shutil.copytree(data_dir / "models", dest / "models")
    return dest


def test_too_little_space_is_refused_before_writing(tmp_path, capsys):
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        rc = appliance("prepare", "--benchmark", "resnet50", "--samples", 8, "--data-dir", small, "-q")
        err = capsys.readouterr().err.strip().splitlines()
        assert rc != 0
        assert len(err) == 1 and "prepare needs about" in err[0] and "MB free there" in err[0], err
        assert str(small) in err[0] and "internal error" not in err[0]
        assert os.listdir(small) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_disk_filling_mid_prepare_is_one_line_and_leaves_nothing_half_written(data_dir, tmp_path, capsys,
                                                                                monkeypatch):
    d = _with_model(data_dir, tmp_path / "d")
    real = store.close_array

    def full_disk(folder: Path, name: str, array: object) -> object:
        real(folder, name, array)  # type: ignore[arg-type]
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / name))

    monkeypatch.setattr(store, "close_array", full_disk)
    rc = appliance("prepare", "--benchmark", "resnet50", "--samples", 8, "--data-dir", d, "-q")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and "no space left on the device (ENOSPC)" in err[0], err
    assert "internal error" not in err[0]
    assert _leftovers(d) == []
    assert not (d / "preprocessed" / "resnet50").exists()


def test_leftovers_of_a_killed_prepare_are_removed_by_the_next(data_dir, tmp_path, capsys):
    d = _with_model(data_dir, tmp_path / "d")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "prepare", "--benchmark", "resnet50",
                             "--samples", "300", "--data-dir", str(d), "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not _leftovers(d) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, "prepare finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    left = _leftovers(d)
    assert left and all(f".{proc.pid}." in p.name for p in left)

    assert appliance("prepare", "--benchmark", "resnet50", "--samples", 4, "--data-dir", d, "-q") == 0
    out = capsys.readouterr().out
    for p in left:
        assert f"removed {p} (" in out and f"process that is gone (PID {proc.pid})" in out
    assert _leftovers(d) == []


def test_sweep_keeps_the_temporaries_of_live_processes(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine = tmp_path / f".x.onnx.{os.getpid()}.ab_12.tmp"
    dead = tmp_path / f".x.onnx.{gone.pid}.ab_12.tmp"
    dead_dir = tmp_path / f".imagenet.{gone.pid}.tmp"
    mine.write_bytes(b"1")
    dead.write_bytes(b"22")
    (dead_dir / "sub").mkdir(parents=True)
    said: list[str] = []
    assert sorted(leftovers.sweep([tmp_path, tmp_path / "absent"], said.append)) == sorted([dead, dead_dir])
    assert mine.exists() and not dead.exists() and not dead_dir.exists()
    assert len(said) == 2 and all(f"PID {gone.pid}" in line for line in said)
