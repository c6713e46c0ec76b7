"""Seeded detection models: published size within 2%, the paper's output layouts, NMS on real outputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from harness.data import benchmarks, nms
from harness.data.models import detection
from harness.data.models.stats import model_stats

# (builder, params reference, GOPS reference, output shapes per image)
MODELS = {
    "ssd-mobilenet": (detection.build_ssd_mobilenet, 6.91e6, 2.47,
                      {detection.SSD_MOBILENET_BOXES: [1917, 4], detection.SSD_MOBILENET_SCORES: [1917, 91]}),
    "ssd-resnet34": (detection.build_ssd_resnet34, 36.3e6, 433.0,
                     {detection.SSD_RESNET34_BOXES: [4, 15130], detection.SSD_RESNET34_SCORES: [81, 15130]}),
}


def _out_shapes(model) -> dict[str, list]:
    return {o.name: [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim][1:] for o in model.graph.output}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_size_within_two_percent_and_layout(name: str) -> None:
    build, params, gops, shapes = MODELS[name]
    model = build(0)
    stats = model_stats(model)
    assert abs(stats.params / params - 1) < 0.02, stats.describe()
    assert abs(stats.gops / gops - 1) < 0.02, stats.describe()
    assert _out_shapes(model) == shapes
    assert build(0).SerializeToString() == model.SerializeToString()  # deterministic bytes


def test_retinanet_layout_and_size() -> None:
    model = detection.build_retinanet(0)
    stats = model_stats(model)
    # no published figure: torchvision's RetinaNet with a ResNeXt50-32x4d FPN and 264 classes counts 37.1M
    assert abs(stats.params / 37.1e6 - 1) < 0.02, stats.describe()
    assert _out_shapes(model) == {"boxes": [5000, 4], "scores": [5000], "indices": [5000]}


def test_ssd_mobilenet_outputs_feed_nms() -> None:
    model = detection.build_ssd_mobilenet(0)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).normal(0, 60, (1, 3, 300, 300)).astype(np.float32)
    boxes, scores = sess.run(None, {detection.SSD_MOBILENET_INPUT: x})
    out = nms.postprocess(benchmarks.get("ssd-mobilenet"), boxes[0], scores[0])
    assert 0 < len(out) <= 100
    q = nms.quantise(benchmarks.get("ssd-mobilenet"), {"boxes": boxes[0], "scores": scores[0]})
    assert q["scores"].dtype == np.uint8 and q["boxes"].dtype == np.uint8
    assert abs(len(nms.postprocess(benchmarks.get("ssd-mobilenet"), q["boxes"], q["scores"])) - len(out)) <= 2
