"""`--backend onnxruntime-parallel` (harness.run.cards.parallel_card), the backend recipe's worked example: its card
is a session in onnxruntime's parallel execution mode computing what the sequential card computes, and the backend is
planned, tuned, run and checked through LoadGen from its record alone."""

from __future__ import annotations

import json
import os

import numpy as np
import onnxruntime as ort
import pytest
from helpers import appliance
from onnx import TensorProto, helper, save

from harness.data.models import IR_VERSION
from harness.run.cards import make_card
from harness.run.cards.backends import RECORDS
from harness.run.cards.spec import BackendSpec

BACKEND = "onnxruntime-parallel"


def _two_branches(path):
    """y = relu(x) + neg(x) * 2: two branches a parallel session may run at once."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Mul", ["n", "two"], ["b"]), helper.make_node("Add", ["a", "b"], ["y"])]
    graph = helper.make_graph(nodes, "branches", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [two])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION), path)
    return path


@pytest.mark.parametrize(("backend", "mode"), [(BACKEND, ort.ExecutionMode.ORT_PARALLEL),
                                               ("onnxruntime", ort.ExecutionMode.ORT_SEQUENTIAL)])
def test_the_card_runs_the_session_in_its_execution_mode_and_computes_the_same(tmp_path, backend, mode):
    spec = BackendSpec(RECORDS[backend], _two_branches(tmp_path / "m.onnx"), "x", ("y",), (((4,), "float32"),), None)
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    card = make_card(spec, 0, cpus)
    try:
        assert card.session.get_session_options().execution_mode == mode
        assert card.info.backend == backend and card.info.device == "cpu-emulated" and card.info.emulated
        assert (card.info.details.get("execution_mode") == "parallel") is (backend == BACKEND)
        x = np.array([[-1.0, 0.0, 2.0, -3.5]], np.float32)
        (y,) = card.infer(x, 1)
        np.testing.assert_array_equal(y, np.maximum(x, 0) - 2 * x)
    finally:
        card.close()


@pytest.mark.slow  # a short tune and two short LoadGen runs
def test_tune_run_and_accuracy_go_through_the_parallel_backend(data_dir, tmp_path, capsys):
    record = tmp_path / "t" / "resnet50.json"
    assert appliance("tune", "--data-dir", data_dir, "--backends", BACKEND, "--precisions", "fp32", "-s", "Offline",
                     "--batch-sizes", "2", "--cards", "emulate:1", "-o", record, "--json") == 0
    tuned = json.loads(capsys.readouterr().out)
    assert tuned["chosen"]["Offline"]["backend"] == BACKEND and [m["backend"] for m in tuned["measured"]] == [BACKEND]
    results = tmp_path / "r"
    for mode in ("performance", "accuracy"):
        assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", record, "-m", mode,
                         "--duration-ms", 300, "--count", 16, "-q") == 0, capsys.readouterr().err
    (perf,) = results.glob("*/resnet50/Offline/performance/run_1/manifest.json")
    card = json.loads(perf.read_text())["cards"][0]
    assert card["backend"] == BACKEND and card["execution_mode"] == "parallel" and card["inter_op_threads"] >= 1
    (accuracy,) = results.glob("*/resnet50/Offline/accuracy/accuracy.txt")
    assert "acc" in accuracy.read_text().lower()
