"""Issue 35: a `prepare` stopped or out of disk midway leaves nothing a later command takes silently, and
its retry is refused up front when the disk cannot hold what it will write."""

from __future__ import annotations

import dataclasses
import errno
import json
from pathlib import Path

import onnx
import pytest
from helpers import appliance, linked_copy
from onnx import TensorProto, helper

from harness.data import benchmarks
from harness.prepare import steps
from harness.records.layout import Layout

RUN = ["run", "--backend", "null", "-q", "--duration-ms", 300]


def test_an_accuracy_run_refuses_a_set_without_its_golden(data_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`prepare --samples 32` interrupted over a prepared 64-sample dir left a 32-sample set whose golden
    is null, which the next accuracy run took silently."""
    local = linked_copy(data_dir, tmp_path / "data")
    manifest = local / "preprocessed" / "resnet50" / "manifest.json"
    doc = json.loads(manifest.read_text())
    manifest.unlink()  # a hard link to the session's data: replaced, never changed in place
    manifest.write_text(json.dumps({**doc, "golden": None}))
    assert appliance(*RUN, "--mode", "accuracy", "--data-dir", local, "--results", tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "has no golden reference" in err, err
    assert not (tmp_path / "r").exists()


def test_the_space_check_counts_a_model_left_without_its_record(data_dir: Path, tmp_path: Path) -> None:
    """ENOSPC mid-prepare left the model without its record; the retry counted the model as made, passed
    the space check and failed again after rebuilding it for 20 s."""
    local = linked_copy(data_dir, tmp_path / "data")
    layout = Layout(local, benchmarks.get("resnet50"))
    assert "model" not in steps.space_needed(layout, None, None, "fp32", None, False)
    layout.model_record.unlink()
    assert "model" in steps.space_needed(layout, None, None, "fp32", None, False)


def _tiny_model(_seed: int) -> onnx.ModelProto:
    """A one-node model in the seeded model's place: what is written matters here, not its build time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    return helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y]))


def test_a_full_disk_at_the_record_leaves_no_model(data_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk between the model and its record left the model without its record."""
    local = linked_copy(data_dir, tmp_path / "data")
    layout = Layout(local, dataclasses.replace(benchmarks.get("resnet50"), build_model=_tiny_model))
    layout.model_record.unlink()
    models = sorted(p.name for p in layout.model_record.parent.iterdir())

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(steps.model_record, "write", full)
    with pytest.raises(OSError):
        steps.prepare_model(layout, None, False, print)
    left = sorted(p.name for p in layout.model_record.parent.iterdir())
    assert left == [m for m in models if "seeded" not in m], left  # the model it rewrote is removed with it
