"""What int8 quantisation leaves in FP32 is the benchmark record's `int8_fp32` (issue 45), and moving it there out
of quantize.py's guess from the graph's shape changed no model: the same nodes are kept FP32 as before.

`_guessed` is that guess as ba66a6a made it (every Gemm / MatMul / ArgMax / Softmax, and from any Concat on axis 2
the prediction convs and everything after), kept here as the oracle the records are compared against, on the
graphs quantize_static is handed (the seeded model with its uint8 front)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core import inbound
from harness.data import benchmarks
from harness.data.models.uint8_front import uint8_input
from harness.prepare.quantize import kept_fp32
from harness.records.layout import Layout, read_model_record


def _guessed(graph: Any) -> set[str]:
    """ba66a6a's quantize.py: CLASSIFIER_OPS + _decode_tail."""
    kept = {n.name for n in graph.node if n.op_type in ("Gemm", "MatMul", "ArgMax", "Softmax")}
    consumers: dict[str, list[Any]] = {}
    producer = {o: n for n in graph.node for o in n.output}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    todo = [n for n in graph.node if n.op_type == "Concat" and any(a.name == "axis" and a.i == 2
                                                                   for a in n.attribute)]
    up = list(todo)
    while up:
        n = up.pop()
        for i in n.input:
            p = producer.get(i)
            if p is not None and p.op_type in ("Reshape", "Concat", "Conv") and p not in todo:
                todo.append(p)
                if p.op_type != "Conv":
                    up.append(p)
    tail: dict[str, None] = {}
    while todo:
        n = todo.pop()
        if n.name not in tail:
            tail[n.name] = None
            todo += [c for o in n.output for c in consumers.get(o, [])]
    return kept | set(tail)


def _graph(name: str) -> Any:
    bench = benchmarks.get(name)
    model = bench.build_model(0)
    return uint8_input(bench.adopt_model(model) if bench.adopt_model else model, bench).graph


def test_resnet50_keeps_its_classifier_head(data_dir: Path) -> None:
    bench = benchmarks.get(benchmarks.RESNET50)
    graph = uint8_input(inbound.load_onnx(read_model_record(Layout(data_dir, bench)).path), bench).graph
    kept = kept_fp32(graph, bench.int8_fp32)
    assert set(kept) == _guessed(graph) and len(kept) == len(set(kept))
    assert sorted(n.op_type for n in graph.node if n.name in kept) == ["ArgMax", "Gemm", "Softmax"]


@pytest.mark.parametrize(("name", "count"), [
    (benchmarks.SSD_MOBILENET, 0),
    (benchmarks.SSD_RESNET34, 27),  # 6 levels x (2 convs, 2 Reshapes), 2 Concats, the Softmax
    pytest.param(benchmarks.RETINANET, 0, marks=pytest.mark.slow),
    pytest.param(benchmarks.YOLO_99, 35, marks=pytest.mark.slow),  # the attention nodes and the decode tail
])
def test_detection_keeps_what_the_shape_guess_kept(name: str, count: int) -> None:
    graph = _graph(name)
    kept = kept_fp32(graph, benchmarks.get(name).int8_fp32)
    assert set(kept) == _guessed(graph) and len(kept) == count


def test_a_record_that_keeps_nothing_quantises_every_node() -> None:
    graph = _graph(benchmarks.SSD_RESNET34)
    assert kept_fp32(graph, benchmarks.get(benchmarks.SSD_MOBILENET).int8_fp32) == []
