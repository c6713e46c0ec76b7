"""`prepare --precision fp16`: a uint8-input fp16 model, its agreement with FP32 measured on the CPU."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import SAMPLES, appliance, linked_copy

from harness.data import benchmarks
from harness.data.models.uint8_front import uint8_input
from harness.prepare.fp16 import convert, emulation
from harness.records.model_record import eligibility, parse
from harness.run.cards.backends import RECORDS
from harness.tune.search import CPU_BATCHES, GPU_BATCHES, GPU_COARSE, Sweep


@pytest.fixture(scope="module")
def prepared(data_dir, tmp_path_factory):
    """The ResNet50 data dir plus its fp16 model, and what `prepare --precision fp16` printed."""
    d = linked_copy(data_dir, tmp_path_factory.mktemp("fp16") / "data")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # the session's SAMPLES, as the data dir was prepared: without --samples prepare draws and preprocesses the
        # benchmark's 1,024 performance samples anew (332 s of the suite's setup in the fresh-clone run)
        assert appliance("prepare", "--data-dir", d, "--samples", SAMPLES, "--precision", "fp16", "-q") == 0
    return d, out.getvalue()


@pytest.fixture
def fp16_dir(prepared):
    return prepared[0]


def test_prepare_prints_the_agreement_and_records_it(prepared):
    d, out = prepared
    line = next(x for x in out.splitlines() if "top-1 agreement with FP32" in x)
    pct = float(line.split(":")[1].split("%")[0])
    assert pct >= 99.0
    record = json.loads((d / "models" / "resnet50-fp16.json").read_text())
    assert record["precision"] == "fp16" and record["input_dtype"] == "uint8"
    assert record["quantization"]["agreement_top1_pct"] == pytest.approx(pct, abs=0.01)
    assert eligibility(benchmarks.get("resnet50"), parse(record, d / "models" / "resnet50-fp16.json"))[0]
    model = onnx.load(str(d / record["path"]))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    halves = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16]
    assert len(halves) > 100  # the weights are fp16


def test_emulation_rounds_the_activations_the_cpu_would_not(data_dir):
    """onnxruntime's CPU provider runs the fp16 model with FP32 activations; the emulation rounds them."""
    bench = benchmarks.get("resnet50")
    record = json.loads((data_dir / "models" / "resnet50.json").read_text())
    u8 = uint8_input(onnx.load(str(data_dir / record["path"])), bench)
    half = convert(u8)
    x = np.random.default_rng(1).integers(0, 256, (2, *bench.input_shape), dtype=np.uint8)

    def softmax(model):
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run([bench.outputs[1]], {bench.input_name: x})[0]

    direct, emulated, fp32 = softmax(half), softmax(emulation(u8, half)), softmax(u8)
    assert not np.array_equal(direct, emulated)
    assert np.abs(emulated - fp32).max() < 0.05  # still the same network


def test_fp16_runs_on_a_card(fp16_dir, tmp_path, capsys):
    rc = appliance("run", "--data-dir", fp16_dir, "--results", tmp_path, "--precision", "fp16", "--count", 16,
                   "--duration-ms", 100, "-q")
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads(next(tmp_path.rglob("manifest.json")).read_text())
    assert manifest["precision"] == "fp16"
    assert any(n.startswith("fp16 model: top-1 agreement") for n in manifest["notes"])


def test_tune_times_fp16_on_gpu_backends_only():
    sweep = Sweep(("fp32", "fp16"), (RECORDS["onnxruntime"], RECORDS["onnxruntime-cuda"]), None)
    got = {(p, b.name) for _, p, b, _, _, _ in sweep.candidates()}
    assert got == {("fp32", "onnxruntime"), ("fp32", "onnxruntime-cuda"), ("fp16", "onnxruntime-cuda")}
    assert {n for _, _, b, n, _, _ in sweep.candidates() if b.name == "onnxruntime"} == set(CPU_BATCHES)
    assert max(n for _, _, b, n, _, _ in sweep.candidates() if b.name == "onnxruntime-cuda") == max(GPU_COARSE)  # then
    assert max(GPU_BATCHES) == 1024  # refined around the best, up to 1024 (issue 43)


def test_tune_of_fp16_on_cpu_only_is_one_line(fp16_dir, tmp_path, capsys):
    rc = appliance("tune", "--data-dir", fp16_dir, "--backends", "onnxruntime", "--precisions", "fp16",
                   "-o", tmp_path / "t.json")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1
    assert "--precisions fp16 runs on --backends onnxruntime-cuda,onnxruntime-tensorrt only" in err[0]
    assert not (tmp_path / "t.json").exists()
