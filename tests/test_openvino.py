"""`--backend openvino`: the openvino runtime on the same ONNX files (several cards: test_openvino_processes.py)."""

from __future__ import annotations

import json

import pytest
from helpers import appliance

pytest.importorskip("openvino")


@pytest.mark.slow
def test_openvino_accuracy_matches_golden(data_dir, tmp_path):
    """FP32 on OpenVINO (f32 inference precision) gives the FP32 onnxruntime reference's top-1."""
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--backend", "openvino",
                     "--mode", "accuracy", "-q") == 0
    manifest = json.loads(next(tmp_path.glob("*/resnet50/Offline/accuracy/manifest.json")).read_text())
    assert manifest["backend"] == "openvino" and manifest["precision"] == "fp32"
    assert manifest["cards"][0]["inference_precision_hint"] == "f32"
    assert manifest["result"]["golden_top1"] >= 97.9  # at most one of 48 samples on a near-tie
