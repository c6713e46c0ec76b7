"""The seeded ResNet50 has the official signature, size and cost, and is reproducible."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

from harness.data.models import resnet50
from harness.data.models.stats import model_stats


def test_signature_params_and_ops(data_dir):
    record = json.loads((data_dir / "models" / "resnet50.json").read_text())
    model = onnx.load(data_dir / record["path"])  # recorded relative to the data dir
    (inp,) = model.graph.input
    assert inp.name == "input_tensor:0"
    assert inp.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim][1:] == [3, 224, 224]
    assert [o.name for o in model.graph.output] == ["ArgMax:0", "softmax_tensor:0"]
    stats = model_stats(model)
    assert abs(stats.params / 25.6e6 - 1) < 0.01, stats.params
    assert stats.params == record["params"]
    # v1.5 is 4.09 GMACs; MLPerf's 7.8 GOPS is quoted for the v1 layout (stride on the 1x1 conv)
    assert 7.8 <= stats.gops <= 8.3, stats.gops


def test_outputs_and_background_class(data_dir):
    record = json.loads((data_dir / "models" / "resnet50.json").read_text())
    sess = ort.InferenceSession(str(data_dir / record["path"]), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).normal(0, 50, (2, 3, 224, 224)).astype(np.float32)
    argmax, softmax = sess.run(None, {"input_tensor:0": x})
    assert argmax.dtype == np.int64 and argmax.shape == (2,)
    assert softmax.shape == (2, 1001)
    np.testing.assert_allclose(softmax.sum(axis=1), 1.0, rtol=1e-4)
    assert (argmax == softmax.argmax(axis=1)).all()


@pytest.mark.slow
def test_same_seed_same_bytes(data_dir):
    record = json.loads((data_dir / "models" / "resnet50.json").read_text())
    assert hashlib.sha256(resnet50.build(0).SerializeToString()).hexdigest() == record["sha256"]
