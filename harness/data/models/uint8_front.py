"""A float model made to read the stored uint8 samples: its input retyped to uint8 and Cast + Sub(mean) put in
front, so staging a batch is a byte copy and the arithmetic of the mean is the graph's (int8, fp16 and bf16
models, and the GPU cards' FP32 model, all read the samples this way)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from harness.records.benchmark_record import Benchmark

if TYPE_CHECKING:
    import onnx


def uint8_input(model: onnx.ModelProto, bench: Benchmark) -> onnx.ModelProto:
    """The FP32 model with its input retyped to uint8 and Cast + Sub(mean) folded in front."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    name = bench.input_name
    if next(i for i in m.graph.input if i.name == name).type.tensor_type.elem_type == TensorProto.UINT8:
        return m  # already reads the stored bytes (YOLO: Cast + Mul(1/255) in its graph)
    centred = f"{name}/centred"
    for node in m.graph.node:
        node.input[:] = [centred if x == name else x for x in node.input]
    inp = next(i for i in m.graph.input if i.name == name)
    inp.type.tensor_type.elem_type = TensorProto.UINT8
    mean = np.asarray(bench.input_mean, np.float32).reshape(1, -1, 1, 1)
    m.graph.initializer.append(numpy_helper.from_array(mean, f"{name}/mean"))
    m.graph.node.insert(0, helper.make_node("Sub", [f"{name}/float", f"{name}/mean"], [centred], name="input/sub_mean"))
    m.graph.node.insert(0, helper.make_node("Cast", [name], [f"{name}/float"], name="input/cast",
                                            to=TensorProto.FLOAT))
    onnx.checker.check_model(m)
    return m
