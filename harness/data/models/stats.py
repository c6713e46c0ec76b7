"""Parameter and operation counts read off an ONNX graph, so synthetic and official models are
measured the same way.

Conventions (stated because published figures differ by them):
- parameters = trainable values: every initializer except BatchNormalization running mean/variance;
- MACs = multiply-accumulates of Conv, Gemm and MatMul per input sample; GOPS = 2 x GMACs (one
  multiply plus one add), the convention behind MLPerf's "7.8 GOPS" for ResNet50 (v1 puts the
  stride on the first 1x1 conv, which makes it about 5% cheaper than v1.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import onnx
from onnx import shape_inference


@dataclass(frozen=True)
class ModelStats:
    params: int
    macs_per_sample: int

    @property
    def gops(self) -> float:
        return 2 * self.macs_per_sample / 1e9

    def describe(self) -> str:
        return (f"{self.params / 1e6:.2f}M parameters, {self.macs_per_sample / 1e9:.2f} GMACs "
                f"= {self.gops:.2f} GOPS per sample")


def _at_batch_one(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with its symbolic input dims set to 1 and every tensor's shape inferred."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    inferred: onnx.ModelProto = shape_inference.infer_shapes(m)
    return inferred


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Static shapes of every tensor with batch size 1 (symbolic dims become 1)."""
    inferred = _at_batch_one(model)
    shapes: dict[str, list[int]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def model_stats(model: onnx.ModelProto) -> ModelStats:
    """Count trainable parameters and per-sample MACs of `model`."""
    running_stats = {n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization"
                     for i in (3, 4) if i < len(n.input)}
    params = sum(prod(i.dims) for i in model.graph.initializer if i.name not in running_stats)
    shapes = _shapes(model)
    macs = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            w, out = shapes[node.input[1]], shapes[node.output[0]]
            macs += prod(out[1:]) * prod(w[1:])  # per output element: Cin/groups x kh x kw
        elif node.op_type in ("Gemm", "MatMul"):
            a, out = shapes[node.input[0]], shapes[node.output[0]]
            k = a[-1] if not (node.op_type == "Gemm" and _attr(node, "transA")) else a[0]
            macs += prod(out[1:]) * k if len(out) > 1 else out[0] * k
    return ModelStats(params=params, macs_per_sample=macs)


def _attr(node: onnx.NodeProto, name: str) -> int:
    return next((a.i for a in node.attribute if a.name == name), 0)


def activation_bytes(model: onnx.ModelProto) -> int:
    """Bytes per sample of every tensor the graph computes (shape inference at batch 1): an upper bound of a
    runtime's working memory per sample, which reuses buffers (the GPU default batch's memory cap)."""
    from onnx import helper

    inferred = _at_batch_one(model)
    total = 0
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        tensor = vi.type.tensor_type
        dims = tensor.shape.dim
        if tensor.elem_type and dims and all(d.HasField("dim_value") for d in dims):
            total += prod(d.dim_value for d in dims) * helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
    return total
