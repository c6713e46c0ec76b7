"""YOLO11l as an ONNX graph with seeded weights and the I/O signature of Ultralytics' ONNX export.

The layers are those of Ultralytics' `yolo11.yaml` at scale `l` (depth 1.0, width 1.0, at most 512
channels; C3k2 blocks with c3k=True as Ultralytics sets for m/l/x, SPPF, C2PSA, the v11 Detect head
with its depthwise class branch), read from the published model definition and written here with
onnx/numpy only. Convs are exported as Ultralytics exports them: Conv with BatchNorm folded into the
bias, then SiLU (Sigmoid x Mul). Signature, as `yolo export format=onnx imgsz=640` writes it:

- input `images` float32 [N,3,640,640], RGB scaled to 0..1 (letterboxed, pad 114);
- output `output0` float32 [N,84,8400]: cx, cy, w, h in input pixels, then 80 sigmoid class scores,
  anchors 80x80 (stride 8), 40x40 (16), 20x20 (32); the DFL box head is decoded inside the graph.

The appliance runs `uint8_input(model)`: the same graph behind Cast + Mul(1/255), so the prepared
uint8 shards go to the card as they are stored and no float copy of a sample is made.

Seeded weights: Gaussian, then scaled from one pass over a batch of seeded synthetic COCO pictures (LSUV
in one pass: the calibration graph normalises every conv in-graph, as BatchNorm over that batch would,
so each conv's scale is measured with its inputs as the rescaled net will produce them). Trunk convs get
no bias and one scale per conv, for an RMS of TRUNK_RMS, where SiLU is nearly x or 0: the net stays close
to homogeneous (a centring bias would turn up every layer's gain for a higher-contrast picture, and 60
layers compound it into saturated scores), and no near-constant channel is blown up to unit spread
(per-channel scaling did that and made the net amplify input noise 10^4-fold: int8 then decorrelated
it). Attention's qkv gets an RMS of 1, so its softmax is not an argmax that flips on rounding. The class
head is centred per class on CLS_BIAS with spread CLS_STD and the DFL head on bins falling with distance,
so the best score of a fifth to two thirds of the anchors passes the reference's 0.001 threshold and a
few reach ~1, over every class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.data.models import IR_VERSION

INPUT = "images"
OUTPUT = "output0"
IMAGE_SIZE = 640
NUM_CLASSES = 80
REG_MAX = 16
STRIDES = (8, 16, 32)
OPSET = 13
CALIBRATION_SIZE = 320   # divisible by 32: four pictures cost one 640 pass
CALIBRATION_PICTURES = 4
CLS_BIAS = -12.0         # per class: most (anchor, class) pairs far below 0.001, the best class of most anchors near it
CLS_STD = 2.5
BOX_BIN_SLOPE = -0.3     # DFL bin logits fall with distance: expected distances of a few cells
SILU_GAIN = 1.0 / math.sqrt(0.29)  # He-style: a SiLU of a unit normal has variance 0.29 (second moment 0.36)
TRUNK_RMS = 4.0          # trunk pre-activations mostly beyond the knee, where SiLU is nearly x or 0: homogeneous


def anchor_count(size: int = IMAGE_SIZE) -> int:
    return sum((size // s) ** 2 for s in STRIDES)


@dataclass
class _Builder:
    """Lays out the network; weights are drawn once per name and reused when the graph is rebuilt."""

    rng: np.random.Generator
    params: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    consts: list[onnx.TensorProto] = field(default_factory=list)
    calibrated: dict[str, float] = field(default_factory=dict)  # conv output -> target std (pre-activation)
    normalise: bool = False  # calibration graph: every conv output is centred and scaled to its target in-graph
    n: int = 0               # node counter
    layer: int = 0           # conv counter: weight names do not depend on the calibration nodes

    def uid(self, prefix: str) -> str:
        self.n += 1
        return f"/{prefix}_{self.n}"

    def const(self, value: np.ndarray, prefix: str = "const") -> str:
        name = self.uid(prefix)
        self.consts.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> list[str]:
        name = self.uid(op)
        outs = [f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs

    def one(self, op: str, inputs: list[str], **attrs: Any) -> str:
        return self.node(op, inputs, **attrs)[0]

    def weight(self, name: str, shape: tuple[int, ...], std: float) -> str:
        if name not in self.params:
            self.params[name] = self.rng.normal(0.0, std, shape).astype(np.float32)
        return name

    def conv(self, x: str, cin: int, cout: int, k: int = 1, s: int = 1, g: int = 1, act: bool = True,
             tag: str = "conv", target: float = TRUNK_RMS, bias: np.ndarray | None = None) -> str:
        """Conv (BatchNorm folded into its bias) + SiLU; `target`: the spread its output is scaled to."""
        self.layer += 1
        name = f"/{tag}_{self.layer}"
        w = self.weight(f"{name}.weight", (cout, cin // g, k, k), SILU_GAIN / math.sqrt(cin // g * k * k))
        if f"{name}.bias" not in self.params:
            self.params[f"{name}.bias"] = np.zeros(cout, np.float32) if bias is None else bias.astype(np.float32)
        y = self.one("Conv", [x, w, f"{name}.bias"], kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4,
                     group=g, dilations=[1, 1])
        self.calibrated[y] = target
        if self.normalise:
            y = self._normalised(y, name, target)
        return self.one("Mul", [y, self.one("Sigmoid", [y])]) if act else y

    def _normalised(self, y: str, name: str, target: float) -> str:
        """The conv output as calibration leaves it, over the calibration batch: heads centred per channel on
        their prior bias and scaled per channel to their target spread; trunk convs scaled as a whole to
        their target RMS, with no bias (see the module docstring)."""
        head = name.startswith(("/cls", "/box"))
        centred = self.one("Sub", [y, self.one("ReduceMean", [y], axes=[0, 2, 3], keepdims=1)]) if head else y
        power = self.one("ReduceMean", [self.one("Mul", [centred, centred])],
                         axes=[0, 2, 3] if head else [0, 1, 2, 3], keepdims=1)
        spread = self.one("Sqrt", [self.add(power, self.const(np.asarray(1e-12, np.float32), "eps"))])
        return self.one("Mul", [self.one("Div", [centred, spread]), self.const(np.asarray(target, np.float32), "t")])

    def split(self, x: str, sizes: list[int], axis: int = 1) -> list[str]:
        return self.node("Split", [x, self.const(np.asarray(sizes, np.int64), "split")], len(sizes), axis=axis)

    def concat(self, xs: list[str], axis: int = 1) -> str:
        return self.one("Concat", xs, axis=axis)

    def add(self, a: str, b: str) -> str:
        return self.one("Add", [a, b])

    def reshape(self, x: str, shape: list[int]) -> str:
        return self.one("Reshape", [x, self.const(np.asarray(shape, np.int64), "shape")])


# ------------------------------------------------------------------------------------------------
# Ultralytics modules (ultralytics/nn/modules/block.py, head.py), as their forward passes compute them


def _bottleneck(b: _Builder, x: str, c: int, shortcut: bool, e: float = 0.5) -> str:
    hidden = int(c * e)
    y = b.conv(b.conv(x, c, hidden, 3), hidden, c, 3)
    return b.add(x, y) if shortcut else y


def _c3k(b: _Builder, x: str, c1: int, c2: int, n: int = 2) -> str:
    """C3 with 3x3 bottlenecks (e=1.0 inside): cv3(cat(m(cv1(x)), cv2(x)))."""
    hidden = int(c2 * 0.5)
    y = b.conv(x, c1, hidden)
    for _ in range(n):
        y = _bottleneck(b, y, hidden, True, e=1.0)
    return b.conv(b.concat([y, b.conv(x, c1, hidden)]), 2 * hidden, c2)


def _c3k2(b: _Builder, x: str, c1: int, c2: int, n: int = 2, e: float = 0.5) -> str:
    """C2f layout (split, chain of n blocks, concat of all) with C3k blocks: c3k=True at scale l."""
    c = int(c2 * e)
    ys = b.split(b.conv(x, c1, 2 * c), [c, c])
    for _ in range(n):
        ys.append(_c3k(b, ys[-1], c, c))
    return b.conv(b.concat(ys), (2 + n) * c, c2)


def _sppf(b: _Builder, x: str, c1: int, c2: int, k: int = 5) -> str:
    hidden = c1 // 2
    ys = [b.conv(x, c1, hidden)]
    for _ in range(3):
        ys.append(b.one("MaxPool", [ys[-1]], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4))
    return b.conv(b.concat(ys), 4 * hidden, c2)


def _attention(b: _Builder, x: str, dim: int, heads: int, hw: int) -> str:
    """Ultralytics' Attention: qkv 1x1, per-head softmax(q^T k / sqrt(key_dim)), v @ attn^T, plus a
    depthwise 3x3 positional encoding of v, then a 1x1 projection."""
    head_dim = dim // heads
    key_dim = head_dim // 2                       # attn_ratio 0.5
    qkv = b.conv(x, dim, dim + 2 * key_dim * heads, act=False, target=1.0)  # attention logits of spread ~1
    q, k, v = b.split(b.reshape(qkv, [-1, heads, 2 * key_dim + head_dim, hw * hw]), [key_dim, key_dim, head_dim],
                      axis=2)
    logits = b.one("MatMul", [b.one("Transpose", [q], perm=[0, 1, 3, 2]), k])
    attn = b.one("Softmax", [b.one("Mul", [logits, b.const(np.asarray(key_dim ** -0.5, np.float32), "scale")])],
                 axis=-1)
    out = b.reshape(b.one("MatMul", [v, b.one("Transpose", [attn], perm=[0, 1, 3, 2])]), [-1, dim, hw, hw])
    pe = b.conv(b.reshape(v, [-1, dim, hw, hw]), dim, dim, 3, g=dim, act=False)
    return b.conv(b.add(out, pe), dim, dim, act=False)


def _c2psa(b: _Builder, x: str, c1: int, n: int, hw: int) -> str:
    c = c1 // 2
    a, y = b.split(b.conv(x, c1, 2 * c), [c, c])
    for _ in range(n):  # PSABlock: x + attn(x), then x + ffn(x)
        y = b.add(y, _attention(b, y, c, c // 64, hw))
        y = b.add(y, b.conv(b.conv(y, c, 2 * c), 2 * c, c, act=False))
    return b.conv(b.concat([a, y]), 2 * c, c1)


def _upsample(b: _Builder, x: str) -> str:
    return b.one("Resize", [x, "", b.const(np.asarray([1, 1, 2, 2], np.float32), "scales")], mode="nearest")


def _detect(b: _Builder, feats: list[tuple[str, int]], size: int) -> str:
    """v11 Detect: cv2 box branch (3x3, 3x3, 1x1 to 4 x 16 DFL bins), cv3 class branch (depthwise 3x3 +
    1x1, twice, then 1x1 to 80), decoded as the export does: DFL expectation, dist2bbox xywh x stride."""
    c2 = max(16, feats[0][1] // 4, REG_MAX * 4)
    c3 = max(feats[0][1], min(NUM_CLASSES, 100))
    bins = np.tile(BOX_BIN_SLOPE * np.arange(REG_MAX, dtype=np.float32), 4)
    levels = []
    for (x, ch), stride in zip(feats, STRIDES, strict=True):
        box = b.conv(b.conv(b.conv(x, ch, c2, 3), c2, c2, 3), c2, 4 * REG_MAX, act=False, tag="box", bias=bins)
        cls = b.conv(b.conv(x, ch, ch, 3, g=ch), ch, c3)
        cls = b.conv(b.conv(cls, c3, c3, 3, g=c3), c3, c3)
        cls = b.conv(cls, c3, NUM_CLASSES, act=False, tag="cls", target=CLS_STD,
                     bias=np.full(NUM_CLASSES, CLS_BIAS))
        levels.append(b.reshape(b.concat([box, cls]), [-1, 4 * REG_MAX + NUM_CLASSES, (size // stride) ** 2]))
    a = anchor_count(size)
    box, cls = b.split(b.concat(levels, axis=2), [4 * REG_MAX, NUM_CLASSES])
    # DFL: softmax over the 16 bins of each side, expectation by a fixed 1x1 conv with weights 0..15
    probs = b.one("Softmax", [b.one("Transpose", [b.reshape(box, [-1, 4, REG_MAX, a])], perm=[0, 2, 1, 3])], axis=1)
    dfl_w = b.const(np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1), "dfl")
    dist = b.reshape(b.one("Conv", [probs, dfl_w], kernel_shape=[1, 1]), [-1, 4, a])
    lt, rb = b.split(dist, [2, 2])
    points, strides = _anchors(size)
    p = b.const(points, "anchors")
    x1y1, x2y2 = b.one("Sub", [p, lt]), b.one("Add", [p, rb])
    centre = b.one("Mul", [b.add(x1y1, x2y2), b.const(np.asarray(0.5, np.float32), "half")])
    xywh = b.one("Mul", [b.concat([centre, b.one("Sub", [x2y2, x1y1])]), b.const(strides, "strides")])
    return b.concat([xywh, b.one("Sigmoid", [cls])])


def _anchors(size: int) -> tuple[np.ndarray, np.ndarray]:
    """make_anchors(offset 0.5): cell centres in grid units [1,2,A] and each anchor's stride [1,A]."""
    pts, strides = [], []
    for s in STRIDES:
        n = size // s
        sy, sx = np.meshgrid(np.arange(n, dtype=np.float32) + 0.5, np.arange(n, dtype=np.float32) + 0.5,
                             indexing="ij")
        pts.append(np.stack([sx.ravel(), sy.ravel()]))
        strides.append(np.full(n * n, s, np.float32))
    return np.concatenate(pts, axis=1)[None], np.concatenate(strides)[None]


def _network(b: _Builder, size: int) -> str:
    """yolo11.yaml at scale l: channels min(c, 512) x 1.0, every repeat 2 x 1.0."""
    x = b.conv(INPUT, 3, 64, 3, 2)                                # 0  P1/2
    x = b.conv(x, 64, 128, 3, 2)                                  # 1  P2/4
    x = _c3k2(b, x, 128, 256, e=0.25)                             # 2
    x = b.conv(x, 256, 256, 3, 2)                                 # 3  P3/8
    p3 = _c3k2(b, x, 256, 512, e=0.25)                            # 4
    x = b.conv(p3, 512, 512, 3, 2)                                # 5  P4/16
    p4 = _c3k2(b, x, 512, 512)                                    # 6
    x = b.conv(p4, 512, 512, 3, 2)                                # 7  P5/32
    x = _c3k2(b, x, 512, 512)                                     # 8
    x = _sppf(b, x, 512, 512)                                     # 9
    p5 = _c2psa(b, x, 512, 2, size // 32)                         # 10
    h13 = _c3k2(b, b.concat([_upsample(b, p5), p4]), 1024, 512)   # 11-13
    h16 = _c3k2(b, b.concat([_upsample(b, h13), p3]), 1024, 256)  # 14-16 (P3/8-small)
    h19 = _c3k2(b, b.concat([b.conv(h16, 256, 256, 3, 2), h13]), 768, 512)   # 17-19 (P4/16-medium)
    h22 = _c3k2(b, b.concat([b.conv(h19, 512, 512, 3, 2), p5]), 1024, 512)   # 20-22 (P5/32-large)
    return _detect(b, [(h16, 256), (h19, 512), (h22, 512)], size)  # 23


def _graph(b: _Builder, size: int, extra_outputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    """The graph at input `size` (square) with the builder's current weights."""
    b.nodes, b.consts, b.calibrated, b.n, b.layer = [], [], {}, 0, 0
    _network(b, size)
    b.nodes[-1].output[0] = OUTPUT  # the final Concat
    graph = helper.make_graph(
        b.nodes, "yolo11l_seeded",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["N", 4 + NUM_CLASSES, anchor_count(size)]),
         *(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in extra_outputs)],
        [*(numpy_helper.from_array(v, k) for k, v in b.params.items()), *b.consts])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                             producer_name="mlperf-appliance", producer_version="yolo11l-seeded")


def _pictures(seed: int, count: int, size: int) -> np.ndarray:
    """Seeded synthetic COCO-style pictures (the dataset's own generator), letterboxed: [count,3,size,size]
    in 0..1, the calibration batch. Several pictures, so the scaling holds for the spread of inputs."""
    from harness.data.datasets import coco

    cats = [c[0] for c in coco.COCO_CATEGORIES]
    imgs = [coco.letterbox(coco.draw_picture(np.random.default_rng([seed, i]), cats)[0], size) for i in range(count)]
    return np.stack([im[:, :, ::-1].transpose(2, 0, 1) for im in imgs]).astype(np.float32) / 255


def _calibrate(b: _Builder) -> None:
    """Rescale each conv so its pre-activation spread is its target (LSUV in one pass): a graph at
    CALIBRATION_SIZE that normalises every conv output in-graph gives each conv's raw spread with its
    inputs already as the rescaled network will produce them."""
    import onnxruntime as ort

    pictures = _pictures(int(b.rng.integers(2**32)), CALIBRATION_PICTURES, CALIBRATION_SIZE)
    b.normalise = True
    try:
        _graph(b, CALIBRATION_SIZE)
        targets = dict(b.calibrated)
        weights = {n.output[0]: (n.input[1], n.input[2]) for n in b.nodes if n.output[0] in targets}
        model = _graph(b, CALIBRATION_SIZE, tuple(targets))
    finally:
        b.normalise = False
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for name, value in zip(targets, sess.run(list(targets), {INPUT: pictures}), strict=True):
        w, bias = weights[name]
        head = w.startswith(("/cls", "/box"))
        raw = value.astype(np.float64) - b.params[bias][None, :, None, None]   # W x, without the bias
        mean = raw.mean(axis=(0, 2, 3)) if head else np.zeros(raw.shape[1])
        spread = np.sqrt(((raw - mean[None, :, None, None]) ** 2).mean(axis=(0, 2, 3) if head else None)) + 1e-12
        spread = np.broadcast_to(spread, mean.shape)
        factor = targets[name] / spread
        b.params[w] *= factor.astype(np.float32)[:, None, None, None]
        # heads keep their prior bias (class logits, DFL bins) around a centred W x; the trunk has none
        b.params[bias] = (b.params[bias] - mean * factor).astype(np.float32) if head else np.zeros_like(
            b.params[bias])


def build(seed: int = 0) -> onnx.ModelProto:
    """The seeded YOLO11l (about 25.3M parameters, 87 GOPS at 640) with the export's float signature."""
    b = _Builder(np.random.default_rng(seed))
    _graph(b, CALIBRATION_SIZE)   # draws every weight in layer order
    _calibrate(b)
    model = _graph(b, IMAGE_SIZE)
    helper.set_model_props(model, {"synthetic_weights": "true", "seed": str(seed), "task": "detect",
                                   "stride": "32", "imgsz": f"[{IMAGE_SIZE}, {IMAGE_SIZE}]", "batch": "1"})
    onnx.checker.check_model(model)
    return model


def uint8_input(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` reading uint8 pixels: Cast + Mul(1/255) in front, so shards are staged as stored bytes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inp = next(i for i in m.graph.input if i.name == INPUT)
    if inp.type.tensor_type.elem_type == TensorProto.UINT8:
        return m
    scaled = f"{INPUT}/scaled"
    for node in m.graph.node:
        node.input[:] = [scaled if x == INPUT else x for x in node.input]
    inp.type.tensor_type.elem_type = TensorProto.UINT8
    m.graph.initializer.append(numpy_helper.from_array(np.asarray(1 / 255, np.float32), f"{INPUT}/inv255"))
    m.graph.node.insert(0, helper.make_node("Mul", [f"{INPUT}/float", f"{INPUT}/inv255"], [scaled],
                                            name="input/div255"))
    m.graph.node.insert(0, helper.make_node("Cast", [INPUT], [f"{INPUT}/float"], name="input/cast",
                                            to=TensorProto.FLOAT))
    onnx.checker.check_model(m)
    return m


def build_uint8(seed: int = 0) -> onnx.ModelProto:
    """What the appliance prepares and runs: the seeded model reading the uint8 shards directly."""
    return uint8_input(build(seed))
