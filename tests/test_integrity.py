"""A run re-hashes what it loads: one byte changed in the model or a shard after prepare, and the run
refuses in one line naming the file, before LoadGen starts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import appliance_subprocess

from harness.data.integrity import Mismatch, sha256_once, verify_prepared


@pytest.fixture
def own_data(data_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the session's prepared data, free to damage."""
    return Path(shutil.copytree(data_dir, tmp_path / "data"))


def _flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def _refused(data: Path, results: Path, changed: Path) -> None:
    proc = appliance_subprocess("run", "--cards", "simulate:cloud-ai-100:2", "--duration-ms", "500",
                                "--data-dir", data, "--results", results)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(changed) in lines[0] and "changed after prepare" in lines[0] and "Traceback" not in proc.stderr
    assert not list(results.rglob("run_*")), "a run folder was made although the run was refused"


def test_changed_model_byte_refuses_the_run(own_data: Path, tmp_path: Path) -> None:
    model = next((own_data / "models").glob("resnet50-seeded-*.onnx"))
    _flip_byte(model, model.stat().st_size // 2)
    _refused(own_data, tmp_path / "results", model)


def test_changed_shard_byte_refuses_the_run(own_data: Path, tmp_path: Path) -> None:
    shard = own_data / "preprocessed" / "resnet50" / "samples-00000.npy"
    _flip_byte(shard, shard.stat().st_size - 1)  # the last pixel of the last sample
    _refused(own_data, tmp_path / "results", shard)


def test_verify_prepared_names_each_changed_file(own_data: Path) -> None:
    assert verify_prepared(own_data, "resnet50") == []
    prepared = own_data / "preprocessed" / "resnet50"
    _flip_byte(prepared / "labels.npy", (prepared / "labels.npy").stat().st_size - 1)
    (prepared / "samples-00000.npy").unlink()
    assert sorted(verify_prepared(own_data, "resnet50"), key=lambda m: m.path.name) == [
        Mismatch(prepared / "labels.npy", "sha256 differs from the prepare manifest"),
        Mismatch(prepared / "samples-00000.npy", "missing"),
    ]


def test_a_file_is_hashed_again_when_it_changes(tmp_path: Path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"a" * 100)
    first = sha256_once(f)
    f.write_bytes(b"b" * 101)  # another size: the cached digest must not be reused
    assert sha256_once(f) != first


def test_old_records_with_absolute_paths_still_read(own_data: Path, tmp_path: Path) -> None:
    """A record written before paths were relative (absolute path of where the data dir used to be)."""
    record_file = own_data / "models" / "resnet50.json"
    record = json.loads(record_file.read_text())
    record["path"] = str(tmp_path / "gone" / "models" / Path(record["path"]).name)
    record_file.write_text(json.dumps(record))
    assert verify_prepared(own_data, "resnet50") == []
