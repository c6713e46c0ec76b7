"""`--output-layout`: a YOLO model exported anchor-major ([N,8400,84]) is prepared with the option, recorded,
and run in that layout; its golden pass and accuracy match the attribute-major model's on the same samples.
Bad choices are one line each."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import appliance
from onnx import helper

SAMPLES = 2


def _anchor_major(seeded: Path, out: Path) -> Path:
    """The seeded model with a Transpose appended: output0 [N,84,8400] -> [N,8400,84]."""
    model = onnx.load(str(seeded))
    for node in model.graph.node:
        node.output[:] = ["output0/attribute-major" if o == "output0" else o for o in node.output]
    model.graph.node.append(helper.make_node("Transpose", ["output0/attribute-major"], ["output0"], perm=[0, 2, 1]))
    dims = model.graph.output[0].type.tensor_type.shape.dim
    dims[1].dim_value, dims[2].dim_value = 8400, 84
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


def _prepare(*args: object) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert appliance("prepare", "-b", "yolo-99", "--samples", SAMPLES, "-q", *args) == 0
    return out.getvalue()


def _accuracy(data: Path, results: Path) -> tuple[str, str, np.ndarray]:
    """(accuracy.txt's mAP line, the golden one, the logged rows sorted) of a 2-sample onnxruntime run."""
    assert appliance("run", "-b", "yolo-99", "-s", "Offline", "--data-dir", data, "--results", results,
                     "--system", "sut", "--cards", "emulate:1", "--mode", "accuracy", "-q") == 0
    acc = results / "sut" / "yolo-99" / "Offline" / "accuracy"
    log = json.loads((acc / "mlperf_log_accuracy.json").read_text())
    rows = np.concatenate([np.frombuffer(bytes.fromhex(r["data"]), np.float32) for r in log]).reshape(-1, 7)
    rows = rows[np.lexsort(rows.T[::-1])]
    return ((acc / "accuracy.txt").read_text().splitlines()[0],
            (acc / "accuracy_golden.txt").read_text().splitlines()[0], rows)


@pytest.mark.slow
def test_anchor_major_model_runs_like_the_attribute_major_one(tmp_path: Path) -> None:
    attr = tmp_path / "attr"
    _prepare("--data-dir", attr)
    seeded = json.loads((attr / "models" / "yolo-99.json").read_text())
    assert seeded["output_layout"] == "attribute-major"
    model = _anchor_major(attr / seeded["path"], tmp_path / "yolo11l-anchor-major.onnx")
    anchor = tmp_path / "anchor"
    printed = _prepare("--data-dir", anchor, "--model", model, "--output-layout", "anchor-major")
    assert "output layout: anchor-major" in printed and "golden reference: " in printed
    assert json.loads((anchor / "models" / "yolo-99.json").read_text())["output_layout"] == "anchor-major"

    map_a, golden_a, rows_a = _accuracy(attr, tmp_path / "ra")
    map_b, golden_b, rows_b = _accuracy(anchor, tmp_path / "rb")
    assert golden_a.startswith("mAP=100.000%") and golden_b.startswith("mAP=100.000%")
    a, b = (float(re.fullmatch(r"mAP=([\d.]+)%", line)[1]) for line in (map_a, map_b))  # type: ignore[index]
    assert abs(a - b) < 0.01
    assert 0 < len(rows_a) == len(rows_b) and np.allclose(rows_a, rows_b, atol=1e-4)  # the same detections


@pytest.mark.parametrize(("benchmark", "layout", "words"), [
    ("resnet50", "anchor-major", "resnet50 has no selectable output layout (no host NMS reads it); "
                                 "drop --output-layout"),
    ("yolo-99", "column-major", "yolo-99 has no column-major output layout; choose one of: attribute-major, "
                                "anchor-major"),
    ("yolo-99", "anchor-major", "the seeded yolo-99 model gives its output in the attribute-major layout; "
                                "--output-layout anchor-major is for --model FILE: pass one or drop it"),
])
def test_bad_layout_choice_is_one_line(benchmark: str, layout: str, words: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert appliance("prepare", "-b", benchmark, "--data-dir", data, "--output-layout", layout, "-q") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not (data / "models" / f"{benchmark}.json").exists()  # nothing recorded
