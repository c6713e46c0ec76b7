"""Host-side NMS for the detection layouts the cards return (the paper's §II.F).

The detection models are cut before NMS, so a card returns raw tensors and this module turns one
image's raw outputs into detections. What a benchmark's outputs are (layout, quantisation, box coder,
class map, NMS parameter sets) is its record's `DetectionSpec` (harness/data/benchmarks.py); nothing here is
keyed by a benchmark's name. One code path per layout, each following the tensor's layout:

    box-major    SSD-MobileNet   scores [1917, 91] (sigmoid),  boxes [1917, 4] (ty, tx, th, tw)
    class-major  SSD-ResNet34    scores [81, 15130] (softmax), boxes planar [4, 15130] (dx, dy, dw, dh)
    topk         RetinaNet       scores [5000], flat indices [5000] (anchor * 264 + class, per level),
                                 boxes [5000, 4] (dx, dy, dw, dh): the top 1000 per FPN level
    attribute-major  YOLO11l     one output [84, 8400]: cx, cy, w, h (input pixels), 80 class scores
    anchor-major     YOLO11l     its transpose [8400, 84] (`Benchmark.with_output_layout`)

Techniques of KRAI's NMS-ABP: scores are compared in their raw form (uint8 codes, fp16 or fp32 bit
patterns: for non-negative IEEE values the bit pattern orders like the value) against a threshold code
computed once; only the survivors are dequantised and decoded, with priors computed once; greedy
per-class NMS with a per-class cap, then the per-image cap.

Semantics (the tests' plain reference NMS implements exactly this):

1. candidates of class c (background excluded) = scores strictly above `score_threshold`, the score
   being the dequantised value in float64;
2. per class, candidates sorted by score descending, ties by candidate index ascending (the anchor for
   SSD, the position in the card's output for RetinaNet); at most `pre_nms_per_class` kept (0: all);
3. those are decoded in float64 (clipped to the image), then greedy NMS: a candidate is kept unless its
   IoU with an already kept box of its class is > `iou_threshold`; at most `max_per_class` kept;
4. all kept detections sorted by score descending, ties by class then rank within the class; the first
   `max_per_image` are returned as rows of 7 float32 `[qsl_idx, ymin, xmin, ymax, xmax, score, class]`,
   boxes normalised to 0..1, class the dataset's category id.

YOLO (Ultralytics' predict, as the MLPerf reference runs it): per anchor the best class (the first of
equal scores) is the only candidate; then steps 1-4 with no per-class caps, boxes decoded to corners in
input pixels (IoU taken there, unclipped), and each kept box mapped back through the letterbox (scale by
the longer side, pad centred; scale_boxes of Ultralytics 8.4), clipped to and normalised by the original
image. Its kernel visits candidates in the global (score, class, anchor) order and stops at the image
cap, which gives the same detections as per-class NMS followed by the cap.

Everything runs in one numba-compiled kernel per layout (harness/data/nms_kernels.py, `cache=True`: compiled
once per machine), which takes the image's arrays and a few typed parameter records built here once. What
keeps them inside the paper's budgets (tools/bench_nms.py): the scan over the raw codes is vectorised
(`scan`), each candidate is one int64 key (class, score, index) and the keys are radix-sorted, the IoU
test against a class's kept boxes is branch-free, uint8 box codes decode through a 256-entry table of
the very same values, and Python does no per-image table work (`Postprocessor`). The kernels release
the GIL, so NMS on a host thread runs beside the harness's other threads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import product
from typing import Any

import numpy as np

from harness.core.errors import DataError
from harness.data import nms_kernels as kernels
from harness.data.nms_kernels import BoxCoder, NMSLimits, ScoreCodes, TopkLevels, YoloParams
from harness.records.benchmark import Benchmark, DetectionSpec, NMSParams, OutputQuant

ROW = 7  # qsl_idx, ymin, xmin, ymax, xmax, score, class


def ssd_mobilenet_priors() -> np.ndarray:
    """TF multiple_grid_anchor_generator of ssd_mobilenet_v1_coco: (ycenter, xcenter, h, w), 1917 anchors."""
    grids, n = (19, 10, 5, 3, 2, 1), 6
    scales = [0.2 + (0.95 - 0.2) * i / (n - 1) for i in range(n)] + [1.0]
    out = []
    for layer, g in enumerate(grids):
        if layer == 0:
            specs = [(0.1, 1.0), (scales[0], 2.0), (scales[0], 0.5)]
        else:
            specs = [(scales[layer], ar) for ar in (1.0, 2.0, 0.5, 3.0, 1 / 3)]
            specs.append((math.sqrt(scales[layer] * scales[layer + 1]), 1.0))
        for y, x in product(range(g), range(g)):
            for s, ar in specs:
                out.append(((y + 0.5) / g, (x + 0.5) / g, s / math.sqrt(ar), s * math.sqrt(ar)))
    return np.asarray(out, dtype=np.float64)


def ssd_resnet34_priors() -> np.ndarray:
    """MLCommons dboxes_R34_coco at 1200x1200: (cx, cy, w, h), sizes outer, positions inner; 15130."""
    fig, feats = 1200, (50, 25, 13, 7, 3, 3)
    steps, scales = (24, 48, 92, 171, 400, 400), (84, 180, 396, 612, 828, 1044, 1260)
    ratios = ((2,), (2, 3), (2, 3), (2, 3), (2,), (2,))
    out = []
    for k, f in enumerate(feats):
        fk = fig / steps[k]
        sk1, sk2 = scales[k] / fig, scales[k + 1] / fig
        sk3 = math.sqrt(sk1 * sk2)
        sizes = [(sk1, sk1), (sk3, sk3)]
        for a in ratios[k]:
            w, h = sk1 * math.sqrt(a), sk1 / math.sqrt(a)
            sizes += [(w, h), (h, w)]
        for w, h in sizes:
            for i, j in product(range(f), repeat=2):
                out.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    return np.clip(np.asarray(out, dtype=np.float64), 0.0, 1.0)


def retinanet_priors() -> np.ndarray:
    """torchvision AnchorGenerator of RetinaNet at 800x800: (x1, y1, x2, y2) pixels; 120087 anchors."""
    size, grids = 800, (100, 50, 25, 13, 7)
    out = []
    for lvl, g in enumerate(grids):
        base = 32 * 2 ** lvl
        sizes = np.array([base, int(base * 2 ** (1 / 3)), int(base * 2 ** (2 / 3))], dtype=np.float64)
        h_ratios = np.sqrt(np.array([0.5, 1.0, 2.0]))
        ws = ((1 / h_ratios)[:, None] * sizes[None, :]).ravel()
        hs = (h_ratios[:, None] * sizes[None, :]).ravel()
        cell = np.round(np.stack([-ws, -hs, ws, hs], axis=1) / 2)
        stride = size // g
        sy, sx = np.meshgrid(np.arange(g) * stride, np.arange(g) * stride, indexing="ij")
        shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1).astype(np.float64)
        out.append((shifts[:, None, :] + cell[None, :, :]).reshape(-1, 4))
    return np.concatenate(out)


def layout(benchmark: Benchmark | DetectionSpec) -> DetectionSpec:
    """The detection spec of a benchmark record, or the spec itself (names are the catalogue's:
    `benchmarks.get(name)` first)."""
    if isinstance(benchmark, DetectionSpec):
        return benchmark
    spec: DetectionSpec | None = getattr(benchmark, "detection", None)
    if spec is None:
        name = getattr(benchmark, "name", benchmark)
        raise DataError(f"{name!r} is not a detection benchmark (its record has no detection spec)")
    return spec


def params_for(benchmark: Benchmark | DetectionSpec, which: str | NMSParams = "reference") -> NMSParams:
    return layout(benchmark).params(which)


# ------------------------------------------------------------------------------------------------
# raw score codes

_CODE_KIND = {"uint8": kernels.CODE_AFFINE, "float16": kernels.CODE_F16, "float32": kernels.CODE_F32}
# unsigned int views of the score forms
_CODE_DTYPE: dict[str, type[np.integer[Any]]] = {"uint8": np.uint8, "float16": np.uint16, "float32": np.uint32}


@cache
def _threshold_codes(dtype: str, threshold: float, scale: float, zero_point: int) -> tuple[int, int]:
    """Smallest raw code whose dequantised value is > threshold, and the end of the valid codes."""
    if threshold < 0:
        raise ValueError("score thresholds must be >= 0 (raw codes compare like values only then)")
    if dtype == "uint8":
        values = scale * (np.arange(256, dtype=np.float64) - zero_point)
        above = np.nonzero(values > threshold)[0]
        return (int(above[0]) if above.size else 256), 256
    if dtype == "float16":
        codes = np.arange(0x7C01, dtype=np.uint16)  # +0 .. +inf
        above = np.nonzero(codes.view(np.float16).astype(np.float64) > threshold)[0]
        return int(above[0]), 0x7C01
    x = np.float32(threshold)
    if float(x) <= threshold:
        x = np.nextafter(x, np.float32(np.inf))
    return int(np.asarray(x, dtype=np.float32).view(np.int32)), 0x7F800001


@dataclass(frozen=True)
class _Plan:
    """One (benchmark, parameters, score form, box form), worked out once: the layout's kernel, its
    parameter records as plain tuples (harness.data.nms_kernels says why), and the int view of the scores
    it reads."""

    kernel: Any                             # a numba dispatcher: kernel(*image arrays, qsl_idx, *records)
    records: tuple[tuple[Any, ...], ...]
    code_dtype: type[np.integer] | None     # None: the scores are read as they are (uint8)


def _score_codes(form: str, threshold: float, scale: float, zero_point: float) -> ScoreCodes:
    """The codes above `threshold` in the codes' own width (uint8 / uint16 / uint32), and their reading."""
    lo, hi = _threshold_codes(form, threshold, scale, int(zero_point))
    if lo >= hi:  # no code is above the threshold: an empty range
        lo, hi = 1, 1
    width = _CODE_DTYPE[form]
    return ScoreCodes(width(lo), width(hi - 1), _CODE_KIND[form], float(scale), float(zero_point))


def _box_coder(lay: DetectionSpec, bquant: OutputQuant | None) -> BoxCoder:
    table = _box_table(lay, bquant) if bquant else np.empty((0, 256))
    variances = np.asarray(lay.variances, dtype=np.float64)
    for arr in (table, variances):
        arr.setflags(write=False)
    bscale, bzp = (bquant.uniform_scale, bquant.zero_point) if bquant else (1.0, 0)
    size = float(lay.image_size) if lay.kind == "topk" else 1.0  # the others' boxes are normalised already
    return BoxCoder(float(bscale), float(bzp), table, lay.priors, variances, size)


@cache
def _plan(lay: DetectionSpec, p: NMSParams, score_form: str, box_form: str) -> _Plan:
    quant = lay.score_quant if score_form == "uint8" else None
    bquant = lay.box_quant if box_form == "uint8" else None
    if score_form == "uint8" and quant is None:
        raise DataError("uint8 scores need the benchmark's quantisation parameters")
    if box_form == "uint8" and bquant is None:
        raise DataError("uint8 boxes need the benchmark's quantisation parameters")
    scale, zp = (quant.uniform_scale, quant.zero_point) if quant else (1.0, 0)
    scores = _score_codes(score_form, p.score_threshold, scale, zp)
    class_shift = kernels.SCORE_SHIFT + max(int(scores.hi) - int(scores.lo), 1).bit_length()
    limits = NMSLimits(class_shift, float(p.iou_threshold), int(p.pre_nms_per_class), int(p.max_per_class),
                       int(p.max_per_image), _fold_len(lay), lay.class_ids)
    records: tuple[ScoreCodes | BoxCoder | NMSLimits | TopkLevels, ...] = (scores, _box_coder(lay, bquant), limits)
    if lay.kind == "topk":
        records += (TopkLevels(_level_starts(lay), lay.topk_per_level, lay.num_classes),)
    kernel = {"box-major": kernels.box_major, "class-major": kernels.class_major, "topk": kernels.topk}[lay.kind]
    return _Plan(kernel, tuple(tuple(r) for r in records), None if score_form == "uint8" else _CODE_DTYPE[score_form])


def _fold_len(lay: DetectionSpec) -> int:
    """Flag bytes the scan folds codes onto: a multiple of 8 (one word) and, box-major, of the row
    length, so each flag byte's codes are of one class and the background column can be cleared."""
    if lay.kind == "box-major":
        return math.lcm(lay.num_classes, 8)
    return 1000 if lay.kind == "topk" else 1024


def _level_starts(lay: DetectionSpec) -> np.ndarray:
    counts = lay.level_anchors
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    starts.setflags(write=False)
    return starts


def _box_table(lay: DetectionSpec, q: OutputQuant) -> np.ndarray:
    """The SSD decode's per-coordinate terms for each uint8 box code (dequantised, divided or scaled by
    the variance, exponentiated for the sizes), computed with the very operations `nms_kernels.decode` uses, so a
    table lookup gives the same bits as decoding: quantised boxes then cost no exp per candidate."""
    var, scale = lay.variances, q.uniform_scale
    rows = []
    for code in range(256):
        t = scale * (float(code) - q.zero_point)
        if lay.kind == "box-major":
            rows.append((t / var[0], t / var[1], math.exp(t / var[2]), math.exp(t / var[3])))
        else:
            rows.append((t * var[0], t * var[0], math.exp(t * var[1]), math.exp(t * var[1])))
    return np.ascontiguousarray(np.asarray(rows, dtype=np.float64).T)


# ------------------------------------------------------------------------------------------------
# YOLO (Ultralytics' ONNX export): one output, 4 box rows (cx, cy, w, h in input pixels) + class scores

YOLO_KINDS = ("attribute-major", "anchor-major")  # [4 + C, A] as exported, or its transpose [A, 4 + C]
# views that order like the values
_SIGNED: dict[str, type[np.integer[Any]]] = {"uint8": np.uint8, "float16": np.int16, "float32": np.int32}


@cache
def _letterbox(height: int, width: int, size: int) -> np.ndarray:
    """(gain_x, gain_y, pad_x, pad_y, width, height) of Ultralytics' letterbox of a height x width image to
    size x size (scale by the longer side, each side rounded, pad centred), as its scale_boxes (8.4) undoes
    it: original x = (x - pad_x) / gain_x, clipped to the image."""
    if height <= 0 or width <= 0:
        raise DataError(f"original image size {height}x{width} is not positive")
    gain = min(size / height, size / width)
    new_h, new_w = max(round(height * gain), 1), max(round(width * gain), 1)
    pad_x, pad_y = round((size - new_w) / 2 - 0.1), round((size - new_h) / 2 - 0.1)
    out = np.array((new_w / width, new_h / height, pad_x, pad_y, width, height), dtype=np.float64)
    out.setflags(write=False)
    return out


@cache
def _yolo_plan(lay: DetectionSpec, p: NMSParams, form: str) -> _Plan:
    """One (YOLO spec, parameters, output dtype): threshold codes, the dequantisation of the box and
    score rows (uint8: one scale for the box rows, one for the class rows), the kernel's arguments."""
    q = lay.quantised.get("output")
    bscale, bzp, sscale, szp = 1.0, 0.0, 1.0, 0.0
    if form == "uint8":
        if q is None or q.dtype != "uint8":
            raise DataError(f"{lay.benchmark}: uint8 outputs need the benchmark's quantisation parameters")
        scales = (q.scale,) * (4 + lay.num_classes) if isinstance(q.scale, float | int) else q.scale
        if len(set(scales[:4])) != 1 or len(set(scales[4:])) != 1:
            raise DataError(f"{lay.benchmark}: uint8 outputs need one scale for the box rows and one for the scores")
        bscale, sscale, bzp = float(scales[0]), float(scales[4]), float(q.zero_point)
        szp = bzp
    lo, hi = _threshold_codes(form, p.score_threshold, sscale, int(szp))
    hi -= 1
    if lo > hi:  # no code is above the threshold: an empty range
        lo, hi = 1, 0
    scores = ScoreCodes(lo, hi, _CODE_KIND[form], sscale, szp)
    score_shift = kernels.SCORE_SHIFT + max(lay.num_classes - 1, 1).bit_length()  # key: score | class | anchor
    params = YoloParams(score_shift, lay.kind == "anchor-major", bscale, bzp, lay.class_ids, float(p.iou_threshold),
                        int(p.max_per_image), kernels.YOLO_BLOCK)
    return _Plan(kernels.yolo, (tuple(scores), tuple(params)), _SIGNED[form])


# ------------------------------------------------------------------------------------------------
# public API

def _check_shape(lay: DetectionSpec, role: str, arr: np.ndarray) -> None:
    want = lay.shapes[role]
    if tuple(arr.shape) != want:
        raise DataError(f"{lay.benchmark} {role} have shape {tuple(arr.shape)}, expected {want} per image "
                        f"({lay.kind} layout); is the model cut for this benchmark?")


# the raw forms the kernels read as they are (dtype -> name; `dtype.name` itself costs microseconds)
_SCORE_FORMS = {np.dtype(t): np.dtype(t).name for t in (np.uint8, np.float16, np.float32)}
_BOX_FORMS = {np.dtype(t): np.dtype(t).name for t in (np.uint8, np.float32, np.float64)}


class Postprocessor:
    """`postprocess` bound to one benchmark and parameter set, for callers that run it image after image
    (the harness's NMS threads): the kernel's arguments are worked out once per score and box dtype, so a
    call costs the shape checks, numba's dispatch and the kernel. It holds no scratch memory (each
    kernel call allocates its own), so one instance can serve several threads."""

    def __init__(self, benchmark: Benchmark | DetectionSpec, params: str | NMSParams = "reference") -> None:
        self.layout = layout(benchmark)
        self.params = self.layout.params(params)
        self._plans: dict[tuple[np.dtype, np.dtype], _Plan] = {}

    def of(self, outputs: Sequence[np.ndarray], qsl_idx: int = 0, original: tuple[int, int] | None = None
           ) -> np.ndarray:
        """Detections of one image's outputs given in the record's order (the spec's `outputs` roles);
        `original` (height, width): the image before the letterbox (YOLO; None: the model's input)."""
        if self.layout.kind in YOLO_KINDS:
            return self.yolo(outputs[0], qsl_idx, original)
        by_role = dict(zip(self.layout.outputs, outputs, strict=True))
        return self(by_role["boxes"], by_role["scores"], by_role.get("indices"), qsl_idx)

    def yolo(self, output: np.ndarray, qsl_idx: int = 0, original: tuple[int, int] | None = None) -> np.ndarray:
        """YOLO: one image's single output ([84, 8400] attribute-major or [8400, 84] anchor-major, float32,
        fp16 or uint8) to detections normalised to the `original` (height, width) image."""
        lay = self.layout
        if output.shape != lay.shapes["output"]:
            _check_shape(lay, "output", output)
        if output.dtype not in _SCORE_FORMS:
            output = output.astype(np.float32)
        plan = self._plans.get((output.dtype, output.dtype))
        if plan is None:
            plan = _yolo_plan(lay, self.params, _SCORE_FORMS[output.dtype])
            self._plans[(output.dtype, output.dtype)] = plan
        size = lay.image_size
        geometry = _letterbox(*(original or (size, size)), size)
        codes = np.ascontiguousarray(output).view(plan.code_dtype or output.dtype)
        rows: np.ndarray = plan.kernel(codes, geometry, float(qsl_idx), *plan.records)
        return rows

    def __call__(self, boxes: np.ndarray, scores: np.ndarray, indices: np.ndarray | None = None,
                 qsl_idx: int = 0) -> np.ndarray:
        lay = self.layout
        if boxes.shape != lay.shapes["boxes"] or scores.shape != lay.shapes["scores"]:
            _check_shape(lay, "boxes", boxes)
            _check_shape(lay, "scores", scores)
        if scores.dtype not in _SCORE_FORMS:
            scores = scores.astype(np.float32)
        if boxes.dtype not in _BOX_FORMS:
            boxes = boxes.astype(np.float32)
        plan = self._plans.get((scores.dtype, boxes.dtype))
        if plan is None:
            plan = _plan(lay, self.params, _SCORE_FORMS[scores.dtype], _BOX_FORMS[boxes.dtype])
            self._plans[(scores.dtype, boxes.dtype)] = plan
        codes = np.ascontiguousarray(scores)
        if plan.code_dtype is not None:
            codes = codes.view(plan.code_dtype)
        if lay.kind != "topk":
            rows: np.ndarray = plan.kernel(codes, np.ascontiguousarray(boxes), float(qsl_idx), *plan.records)
            return rows
        if indices is None:
            raise DataError(f"{lay.benchmark} needs the card's candidate indices as well as boxes and scores")
        _check_shape(lay, "indices", indices)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        topk: np.ndarray = plan.kernel(codes, np.ascontiguousarray(boxes), indices, float(qsl_idx), *plan.records)
        return topk


@cache
def bound(spec: DetectionSpec, params: str | NMSParams = "reference") -> Postprocessor:
    """The shared Postprocessor of one detection spec and parameter set."""
    return Postprocessor(spec, params)


def postprocess(benchmark: Benchmark | DetectionSpec, boxes: np.ndarray, scores: np.ndarray,
                indices: np.ndarray | None = None, *, params: str | NMSParams = "reference",
                qsl_idx: int = 0) -> np.ndarray:
    """Detections of one image's raw outputs (float, fp16 or uint8 as the layout allows): (K, 7) float32."""
    key = layout(benchmark)  # records are unhashable, their specs are (by identity)
    return _postprocessor(key, params)(boxes, scores, indices, qsl_idx)


@cache
def _postprocessor(benchmark: DetectionSpec, params: str | NMSParams) -> Postprocessor:
    return bound(layout(benchmark), params)


def quantise(benchmark: Benchmark | DetectionSpec, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs as the paper's cards return them (the spec's `quantised` forms, e.g. uint8 scores and boxes
    for SSD-MobileNet, fp16 scores and uint8 boxes for SSD-ResNet34); roles without one pass unchanged."""
    out = dict(outputs)
    for role, q in layout(benchmark).quantised.items():
        out[role] = q.quantise(outputs[role])
    return out


def warm_up(*specs: DetectionSpec) -> None:
    """Compile (or load from numba's cache) the specs' kernels on empty inputs, so no timing pays for it."""
    for lay in specs:
        arrays = {role: np.zeros(shape, dtype=np.int64 if role == "indices" else np.float32)
                  for role, shape in lay.shapes.items()}
        for form in (arrays, quantise(lay, arrays)) if lay.quantised else (arrays,):
            bound(lay).of([form[role] for role in lay.outputs])


@dataclass(frozen=True, eq=False)
class DetectionEncoder:
    """Host NMS per image (harness.data.nms) as the record's encoder: rows of 7 float32 [qsl_idx, ymin, xmin,
    ymax, xmax, score, class] per sample. `image_sizes` [N, 2] (height, width) per QSL index: the original
    images, for specs whose boxes go back through a letterbox (None: the model's input size)."""

    spec: DetectionSpec
    params: str = "reference"
    image_sizes: np.ndarray | None = None

    def __call__(self, outputs: list[np.ndarray], qsl: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        post = bound(self.spec, self.params)
        sizes = self.image_sizes
        rows = [post.of([o[j] for o in outputs], int(i), None if sizes is None else (int(sizes[i, 0]),
                                                                                      int(sizes[i, 1])))
                for j, i in enumerate(qsl)]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([r.size for r in rows], out=offsets[1:])
        return (np.concatenate(rows).ravel() if rows else np.empty(0, np.float32)), offsets
