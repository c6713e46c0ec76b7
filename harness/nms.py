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

Everything runs in one numba-compiled kernel per layout (`cache=True`: compiled once per machine). What
keeps them inside the paper's budgets (tools/bench_nms.py): the scan over the raw codes is vectorised
(`_scan`), each candidate is one int64 key (class, score, index) and the keys are radix-sorted, the IoU
test against a class's kept boxes is branch-free, uint8 box codes decode through a 256-entry table of
the very same values, and Python does no per-image table work (`Postprocessor`). The kernels release
the GIL, so NMS on a host thread runs beside the harness's other threads.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import product
from typing import Any

import numpy as np
from numba import njit

from harness.benchmarks import NMS_PARAM_SETS, DetectionSpec, NMSParams
from harness.errors import ApplianceError, DataError

ROW = 7  # qsl_idx, ymin, xmin, ymax, xmax, score, class
PARAM_SETS = NMS_PARAM_SETS


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


@cache
def priors(spec: DetectionSpec) -> np.ndarray:
    if spec.make_priors is None:
        return np.empty((0, 4))
    p = np.ascontiguousarray(spec.make_priors())
    assert p.shape == (spec.num_anchors, 4), p.shape
    p.setflags(write=False)
    return p


def layout(benchmark: Any) -> DetectionSpec:
    """The detection spec of a record, a benchmark's name, or the spec itself."""
    if isinstance(benchmark, DetectionSpec):
        return benchmark
    if isinstance(benchmark, str):
        from harness import benchmarks
        with contextlib.suppress(ApplianceError):  # not a benchmark at all: said below
            benchmark = benchmarks.get(benchmark)
    spec: DetectionSpec | None = getattr(benchmark, "detection", None)
    if spec is None:
        from harness import benchmarks
        known = ", ".join(n for n in benchmarks.NAMES if benchmarks.get(n).detection is not None)
        name = getattr(benchmark, "name", benchmark)
        raise DataError(f"{name!r} is not a detection benchmark; choose one of: {known}")
    return spec


def params_for(benchmark: Any, which: str | NMSParams = "reference") -> NMSParams:
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
    args: tuple


@cache
def _plan(lay: DetectionSpec, p: NMSParams, score_form: str, box_form: str) -> _Plan:
    quant = lay.score_quant if score_form == "uint8" else None
    if score_form == "uint8" and quant is None:
        raise DataError("uint8 scores need the benchmark's quantisation parameters")
    if box_form == "uint8" and lay.box_quant is None:
        raise DataError("uint8 boxes need the benchmark's quantisation parameters")
    scale, zp = (quant.scale, quant.zero_point) if quant else (1.0, 0)
    lo, hi = _threshold_codes(score_form, p.score_threshold, scale, zp)
    if lo >= hi:  # no code is above the threshold: an empty range
        lo, hi = 1, 1
    code_dtype = _CODE_DTYPE[score_form]
    score_kind = {"uint8": _KIND_AFFINE, "float16": _KIND_F16, "float32": _KIND_F32}[score_form]
    class_shift = _SCORE_SHIFT + max(hi - 1 - lo, 1).bit_length()
    bscale, bzp = (lay.box_quant.scale, lay.box_quant.zero_point) if box_form == "uint8" else (1.0, 0)
    table = _box_table(lay) if box_form == "uint8" else np.empty((0, 256))
    variances = np.asarray(lay.variances, dtype=np.float64)
    for arr in (table, variances):
        arr.setflags(write=False)
    args = (code_dtype(lo), code_dtype(hi - 1), class_shift, score_kind, float(scale), float(zp), float(bscale),
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


def _box_table(lay: DetectionSpec) -> np.ndarray:
    """The SSD decode's per-coordinate terms for each uint8 box code (dequantised, divided or scaled by
    the variance, exponentiated for the sizes), computed with the very operations `_decode` uses, so a
    table lookup gives the same bits as decoding: quantised boxes then cost no exp per candidate."""
    q, var = lay.box_quant, lay.variances
    rows = []
    for code in range(256):
        t = q.scale * (float(code) - q.zero_point)
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

    def __init__(self, benchmark: Any, params: str | NMSParams = "reference") -> None:
        self.layout = layout(benchmark)
        self.params = params_for(self.layout.benchmark, params)
        self._plans: dict[tuple[np.dtype, np.dtype], _Plan] = {}

    def of(self, outputs: Sequence[np.ndarray], qsl_idx: int = 0) -> np.ndarray:
        """Detections of one image's outputs given in the record's order (the spec's `outputs` roles)."""
        by_role = dict(zip(self.layout.outputs, outputs, strict=True))
        return self(by_role["boxes"], by_role["scores"], by_role.get("indices"), qsl_idx)

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
            return plan.kernel(codes, np.ascontiguousarray(boxes), float(qsl_idx), *plan.args)
        if indices is None:
            raise DataError(f"{lay.benchmark} needs the card's candidate indices as well as boxes and scores")
        _check_shape(lay, "indices", indices)
        return plan.kernel(codes, np.ascontiguousarray(boxes), float(qsl_idx),
                           np.ascontiguousarray(indices, dtype=np.int64), *plan.args)


@cache
def bound(spec: DetectionSpec, params: str | NMSParams = "reference") -> Postprocessor:
    """The shared Postprocessor of one detection spec and parameter set."""
    return Postprocessor(spec, params)


def postprocess(benchmark: Any, boxes: np.ndarray, scores: np.ndarray, indices: np.ndarray | None = None, *,
                params: str | NMSParams = "reference", qsl_idx: int = 0) -> np.ndarray:
    """Detections of one image's raw outputs (float, fp16 or uint8 as the layout allows): (K, 7) float32."""
    return bound(layout(benchmark), params)(boxes, scores, indices, qsl_idx)


def quantise(benchmark: Any, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs as the paper's cards return them (the spec's `quantised` forms, e.g. uint8 scores and boxes
    for SSD-MobileNet, fp16 scores and uint8 boxes for SSD-ResNet34); roles without one pass unchanged."""
    out = dict(outputs)
    for role, q in layout(benchmark).quantised.items():
        out[role] = q.quantise(outputs[role])
    return out


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel on tiny inputs, so no run pays for it."""
    from harness import benchmarks

    for name in benchmarks.NAMES:
        lay = benchmarks.get(name).detection
        if lay is None:
            continue
        arrays = {role: np.zeros(shape, dtype=np.int64 if role == "indices" else np.float32)
                  for role, shape in lay.shapes.items()}
        postprocess(lay, arrays["boxes"], arrays["scores"], arrays.get("indices"))
        if lay.quantised:
            q = quantise(lay, arrays)
            postprocess(lay, q["boxes"], q["scores"], q.get("indices"))
