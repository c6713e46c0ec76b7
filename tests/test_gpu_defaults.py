"""A GPU card's batch and precision without a tuned record (issue 34: batch 8 at the model's precision wasted an
H100: 1,778 samples/s where the same GPU does 8,236). The rule (harness.run.gpu_defaults, docs/run.md) is checked
here on the CPU: a GPU plan itself needs a GPU."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from helpers import linked_copy

from harness.core.scenarios import Scenario
from harness.data import benchmarks
from harness.data.models.stats import activation_bytes
from harness.records import model_record
from harness.records.layout import Layout, read_model_record
from harness.run import gpu_defaults

RESNET = benchmarks.get("resnet50")
H100_MIB = 81559  # NVML's total for an H100 80GB HBM3


def _with_fp16(data_dir: Path, to: Path, agreement: float) -> Path:
    """The data dir plus an fp16 model record with `agreement` (its file: the FP32 model's)."""
    d = linked_copy(data_dir, to)
    fp32 = model_record.read(d / "models" / "resnet50.json")
    model_record.write(d / "models" / "resnet50-fp16.json", model_record.ModelRecord(
        **{**fp32.__dict__, "precision": "fp16", "quantization": {"agreement_top1_pct": agreement}}))
    return d


def test_precision_is_fp16_where_prepared_and_eligible(data_dir, tmp_path):
    assert gpu_defaults.precision(Layout(data_dir, RESNET))[0] == "fp32"  # none prepared
    good = _with_fp16(data_dir, tmp_path / "good", 99.6)
    assert gpu_defaults.precision(Layout(good, RESNET)) == ("fp16", "GPU default: fp16 (top-1 agreement with FP32 "
                                                                    "99.60% >= the 99% resnet50 must reach)")
    low = _with_fp16(data_dir, tmp_path / "low", 96.3)
    precision, why = gpu_defaults.precision(Layout(low, RESNET))
    assert precision == "fp32" and "not eligible" in why and "96.30% < the 99%" in why


def test_the_batch_by_scenario_and_memory(data_dir):
    model = read_model_record(Layout(data_dir, RESNET), "fp32")
    per_sample = activation_bytes(onnx.load(model.path))
    assert 50 << 20 < per_sample < 400 << 20  # ResNet50 fp32: about 150 MB of tensors per sample, no reuse
    offline, why = gpu_defaults.batch(RESNET, Scenario.OFFLINE, model, 1, H100_MIB)
    assert offline * per_sample <= 0.5 * (H100_MIB << 20) < 2 * offline * per_sample  # the largest that fits
    assert offline & (offline - 1) == 0 and offline <= RESNET.gpu_batch and "capped" in why
    four, _ = gpu_defaults.batch(RESNET, Scenario.OFFLINE, model, 4, H100_MIB)
    assert four == offline // 4
    server, _ = gpu_defaults.batch(RESNET, Scenario.SERVER, model, 1, H100_MIB)
    assert server == offline // 16
    assert gpu_defaults.batch(RESNET, Scenario.OFFLINE, model, 1, None)[0] == RESNET.gpu_batch  # no NVML
    assert gpu_defaults.batch(RESNET, Scenario.SINGLE_STREAM, model, 1, H100_MIB)[0] == 1
    assert gpu_defaults.batch(RESNET, Scenario.MULTI_STREAM, model, 1, H100_MIB)[0] == 8


@pytest.mark.parametrize("name", ["resnet50", "yolo-99"])
def test_every_benchmark_record_has_a_gpu_batch(name):
    assert benchmarks.get(name).gpu_batch > benchmarks.get(name).default_batch
