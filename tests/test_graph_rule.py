"""Issue 43, finding 1: when a GPU card captures CUDA graphs (harness.run.cards.gpu_iobinding.graph_rule), checked
on onnxruntime's CPU provider: the hazards read from the graph as onnxruntime's CUDA provider would run it (a MatMul
on the pointer-array path, data-shaped ops), the models the cards load, and the default that keeps the configuration
that faulted on the H100 (yolo-99 FP32 with FP32 outputs, CUDA error 700 in a replay) from capturing."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import appliance
from onnx import TensorProto, helper, numpy_helper

from harness.core.errors import ApplianceError, BatchDoesNotFit
from harness.data import benchmarks
from harness.records.layout import Layout, read_model_record
from harness.run.cards.backends import RECORDS
from harness.run.cards.gpu_iobinding import GRAPH_ENV, capture_hazards, cuda_settings, graph_rule
from harness.run.cards.kept_sessions import KeptSessions
from harness.tune import search


def _matmul(left: list[int | str], right: list[int]) -> onnx.ModelProto:
    """x[left] @ w[right] (w an initializer), output y."""
    w = numpy_helper.from_array(np.ones(right, np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, left)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _runs_on_cpu(model: onnx.ModelProto, shape: list[int]) -> None:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones(shape, np.float32)})


@pytest.mark.parametrize(("left", "right", "hazard"), [
    (["N", 3, 4, 5], [3, 5, 6], True),       # 3N matrices against 3: matmul.cc's pointer arrays
    (["N", 3, 4, 5], [1, 3, 5, 6], True),    # the right one broadcast over N: not one stride
    (["N", 4, 5], [5, 6], False),            # a 2-D right operand: strided, stride 0
    ([4, 5], [2, 5, 6], True),               # a 2-D left operand against a batch
    ([4, 5], [5, 6], False),                 # one matrix: one GEMM
])
def test_a_matmul_on_the_pointer_array_path_is_a_hazard(left, right, hazard):
    model = _matmul(left, right)
    _runs_on_cpu(model, [2 if d == "N" else d for d in left])
    found = capture_hazards(model)
    assert bool(found) == hazard, found
    if hazard:
        assert "pointer arrays" in found[0] and "'mm'" in found[0]


def test_a_matmul_with_as_many_matrices_each_side_is_no_hazard():
    model = _matmul(["N", 3, 4, 5], [1, 1, 5, 6])
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones([2, 3, 5, 6], np.float32), "w"))
    assert capture_hazards(model, batch=2) == []


def test_data_shaped_ops_are_hazards_and_a_constant_topk_is_not():
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["nz"], name="nz"), helper.make_node("TopK", ["x", "k"], ["v", "i"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info(n, TensorProto.INT64 if n != "v" else TensorProto.FLOAT, None)
         for n in ("nz", "v", "i")], [k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    _runs_on_cpu(model, [2, 5])
    found = capture_hazards(model)
    assert len(found) == 1 and found[0].startswith("NonZero 'nz'")


def test_the_models_the_gpu_cards_load_have_no_hazard(data_dir):
    """The YOLO11l and ResNet50 graphs (FP32, as prepare builds them) have neither pattern: the H100's fault is not
    one a CPU can see, so the default below rests on which configurations a GPU has replayed."""
    resnet = read_model_record(Layout(data_dir, benchmarks.get("resnet50")), "fp32")
    for model in (onnx.load(resnet.path), benchmarks.get("yolo-99").build_model(0)):
        _runs_on_cpu_as_loaded(model)
        assert capture_hazards(model, batch=16) == []


def _runs_on_cpu_as_loaded(model: onnx.ModelProto) -> None:
    """The model is one onnxruntime's CPU provider loads (the session the card would make, CPU provider)."""
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(("key", "on", "words"), [
    (("yolo-99", "fp32", ("float32",)), False, "CUDA error 700"),
    (("yolo-99", "fp16", ("float16",)), True, "proven: H100"),
    (("resnet50", "fp32", ("int64", "float32")), True, "proven: H100"),
    (("resnet50", "fp16", ("int64", "float32")), True, "proven: H100"),
    (("ssd-mobilenet", "fp32", ("float32", "float32")), False, "has not been replayed on a GPU"),
])
def test_graphs_are_on_by_default_only_where_a_gpu_replayed_them(key, on, words):
    got, why = graph_rule(_matmul(["N", 4, 5], [5, 6]), *key, asked=None)
    assert got is on and words in why


def test_the_environment_forces_graphs_on_or_off_but_never_past_a_hazard():
    clean, hazard = _matmul(["N", 4, 5], [5, 6]), _matmul(["N", 3, 4, 5], [3, 5, 6])
    key = ("yolo-99", "fp32", ("float32",))
    on, why = graph_rule(clean, *key, asked=True)
    assert on and f"{GRAPH_ENV}=1" in why and "CUDA error 700" in why  # forced, and told what happened before
    assert graph_rule(clean, "resnet50", "fp16", ("int64", "float32"), asked=False) == (False, f"{GRAPH_ENV}=0")
    on, why = graph_rule(hazard, "resnet50", "fp16", ("int64", "float32"), asked=True)
    assert not on and "pointer arrays" in why


def test_cuda_settings_leave_graphs_to_the_rule_unless_asked(monkeypatch):
    monkeypatch.delenv(GRAPH_ENV, raising=False)
    assert cuda_settings()["cuda_graph"] is None
    monkeypatch.setenv(GRAPH_ENV, "1")
    assert cuda_settings()["cuda_graph"] is True
    monkeypatch.setenv(GRAPH_ENV, "yes")
    with pytest.raises(ApplianceError, match=r"takes 0 or 1 \(or leave it unset\)"):
        cuda_settings()


# tune --card-outputs: the configuration a GPU run uses is the one tune times ---------------------------------
def test_tune_refuses_card_outputs_the_benchmark_has_not_before_timing(data_dir, capsys):
    assert appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime", "--batch-sizes", "1",
                     "--card-outputs", "quantised", "-s", "Offline", "-q") == 2
    err = capsys.readouterr().err
    assert "resnet50 has no quantised card outputs" in err and len(err.strip().splitlines()) == 1


def test_tune_times_the_cards_with_the_outputs_asked(data_dir, monkeypatch):
    """Each candidate's benchmark record (what its cards return) carries --card-outputs."""
    seen = []

    def measure(bench, data, model, candidate, sessions):
        seen.append((bench.card_outputs, tuple(dtype for _, dtype in bench.output_specs)))
        raise BatchDoesNotFit("recorded")  # the candidate's record is all this test reads

    monkeypatch.setattr(search, "_measure", measure)
    model = read_model_record(Layout(data_dir, benchmarks.get("resnet50")), "fp32")
    with pytest.raises(ApplianceError, match="no candidate fits"):
        search._time_all(benchmarks.get("ssd-mobilenet"), None, {"fp32": model},
                         [("auto", "fp32", RECORDS["onnxruntime"], 1, 1, "")], "quantised", KeptSessions())
    assert seen == [("quantised", ("uint8", "uint8"))]
