"""YOLO11l seeded model (harness.data.models.yolo) and the COCO-safe dataset with its letterbox
(harness.data.datasets.coco): size, signature, sane activations, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from harness.core.errors import DataError
from harness.data import concrete
from harness.data.datasets import coco
from harness.data.models import yolo
from harness.data.models.stats import model_stats


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return yolo.build(0)


def _session(m: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def test_size_within_published_bounds(model: onnx.ModelProto) -> None:
    stats = model_stats(model)
    assert abs(stats.params / 25.3e6 - 1) < 0.01, stats.describe()
    assert abs(stats.gops / 86.9 - 1) < 0.03, stats.describe()


def test_export_signature(model: onnx.ModelProto) -> None:
    (inp,) = model.graph.input
    assert inp.name == "images" and inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim][1:] == [3, 640, 640]
    (out,) = model.graph.output
    assert out.name == "output0" and [d.dim_value for d in out.type.tensor_type.shape.dim][1:] == [84, 8400]
    u8 = yolo.uint8_input(model)
    assert u8.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert yolo.uint8_input(u8).graph.node[0].op_type == "Cast"  # idempotent: one Cast in front, not two
    assert sum(n.op_type == "Cast" for n in yolo.uint8_input(u8).graph.node) == 1


def test_outputs_sane_on_a_letterboxed_picture(model: onnx.ModelProto) -> None:
    """Finite outputs; boxes inside a plausible range; class scores spread over 0..1; the uint8 model
    gives the float model's answer on the same pixels (the /255 folded in)."""
    rng = np.random.default_rng(5)
    img, _ = coco.draw_picture(rng, [c[0] for c in coco.COCO_CATEGORIES])
    chw = np.ascontiguousarray(coco.letterbox(img)[:, :, ::-1].transpose(2, 0, 1))[None]
    y = _session(yolo.uint8_input(model)).run(None, {"images": chw})[0]
    assert y.shape == (1, 84, 8400) and np.isfinite(y).all()
    cx, cy, w, h = y[0, :4]
    assert 10 < np.median(w) < 320 and 10 < np.median(h) < 320 and (w >= 0).all() and (h >= 0).all()
    # a centre moves at most half of 15 bins x stride 32 off its cell: [-224, 864]
    assert -225 < cx.min() < cx.max() < 865 and -225 < cy.min() < cy.max() < 865
    best = y[0, 4:].max(axis=0)
    assert 0.05 < (best > 0.001).mean() < 0.99       # some anchors pass the reference's threshold, not all
    assert best.max() > 0.2 and np.percentile(best, 10) < 0.01
    assert len(np.unique(y[0, 4:].argmax(axis=0))) > 10  # many classes win somewhere
    f = _session(model).run(None, {"images": chw.astype(np.float32) / 255})[0]
    np.testing.assert_allclose(y[:, :4], f[:, :4], rtol=0.01, atol=0.5)  # x * (1/255) rounds unlike x / 255
    np.testing.assert_allclose(y[:, 4:], f[:, 4:], atol=5e-3)


def test_anchor_grid() -> None:
    points, strides = yolo._anchors(640)
    assert points.shape == (1, 2, 8400) and strides.shape == (1, 8400)
    assert tuple(points[0, :, 0]) == (0.5, 0.5) and tuple(points[0, :, 80]) == (0.5, 1.5)  # x fastest
    assert (strides[0, :6400] == 8).all() and (strides[0, 6400:8000] == 16).all() and (strides[0, 8000:] == 32).all()


@pytest.mark.parametrize(("h", "w", "top", "left", "inner"), [
    (480, 640, 80, 0, (480, 640)), (375, 500, 80, 0, (480, 640)), (640, 427, 0, 106, (640, 427)),
    (640, 640, 0, 0, (640, 640)), (1, 640, 319, 0, (1, 640)),
])
def test_letterbox_scales_by_longer_side_and_pads_centred(h: int, w: int, top: int, left: int,
                                                          inner: tuple[int, int]) -> None:
    img = np.full((h, w, 3), 7, np.uint8)
    out = coco.letterbox(img)
    assert out.shape == (640, 640, 3)
    ih, iw = inner
    assert (out[top:top + ih, left:left + iw] == 7).all()
    mask = np.ones((640, 640), bool)
    mask[top:top + ih, left:left + iw] = False
    assert (out[mask] == 114).all()
    gx, gy, px, py = coco.letterbox_geometry(h, w)
    assert (px, py) == (left, top) and gx == pytest.approx(iw / w) and gy == pytest.approx(ih / h)


def test_preprocess_yolo_is_rgb_chw(tmp_path: Path) -> None:
    img = np.zeros((320, 640, 3), np.uint8)
    img[:, :, 0] = 200  # blue in BGR
    cv2.imwrite(str(tmp_path / "a.png"), img)
    chw = coco.preprocess_yolo(tmp_path / "a.png")
    assert chw.shape == (3, 640, 640) and chw.dtype == np.uint8
    assert chw[2, 320, 320] == 200 and chw[0, 320, 320] == 0 and chw[0, 0, 0] == 114


def test_coco_safe_layout_round_trip(tmp_path: Path) -> None:
    coco.COCO_SAFE.make_synthetic(tmp_path, 3, 1)
    listing = coco.COCO_SAFE.read(tmp_path)
    assert [n.split("/")[0] for n in listing.names] == ["val2017_safe"] * 3
    assert (tmp_path / "annotations" / "instances_val2017.json").is_file()
    assert listing.annotations is not None and len(listing.annotations["images"]) == 3
    assert {c["id"] for c in listing.annotations["categories"]} >= {1, 90}
    assert concrete.image_sizes(listing.annotations).shape == (3, 2)


def test_coco_safe_refuses_unannotated_images(tmp_path: Path) -> None:
    coco.COCO_SAFE.make_synthetic(tmp_path, 2, 1)
    (tmp_path / "val2017_safe" / "000000999999.jpg").write_bytes(b"x")
    with pytest.raises(DataError, match=r"1 image\(s\) in .*val2017_safe are not in .*000000999999.jpg"):
        coco.COCO_SAFE.read(tmp_path)


def test_coco_safe_refuses_the_full_val_annotations(tmp_path: Path) -> None:
    coco.COCO_SAFE.make_synthetic(tmp_path, 1, 1)
    path = tmp_path / "annotations" / "instances_val2017.json"
    doc = json.loads(path.read_text())
    doc["images"] = [{"id": i + 1, "file_name": f"{i + 1:012d}.jpg", "height": 480, "width": 640}
                     for i in range(5000)]
    doc["annotations"] = []
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="lists 5,000 images: the full COCO val2017 annotation file") as err:
        coco.COCO_SAFE.read(tmp_path)
    assert "\n" not in str(err.value)
    with pytest.raises(DataError, match="at most"):
        coco.COCO_SAFE.make_synthetic(tmp_path / "big", 1526, 1)
