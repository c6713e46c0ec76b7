"""The three detection models as ONNX graphs with seeded weights, cut before NMS.

Each has its real architecture's layers, so parameter count, operations and output layouts are the
published ones; only the weights are synthetic. The card returns raw tensors in the paper's layouts
and the host does NMS (harness.data.nms):

- ssd-mobilenet: SSD-MobileNet-v1 (TF object detection API), 300x300; MobileNetV1 backbone, four extra
  feature layers, 1x1 box predictors; outputs `raw_outputs/box_encodings` [N,1917,4] and
  `raw_outputs/class_predictions` [N,1917,91] (sigmoid applied), box-major.
- ssd-resnet34: MLCommons SSD-ResNet34 at 1200x1200; ResNet34 backbone (its strides placed so the first
  feature map is 50x50), five extra layers, 3x3 heads; outputs `bboxes` [N,4,15130] planar and `scores`
  [N,81,15130] class-major (softmax over classes applied).
- retinanet: RetinaNet with a ResNeXt50-32x4d FPN backbone at 800x800 (torchvision's layout), 9 anchors,
  264 classes; per FPN level the card keeps the top 1000 (anchor, class) scores: outputs `boxes`
  [N,5000,4] (regression of those anchors), `scores` [N,5000] (sigmoid), `indices` [N,5000] (int64,
  anchor * 264 + class within the level).

Weights are He-initialised with BatchNorm folded in as identity statistics; the class heads start at
the prior probability 0.01 (RetinaNet's bias init), so seeded models produce a realistic number of
candidates above the score thresholds rather than all or none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.data.models import IR_VERSION

OPSET = 13
PIXEL_STD = 60.0  # inputs are mean-subtracted pixels; the stem is scaled so activations start near unit variance


@dataclass
class _G:
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    n: int = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"

    def const(self, name: str, value: np.ndarray | float | list[float], dtype: type = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value).astype(dtype), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    # one keyword per Conv / BatchNorm / Relu choice, as the graphs being rebuilt name them
    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, *, groups: int = 1,  # noqa: PLR0913
             pad: int | None = None, bn: bool = True, relu: bool = True, bias: float | None = None, scale: float = 1.0,
             gamma: float = 1.0, prefix: str = "conv") -> str:
        name = self.name(prefix)
        fan_in = cin // groups * k * k
        w = self.const(f"{name}/weights", self.rng.normal(0.0, scale * math.sqrt(2.0 / fan_in),
                                                           (cout, cin // groups, k, k)))
        inputs = [x, w]
        if not bn:
            inputs.append(self.const(f"{name}/biases", np.full(cout, 0.0 if bias is None else bias)))
        p = (k - 1) // 2 if pad is None else pad
        y = self.node("Conv", inputs, f"{name}/Conv2D", kernel_shape=[k, k], strides=[stride, stride],
                      pads=[p] * 4, group=groups)
        if bn:
            params = [self.const(f"{name}/BatchNorm/{p_}", v) for p_, v in (
                ("gamma", np.full(cout, gamma)), ("beta", np.zeros(cout)),
                ("moving_mean", np.zeros(cout)), ("moving_variance", np.ones(cout)))]
            y = self.node("BatchNormalization", [y, *params], f"{name}/BatchNorm", epsilon=1e-3)
        if relu:
            y = self.node("Relu", [y], f"{name}/Relu")
        return y

    def head(self, x: str, cin: int, cout: int, k: int, bias: float | np.ndarray, std: float, prefix: str) -> str:
        """A prediction conv: small weights, given bias (prior probability)."""
        name = self.name(prefix)
        w = self.const(f"{name}/weights", self.rng.normal(0.0, std / math.sqrt(cin * k * k), (cout, cin, k, k)))
        b = self.const(f"{name}/biases", np.broadcast_to(np.asarray(bias, dtype=np.float32), (cout,)))
        return self.node("Conv", [x, w, b], f"{name}/Conv2D", kernel_shape=[k, k], pads=[(k - 1) // 2] * 4)

    def reshape(self, x: str, shape: list[int]) -> str:
        s = self.const(self.name("shape"), np.asarray(shape, dtype=np.int64), np.int64)
        return self.node("Reshape", [x, s], self.name("reshape"))

    def transpose(self, x: str, perm: list[int]) -> str:
        return self.node("Transpose", [x], self.name("transpose"), perm=perm)

    def concat(self, xs: list[str], axis: int, name: str | None = None) -> str:
        return self.node("Concat", xs, name or self.name("concat"), axis=axis)

    def add_relu(self, a: str, b: str) -> str:
        return self.node("Relu", [self.node("Add", [a, b], self.name("add"))], self.name("relu"))


def _finish(g: _G, name: str, input_name: str, input_shape: list[int],
            outputs: list[tuple[str, int, list[int | str]]],
            seed: int) -> onnx.ModelProto:
    io_in = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["N", *input_shape])
    outs = [helper.make_tensor_value_info(n, t, ["N", *s]) for n, t, s in outputs]
    graph = helper.make_graph(g.nodes, name, [io_in], outs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="mlperf-appliance", producer_version=f"{name}-seeded")
    helper.set_model_props(model, {"synthetic_weights": "true", "seed": str(seed)})
    onnx.checker.check_model(model)
    return model


PRIOR_LOGIT = -math.log(99.0)  # sigmoid(PRIOR_LOGIT) = 0.01


# ------------------------------------------------------------------------------------------------
# SSD-MobileNet-v1

SSD_MOBILENET_INPUT = "image_tensor:0"
SSD_MOBILENET_BOXES = "raw_outputs/box_encodings"
SSD_MOBILENET_SCORES = "raw_outputs/class_predictions"


def build_ssd_mobilenet(seed: int = 0) -> onnx.ModelProto:
    g = _G(np.random.default_rng(seed))
    x = g.conv(SSD_MOBILENET_INPUT, 3, 32, 3, 2, scale=1 / PIXEL_STD, prefix="Conv2d_0")
    cin = 32
    feats: list[tuple[str, int]] = []
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1),
              (512, 1), (1024, 2), (1024, 1)]
    for i, (cout, stride) in enumerate(blocks, start=1):
        x = g.conv(x, cin, cin, 3, stride, groups=cin, prefix=f"Conv2d_{i}_depthwise")
        x = g.conv(x, cin, cout, 1, prefix=f"Conv2d_{i}_pointwise")
        cin = cout
        if i in (11, 13):
            feats.append((x, cout))
    for mid, cout in ((256, 512), (128, 256), (128, 256), (64, 128)):  # 10 -> 5 -> 3 -> 2 -> 1
        x = g.conv(x, cin, mid, 1, prefix="extra_1x1")
        x = g.conv(x, mid, cout, 3, 2, prefix="extra_3x3_s2")
        cin = cout
        feats.append((x, cout))
    boxes, scores = [], []
    for i, (f, c) in enumerate(feats):
        nd = 3 if i == 0 else 6
        b = g.head(f, c, nd * 4, 1, 0.0, 0.5, f"BoxPredictor_{i}/BoxEncodingPredictor")
        s = g.head(f, c, nd * 91, 1, PRIOR_LOGIT, 2.0, f"BoxPredictor_{i}/ClassPredictor")
        n = _MN_COUNTS[i]
        boxes.append(g.reshape(g.transpose(b, [0, 2, 3, 1]), [-1, n, 4]))  # [N, H*W*nd, 4]: position outer
        scores.append(g.reshape(g.transpose(s, [0, 2, 3, 1]), [-1, n, 91]))
    g.concat(boxes, 1, SSD_MOBILENET_BOXES)
    logits = g.concat(scores, 1)
    g.node("Sigmoid", [logits], SSD_MOBILENET_SCORES)
    return _finish(g, "ssd_mobilenet_v1_seeded", SSD_MOBILENET_INPUT, [3, 300, 300],
                   [(SSD_MOBILENET_BOXES, TensorProto.FLOAT, [1917, 4]),
                    (SSD_MOBILENET_SCORES, TensorProto.FLOAT, [1917, 91])], seed)


_MN_COUNTS = (19 * 19 * 3, 10 * 10 * 6, 5 * 5 * 6, 3 * 3 * 6, 2 * 2 * 6, 1 * 6)


# ------------------------------------------------------------------------------------------------
# SSD-ResNet34

SSD_RESNET34_INPUT = "image"
SSD_RESNET34_BOXES = "bboxes"
SSD_RESNET34_SCORES = "scores"


def _basic(g: _G, x: str, cin: int, cout: int, stride: int) -> str:
    y = g.conv(x, cin, cout, 3, stride, prefix="block_a")
    y = g.conv(y, cout, cout, 3, 1, relu=False, gamma=0.2, prefix="block_b")
    short = x if stride == 1 and cin == cout else g.conv(x, cin, cout, 1, stride, relu=False, prefix="block_down")
    return g.add_relu(y, short)


def build_ssd_resnet34(seed: int = 0) -> onnx.ModelProto:
    """Strides: conv1 2, maxpool 2, layer2 2, layer3's last block 3 (150 -> 50), layer4 1: the first feature
    map is 50x50 at 1200x1200, and the operation count matches the published 433 GOPS."""
    g = _G(np.random.default_rng(seed))
    x = g.conv(SSD_RESNET34_INPUT, 3, 64, 7, 2, scale=1 / PIXEL_STD, prefix="conv1")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    plan = [(64, [1, 1, 1]), (128, [2, 1, 1, 1]), (256, [1, 1, 1, 1, 1, 3]), (512, [1, 1, 1])]
    for cout, strides in plan:
        for s in strides:
            x = _basic(g, x, cin, cout, s)
            cin = cout
    feats = [(x, 512)]
    extras = ((512, 512, 2, 1), (512, 512, 2, 1), (128, 256, 2, 1), (128, 256, 2, 0), (128, 256, 1, 1))
    for mid, cout, s, p in extras:  # 50 -> 25 -> 13 -> 7 -> 3 -> 3
        x = g.conv(x, cin, mid, 1, prefix="extra_1x1")
        x = g.conv(x, mid, cout, 3, s, pad=p, prefix="extra_3x3")
        cin = cout
        feats.append((x, cout))
    nds, sizes = (4, 6, 6, 6, 4, 4), (50, 25, 13, 7, 3, 3)
    locs, confs = [], []
    for (f, c), nd, hw in zip(feats, nds, sizes, strict=True):
        loc = g.head(f, c, nd * 4, 3, 0.0, 0.5, "loc")
        conf = g.head(f, c, nd * 81, 3, np.r_[np.full(nd, 5.5), np.zeros(nd * 80)], 2.0, "conf")
        locs.append(g.reshape(loc, [-1, 4, nd * hw * hw]))      # channels (coordinate, box): box-major per map
        confs.append(g.reshape(conf, [-1, 81, nd * hw * hw]))   # channels (class, box)
    g.concat(locs, 2, SSD_RESNET34_BOXES)
    g.node("Softmax", [g.concat(confs, 2)], SSD_RESNET34_SCORES, axis=1)
    return _finish(g, "ssd_resnet34_1200_seeded", SSD_RESNET34_INPUT, [3, 1200, 1200],
                   [(SSD_RESNET34_BOXES, TensorProto.FLOAT, [4, 15130]),
                    (SSD_RESNET34_SCORES, TensorProto.FLOAT, [81, 15130])], seed)


# ------------------------------------------------------------------------------------------------
# RetinaNet ResNeXt50-32x4d FPN

RETINANET_INPUT = "images"
RETINANET_BOXES = "boxes"
RETINANET_SCORES = "scores"
RETINANET_INDICES = "indices"
RETINANET_CLASSES = 264
RETINANET_TOPK = 1000
# The FPN has no normalisation, so its features reach a spread of ~5 at 800x800: the predictors' weight
# scales are set for logits near the prior (not saturated at 1.0) and regressions of a few tenths (not boxes
# pushed out of the image), as a trained model gives.
RETINANET_CLS_STD = 0.15
RETINANET_REG_STD = 0.05


def _bottleneck_x(g: _G, x: str, cin: int, width: int, cout: int, stride: int) -> str:
    y = g.conv(x, cin, width, 1, prefix="rx_a")
    y = g.conv(y, width, width, 3, stride, groups=32, prefix="rx_b")
    y = g.conv(y, width, cout, 1, relu=False, gamma=0.2, prefix="rx_c")
    short = x if stride == 1 and cin == cout else g.conv(x, cin, cout, 1, stride, relu=False, prefix="rx_down")
    return g.add_relu(y, short)


def build_retinanet(seed: int = 0) -> onnx.ModelProto:
    g = _G(np.random.default_rng(seed))
    x = g.conv(RETINANET_INPUT, 3, 64, 7, 2, scale=1 / PIXEL_STD, prefix="conv1")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, cs = 64, []
    for width, cout, blocks, stride in ((128, 256, 3, 1), (256, 512, 4, 2), (512, 1024, 6, 2), (1024, 2048, 3, 2)):
        for b in range(blocks):
            x = _bottleneck_x(g, x, cin, width, cout, stride if b == 0 else 1)
            cin = cout
        cs.append((x, cout))
    # FPN on C3..C5 with P6, P7 from P5 (torchvision LastLevelP6P7(256, 256))
    lat = [g.conv(c, ch, 256, 1, bn=False, relu=False, prefix="fpn_inner") for c, ch in cs[1:]]
    top = lat[2]
    merged = [top]
    for inner in (lat[1], lat[0]):
        up = g.node("Resize", [top, "", g.const(g.name("scales"), np.array([1, 1, 2, 2], np.float32))],
                    g.name("upsample"), mode="nearest")  # 25 -> 50 -> 100: exact at 800x800
        top = g.node("Add", [inner, up], g.name("fpn_add"))
        merged.insert(0, top)
    ps = [g.conv(m, 256, 256, 3, bn=False, relu=False, prefix="fpn_layer") for m in merged]  # P3, P4, P5
    p6 = g.conv(ps[2], 256, 256, 3, 2, bn=False, relu=False, prefix="fpn_p6")
    p7 = g.conv(g.node("Relu", [p6], "p6_relu"), 256, 256, 3, 2, bn=False, relu=False, prefix="fpn_p7")
    ps += [p6, p7]
    k = RETINANET_CLASSES
    # heads shared across levels (torchvision): 4 x (conv 3x3 256 + ReLU), then the predictor
    cls_w = [g.const(f"cls_tower_{i}/w", g.rng.normal(0, math.sqrt(2 / 2304), (256, 256, 3, 3))) for i in range(4)]
    reg_w = [g.const(f"reg_tower_{i}/w", g.rng.normal(0, math.sqrt(2 / 2304), (256, 256, 3, 3))) for i in range(4)]
    cls_b = [g.const(f"cls_tower_{i}/b", np.zeros(256)) for i in range(4)]
    reg_b = [g.const(f"reg_tower_{i}/b", np.zeros(256)) for i in range(4)]
    cls_out_w = g.const("cls_logits/w", g.rng.normal(0, RETINANET_CLS_STD / math.sqrt(2304), (9 * k, 256, 3, 3)))
    cls_out_b = g.const("cls_logits/b", np.full(9 * k, PRIOR_LOGIT))
    reg_out_w = g.const("bbox_reg/w", g.rng.normal(0, RETINANET_REG_STD / math.sqrt(2304), (36, 256, 3, 3)))
    reg_out_b = g.const("bbox_reg/b", np.zeros(36))

    def tower(x: str, ws: list[str], bs: list[str], out_w: str, out_b: str) -> str:
        for w, b in zip(ws, bs, strict=True):
            x = g.node("Relu", [g.node("Conv", [x, w, b], g.name("head_conv"), kernel_shape=[3, 3], pads=[1] * 4)],
                       g.name("head_relu"))
        return g.node("Conv", [x, out_w, out_b], g.name("head_out"), kernel_shape=[3, 3], pads=[1] * 4)

    kk = g.const("topk_k", np.array([RETINANET_TOPK], np.int64), np.int64)
    kcls = g.const("num_classes", np.array(k, np.int64), np.int64)
    scores, indices, boxes = [], [], []
    for lvl, (p, hw) in enumerate(zip(ps, (100, 50, 25, 13, 7), strict=True)):
        logits = g.reshape(g.transpose(tower(p, cls_w, cls_b, cls_out_w, cls_out_b), [0, 2, 3, 1]),
                           [-1, hw * hw * 9 * k])                                   # (position, anchor, class)
        reg = g.reshape(g.transpose(tower(p, reg_w, reg_b, reg_out_w, reg_out_b), [0, 2, 3, 1]), [-1, hw * hw * 9, 4])
        vals = g.name(f"topk_values_l{lvl}")
        idx = g.name(f"topk_indices_l{lvl}")
        g.nodes.append(helper.make_node("TopK", [logits, kk], [vals, idx], name=g.name("topk"), axis=1))
        anchor = g.node("Div", [idx, kcls], g.name("anchor_of"))
        gathered = g.node("GatherElements", [reg, g.node("Expand", [g.node("Unsqueeze", [anchor, g.const(
            g.name("ax2"), np.array([2], np.int64), np.int64)], g.name("unsq")), g.const(
            g.name("shp"), np.array([1, 1, 4], np.int64), np.int64)], g.name("expand"))], g.name("gather"), axis=1)
        scores.append(g.node("Sigmoid", [vals], g.name("sigmoid")))
        indices.append(idx)
        boxes.append(gathered)
    g.concat(scores, 1, RETINANET_SCORES)
    g.concat(indices, 1, RETINANET_INDICES)
    g.concat(boxes, 1, RETINANET_BOXES)
    return _finish(g, "retinanet_resnext50_32x4d_fpn_seeded", RETINANET_INPUT, [3, 800, 800],
                   [(RETINANET_BOXES, TensorProto.FLOAT, [5000, 4]), (RETINANET_SCORES, TensorProto.FLOAT, [5000]),
                    (RETINANET_INDICES, TensorProto.INT64, [5000])], seed)
