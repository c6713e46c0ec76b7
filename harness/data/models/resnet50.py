"""ResNet50-v1.5 as an ONNX graph with seeded weights and the official MLCommons I/O signature.

The graph has the layers of the real model (bottleneck blocks 3-4-6-3, stride on the 3x3 conv as
in v1.5, 1001 classes with 0 = background), so its parameter count, FLOPs, tensor shapes and
memory traffic are those of `resnet50_v1.onnx`; only the weights are synthetic. Swapping in the
official file needs no code change: input `input_tensor:0` float32 [N,3,224,224], outputs
`ArgMax:0` int64 [N] and `softmax_tensor:0` float32 [N,1001].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.data.models import IR_VERSION

INPUT = "input_tensor:0"
OUTPUT_ARGMAX = "ArgMax:0"
OUTPUT_SOFTMAX = "softmax_tensor:0"
NUM_CLASSES = 1001
OPSET = 13
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)
EXPANSION = 4
RESIDUAL_GAMMA = 0.2  # last BN of each branch starts small so 16 residual adds keep variance bounded


@dataclass
class _Graph:
    """Accumulates nodes and initializers while the network is laid out."""

    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, name: str, cin: int, cout: int, k: int, stride: int,  # noqa: PLR0913
                relu: bool, gamma: float = 1.0, scale: float = 1.0) -> str:  # a layer's shape: one argument each
        std = scale * np.sqrt(2.0 / (cin * k * k))  # He init: unit-variance activations after ReLU
        w = self.const(f"{name}/kernel", self.rng.normal(0.0, std, (cout, cin, k, k)))
        pad = (k - 1) // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [f"{name}/conv"], name=f"{name}/Conv2D",
            kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        bn = [self.const(f"{name}/bn/{p}", v) for p, v in (
            ("gamma", np.full(cout, gamma)), ("beta", np.zeros(cout)),
            ("moving_mean", np.zeros(cout)), ("moving_variance", np.ones(cout)))]
        out = f"{name}/bn"
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}/conv", *bn], [out],
                                           name=f"{name}/FusedBatchNorm", epsilon=1.001e-5))
        if relu:
            self.nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"], name=f"{name}/Relu"))
            out = f"{name}/relu"
        return out

    def bottleneck(self, x: str, name: str, cin: int, width: int, stride: int) -> str:
        cout = width * EXPANSION
        y = self.conv_bn(x, f"{name}/a", cin, width, 1, 1, relu=True)
        y = self.conv_bn(y, f"{name}/b", width, width, 3, stride, relu=True)  # v1.5: stride here
        y = self.conv_bn(y, f"{name}/c", width, cout, 1, 1, relu=False, gamma=RESIDUAL_GAMMA)
        shortcut = x
        if stride != 1 or cin != cout:
            shortcut = self.conv_bn(x, f"{name}/shortcut", cin, cout, 1, stride, relu=False)
        self.nodes.append(helper.make_node("Add", [y, shortcut], [f"{name}/add"], name=f"{name}/add"))
        self.nodes.append(helper.make_node("Relu", [f"{name}/add"], [f"{name}/out"], name=f"{name}/out"))
        return f"{name}/out"


def _features(g: _Graph) -> str:
    """Stem + four stages + global average pool; returns the pooled [N,2048] tensor name."""
    # Inputs are mean-subtracted pixels (std ~60): scale the stem so activations start near unit variance.
    x = g.conv_bn(INPUT, "resnet_model/stem", 3, 64, 7, 2, relu=True, scale=1.0 / 60.0)
    g.nodes.append(helper.make_node("MaxPool", [x], ["resnet_model/max_pool"], name="resnet_model/MaxPool",
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "resnet_model/max_pool", 64
    for s, (width, blocks, stride) in enumerate(STAGES, start=1):
        for b in range(blocks):
            x = g.bottleneck(x, f"resnet_model/stage{s}/block{b}", cin, width, stride if b == 0 else 1)
            cin = width * EXPANSION
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["resnet_model/gap"], name="resnet_model/Mean"))
    g.nodes.append(helper.make_node("Flatten", ["resnet_model/gap"], ["resnet_model/pooled"],
                                    name="resnet_model/Squeeze", axis=1))
    return "resnet_model/pooled"


def _template_classifier(features: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray]:
    """Classifier [NUM_CLASSES, 2048] weights and bias that know the synthetic world's class scenes.

    A trained ResNet50 separates real photographs with wide margins; random weights separate nothing.
    Here the pooled features of each class's seeded scene (`imagenet.render_template`, preprocessed as
    a sample is) become that class's prototype, and the classifier is nearest-prototype: synthetic
    pictures, jittered renderings of the scenes, land near their own prototype, so FP32 top-1 matches
    the val_map label and int8 keeps it. The prototypes' common direction is projected out because deep
    random features share one large mean vector and int8's small gain error along it would otherwise
    move every sample at once. Data-free: the scenes come from a fixed seed, not from any dataset.
    Background (class 0) gets no weight and the lowest logit seen, never the top-1, inside the range
    int8 calibration sees.
    """
    import onnxruntime as ort

    from harness.data.datasets import imagenet

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(features.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    mean = np.asarray(imagenet.MEAN_RGB, np.float32).reshape(1, 3, 1, 1)
    protos = []
    for start in range(0, imagenet.NUM_LABELS, 25):
        scenes = np.stack([imagenet.preprocess_bgr(imagenet.render_template(label, 256, 256))
                           for label in range(start, min(start + 25, imagenet.NUM_LABELS))])
        protos.append(sess.run(None, {INPUT: scenes.astype(np.float32) - mean})[0])
    p = np.concatenate(protos).astype(np.float64)
    centre = p.mean(axis=0)
    along = centre / np.linalg.norm(centre)
    w = p - centre
    w -= np.outer(w @ along, along)
    logits = (p - centre) @ w.T - 0.5 * (w * w).sum(axis=1)   # -|x - prototype|^2 / 2 up to a per-sample term
    scale = 4.0 / logits.std()
    weights = np.vstack([np.zeros((1, p.shape[1])), w]) * scale
    bias = np.concatenate([[logits.min()], -0.5 * (w * w).sum(axis=1) - w @ centre]) * scale
    return weights.astype(np.float32), bias.astype(np.float32)


def build(seed: int = 0) -> onnx.ModelProto:
    """Build the seeded ResNet50-v1.5 model (about 25.56M trainable parameters)."""
    g = _Graph(np.random.default_rng(seed))
    pooled = _features(g)
    io_in = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["N", 3, 224, 224])
    feats = helper.make_model(
        helper.make_graph(g.nodes, "resnet50_features", [io_in],
                          [helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["N", 2048])], g.inits),
        opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    w, b = _template_classifier(feats)
    g.const("resnet_model/dense/kernel", w)
    g.const("resnet_model/dense/bias", b)
    g.nodes += [
        helper.make_node("Gemm", [pooled, "resnet_model/dense/kernel", "resnet_model/dense/bias"],
                         ["resnet_model/final_dense"], name="resnet_model/dense/MatMul", transB=1),
        helper.make_node("Softmax", ["resnet_model/final_dense"], [OUTPUT_SOFTMAX], name="softmax_tensor", axis=1),
        helper.make_node("ArgMax", ["resnet_model/final_dense"], [OUTPUT_ARGMAX], name="ArgMax", axis=1, keepdims=0),
    ]
    outputs = [helper.make_tensor_value_info(OUTPUT_ARGMAX, TensorProto.INT64, ["N"]),
               helper.make_tensor_value_info(OUTPUT_SOFTMAX, TensorProto.FLOAT, ["N", NUM_CLASSES])]
    graph = helper.make_graph(g.nodes, "resnet50_v1.5_seeded", [io_in], outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="mlperf-appliance", producer_version="resnet50-seeded")
    helper.set_model_props(model, {"synthetic_weights": "true", "seed": str(seed)})
    onnx.checker.check_model(model)
    return model
