"""Issue 41: the prepared set's files named as what they are. A FIFO or a device where the manifest or the
golden reference should be was "no prepared data … run prepare first" / "golden.npy is missing"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import appliance, linked_copy

from harness.core.errors import DataError
from harness.records import store


def test_a_fifo_as_the_manifest_is_said_as_one(data_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    local = linked_copy(data_dir, tmp_path / "data")
    manifest = local / "preprocessed" / "resnet50" / store.MANIFEST
    manifest.unlink()
    os.mkfifo(manifest)
    assert appliance("run", "--backend", "null", "-q", "--data-dir", local, "--results", tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is a FIFO (named pipe)" in err, err
    assert "no prepared data" not in err and not (tmp_path / "r").exists()


def test_a_device_as_the_golden_is_said_as_one(data_dir: Path, tmp_path: Path) -> None:
    local = linked_copy(data_dir, tmp_path / "data")
    golden = local / "preprocessed" / "resnet50" / "golden.npy"
    golden.unlink()
    golden.symlink_to("/dev/null")
    with pytest.raises(DataError, match=r"golden\.npy is a character device, not a regular file"):
        store.open_prepared(golden.parent, "appliance prepare")
    golden.unlink()
    with pytest.raises(DataError, match=r"golden\.npy is missing"):  # nothing there: still said so
        store.open_prepared(golden.parent, "appliance prepare")
