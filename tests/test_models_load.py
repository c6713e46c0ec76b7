"""Every graph the appliance makes or rewrites loads in the onnxruntime it runs with (issue 34).

The first H100 run refused every GPU card: the start probe was written by onnx's `make_model` at onnx's newest IR
version (14), which onnxruntime 1.31 refuses, on the CPU provider too. So each graph is loaded here on the CPU
provider, in ci/test's CPU venv and again (marked `ortgpu`) in its onnxruntime-gpu venv: the probe, every seeded
model, and each rewrite a run or `prepare` makes (uint8 front, every card-output cast, fp16).
"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from harness.data import benchmarks
from harness.data.models import IR_VERSION
from harness.data.models.uint8_front import uint8_input
from harness.prepare import fp16
from harness.run.cards.onnxruntime_card import _probe_model, cast_outputs, one_line


def _loads(model: onnx.ModelProto | bytes) -> None:
    """A session on the CPU provider, without graph optimisation (the load is what is checked, quickly)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    data = model if isinstance(model, bytes) else model.SerializeToString()
    ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _rewrites(model: onnx.ModelProto, name: str) -> dict[str, onnx.ModelProto | bytes]:
    """The graphs a run or `prepare` makes of `model` for benchmark `name`."""
    bench = benchmarks.get(name)
    u8 = uint8_input(model, bench)
    made: dict[str, onnx.ModelProto | bytes] = {"seeded": model, "uint8 front": u8, "fp16": fp16.convert(u8)}
    for kind, casts in bench.output_variants.items():
        copy = onnx.ModelProto()
        copy.CopyFrom(u8)
        made[f"{kind} outputs"] = cast_outputs(copy, bench.outputs, casts)
    return made


@pytest.mark.ortgpu
def test_the_gpu_start_probe_loads_on_the_cpu_provider():
    probe = _probe_model()
    assert onnx.load_from_string(probe).ir_version == IR_VERSION
    _loads(probe)


@pytest.mark.ortgpu
def test_onnxruntimes_reason_is_kept_whole():
    """A graph at onnx's own newest IR version is refused with a first line ending in "Unsupported": the reason
    ("model IR version") is on the next line, and the one line the appliance prints keeps it."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=onnx.IR_VERSION + 1)
    with pytest.raises(Exception) as info:
        _loads(model)
    line = one_line(str(info.value))
    assert "\n" not in line and "IR version" in line, line


@pytest.mark.ortgpu
def test_resnet50_and_its_rewrites_load(data_dir):
    model = onnx.load(str(next((data_dir / "models").glob("resnet50-seeded-*.onnx"))))
    for what, graph in _rewrites(model, "resnet50").items():
        assert isinstance(graph, bytes) or graph.ir_version <= IR_VERSION, what
        _loads(graph)


@pytest.mark.ortgpu
@pytest.mark.parametrize("name", [n for n in benchmarks.NAMES if n not in ("resnet50", "yolo-95")])
def test_seeded_detection_models_and_their_rewrites_load(name):
    """yolo-95 is yolo-99's model; resnet50's seeded build takes minutes, so its prepared file is used above."""
    model = benchmarks.get(name).build_model(0)
    assert isinstance(model, onnx.ModelProto) and model.ir_version == IR_VERSION
    for what, graph in _rewrites(model, name).items():
        assert isinstance(graph, bytes) or graph.ir_version <= IR_VERSION, what
        _loads(graph)


@pytest.mark.slow
def test_the_int8_model_loads(int8_data_dir):
    """onnxruntime's quantiser writes the int8 model itself: it loads too (CPU venv only: it takes a calibration)."""
    path = next((int8_data_dir / "models").glob("resnet50-int8-*.onnx"))
    assert onnx.load(str(path), load_external_data=False).ir_version <= IR_VERSION
    _loads(path.read_bytes())
