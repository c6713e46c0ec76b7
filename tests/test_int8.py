"""`prepare --precision int8`: real onnxruntime static quantisation, run on uint8 samples as stored."""

from __future__ import annotations

import json

import pytest
from helpers import SAMPLES, appliance

from harness.data.datasets import imagenet


@pytest.mark.slow
def test_int8_model_reads_uint8_and_agrees_with_fp32(data_dir, tmp_path, capsys):
    names, _ = imagenet.read_val_map(data_dir / "imagenet")
    bad = tmp_path / "bad.txt"
    bad.write_text("ILSVRC2012_val_99999999.JPEG\n")
    prep = ("prepare", "--data-dir", data_dir, "--samples", SAMPLES, "--precision", "int8", "-q")
    assert appliance(*prep, "--calibration-list", bad) == 2
    assert "not in the prepared dataset" in capsys.readouterr().err
    assert not (data_dir / "models" / "resnet50-int8.json").exists()

    cal = tmp_path / "cal_image_list.txt"
    cal.write_text("".join(f"{n}\n" for n in names[::3]))  # 16 of the 48 images
    assert appliance(*prep, "--calibration-list", cal) == 0
    printed = capsys.readouterr().out
    record = json.loads((data_dir / "models" / "resnet50-int8.json").read_text())
    q = record["quantization"]
    assert record["precision"] == "int8" and q["calibration_images"] == 16 and q["format"] == "QDQ"
    assert f"top-1 agreement with FP32: {q['agreement_top1_pct']:.2f}%" in printed

    # an accuracy run of the int8 model: staged uint8 bytes, scored against the FP32 golden labels
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--precision", "int8",
                     "--mode", "accuracy", "-q") == 0
    manifest = json.loads(next((tmp_path / "r").glob("*/resnet50/Offline/accuracy/manifest.json")).read_text())
    assert manifest["precision"] == "int8" and manifest["model"]["sha256"] == record["sha256"]
    # the same samples through the harness (other batch compositions) give the same top-1, within one sample
    assert abs(manifest["result"]["golden_top1"] - q["agreement_top1_pct"]) <= 100 / SAMPLES + 1e-6
    # issue 9's goal; mean folding or input typing gone wrong would agree on almost none
    assert q["agreement_top1_pct"] >= 99.0
