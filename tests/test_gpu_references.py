"""Issue 43, finding 6: the H200 known by its PCI id and given NVIDIA's own per-GPU ResNet50 figure, every GPU
figure of tools/gpu_bench.sh's table labelled with the GPU's name (an H200's run is not divided by an H100's)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from harness.hw.topology.cards import KINDS

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _table():
    spec = importlib.util.spec_from_file_location("gpu_bench_table", TOOLS / "gpu_bench_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("device", "model"), [(0x2335, "H200-SXM-141GB"), (0x233B, "H200-NVL"),
                                               (0x2330, "H100-SXM5-80GB")])
def test_the_h200_is_in_the_card_table(device, model):
    nvidia = next(k for k in KINDS if k.vendor_id == 0x10DE)
    assert nvidia.model(device) == model


def test_the_h200_reference_is_nvidias_eight_gpu_figure_over_eight():
    table = _table()
    key, rate, source = table.nvidia_reference("NVIDIA H200")
    total = int(re.search(r"([\d,]+) / 8", source).group(1).replace(",", ""))
    assert key == "H200" and rate == total / 8 == 94620
    assert "H200-SXM-141GBx8_TRT/resnet50/Offline" in source and "198fc46" in source
    assert table.nvidia_reference("NVIDIA H100 80GB HBM3")[:2] == ("H100", 87970.0)
    assert "no NVIDIA figure for NVIDIA L4" in table.nvidia_reference("NVIDIA L4")[2]


def test_the_table_divides_an_h200_run_by_the_h200_and_names_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({
        "precision": "fp16", "batch_size": 512, "card_map": {"spec": "cuda:allx2"},
        "cards": [{"gpu": {"name": "NVIDIA H200", "pci": "0000:01:00.0"}}] * 2}))
    (tmp_path / "b-offline.json").write_text(json.dumps(
        [{"path": str(run), "perf": {"metric": 18924.0, "valid": True}}]))
    rows = {what.strip(): (value, note) for what, value, note in _table().resnet_rows(str(tmp_path / "b"))}
    value, note = rows["per-GPU Offline / NVIDIA H200 TensorRT"]
    assert value == "0.200" and "on NVIDIA H200 of 94620" in note


def test_the_table_times_yolo_tf32_against_fp32_from_the_tuned_record(tmp_path):
    measured = [{"precision": p, "samples_per_second": r} for p, r in
                (("fp32", 400.0), ("fp32", 500.0), ("tf32", 900.0), ("tf32", 1000.0))]
    (tmp_path / "b-yolo-tune.json").write_text(json.dumps({"measured": measured}))
    ((_what, value, note),) = _table().precision_rows(str(tmp_path / "b"))
    assert value == "fp32 500.0/s, tf32 1000.0/s" and note.startswith("tf32 / fp32 2.00"), (value, note)
    (tmp_path / "b-yolo-tune.json").unlink()
    assert "no tuned record" in _table().precision_rows(str(tmp_path / "b"))[0][2]
