"""`--backend openvino`: the openvino runtime on the same ONNX files; one card per process."""

from __future__ import annotations

import json
import os

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


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs for emulate:2")
def test_openvino_refuses_several_cards_in_one_process(data_dir, tmp_path, capsys):
    """OpenVINO's CPU workers are shared by the cards of a process and keep the process's CPUs (read back
    from /proc while developing this backend), so per-card pinning cannot hold: refused before anything
    is written, in one line."""
    results = tmp_path / "results"
    rc = appliance("run", "--data-dir", data_dir, "--results", results, "--backend", "openvino",
                   "--cards", "emulate:2", "--duration-ms", 500, "--count", 8, "-q")
    err = capsys.readouterr().err
    assert rc != 0 and "one card per process" in err and "emulate:1" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not results.exists() or not any(results.rglob("run_*")), list(results.rglob("*"))
