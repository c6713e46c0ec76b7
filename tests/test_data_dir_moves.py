"""A prepared data dir names its files relative to itself: prepared with a relative --data-dir, moved,
and used from another working directory, it runs. Files and folders it and a run make are readable
by others (the umask decides, not tempfile's 0600 / 0700)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import appliance

from harness.core.outbound import atomic_write_text, staged_dir


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes_follow_umask(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        want = 0o755 if path.is_dir() else 0o644
        assert mode & want == want and not mode & 0o022, f"{path} is {oct(mode)}"


@pytest.mark.slow
def test_relative_data_dir_moved_and_used_from_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         umask_022: None) -> None:
    (tmp_path / "first").mkdir()
    monkeypatch.chdir(tmp_path / "first")
    assert appliance("prepare", "--benchmark", "resnet50", "--data-dir", "data", "--samples", 4, "-q") == 0
    record = json.loads(Path("data/models/resnet50.json").read_text())
    assert not Path(record["path"]).is_absolute() and record["path"].startswith("models/")
    os.rename(tmp_path / "first" / "data", tmp_path / "moved")
    (tmp_path / "second").mkdir()
    monkeypatch.chdir(tmp_path / "second")
    assert appliance("run", "--cards", "emulate:1", "--duration-ms", 300, "--count", 8, "--data-dir", "../moved",
                     "--results", "results", "-q") == 0
    manifest = next(Path("results").rglob("manifest.json"))
    assert json.loads(manifest.read_text())["model"]["path"] == str(tmp_path / "moved" / record["path"])
    _modes_follow_umask(tmp_path / "moved")
    _modes_follow_umask(Path("results"))


def test_atomic_files_and_staged_folders_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        with staged_dir(tmp_path / "folder") as tmp:
            (tmp / "inside").write_text("y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "folder").stat().st_mode) == 0o750
