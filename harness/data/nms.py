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

Everything runs in one numba-compiled kernel per layout (`cache=True`: compiled once per machine). What
keeps them inside the paper's budgets (tools/bench_nms.py): the scan over the raw codes is vectorised
(`_scan`), each candidate is one int64 key (class, score, index) and the keys are radix-sorted, the IoU
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
from numba import njit

from harness.core.errors import DataError
from harness.records.benchmark_record import Benchmark, DetectionSpec, NMSParams, OutputQuant

__all__ = ["ROW", "YOLO_KINDS", "DetectionEncoder", "Postprocessor", "bound", "layout", "params_for", "postprocess",
           "quantise", "retinanet_priors", "ssd_mobilenet_priors", "ssd_resnet34_priors", "warm_up"]

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

_KIND_AFFINE, _KIND_F16, _KIND_F32 = 0, 1, 2
_SCORE_SHIFT = 17  # candidate keys: class << class_shift | (hi - code) << 17 | candidate (< 2^17)
_CODE_DTYPE = {"uint8": np.uint8, "float16": np.uint16, "float32": np.uint32}  # unsigned int views


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
    """One (benchmark, parameters, score form, box form), worked out once: the layout's kernel, the int
    view of the scores, and the kernel's arguments after the image's own (codes, boxes, qsl_idx[,
    indices]), typed as the kernel takes them (lo and hi in the codes' own width, so that the scan
    compares without widening)."""

    kernel: Any
    code_dtype: Any         # None: the scores are read as they are (uint8)
    args: tuple[Any, ...]


@cache
def _plan(lay: DetectionSpec, p: NMSParams, score_form: str, box_form: str) -> _Plan:
    quant = lay.score_quant if score_form == "uint8" else None
    bquant = lay.box_quant if box_form == "uint8" else None
    if score_form == "uint8" and quant is None:
        raise DataError("uint8 scores need the benchmark's quantisation parameters")
    if box_form == "uint8" and bquant is None:
        raise DataError("uint8 boxes need the benchmark's quantisation parameters")
    scale, zp = (quant.uniform_scale, quant.zero_point) if quant else (1.0, 0)
    lo, hi = _threshold_codes(score_form, p.score_threshold, scale, zp)
    if lo >= hi:  # no code is above the threshold: an empty range
        lo, hi = 1, 1
    code_dtype = _CODE_DTYPE[score_form]
    score_kind = {"uint8": _KIND_AFFINE, "float16": _KIND_F16, "float32": _KIND_F32}[score_form]
    class_shift = _SCORE_SHIFT + max(hi - 1 - lo, 1).bit_length()
    bscale, bzp = (bquant.uniform_scale, bquant.zero_point) if bquant else (1.0, 0)
    table = _box_table(lay, bquant) if bquant else np.empty((0, 256))
    variances = np.asarray(lay.variances, dtype=np.float64)
    for arr in (table, variances):
        arr.setflags(write=False)
    args: tuple[Any, ...] = (
            code_dtype(lo), code_dtype(hi - 1), class_shift, score_kind, float(scale), float(zp), float(bscale),
            float(bzp), table, lay.priors, variances, lay.class_ids, float(p.iou_threshold),
            int(p.pre_nms_per_class), int(p.max_per_class), int(p.max_per_image), _fold_len(lay))
    if lay.kind == "topk":
        args += (float(lay.image_size), _level_starts(lay), lay.topk_per_level, lay.num_classes)
    kernel = {"box-major": _box_major, "class-major": _class_major, "topk": _topk}[lay.kind]
    return _Plan(kernel, None if score_form == "uint8" else code_dtype, args)


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
    the variance, exponentiated for the sizes), computed with the very operations `_decode` uses, so a
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
def _clip01(v):
    return min(max(v, 0.0), 1.0)


@njit(cache=True)
def _decode(kind, boxes, bscale, bzp, tab, priors, var, cand, anchor, size):
    """Candidate `cand` (anchor `anchor`) decoded to (ymin, xmin, ymax, xmax), clipped, 0..1. With a
    table (uint8 boxes only) the per-code terms are looked up instead of computed: the same values."""
    if kind == 0 and tab.shape[0]:
        yc = tab[0, int(boxes[cand, 0])] * priors[anchor, 2] + priors[anchor, 0]
        xc = tab[1, int(boxes[cand, 1])] * priors[anchor, 3] + priors[anchor, 1]
        h = tab[2, int(boxes[cand, 2])] * priors[anchor, 2]
        w = tab[3, int(boxes[cand, 3])] * priors[anchor, 3]
        return _clip01(yc - h / 2.0), _clip01(xc - w / 2.0), _clip01(yc + h / 2.0), _clip01(xc + w / 2.0)
    if kind == 1 and tab.shape[0]:
        cx = tab[0, int(boxes[0, cand])] * priors[anchor, 2] + priors[anchor, 0]
        cy = tab[1, int(boxes[1, cand])] * priors[anchor, 3] + priors[anchor, 1]
        w = tab[2, int(boxes[2, cand])] * priors[anchor, 2]
        h = tab[3, int(boxes[3, cand])] * priors[anchor, 3]
        return _clip01(cy - h / 2.0), _clip01(cx - w / 2.0), _clip01(cy + h / 2.0), _clip01(cx + w / 2.0)
    if kind == 0:  # box-major TF coder: boxes [A, 4] = (ty, tx, th, tw); priors (yc, xc, h, w)
        ty = bscale * (float(boxes[cand, 0]) - bzp)
        tx = bscale * (float(boxes[cand, 1]) - bzp)
        th = bscale * (float(boxes[cand, 2]) - bzp)
        tw = bscale * (float(boxes[cand, 3]) - bzp)
        yc = ty / var[0] * priors[anchor, 2] + priors[anchor, 0]
        xc = tx / var[1] * priors[anchor, 3] + priors[anchor, 1]
        h = math.exp(th / var[2]) * priors[anchor, 2]
        w = math.exp(tw / var[3]) * priors[anchor, 3]
        return _clip01(yc - h / 2.0), _clip01(xc - w / 2.0), _clip01(yc + h / 2.0), _clip01(xc + w / 2.0)
    if kind == 1:  # class-major SSD-R34: boxes planar [4, A] = (dx, dy, dw, dh); priors (cx, cy, w, h)
        dx = bscale * (float(boxes[0, cand]) - bzp)
        dy = bscale * (float(boxes[1, cand]) - bzp)
        dw = bscale * (float(boxes[2, cand]) - bzp)
        dh = bscale * (float(boxes[3, cand]) - bzp)
        cx = dx * var[0] * priors[anchor, 2] + priors[anchor, 0]
        cy = dy * var[0] * priors[anchor, 3] + priors[anchor, 1]
        w = math.exp(dw * var[1]) * priors[anchor, 2]
        h = math.exp(dh * var[1]) * priors[anchor, 3]
        return _clip01(cy - h / 2.0), _clip01(cx - w / 2.0), _clip01(cy + h / 2.0), _clip01(cx + w / 2.0)
    # topk RetinaNet: boxes [K, 4] = (dx, dy, dw, dh); priors (x1, y1, x2, y2) pixels
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
    return (min(max(cy - 0.5 * h, 0.0), size) / size, min(max(cx - 0.5 * w, 0.0), size) / size,
            min(max(cy + 0.5 * h, 0.0), size) / size, min(max(cx + 0.5 * w, 0.0), size) / size)


_FOLD = 8  # scan: codes folded onto one flag byte, one bit each
# lowest set bit of a 64-bit word by a de Bruijn multiplication (numba has no count-trailing-zeros)
_DE_BRUIJN = 0x03F79D71B4CB0A89
_DE_BRUIJN_BIT = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    _DE_BRUIJN_BIT[(((1 << _bit) * _DE_BRUIJN) & ((1 << 64) - 1)) >> 58] = _bit


@njit(cache=True)
def _scan(flat, start, stop, lo, hi, period, fold_len):
    """Indices i in [start, stop) with lo <= flat[i] <= hi, skipping offsets i - start that are multiples
    of `period` (the background column; 0: none), in no particular order.

    Vectorised without per-block horizontal reductions (LLVM does not vectorise those at such short
    lengths): each chunk of up to _FOLD * fold_len codes is folded onto fold_len flag bytes by
    elementwise compares (bit k of byte i: code k * fold_len + i is a hit; one unsigned compare in the
    codes' own width tests lo <= code <= hi), then the flag words are tested four at a time and the
    set bits give the hits. fold_len is a multiple of 8 and of period."""
    span = flat.dtype.type(hi - lo)
    padded = (fold_len + 31) // 32 * 32
    flags = np.zeros(padded, dtype=np.uint8)
    words = flags.view(np.int64)
    keep = np.full(padded, 0xFF, dtype=np.uint8)  # flag bytes of the background column cleared
    if period:
        for i in range(0, fold_len, period):
            keep[i] = 0
    keep_words = keep.view(np.int64)
    hits = np.empty(_FOLD * fold_len, dtype=np.int64)
    n = 0
    o = start
    while o < stop:
        if hits.size - n < _FOLD * fold_len:  # room for a whole chunk's hits: no checks inside
            grown = np.empty(2 * hits.size, dtype=np.int64)
            grown[:n] = hits[:n]
            hits = grown
        folds = min(_FOLD, (stop - o) // fold_len)
        if folds == 0:  # the tail, shorter than fold_len
            for i in range(o, stop):
                if flat.dtype.type(flat[i] - lo) <= span and (period == 0 or (i - start) % period != 0):
                    hits[n] = i
                    n += 1
            break
        flags[:fold_len] = 0
        for k in range(folds):
            x = flat[o + k * fold_len:o + (k + 1) * fold_len]
            bit = np.uint8(1 << k)
            for i in range(fold_len):
                if flat.dtype.type(x[i] - lo) <= span:
                    flags[i] |= bit
        for g in range(0, padded // 8, 4):
            if ((words[g] & keep_words[g]) | (words[g + 1] & keep_words[g + 1]) | (words[g + 2] & keep_words[g + 2])
                    | (words[g + 3] & keep_words[g + 3])) == 0:
                continue
            for w in range(g, g + 4):
                word = words[w] & keep_words[w]
                while word:
                    b = _DE_BRUIJN_BIT[(((word & -word) * _DE_BRUIJN) >> 58) & 63]  # byte b >> 3, fold b & 7
                    hits[n] = o + (b & 7) * fold_len + 8 * w + (b >> 3)
                    n += 1
                    word &= word - 1
        o += folds * fold_len
    return hits[:n]


_RADIX_BITS = 8
_INSERTION_MAX = 64


@njit(cache=True)
def _sort_keys(keys):
    """Non-negative int64 keys sorted ascending, in place or in a new array (the one returned): insertion
    sort for a few dozen keys (SSD-MobileNet's), else LSD radix sort on 8-bit digits, digits that are
    the same in every key skipped (SSD-ResNet34's thousands); both several times faster than np.sort."""
    n = keys.size
    if n <= _INSERTION_MAX:
        for i in range(1, n):
            v = keys[i]
            j = i - 1
            while j >= 0 and keys[j] > v:
                keys[j + 1] = keys[j]
                j -= 1
            keys[j + 1] = v
        return keys
    top = keys.max()
    counts = np.empty(1 << _RADIX_BITS, dtype=np.int64)
    src, dst = keys, np.empty_like(keys)
    shift = 0
    while shift < 63 and (top >> shift) > 0:  # (a shift by 64 or more is undefined)
        counts[:] = 0
        for i in range(n):
            counts[(src[i] >> shift) & ((1 << _RADIX_BITS) - 1)] += 1
        if counts.max() < n:
            total = 0
            for d in range(1 << _RADIX_BITS):
                c = counts[d]
                counts[d] = total
                total += c
            for i in range(n):
                d = (src[i] >> shift) & ((1 << _RADIX_BITS) - 1)
                dst[counts[d]] = src[i]
                counts[d] += 1
            src, dst = dst, src
        shift += _RADIX_BITS
    return src


_CAND_MASK = (1 << _SCORE_SHIFT) - 1


@njit(cache=True, error_model="numpy")
def _nms_sorted(keys, cshift, anchor_of, kind, hi, codes_kind, sscale, szp, boxes, bscale, bzp, tab, priors,
                var, size, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx):
    """Greedy per-class NMS over candidate keys sorted by (class, score desc, candidate); the anchor of
    candidate i is anchor_of[i] (empty: i itself). Boxes are decoded only when a candidate's turn comes;
    the IoU test against the class's kept boxes is branch-free (vectorised)."""
    n = keys.size
    kept_box = np.empty((n, 4), dtype=np.float64)
    kept_cls = np.empty(n, dtype=np.int64)
    kept_key = np.empty(n, dtype=np.int64)  # (hi - code) << 32 | kept index: score desc, class, rank
    cap = max(class_cap, 0)
    score_mask = (1 << (cshift - _SCORE_SHIFT)) - 1
    y1s, x1s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    y2s, x2s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    areas = np.empty(cap, dtype=np.float64)
    nk = 0
    start = 0
    while start < n:
        c = keys[start] >> cshift
        end = start + 1
        while end < n and (keys[end] >> cshift) == c:
            end += 1
        stop = min(end, start + pre_cap) if pre_cap > 0 else end
        nh = 0
        for t in range(start, stop):
            if nh >= cap:
                break
            k = keys[t]
            cand = k & _CAND_MASK
            anchor = anchor_of[cand] if anchor_of.size else cand
            y1, x1, y2, x2 = _decode(kind, boxes, bscale, bzp, tab, priors, var, cand, anchor, size)
            area = (y2 - y1) * (x2 - x1)
            suppressed = False
            for q in range(nh):  # IoU > threshold with a kept box (IoU 0 without positive overlap)
                ih = min(y2, y2s[q]) - max(y1, y1s[q])
                iw = min(x2, x2s[q]) - max(x1, x1s[q])
                inter = ih * iw
                union = area + areas[q] - inter
                suppressed |= (ih > 0.0) & (iw > 0.0) & (union > 0.0) & (inter / union > iou_thr)
            if not suppressed:
                y1s[nh], x1s[nh], y2s[nh], x2s[nh], areas[nh] = y1, x1, y2, x2, area
                kept_box[nk, 0], kept_box[nk, 1], kept_box[nk, 2], kept_box[nk, 3] = y1, x1, y2, x2
                kept_cls[nk] = c
                kept_key[nk] = (((k >> _SCORE_SHIFT) & score_mask) << 32) | nk
                nk += 1
                nh += 1
        start = end
    m = min(nk, image_cap)
    if m < nk:  # only the best image_cap are wanted: select them, then order those
        sel = _sort_keys(np.partition(kept_key[:nk], m - 1)[:m]) if m > 0 else kept_key[:0]
    else:
        sel = _sort_keys(kept_key[:nk])
    out = np.empty((m, 7), dtype=np.float32)
    for r in range(m):
        i = sel[r] & 0xFFFFFFFF
        out[r, 0] = qsl_idx
        out[r, 1] = kept_box[i, 0]
        out[r, 2] = kept_box[i, 1]
        out[r, 3] = kept_box[i, 2]
        out[r, 4] = kept_box[i, 3]
        out[r, 5] = _score_value(int(hi) - (sel[r] >> 32), codes_kind, sscale, szp)
        out[r, 6] = class_ids[kept_cls[i]]
    return out


@njit(cache=True, nogil=True)
def _box_major(codes, boxes, qsl_idx, lo, hi, cshift, skind, sscale, szp, bscale, bzp, tab, priors, var,
               class_ids, iou_thr, pre_cap, class_cap, image_cap, fold_len):
    """SSD-MobileNet: scores [A, C] box-outer, background column 0 skipped in the scan."""
    a_n, c_n = codes.shape
    flat = codes.reshape(a_n * c_n)
    hits = _scan(flat, 0, flat.size, lo, hi, c_n, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    for j in range(hits.size):
        i = hits[j]
        a, c = i // c_n, i % c_n
        keys[j] = (c << cshift) | ((int(hi) - int(flat[i])) << _SCORE_SHIFT) | a
    return _nms_sorted(_sort_keys(keys), cshift, hits[:0], 0, hi, skind, sscale, szp, boxes, bscale, bzp, tab,
                       priors, var, 1.0, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


@njit(cache=True, nogil=True)
def _class_major(codes, boxes, qsl_idx, lo, hi, cshift, skind, sscale, szp, bscale, bzp, tab, priors, var,
                 class_ids, iou_thr, pre_cap, class_cap, image_cap, fold_len):
    """SSD-ResNet34: scores [C, A] class-outer; the background row 0 is not scanned at all."""
    c_n, a_n = codes.shape
    flat = codes.reshape(a_n * c_n)
    hits = _scan(flat, a_n, flat.size, lo, hi, 0, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    for j in range(hits.size):
        i = hits[j]
        c, a = i // a_n, i % a_n
        keys[j] = (c << cshift) | ((int(hi) - int(flat[i])) << _SCORE_SHIFT) | a
    return _nms_sorted(_sort_keys(keys), cshift, hits[:0], 1, hi, skind, sscale, szp, boxes, bscale, bzp, tab,
                       priors, var, 1.0, class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


@njit(cache=True, nogil=True)
def _topk(codes, boxes, qsl_idx, indices, lo, hi, cshift, skind, sscale, szp, bscale, bzp, tab, priors, var,
          class_ids, iou_thr, pre_cap, class_cap, image_cap, fold_len, size, level_start, per_level, num_classes):
    """RetinaNet: the card's top-K per level; flat index = anchor * classes + class within a level."""
    k_n = codes.shape[0]
    hits = _scan(codes, 0, k_n, lo, hi, 0, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    anchor = np.empty(k_n, dtype=np.int64)
    for j in range(hits.size):
        p = hits[j]
        flat = indices[p]
        c = flat % num_classes
        anchor[p] = level_start[p // per_level] + flat // num_classes
        keys[j] = (c << cshift) | ((int(hi) - int(codes[p])) << _SCORE_SHIFT) | p
    return _nms_sorted(_sort_keys(keys), cshift, anchor, 2, hi, skind, sscale, szp, boxes, bscale, bzp, tab,
                       priors, var, float(size), class_ids, iou_thr, pre_cap, class_cap, image_cap, qsl_idx)


# ------------------------------------------------------------------------------------------------
# YOLO (Ultralytics' ONNX export): one output, 4 box rows (cx, cy, w, h in input pixels) + class scores

YOLO_KINDS = ("attribute-major", "anchor-major")  # [4 + C, A] as exported, or its transpose [A, 4 + C]
_SIGNED = {"uint8": np.uint8, "float16": np.int16, "float32": np.int32}  # views that order like the values
_YOLO_BLOCK = 2048  # anchors per block of the attribute-major best-class pass: its running maxima stay in L1


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
    kind = {"uint8": _KIND_AFFINE, "float16": _KIND_F16, "float32": _KIND_F32}[form]
    score_shift = _SCORE_SHIFT + max(lay.num_classes - 1, 1).bit_length()  # key: score | class | anchor
    args = (lo, hi, score_shift, lay.kind == "anchor-major", kind, sscale, szp, bscale, bzp, lay.class_ids,
            float(p.iou_threshold), int(p.max_per_image), _YOLO_BLOCK)
    return _Plan(_yolo, _SIGNED[form], args)


@njit(cache=True)
def _signed_value(code, kind, scale, zp):
    """The value of one raw code read through a signed view (uint8 affine, int16 = fp16, int32 = fp32)."""
    c = int(code)
    if kind == 0:
        return scale * (float(c) - zp)
    v = _score_value(c & (0x7FFF if kind == 1 else 0x7FFFFFFF), kind, 1.0, 0.0)
    return -v if c < 0 else v


@njit(cache=True, nogil=True, error_model="numpy")
def _yolo(codes, qsl_idx, geo, lo, hi, score_shift, anchor_major, kind, sscale, szp, bscale, bzp, class_ids,
          iou_thr, image_cap, block):
    """YOLO host NMS on the raw codes: best class per anchor (the loop order follows the layout), the
    threshold on the best code, survivors keyed (score desc, class, anchor) and radix-sorted, then
    greedy NMS in that global order with per-class kept lists, which equals class-aware NMS followed by
    the per-image cap, and stops as soon as the cap is reached. Boxes are decoded only for candidates
    whose turn comes; IoU is taken in input pixels, then the letterbox is undone and the box clipped to
    and normalised by the original image."""
    if anchor_major:
        a_n, attrs = codes.shape
    else:
        attrs, a_n = codes.shape
    c_n = attrs - 4
    cls_shift = _SCORE_SHIFT
    keys = np.empty(a_n, dtype=np.int64)
    n = 0
    if anchor_major:  # each anchor's scores are contiguous: a max reduction, the class only for survivors
        flat = codes.reshape(a_n * attrs)
        for a in range(a_n):
            o = a * attrs + 4
            best = np.int32(flat[o])
            for c in range(1, c_n):
                best = max(best, np.int32(flat[o + c]))
            if best < lo or best > hi:
                continue
            c = 0
            while np.int32(flat[o + c]) != best:
                c += 1
            keys[n] = ((hi - int(best)) << score_shift) | (c << cls_shift) | a
            n += 1
    else:
        best_code = np.empty(block, dtype=np.int32)
        bcls = np.empty(block, dtype=np.int32)
        for start in range(0, a_n, block):
            m = min(block, a_n - start)
            first = codes[4, start:start + m]
            for a in range(m):
                best_code[a] = first[a]
                bcls[a] = 0
            for c in range(1, c_n):
                row = codes[4 + c, start:start + m]
                for a in range(m):
                    v = np.int32(row[a])
                    b = best_code[a]
                    up = v > b
                    best_code[a] = v if up else b
                    bcls[a] = c if up else bcls[a]
            for a in range(m):
                b = best_code[a]
                if lo <= b <= hi:
                    keys[n] = ((hi - int(b)) << score_shift) | (int(bcls[a]) << cls_shift) | (start + a)
                    n += 1
    keys = _sort_keys(keys[:n])
    cap = max(image_cap, 0)
    x1s, y1s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    x2s, y2s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    areas = np.empty(cap, dtype=np.float64)
    kept_key = np.empty(cap, dtype=np.int64)
    per_class = np.empty((c_n, cap), dtype=np.int32)  # kept indices of each class
    counts = np.zeros(c_n, dtype=np.int32)
    nk = 0
    for t in range(n):
        if nk >= cap:
            break
        k = keys[t]
        a = k & _CAND_MASK
        c = (k >> cls_shift) & ((1 << (score_shift - cls_shift)) - 1)
        if anchor_major:
            cx = _signed_value(codes[a, 0], kind, bscale, bzp)
            cy = _signed_value(codes[a, 1], kind, bscale, bzp)
            w = _signed_value(codes[a, 2], kind, bscale, bzp)
            h = _signed_value(codes[a, 3], kind, bscale, bzp)
        else:
            cx = _signed_value(codes[0, a], kind, bscale, bzp)
            cy = _signed_value(codes[1, a], kind, bscale, bzp)
            w = _signed_value(codes[2, a], kind, bscale, bzp)
            h = _signed_value(codes[3, a], kind, bscale, bzp)
        x1, y1 = cx - w / 2.0, cy - h / 2.0
        x2, y2 = cx + w / 2.0, cy + h / 2.0
        area = (x2 - x1) * (y2 - y1)
        suppressed = False
        for j in range(counts[c]):
            q = per_class[c, j]
            iw = min(x2, x2s[q]) - max(x1, x1s[q])
            ih = min(y2, y2s[q]) - max(y1, y1s[q])
            inter = ih * iw
            union = area + areas[q] - inter
            if (ih > 0.0) & (iw > 0.0) & (union > 0.0) & (inter / union > iou_thr):
                suppressed = True
                break
        if not suppressed:
            x1s[nk], y1s[nk], x2s[nk], y2s[nk], areas[nk] = x1, y1, x2, y2, area
            kept_key[nk] = k
            per_class[c, counts[c]] = nk
            counts[c] += 1
            nk += 1
    gain_x, gain_y, pad_x, pad_y, width, height = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    out = np.empty((nk, 7), dtype=np.float32)
    for r in range(nk):
        k = kept_key[r]
        out[r, 0] = qsl_idx
        out[r, 1] = min(max((y1s[r] - pad_y) / gain_y, 0.0), height) / height
        out[r, 2] = min(max((x1s[r] - pad_x) / gain_x, 0.0), width) / width
        out[r, 3] = min(max((y2s[r] - pad_y) / gain_y, 0.0), height) / height
        out[r, 4] = min(max((x2s[r] - pad_x) / gain_x, 0.0), width) / width
        out[r, 5] = _signed_value(hi - (k >> score_shift), kind, sscale, szp)
        out[r, 6] = class_ids[(k >> cls_shift) & ((1 << (score_shift - cls_shift)) - 1)]
    return out


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
        codes = np.ascontiguousarray(output).view(plan.code_dtype)
        return plan.kernel(codes, float(qsl_idx), geometry, *plan.args)  # type: ignore[no-any-return]

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
            rows: np.ndarray = plan.kernel(codes, np.ascontiguousarray(boxes), float(qsl_idx), *plan.args)
            return rows
        if indices is None:
            raise DataError(f"{lay.benchmark} needs the card's candidate indices as well as boxes and scores")
        _check_shape(lay, "indices", indices)
        topk: np.ndarray = plan.kernel(codes, np.ascontiguousarray(boxes), float(qsl_idx),
                                       np.ascontiguousarray(indices, dtype=np.int64), *plan.args)
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
        from harness.data import nms

        post = nms.bound(self.spec, self.params)
        sizes = self.image_sizes
        rows = [post.of([o[j] for o in outputs], int(i), None if sizes is None else (int(sizes[i, 0]),
                                                                                      int(sizes[i, 1])))
                for j, i in enumerate(qsl)]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([r.size for r in rows], out=offsets[1:])
        return (np.concatenate(rows).ravel() if rows else np.empty(0, np.float32)), offsets
