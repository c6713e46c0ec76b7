"""Host-side NMS for the three detection layouts the cards return (SPEC §3, §4; the paper's §II.F).

The detection models are cut before NMS, so a card returns raw tensors and this module turns one
image's raw outputs into detections. One code path per layout, each following the tensor's layout:

    box-major    SSD-MobileNet   scores [1917, 91] (sigmoid),  boxes [1917, 4] (ty, tx, th, tw)
    class-major  SSD-ResNet34    scores [81, 15130] (softmax), boxes planar [4, 15130] (dx, dy, dw, dh)
    topk         RetinaNet       scores [5000], flat indices [5000] (anchor * 264 + class, per level),
                                 boxes [5000, 4] (dx, dy, dw, dh): the top 1000 per FPN level

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

Everything runs in one numba-compiled kernel per layout (`cache=True`: compiled once per machine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from itertools import product
from typing import Any

import numpy as np
from numba import njit

from harness.errors import DataError

ROW = 7  # qsl_idx, ymin, xmin, ymax, xmax, score, class

# COCO 2017's 80 category ids: `coco.getCatIds()` of instances_val2017.json.
COCO_80_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28,
               31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54,
               55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81,
               82, 84, 85, 86, 87, 88, 89, 90)


@dataclass(frozen=True)
class NMSParams:
    score_threshold: float
    iou_threshold: float
    pre_nms_per_class: int  # candidates per class kept (best first) before NMS; 0 = all
    max_per_class: int      # detections per class after NMS
    max_per_image: int


@dataclass(frozen=True)
class Quant:
    """uint8 affine quantisation of an output: value = scale * (q - zero_point)."""

    scale: float
    zero_point: int

    def quantise(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(x / self.scale) + self.zero_point, 0, 255).astype(np.uint8)

    def dequantise(self, q: np.ndarray) -> np.ndarray:
        return self.scale * (q.astype(np.float64) - self.zero_point)


# SPEC §4: MLCommons reference values (default) and KRAI's NMS-ABP values.
PARAMS: dict[str, dict[str, NMSParams]] = {
    "ssd-mobilenet": {"reference": NMSParams(0.3, 0.6, 0, 100, 100),
                      "krai": NMSParams(0.3, 0.45, 0, 100, 100)},
    "ssd-resnet34": {"reference": NMSParams(0.05, 0.5, 200, 200, 200),
                     "krai": NMSParams(0.05, 0.5, 0, 100, 600)},
    "retinanet": {"reference": NMSParams(0.05, 0.5, 0, 300, 300),
                  "krai": NMSParams(0.05, 0.5, 0, 200, 1000)},
}
PARAM_SETS = ("reference", "krai")


@dataclass(frozen=True)
class Layout:
    """What one detection benchmark's card returns and how its boxes decode."""

    benchmark: str
    kind: str                        # box-major | class-major | topk
    num_anchors: int
    num_classes: int                 # model classes, background (0) included for SSD
    outputs: tuple[str, ...]         # roles of the model outputs, in the record's order
    shapes: dict[str, tuple[int, ...]]  # per-image shape of each role
    variances: tuple[float, ...]     # box coder: SSD scale factors / RetinaNet weights
    image_size: int                  # pixels (RetinaNet decodes in pixels)
    score_quant: Quant | None        # quantised form the paper's cards return (None: fp16 or none)
    box_quant: Quant | None
    quantised_score_dtype: str       # "uint8", "float16" or "" (no quantised variant)
    topk_per_level: int = 0
    level_anchors: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def class_ids(self) -> np.ndarray:
        return _class_ids(self.benchmark)

    @property
    def priors(self) -> np.ndarray:
        return _priors(self.benchmark)


def _ssd_mobilenet_priors() -> np.ndarray:
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


def _ssd_resnet34_priors() -> np.ndarray:
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


def _retinanet_priors() -> np.ndarray:
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


LAYOUTS: dict[str, Layout] = {
    "ssd-mobilenet": Layout(
        "ssd-mobilenet", "box-major", 1917, 91, ("boxes", "scores"),
        {"boxes": (1917, 4), "scores": (1917, 91)}, (10.0, 10.0, 5.0, 5.0), 300,
        # box scale calibrated to the seeded model's encodings (|t| < 2): 0.125 cost 2 points of mAP against golden
        score_quant=Quant(1 / 255, 0), box_quant=Quant(1 / 64, 128), quantised_score_dtype="uint8"),
    "ssd-resnet34": Layout(
        "ssd-resnet34", "class-major", 15130, 81, ("boxes", "scores"),
        {"boxes": (4, 15130), "scores": (81, 15130)}, (0.1, 0.2), 1200,
        score_quant=None, box_quant=Quant(0.0625, 128), quantised_score_dtype="float16"),
    "retinanet": Layout(
        "retinanet", "topk", 120087, 264, ("boxes", "scores", "indices"),
        {"boxes": (5000, 4), "scores": (5000,), "indices": (5000,)}, (1.0, 1.0, 1.0, 1.0), 800,
        score_quant=None, box_quant=None, quantised_score_dtype="", topk_per_level=1000,
        level_anchors=tuple(9 * g * g for g in (100, 50, 25, 13, 7))),
}


@cache
def _priors(benchmark: str) -> np.ndarray:
    fn = {"ssd-mobilenet": _ssd_mobilenet_priors, "ssd-resnet34": _ssd_resnet34_priors,
          "retinanet": _retinanet_priors}[benchmark]
    p = np.ascontiguousarray(fn())
    assert p.shape == (LAYOUTS[benchmark].num_anchors, 4), p.shape
    p.setflags(write=False)
    return p


@cache
def _class_ids(benchmark: str) -> np.ndarray:
    """Model class index -> dataset category id (float64, for the output rows)."""
    if benchmark == "ssd-mobilenet":      # 91 TF classes are COCO ids already
        ids = np.arange(91)
    elif benchmark == "ssd-resnet34":     # 81 classes: [0] + coco.getCatIds()
        ids = np.asarray((0, *COCO_80_IDS))
    else:                                 # OpenImages MLPerf: category ids 0..263 (export_to_coco enumerates)
        ids = np.arange(264)
    out = ids.astype(np.float64)
    out.setflags(write=False)
    return out


def layout(benchmark: Any) -> Layout:
    name = getattr(benchmark, "name", benchmark)
    try:
        return LAYOUTS[name]
    except KeyError:
        raise DataError(f"{name!r} is not a detection benchmark; choose one of: {', '.join(LAYOUTS)}") from None


def params_for(benchmark: Any, which: str | NMSParams = "reference") -> NMSParams:
    if isinstance(which, NMSParams):
        return which
    table = PARAMS[layout(benchmark).benchmark]
    if which not in table:
        raise DataError(f"unknown NMS parameter set {which!r}; choose one of: {', '.join(PARAM_SETS)}")
    return table[which]


# ------------------------------------------------------------------------------------------------
# raw score codes

_KIND_AFFINE, _KIND_F16, _KIND_F32 = 0, 1, 2


@dataclass(frozen=True)
class ScoreCodes:
    """How one score tensor's raw codes compare: lo <= code < hi means score > threshold."""

    codes: np.ndarray  # int view of the scores: uint8, uint16 (fp16 bits) or int32 (fp32 bits)
    kind: int
    lo: int
    hi: int
    scale: float
    zero_point: float


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


def score_codes(scores: np.ndarray, threshold: float, quant: Quant | None) -> ScoreCodes:
    if scores.dtype == np.uint8:
        if quant is None:
            raise DataError("uint8 scores need the benchmark's quantisation parameters")
        lo, hi = _threshold_codes("uint8", threshold, quant.scale, quant.zero_point)
        return ScoreCodes(scores, _KIND_AFFINE, lo, hi, quant.scale, float(quant.zero_point))
    if scores.dtype == np.float16:
        lo, hi = _threshold_codes("float16", threshold, 1.0, 0)
        return ScoreCodes(scores.view(np.uint16), _KIND_F16, lo, hi, 1.0, 0.0)
    if scores.dtype != np.float32:
        scores = scores.astype(np.float32)
    lo, hi = _threshold_codes("float32", threshold, 1.0, 0)
    return ScoreCodes(scores.view(np.int32), _KIND_F32, lo, hi, 1.0, 0.0)


def _box_values(boxes: np.ndarray, quant: Quant | None) -> tuple[np.ndarray, float, float]:
    """Boxes as the kernel reads them: uint8 codes with (scale, zero point), or floats with (1, 0)."""
    if boxes.dtype == np.uint8:
        if quant is None:
            raise DataError("uint8 boxes need the benchmark's quantisation parameters")
        return boxes, quant.scale, float(quant.zero_point)
    if boxes.dtype not in (np.float32, np.float64):
        boxes = boxes.astype(np.float32)
    return boxes, 1.0, 0.0


# ------------------------------------------------------------------------------------------------
# numba kernels

@njit(cache=True)
def _score_value(code, kind, scale, zp):
    """Dequantised score in float64, exactly as numpy would compute it."""
    c = int(code)
    if kind == 0:
        return scale * (float(c) - zp)
    if kind == 1:
        e, m = (c >> 10) & 0x1F, c & 0x3FF
        if e == 0:
            return math.ldexp(float(m), -24)
        if e == 31:
            return math.inf
        return math.ldexp(float(m | 0x400), e - 25)
    e, m = (c >> 23) & 0xFF, c & 0x7FFFFF
    if e == 0:
        return math.ldexp(float(m), -149)
    if e == 255:
        return math.inf
    return math.ldexp(float(m | 0x800000), e - 150)


@njit(cache=True)
def _iou(b, i, j):
    ih = min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])
    iw = min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])
    if ih <= 0.0 or iw <= 0.0:
        return 0.0
    inter = ih * iw
    union = (b[i, 2] - b[i, 0]) * (b[i, 3] - b[i, 1]) + (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1]) - inter
    return inter / union if union > 0.0 else 0.0


@njit(cache=True)
def _clip01(v):
    return min(max(v, 0.0), 1.0)


@njit(cache=True)
def _decode_one(kind, boxes, bscale, bzp, priors, var, cand, anchor, size, out, r):
    """Decode candidate `cand` (anchor `anchor`) into out[r] = (ymin, xmin, ymax, xmax), clipped, 0..1."""
    if kind == 0:  # box-major TF coder: boxes [A, 4] = (ty, tx, th, tw); priors (yc, xc, h, w)
        ty = bscale * (float(boxes[cand, 0]) - bzp)
        tx = bscale * (float(boxes[cand, 1]) - bzp)
        th = bscale * (float(boxes[cand, 2]) - bzp)
        tw = bscale * (float(boxes[cand, 3]) - bzp)
        yc = ty / var[0] * priors[anchor, 2] + priors[anchor, 0]
        xc = tx / var[1] * priors[anchor, 3] + priors[anchor, 1]
        h = math.exp(th / var[2]) * priors[anchor, 2]
        w = math.exp(tw / var[3]) * priors[anchor, 3]
        out[r, 0] = _clip01(yc - h / 2.0)
        out[r, 1] = _clip01(xc - w / 2.0)
        out[r, 2] = _clip01(yc + h / 2.0)
        out[r, 3] = _clip01(xc + w / 2.0)
    elif kind == 1:  # class-major SSD-R34: boxes planar [4, A] = (dx, dy, dw, dh); priors (cx, cy, w, h)
        dx = bscale * (float(boxes[0, cand]) - bzp)
        dy = bscale * (float(boxes[1, cand]) - bzp)
        dw = bscale * (float(boxes[2, cand]) - bzp)
        dh = bscale * (float(boxes[3, cand]) - bzp)
        cx = dx * var[0] * priors[anchor, 2] + priors[anchor, 0]
        cy = dy * var[0] * priors[anchor, 3] + priors[anchor, 1]
        w = math.exp(dw * var[1]) * priors[anchor, 2]
        h = math.exp(dh * var[1]) * priors[anchor, 3]
        out[r, 0] = _clip01(cy - h / 2.0)
        out[r, 1] = _clip01(cx - w / 2.0)
        out[r, 2] = _clip01(cy + h / 2.0)
        out[r, 3] = _clip01(cx + w / 2.0)
    else:  # topk RetinaNet: boxes [K, 4] = (dx, dy, dw, dh); priors (x1, y1, x2, y2) pixels
        clip = math.log(1000.0 / 16)
        dx = (bscale * (float(boxes[cand, 0]) - bzp)) / var[0]
        dy = (bscale * (float(boxes[cand, 1]) - bzp)) / var[1]
        dw = min((bscale * (float(boxes[cand, 2]) - bzp)) / var[2], clip)
        dh = min((bscale * (float(boxes[cand, 3]) - bzp)) / var[3], clip)
        aw = priors[anchor, 2] - priors[anchor, 0]
        ah = priors[anchor, 3] - priors[anchor, 1]
        cx = dx * aw + (priors[anchor, 0] + 0.5 * aw)
        cy = dy * ah + (priors[anchor, 1] + 0.5 * ah)
        w = math.exp(dw) * aw
        h = math.exp(dh) * ah
        out[r, 0] = min(max(cy - 0.5 * h, 0.0), size) / size
        out[r, 1] = min(max(cx - 0.5 * w, 0.0), size) / size
        out[r, 2] = min(max(cy + 0.5 * h, 0.0), size) / size
        out[r, 3] = min(max(cx + 0.5 * w, 0.0), size) / size


_SCORE_SHIFT, _CLASS_SHIFT = 17, 48  # key = class << 48 | (2^31 - 1 - code) << 17 | candidate
_CAND_MASK = (1 << 17) - 1
_CODE_MAX = (1 << 31) - 1


@njit(cache=True)
def _nms_sorted(keys, n, ccand, canchor, kind, codes_kind, sscale, szp, boxes, bscale, bzp, priors,
                var, size, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx):
    """Greedy per-class NMS over candidates whose keys are sorted (class, score desc, index)."""
    kept_key = np.empty(n, dtype=np.int64)
    kept_box = np.empty((n, 4), dtype=np.float64)
    kept_score = np.empty(n, dtype=np.float64)
    kept_cls = np.empty(n, dtype=np.int64)
    nk = 0
    work = np.empty((max(n, 1), 4), dtype=np.float64)
    start = 0
    while start < n:
        c = keys[start] >> _CLASS_SHIFT
        end = start
        while end < n and (keys[end] >> _CLASS_SHIFT) == c:
            end += 1
        take = end - start
        if pre_cap > 0 and take > pre_cap:
            take = pre_cap
        kept_here = np.empty(take, dtype=np.int64)
        nh = 0
        for t in range(take):
            if nh >= class_cap:
                break
            k = keys[start + t]
            cand = k & _CAND_MASK
            _decode_one(kind, boxes, bscale, bzp, priors, var, ccand[cand], canchor[cand], size, work, t)
            ok = True
            for q in range(nh):
                if _iou(work, t, kept_here[q]) > iou_thr:
                    ok = False
                    break
            if ok:
                kept_here[nh] = t
                code = _CODE_MAX - ((k >> _SCORE_SHIFT) & _CODE_MAX)
                kept_score[nk] = _score_value(code, codes_kind, sscale, szp)
                kept_box[nk, :] = work[t, :]
                kept_cls[nk] = c
                # final order: score desc, class asc, rank in class asc
                kept_key[nk] = (((k >> _SCORE_SHIFT) & _CODE_MAX) << 20) | (c << 10) | nh
                nk += 1
                nh += 1
        start = end
    order = np.argsort(kept_key[:nk], kind="mergesort")
    m = min(nk, image_cap)
    out = np.empty((m, 7), dtype=np.float32)
    for r in range(m):
        i = order[r]
        out[r, 0] = qsl_idx
        out[r, 1] = kept_box[i, 0]
        out[r, 2] = kept_box[i, 1]
        out[r, 3] = kept_box[i, 2]
        out[r, 4] = kept_box[i, 3]
        out[r, 5] = kept_score[i]
        out[r, 6] = class_ids[kept_cls[i]]
    return out


_CHUNK = 64  # class-major scan: codes counted per chunk (vectorised), then only chunks with hits scanned


@njit(cache=True)
def _box_major(codes, lo, hi, skind, sscale, szp, boxes, bscale, bzp, priors, var, class_ids,
               iou_thr, pre_cap, class_cap, image_cap, qsl_idx):
    """SSD-MobileNet: scores [A, C] box-outer; rows are counted first (vectorised), hits collected after."""
    a_n, c_n = codes.shape
    counts = np.zeros(a_n, dtype=np.int32)
    total = 0
    for a in range(a_n):
        row = codes[a]
        m = 0
        for c in range(1, c_n):
            s = row[c]
            m += (s >= lo) & (s < hi)
        counts[a] = m
        total += m
    keys = np.empty(total, dtype=np.int64)
    n = 0
    for a in range(a_n):
        if counts[a] == 0:
            continue
        row = codes[a]
        for c in range(1, c_n):
            s = row[c]
            if s >= lo and s < hi:
                keys[n] = (c << _CLASS_SHIFT) | ((_CODE_MAX - int(s)) << _SCORE_SHIFT) | a
                n += 1
    keys = np.sort(keys)
    ident = np.arange(a_n)
    return _nms_sorted(keys, n, ident, ident, 0, skind, sscale, szp, boxes, bscale, bzp, priors, var,
                       1.0, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


@njit(cache=True)
def _class_major(codes, lo, hi, skind, sscale, szp, boxes, bscale, bzp, priors, var, class_ids,
                 iou_thr, pre_cap, class_cap, image_cap, qsl_idx):
    """SSD-ResNet34: scores [C, A] class-outer; chunks of a class row are counted first (vectorised),
    then only chunks with hits are scanned; candidates come out grouped by class."""
    c_n, a_n = codes.shape
    nch = (a_n + _CHUNK - 1) // _CHUNK
    counts = np.zeros((c_n, nch), dtype=np.int32)
    total = 0
    for c in range(1, c_n):
        row = codes[c]
        for k in range(nch):
            m = 0
            for a in range(k * _CHUNK, min(k * _CHUNK + _CHUNK, a_n)):
                s = row[a]
                m += (s >= lo) & (s < hi)
            counts[c, k] = m
            total += m
    keys = np.empty(total, dtype=np.int64)
    n = 0
    for c in range(1, c_n):
        row = codes[c]
        first = n
        for k in range(nch):
            if counts[c, k] == 0:
                continue
            for a in range(k * _CHUNK, min(k * _CHUNK + _CHUNK, a_n)):
                s = row[a]
                if s >= lo and s < hi:
                    keys[n] = (c << _CLASS_SHIFT) | ((_CODE_MAX - int(s)) << _SCORE_SHIFT) | a
                    n += 1
        if n - first > 1:
            keys[first:n] = np.sort(keys[first:n])
    ident = np.arange(a_n)
    return _nms_sorted(keys, n, ident, ident, 1, skind, sscale, szp, boxes, bscale, bzp, priors, var,
                       1.0, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


@njit(cache=True)
def _topk(codes, lo, hi, skind, sscale, szp, indices, boxes, bscale, bzp, priors, var, size, level_start,
          per_level, num_classes, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx):
    """RetinaNet: the card's top-K per level; flat index = anchor * classes + class within a level."""
    k_n = codes.shape[0]
    keys = np.empty(k_n, dtype=np.int64)
    anchor = np.empty(k_n, dtype=np.int64)
    n = 0
    for p in range(k_n):
        s = codes[p]
        if s >= lo and s < hi:
            flat = indices[p]
            c = flat % num_classes
            anchor[p] = level_start[p // per_level] + flat // num_classes
            keys[n] = (c << _CLASS_SHIFT) | ((_CODE_MAX - int(s)) << _SCORE_SHIFT) | p
            n += 1
    keys = np.sort(keys[:n])
    ident = np.arange(k_n)
    return _nms_sorted(keys, n, ident, anchor, 2, skind, sscale, szp, boxes, bscale, bzp, priors, var,
                       float(size), class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


# ------------------------------------------------------------------------------------------------
# public API

def _check_shape(lay: Layout, role: str, arr: np.ndarray) -> None:
    want = lay.shapes[role]
    if tuple(arr.shape) != want:
        raise DataError(f"{lay.benchmark} {role} have shape {tuple(arr.shape)}, expected {want} per image "
                        f"({lay.kind} layout); is the model cut for this benchmark?")


def postprocess(benchmark: Any, boxes: np.ndarray, scores: np.ndarray, indices: np.ndarray | None = None, *,
                params: str | NMSParams = "reference", qsl_idx: int = 0) -> np.ndarray:
    """Detections of one image's raw outputs (float, fp16 or uint8 as the layout allows): (K, 7) float32."""
    lay = layout(benchmark)
    p = params_for(lay.benchmark, params)
    _check_shape(lay, "boxes", boxes)
    _check_shape(lay, "scores", scores)
    sc = score_codes(np.ascontiguousarray(scores), p.score_threshold, lay.score_quant)
    bx, bscale, bzp = _box_values(np.ascontiguousarray(boxes), lay.box_quant)
    var = np.asarray(lay.variances, dtype=np.float64)
    common = (sc.lo, sc.hi, sc.kind, sc.scale, sc.zero_point)
    caps = (float(p.iou_threshold), int(p.pre_nms_per_class), int(p.max_per_class), int(p.max_per_image),
            float(qsl_idx))
    if lay.kind == "box-major":
        return _box_major(sc.codes, *common, bx, bscale, bzp, lay.priors, var, lay.class_ids, *caps)
    if lay.kind == "class-major":
        return _class_major(sc.codes, *common, bx, bscale, bzp, lay.priors, var, lay.class_ids, *caps)
    if indices is None:
        raise DataError(f"{lay.benchmark} needs the card's candidate indices as well as boxes and scores")
    _check_shape(lay, "indices", indices)
    return _topk(sc.codes, *common, np.ascontiguousarray(indices, dtype=np.int64), bx, bscale, bzp, lay.priors,
                 var, lay.image_size, _level_starts(lay.benchmark), lay.topk_per_level, lay.num_classes,
                 lay.class_ids, *caps)


@cache
def _level_starts(benchmark: str) -> np.ndarray:
    counts = LAYOUTS[benchmark].level_anchors
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def quantise(benchmark: Any, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs as the paper's cards return them: uint8 scores and boxes (SSD-MobileNet), fp16 scores and
    uint8 boxes (SSD-ResNet34). RetinaNet has no quantised form here; its outputs pass unchanged."""
    lay = layout(benchmark)
    out = dict(outputs)
    if lay.quantised_score_dtype == "uint8" and lay.score_quant is not None:
        out["scores"] = lay.score_quant.quantise(outputs["scores"])
    elif lay.quantised_score_dtype == "float16":
        out["scores"] = outputs["scores"].astype(np.float16)
    if lay.box_quant is not None:
        out["boxes"] = lay.box_quant.quantise(outputs["boxes"])
    return out


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel on tiny inputs, so no run pays for it."""
    for name, lay in LAYOUTS.items():
        arrays = {role: np.zeros(shape, dtype=np.int64 if role == "indices" else np.float32)
                  for role, shape in lay.shapes.items()}
        postprocess(name, arrays["boxes"], arrays["scores"], arrays.get("indices"))
        if lay.quantised_score_dtype:
            q = quantise(name, arrays)
            postprocess(name, q["boxes"], q["scores"], q.get("indices"))
