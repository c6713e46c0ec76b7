"""bf16 as a precision (harness.prepare.bf16): the FP32 weights computed in bfloat16 by OpenVINO where the CPU has
AVX512_BF16 or AMX-BF16, its agreement with FP32 measured at prepare, refused in one line elsewhere and on
backends without a bf16 path; tune and run take it like any prepared precision."""

from __future__ import annotations

import json

import pytest
from helpers import appliance, linked_copy, manifest_json

from harness.audit.submission.tree import measurements
from harness.core.errors import ApplianceError
from harness.hw import bf16_support, system
from harness.records import manifest as run_manifest
from harness.run.cards.backends import RECORDS
from harness.tune.search import Sweep

# /proc/cpuinfo flags of three CPU families this project's machines have had (abridged to what matters)
MILAN = {"sse4_2", "avx", "avx2", "fma"}                                       # AMD Zen 3: no bf16
GENOA = MILAN | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}          # AMD Zen 4
SAPPHIRE_RAPIDS = GENOA | {"avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"}  # Intel, AMX
OV_CAPS = ["BF16", "FP32", "INT8", "BIN", "EXPORT_IMPORT"]
HERE = bf16_support.missing(system.cpu_flags(), bf16_support.openvino_capabilities()) is None
needs_bf16 = pytest.mark.skipif(not HERE, reason=f"{system.cpu_model()} has neither avx512_bf16 nor amx_bf16")


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bf16_support_by_cpu_family():
    assert "neither avx512_bf16 nor amx_bf16" in str(bf16_support.missing(MILAN, ["FP32", "INT8"]))
    assert bf16_support.missing(GENOA, OV_CAPS) is None
    assert bf16_support.missing(SAPPHIRE_RAPIDS, OV_CAPS) is None
    assert bf16_support.missing(SAPPHIRE_RAPIDS - {"avx512_bf16"}, OV_CAPS) is None  # AMX alone is enough
    # the flag is there but OpenVINO's plugin does not offer BF16 (an old OpenVINO, a masked CPUID)
    assert "does not offer BF16" in str(bf16_support.missing(GENOA, ["FP32", "INT8"]))


def test_prepare_bf16_refused_in_one_line_on_a_cpu_without_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(system, "cpu_flags", lambda: frozenset(MILAN))  # what /proc/cpuinfo says on Zen 3
    data = tmp_path / "data"
    assert appliance("prepare", "--data-dir", data, "--samples", 8, "--precision", "bf16", "-q") == 2
    line = _one_line(capsys)
    assert "--precision bf16: the CPU has neither avx512_bf16 nor amx_bf16" in line and "use fp32 or int8" in line
    assert not data.exists()  # refused before anything was built or written


def test_bf16_runs_on_openvino_only(data_dir, tmp_path, capsys, monkeypatch):
    """A bf16 record with an onnxruntime card: refused before any run folder, whatever the CPU."""
    d = linked_copy(data_dir, tmp_path / "data")
    fp32 = json.loads((d / "models" / "resnet50.json").read_text())
    (d / "models" / "resnet50-bf16.json").write_text(json.dumps({**fp32, "precision": "bf16",
                                                                  "inference_precision": "bf16"}))
    results = tmp_path / "results"
    assert appliance("run", "--data-dir", d, "--results", results, "--precision", "bf16",
                     "--duration-ms", 500) == 2
    assert "--precision bf16 runs on --backend openvino only: onnxruntime has no bf16 path" in _one_line(capsys)
    assert not any(results.rglob("run_*")) and not any(results.rglob(".run_*"))
    # and a CPU without bf16 refuses the openvino card too, before it starts
    monkeypatch.setattr(system, "cpu_flags", lambda: frozenset(MILAN))
    assert appliance("run", "--data-dir", d, "--results", results, "--precision", "bf16", "--backend", "openvino",
                     "--duration-ms", 500) == 2
    assert "--precision bf16: the CPU has neither" in _one_line(capsys)
    assert not any(results.rglob("run_*")) and not any(results.rglob(".run_*"))


def test_tune_times_bf16_on_openvino_only():
    sweep = Sweep(("fp32", "bf16"), (RECORDS["onnxruntime"], RECORDS["openvino"]), (2,), (1,))
    named = [(c, p, b.name, n, r, o) for c, p, b, n, r, o in sweep.candidates()]
    assert named == [("auto", "fp32", "onnxruntime", 2, 1, ""), ("auto", "fp32", "openvino", 2, 1, ""),
                     ("auto", "bf16", "openvino", 2, 1, "")]  # "": no provider options (a CPU)
    with pytest.raises(ApplianceError, match="--precisions bf16 runs on --backends openvino only"):
        Sweep(("fp32", "bf16"), (RECORDS["onnxruntime"],), (2,), (1,)).check()


def test_measurements_say_the_precision():
    def made(precision: str) -> dict[str, str]:
        return measurements(run_manifest.parse(manifest_json(precision=precision), "a manifest"))

    assert made("fp32")["weight_data_types"] == "fp32"
    int8 = made("int8")
    assert int8["weight_data_types"] == "int8" and "quantised to int8" in int8["weight_transformations"]
    b = made("bf16")
    assert b["weight_data_types"] == "bf16" and "converted to bf16 by OpenVINO" in b["weight_transformations"]
    assert "cast in the graph" in b["input_data_types"]
    half = made("fp16")  # an fp16 run's weights are fp16, not the fp32 a missing entry fell back to
    assert half["weight_data_types"] == "fp16" and "convert_float_to_float16" in half["weight_transformations"]


@needs_bf16
@pytest.mark.slow
def test_prepare_bf16_agrees_with_fp32_and_runs_at_bf16(data_dir, tmp_path, capsys):
    d = linked_copy(data_dir, tmp_path / "data")
    assert appliance("prepare", "--data-dir", d, "--samples", 48, "--precision", "bf16", "-q") == 0
    out = capsys.readouterr().out
    assert "top-1 agreement with FP32:" in out and "--precision bf16 --backend openvino" in out
    record = json.loads((d / "models" / "resnet50-bf16.json").read_text())
    assert record["precision"] == "bf16" and record["inference_precision"] == "bf16"
    assert record["input_dtype"] == "uint8" and record["path"] != json.loads(
        (d / "models" / "resnet50.json").read_text())["path"]  # the uint8-input copy of the FP32 weights
    assert record["quantization"]["agreement_top1_pct"] >= 99.0
    assert appliance("prepare", "--data-dir", d, "--samples", 48, "--precision", "bf16", "-q") == 0
    assert "(up to date; top-1 agreement with FP32" in capsys.readouterr().out
    results = tmp_path / "results"
    assert appliance("run", "--data-dir", d, "--results", results, "--precision", "bf16", "--backend", "openvino",
                     "--mode", "accuracy", "--quiet") == 0
    manifest = json.loads(next(results.rglob("accuracy/manifest.json")).read_text())
    assert manifest["precision"] == "bf16" and manifest["inference_precision"] == "bf16"
    assert manifest["cards"][0]["inference_precision_hint"] == "bf16"
    assert manifest["result"]["golden_top1"] >= 97.9  # at most one of 48 samples on a near-tie
    assert any("bf16 model: top-1 agreement with FP32" in n for n in manifest["notes"])


def test_bf16_compiled_precision_is_checked():
    """A compiled model OpenVINO made for f32 is refused, never labelled bf16."""
    import openvino as ov

    core = ov.Core()
    model = _tiny_model()
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    with pytest.raises(RuntimeError, match=r"compiled the model for .*not bf16"):
        bf16_support.check_compiled(compiled)
    if HERE:
        bf16_support.check_compiled(core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16"}))


def _tiny_model():
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([1, 16], np.float32, name="x")
    w = ops.constant(np.ones((16, 4), np.float32))
    return ov.Model([ops.matmul(x, w, False, False)], [x], "tiny")
