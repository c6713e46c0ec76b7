"""yolo-99 end to end: prepare (size report), every edge scenario on a simulated card, accuracy with golden
mAP 100% and TEST01 on a real onnxruntime card, `--model` bad input. YOLO11l costs ~87 GOPS per image
(0.5-4 s on a busy 2-core machine), so the real-card runs use 2 images and the timed runs a simulated card."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import appliance
from onnx import TensorProto, helper, numpy_helper

from harness.records import detail_log

SAMPLES = 2
STEADY_YOLO = """version: 1
name: steady-yolo
model: test card with a steady 10 ms latency per image
source: tests
input_dtype: uint8
benchmarks:
  yolo-99: {samples_per_second: 100, batch: 1}
"""


@pytest.fixture(scope="module")
def yolo_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("yolo-data")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert appliance("prepare", "--benchmark", "yolo-99", "--data-dir", d, "--samples", SAMPLES) == 0
    return d, out.getvalue()


def _run_dir(root: Path, scenario: str, leaf: str) -> Path:
    found = sorted(root.glob(f"*/yolo-99/{scenario}/{leaf}"))
    assert found, f"no {leaf} under {root}"
    return found[-1]


def test_prepare_prints_parameters_and_gops_within_bounds(yolo_dir: tuple[Path, str]) -> None:
    _, printed = yolo_dir
    m = re.search(r"([\d.]+)M parameters, [\d.]+ GMACs = ([\d.]+) GOPS", printed)
    assert m, printed
    assert abs(float(m[1]) / 25.3 - 1) < 0.01 and abs(float(m[2]) / 86.9 - 1) < 0.03
    assert re.search(r"published: 25\.3M parameters \([+-]0\.\d+%\), 86\.9 GOPS", printed)
    manifest = json.loads((yolo_dir[0] / "preprocessed" / "yolo-99" / "manifest.json").read_text())
    assert manifest["dtype"] == "uint8" and manifest["sample_shape"] == [3, 640, 640] and manifest["count"] == SAMPLES
    assert manifest["source"].endswith("coco_safe")


@pytest.mark.parametrize("scenario", ["SingleStream", "MultiStream", "Offline"])
def test_edge_scenarios_on_a_simulated_card(scenario: str, yolo_dir: tuple[Path, str], tmp_path: Path) -> None:
    profile = tmp_path / "steady.yaml"
    profile.write_text(STEADY_YOLO)
    count = {"SingleStream": 16, "MultiStream": 4, "Offline": 32}[scenario]
    assert appliance("run", "-b", "yolo-99", "-s", scenario, "--data-dir", yolo_dir[0], "--results", tmp_path / "r",
                     "--cards", f"simulate:{profile}:1", "--duration-ms", 300, "--count", count, "-q") == 0
    detail = detail_log.values(_run_dir(tmp_path / "r", scenario, "performance/run_1") / "mlperf_log_detail.txt")
    assert detail["effective_scenario"] == scenario and detail["_errors"] == []
    assert detail["result_validity"] in ("VALID", "INVALID")
    assert detail["effective_performance_sample_count"] == SAMPLES  # 64 in the round, capped by the data
    if scenario == "MultiStream":
        assert detail["effective_samples_per_query"] == 8


def test_edge_profiles_model_yolo(yolo_dir: tuple[Path, str], tmp_path: Path) -> None:
    """The shipped simulated Cloud AI 100 profile has a YOLO entry."""
    assert appliance("run", "-b", "yolo-99", "-s", "Offline", "--data-dir", yolo_dir[0], "--results", tmp_path,
                     "--cards", "simulate:cloud-ai-100:2", "--duration-ms", 200, "--count", 64, "-q") == 0
    manifest = json.loads((_run_dir(tmp_path, "Offline", "performance/run_1") / "manifest.json").read_text())
    assert "simulated" in json.dumps(manifest).lower()


@pytest.mark.slow
def test_accuracy_golden_100_and_test01_on_onnxruntime(yolo_dir: tuple[Path, str], tmp_path: Path) -> None:
    common = ("-b", "yolo-99", "-s", "Offline", "--data-dir", yolo_dir[0], "--results", tmp_path, "--system", "sut",
              "--cards", "emulate:1", "-q")
    assert appliance("run", *common, "--duration-ms", 100, "--count", SAMPLES) == 0
    assert appliance("run", *common, "--mode", "accuracy") == 0
    acc = tmp_path / "sut" / "yolo-99" / "Offline" / "accuracy"
    first, second = (acc / "accuracy.txt").read_text().splitlines()
    assert re.fullmatch(r"mAP=[\d.]+%", first) and second.startswith("hash=")  # the checker's mAP pattern
    assert (acc / "accuracy_golden.txt").read_text().startswith("mAP=100.000%")
    log = json.loads((acc / "mlperf_log_accuracy.json").read_text())
    assert sorted(r["qsl_idx"] for r in log) == list(range(SAMPLES))
    rows = np.concatenate([np.frombuffer(bytes.fromhex(r["data"]), np.float32) for r in log]).reshape(-1, 7)
    assert 0 < len(rows) <= 300 * SAMPLES
    assert set(rows[:, 6].astype(int)) <= {c for c in range(1, 91)} - {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}
    assert (rows[:, 1:5] >= 0).all() and (rows[:, 1:5] <= 1).all()  # normalised to the original image
    assert appliance("run", *common, "--duration-ms", 100, "--count", SAMPLES, "--mode", "TEST01") == 0
    verdict = tmp_path / "sut" / "yolo-99" / "Offline" / "TEST01" / "verify_accuracy.txt"
    assert verdict.read_text().rstrip().endswith("TEST PASS")


def _fake_export(path: Path, size: int, out_shape: list[int]) -> Path:
    """An ONNX file with YOLO's names and the given input size / output shape (a constant output)."""
    value = numpy_helper.from_array(np.zeros([1, *out_shape], np.float32), "value")
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["output0"], value=value)], "fake",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["N", *out_shape])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize(("size", "shape", "option", "words"), [
    (640, [8400, 84], (), "has shape [8400, 84] per sample, yolo-99 needs [84, 8400]: that is the anchor-major "
                          "layout, select it with --output-layout anchor-major"),
    (640, [84, 8400], ("--output-layout", "anchor-major"), "has shape [84, 8400] per sample, yolo-99 needs "
     "[8400, 84]: that is the attribute-major layout, select it with --output-layout attribute-major"),
    (320, [84, 2100], (), "input 'images' is 320x320; yolo-99 runs at 640x640: export the model at 640x640"),
])
def test_model_with_wrong_layout_or_size(size: int, shape: list[int], option: tuple[str, ...], words: str,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _fake_export(tmp_path / "yolo11l.onnx", size, shape)
    data = tmp_path / "data"
    assert appliance("prepare", "-b", "yolo-99", "--data-dir", data, "--model", model, "--samples", 1, "-q",
                     *option) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[-1] and not any("Traceback" in line for line in err)
    assert not (data / "models" / "yolo-99.json").exists()  # nothing recorded


@pytest.mark.slow
def test_int8_reads_uint8_and_keeps_the_decode_fp32(yolo_dir: tuple[Path, str]) -> None:
    """prepare --precision int8 for YOLO: QDQ trunk, uint8 input as stored, decode tail FP32, and its mAP
    against the FP32 golden detections recorded (a floor that a decorrelated or broken model misses)."""
    import onnx

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert appliance("prepare", "-b", "yolo-99", "--data-dir", yolo_dir[0], "--samples", SAMPLES,
                         "--precision", "int8") == 0
    record = json.loads((yolo_dir[0] / "models" / "yolo-99-int8.json").read_text())
    q = record["quantization"]
    assert 10.0 <= q["golden_map_pct"] <= 100.0 and f"{q['golden_map_pct']:.2f}%" in out.getvalue()
    model = onnx.load(yolo_dir[0] / record["path"])  # records name files relative to the data dir
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") > 100 and ops.count("Cast") == 1
    producer = {o: n for n in model.graph.node for o in n.output}
    assert producer["output0"].op_type == "Concat" and "DequantizeLinear" not in {
        producer[i].op_type for i in producer["output0"].input}  # boxes and scores leave in FP32
