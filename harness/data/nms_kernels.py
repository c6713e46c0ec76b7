"""The numba kernels of host NMS (harness.data.nms is the public front and says what they compute).

Each kernel takes one image's raw outputs and a few parameter records, each built once per (benchmark,
parameter set, output dtypes) by harness.data.nms:

    ScoreCodes   how the raw score codes are read: the code range above the threshold and the
                 dequantisation (affine uint8, or the bit patterns of fp16 / fp32)
    BoxCoder     how a candidate's box is decoded: the layout's coder, its dequantisation, the uint8
                 lookup table, priors, variances, the image size the boxes are clipped to
    NMSLimits    the key layout and the NMS parameter set: IoU threshold and the caps, the scan's fold
    TopkLevels   RetinaNet's per-level candidate blocks
    YoloParams   YOLO's key layout, box dequantisation, IoU threshold and cap

The records are `typing.NamedTuple`s on the Python side, but a kernel is called with plain tuples
(`tuple(record)`) and unpacks them by position, in the field order declared here: numba's dispatcher types
a plain tuple in C, a NamedTuple in Python (about 1.5 us a call, more than the smallest image's NMS). Each
unpacking names the fields it takes by their declared names, `_` for the rest: tests/test_nms_records.py holds
every unpacking to the declared order.

Candidates are int64 keys (class, score, candidate index) radix-sorted (`sort_keys`); the scan over the raw
codes is vectorised (`scan`); the IoU test against a class's kept boxes is branch-free.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit

CODE_AFFINE, CODE_F16, CODE_F32 = 0, 1, 2        # ScoreCodes.kind: uint8 affine, fp16 bits, fp32 bits
CODER_BOX_MAJOR, CODER_CLASS_MAJOR, CODER_TOPK = 0, 1, 2  # the layouts' box coders (`decode`'s kind)
SCORE_SHIFT = 17  # candidate keys: class << class_shift | (hi - code) << 17 | candidate (< 2^17)
CANDIDATE_MASK = (1 << SCORE_SHIFT) - 1
YOLO_BLOCK = 2048  # anchors per block of the attribute-major best-class pass: its running maxima stay in L1


class ScoreCodes(NamedTuple):
    """The raw score codes a kernel compares: `lo` .. `hi` (inclusive) are the codes above the score
    threshold, in the codes' own integer width (so the scan compares without widening); `kind` is
    CODE_AFFINE (value = scale * (code - zero_point)), CODE_F16 or CODE_F32 (the code is the bit pattern)."""

    lo: Any
    hi: Any
    kind: int
    scale: float
    zero_point: float


class BoxCoder(NamedTuple):
    """A layout's box decode (the layout itself, CODER_*, is the calling kernel's constant): the boxes'
    dequantisation, `table` (uint8 boxes: the per-code terms, [4, 256]; else empty), `priors`, `variances`,
    and `image_size` (RetinaNet's pixels; 1.0 for boxes already normalised)."""

    scale: float
    zero_point: float
    table: np.ndarray
    priors: np.ndarray
    variances: np.ndarray
    image_size: float


class NMSLimits(NamedTuple):
    """The key layout (`class_shift`), the NMS parameter set, the scan's `fold_len` and the class map."""

    class_shift: int
    iou_threshold: float
    pre_nms_per_class: int
    max_per_class: int
    max_per_image: int
    fold_len: int
    class_ids: np.ndarray


class TopkLevels(NamedTuple):
    """RetinaNet's top-K output: `per_level` candidates per FPN level, level l's anchors from `starts[l]`;
    a candidate's flat index is anchor * num_classes + class within its level."""

    starts: np.ndarray
    per_level: int
    num_classes: int


class YoloParams(NamedTuple):
    """YOLO's key (score | class at SCORE_SHIFT | anchor), the layout, the box rows' dequantisation, the
    class map, IoU threshold, per-image cap and the best-class pass's block of anchors."""

    score_shift: int
    anchor_major: bool
    box_scale: float
    box_zero_point: float
    class_ids: np.ndarray
    iou_threshold: float
    max_per_image: int
    block: int


# ------------------------------------------------------------------------------------------------
# values and boxes

@njit(cache=True)
def score_value(code: int, kind: int, scale: float, zero_point: float) -> float:
    """Dequantised score in float64, exactly as numpy would compute it."""
    c = int(code)
    if kind == CODE_AFFINE:
        return scale * (float(c) - zero_point)
    if kind == CODE_F16:
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
def signed_value(code: int, kind: int, scale: float, zero_point: float) -> float:
    """The value of one raw code read through a signed view (uint8 affine, int16 = fp16, int32 = fp32)."""
    c = int(code)
    if kind == CODE_AFFINE:
        return scale * (float(c) - zero_point)
    v = score_value(c & (0x7FFF if kind == CODE_F16 else 0x7FFFFFFF), kind, 1.0, 0.0)
    return -v if c < 0 else v


@njit(cache=True)
def _clip01(v: float) -> float:
    return min(max(v, 0.0), 1.0)


Box = tuple[float, float, float, float]


@njit(cache=True)
def decode(coder: BoxCoder, kind: int, boxes: np.ndarray, cand: int, anchor: int) -> Box:
    """Candidate `cand` (anchor `anchor`) decoded to (ymin, xmin, ymax, xmax), clipped, 0..1. With a
    table (uint8 boxes only) the per-code terms are looked up instead of computed: the same values. `kind`:
    the layout (CODER_*), a constant of the calling kernel."""
    scale, zero_point, table, priors, variances, image_size = coder
    if kind == 0 and table.shape[0]:
        yc = table[0, int(boxes[cand, 0])] * priors[anchor, 2] + priors[anchor, 0]
        xc = table[1, int(boxes[cand, 1])] * priors[anchor, 3] + priors[anchor, 1]
        h = table[2, int(boxes[cand, 2])] * priors[anchor, 2]
        w = table[3, int(boxes[cand, 3])] * priors[anchor, 3]
        return _clip01(yc - h / 2.0), _clip01(xc - w / 2.0), _clip01(yc + h / 2.0), _clip01(xc + w / 2.0)
    if kind == 1 and table.shape[0]:
        cx = table[0, int(boxes[0, cand])] * priors[anchor, 2] + priors[anchor, 0]
        cy = table[1, int(boxes[1, cand])] * priors[anchor, 3] + priors[anchor, 1]
        w = table[2, int(boxes[2, cand])] * priors[anchor, 2]
        h = table[3, int(boxes[3, cand])] * priors[anchor, 3]
        return _clip01(cy - h / 2.0), _clip01(cx - w / 2.0), _clip01(cy + h / 2.0), _clip01(cx + w / 2.0)
    if kind == 0:  # box-major TF coder: boxes [A, 4] = (ty, tx, th, tw); priors (yc, xc, h, w)
        ty = scale * (float(boxes[cand, 0]) - zero_point)
        tx = scale * (float(boxes[cand, 1]) - zero_point)
        th = scale * (float(boxes[cand, 2]) - zero_point)
        tw = scale * (float(boxes[cand, 3]) - zero_point)
        yc = ty / variances[0] * priors[anchor, 2] + priors[anchor, 0]
        xc = tx / variances[1] * priors[anchor, 3] + priors[anchor, 1]
        h = math.exp(th / variances[2]) * priors[anchor, 2]
        w = math.exp(tw / variances[3]) * priors[anchor, 3]
        return _clip01(yc - h / 2.0), _clip01(xc - w / 2.0), _clip01(yc + h / 2.0), _clip01(xc + w / 2.0)
    if kind == 1:  # class-major SSD-R34: boxes planar [4, A] = (dx, dy, dw, dh); priors (cx, cy, w, h)
        dx = scale * (float(boxes[0, cand]) - zero_point)
        dy = scale * (float(boxes[1, cand]) - zero_point)
        dw = scale * (float(boxes[2, cand]) - zero_point)
        dh = scale * (float(boxes[3, cand]) - zero_point)
        cx = dx * variances[0] * priors[anchor, 2] + priors[anchor, 0]
        cy = dy * variances[0] * priors[anchor, 3] + priors[anchor, 1]
        w = math.exp(dw * variances[1]) * priors[anchor, 2]
        h = math.exp(dh * variances[1]) * priors[anchor, 3]
        return _clip01(cy - h / 2.0), _clip01(cx - w / 2.0), _clip01(cy + h / 2.0), _clip01(cx + w / 2.0)
    # topk RetinaNet: boxes [K, 4] = (dx, dy, dw, dh); priors (x1, y1, x2, y2) pixels
    clip = math.log(1000.0 / 16)
    dx = (scale * (float(boxes[cand, 0]) - zero_point)) / variances[0]
    dy = (scale * (float(boxes[cand, 1]) - zero_point)) / variances[1]
    dw = min((scale * (float(boxes[cand, 2]) - zero_point)) / variances[2], clip)
    dh = min((scale * (float(boxes[cand, 3]) - zero_point)) / variances[3], clip)
    aw = priors[anchor, 2] - priors[anchor, 0]
    ah = priors[anchor, 3] - priors[anchor, 1]
    cx = dx * aw + (priors[anchor, 0] + 0.5 * aw)
    cy = dy * ah + (priors[anchor, 1] + 0.5 * ah)
    w = math.exp(dw) * aw
    h = math.exp(dh) * ah
    size = image_size
    return (min(max(cy - 0.5 * h, 0.0), size) / size, min(max(cx - 0.5 * w, 0.0), size) / size,
            min(max(cy + 0.5 * h, 0.0), size) / size, min(max(cx + 0.5 * w, 0.0), size) / size)


# ------------------------------------------------------------------------------------------------
# the scan and the key sort

FOLD = 8  # scan: codes folded onto one flag byte, one bit each
# lowest set bit of a 64-bit word by a de Bruijn multiplication (numba has no count-trailing-zeros)
_DE_BRUIJN = 0x03F79D71B4CB0A89
_DE_BRUIJN_BIT = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    _DE_BRUIJN_BIT[(((1 << _bit) * _DE_BRUIJN) & ((1 << 64) - 1)) >> 58] = _bit


@njit(cache=True)
def _keep_mask(padded: int, fold_len: int, period: int) -> np.ndarray:
    """Flag bytes to keep: all but those of the background column (every `period`-th; 0: none)."""
    keep = np.full(padded, 0xFF, dtype=np.uint8)
    if period:
        for i in range(0, fold_len, period):
            keep[i] = 0
    return keep


@njit(cache=True)
def _scan_tail(tail: np.ndarray, first: int, offset: int, lo: Any, span: Any, period: int, out: np.ndarray
               ) -> int:
    """The hits among the last codes (fewer than a fold), one by one: index `first + i` for code `tail[i]`
    (`offset + i` past the scan's start, for the background column); written to `out`, their count returned."""
    n = 0
    for i in range(tail.size):
        if tail.dtype.type(tail[i] - lo) <= span and (period == 0 or (offset + i) % period != 0):
            out[n] = first + i
            n += 1
    return n


@njit(cache=True)
def scan(flat: np.ndarray, start: int, stop: int, lo: Any, hi: Any, period: int, fold_len: int) -> np.ndarray:
    """Indices i in [start, stop) with lo <= flat[i] <= hi, skipping offsets i - start that are multiples
    of `period` (the background column; 0: none), in no particular order.

    Vectorised without per-block horizontal reductions (LLVM does not vectorise those at such short
    lengths): each chunk of up to FOLD * fold_len codes is folded onto fold_len flag bytes by
    elementwise compares (bit k of byte i: code k * fold_len + i is a hit; one unsigned compare in the
    codes' own width tests lo <= code <= hi), then the flag words are tested four at a time and the
    set bits give the hits. fold_len is a multiple of 8 and of period."""
    span = flat.dtype.type(hi - lo)
    padded = (fold_len + 31) // 32 * 32
    flags = np.zeros(padded, dtype=np.uint8)
    words = flags.view(np.int64)
    keep_words = _keep_mask(padded, fold_len, period).view(np.int64)
    hits = np.empty(FOLD * fold_len, dtype=np.int64)
    n = 0
    o = start
    while o < stop:
        if hits.size - n < FOLD * fold_len:  # room for a whole chunk's hits: no checks inside
            grown = np.empty(2 * hits.size, dtype=np.int64)
            grown[:n] = hits[:n]
            hits = grown
        folds = min(FOLD, (stop - o) // fold_len)
        if folds == 0:  # the tail, shorter than fold_len
            n += _scan_tail(flat[o:stop], o, o - start, lo, span, period, hits[n:])
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


RADIX_BITS = 8
INSERTION_MAX = 64


@njit(cache=True)
def sort_keys(keys: np.ndarray) -> np.ndarray:
    """Non-negative int64 keys sorted ascending, in place or in a new array (the one returned): insertion
    sort for a few dozen keys (SSD-MobileNet's), else LSD radix sort on 8-bit digits, digits that are
    the same in every key skipped (SSD-ResNet34's thousands); both several times faster than np.sort."""
    n = keys.size
    if n <= INSERTION_MAX:
        for i in range(1, n):
            v = keys[i]
            j = i - 1
            while j >= 0 and keys[j] > v:
                keys[j + 1] = keys[j]
                j -= 1
            keys[j + 1] = v
        return keys
    top = keys.max()
    counts = np.empty(1 << RADIX_BITS, dtype=np.int64)
    src, dst = keys, np.empty_like(keys)
    shift = 0
    while shift < 63 and (top >> shift) > 0:  # (a shift by 64 or more is undefined)
        counts[:] = 0
        for i in range(n):
            counts[(src[i] >> shift) & ((1 << RADIX_BITS) - 1)] += 1
        if counts.max() < n:
            total = 0
            for d in range(1 << RADIX_BITS):
                c = counts[d]
                counts[d] = total
                total += c
            for i in range(n):
                d = (src[i] >> shift) & ((1 << RADIX_BITS) - 1)
                dst[counts[d]] = src[i]
                counts[d] += 1
            src, dst = dst, src
        shift += RADIX_BITS
    return src


# ------------------------------------------------------------------------------------------------
# SSD / RetinaNet: per-class greedy NMS over sorted keys

class _Kept(NamedTuple):
    """Every kept detection of an image: box, class, and its order key (hi - code) << 32 | index."""

    box: np.ndarray
    cls: np.ndarray
    key: np.ndarray


@njit(cache=True)
def _image_rows(kept: _Kept, nk: int, scores: ScoreCodes, limits: NMSLimits, qsl_idx: float) -> np.ndarray:
    """The best max_per_image kept detections, score descending, as rows of 7."""
    _, hi, kind, scale, zero_point = scores
    _, _, _, _, max_per_image, _, class_ids = limits
    m = min(nk, max_per_image)
    if m < nk:  # only the best max_per_image are wanted: select them, then order those
        sel = sort_keys(np.partition(kept.key[:nk], m - 1)[:m]) if m > 0 else kept.key[:0]
    else:
        sel = sort_keys(kept.key[:nk])
    out = np.empty((m, 7), dtype=np.float32)
    for r in range(m):
        i = sel[r] & 0xFFFFFFFF
        out[r, 0] = qsl_idx
        out[r, 1] = kept.box[i, 0]
        out[r, 2] = kept.box[i, 1]
        out[r, 3] = kept.box[i, 2]
        out[r, 4] = kept.box[i, 3]
        out[r, 5] = score_value(int(hi) - (sel[r] >> 32), kind, scale, zero_point)
        out[r, 6] = class_ids[kept.cls[i]]
    return out


@njit(cache=True, error_model="numpy")
def _nms_sorted(keys: np.ndarray, anchor_of: np.ndarray, boxes: np.ndarray, scores: ScoreCodes,
                coder: BoxCoder, layout: int, limits: NMSLimits, qsl_idx: float) -> np.ndarray:
    """Greedy per-class NMS over candidate keys sorted by (class, score desc, candidate); the anchor of
    candidate i is anchor_of[i] (empty: i itself); then the per-image cap (`_image_rows`). Boxes are
    decoded only when a candidate's turn comes; the IoU test against the class's kept boxes is branch-free
    (vectorised), IoU 0 without a positive overlap. The class runs are found inline: with a helper for
    them as well, LLVM lays this loop out worse (SSD-MobileNet 15% slower an image)."""
    class_shift, iou_threshold, pre_nms_per_class, max_per_class, _, _, _ = limits
    n = keys.size
    kept_box = np.empty((n, 4), dtype=np.float64)
    kept_cls = np.empty(n, dtype=np.int64)
    kept_key = np.empty(n, dtype=np.int64)
    cap = max(max_per_class, 0)
    score_mask = (1 << (class_shift - SCORE_SHIFT)) - 1
    y1s, x1s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    y2s, x2s = np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64)
    areas = np.empty(cap, dtype=np.float64)
    nk = 0
    start = 0
    while start < n:
        c = keys[start] >> class_shift
        end = start + 1
        while end < n and (keys[end] >> class_shift) == c:
            end += 1
        stop = min(end, start + pre_nms_per_class) if pre_nms_per_class > 0 else end
        nh = 0
        for t in range(start, stop):
            if nh >= cap:
                break
            k = keys[t]
            cand = k & CANDIDATE_MASK
            anchor = anchor_of[cand] if anchor_of.size else cand
            y1, x1, y2, x2 = decode(coder, layout, boxes, cand, anchor)
            area = (y2 - y1) * (x2 - x1)
            suppressed = False
            for q in range(nh):
                ih = min(y2, y2s[q]) - max(y1, y1s[q])
                iw = min(x2, x2s[q]) - max(x1, x1s[q])
                inter = ih * iw
                union = area + areas[q] - inter
                suppressed |= (ih > 0.0) & (iw > 0.0) & (union > 0.0) & (inter / union > iou_threshold)
            if not suppressed:
                y1s[nh], x1s[nh], y2s[nh], x2s[nh], areas[nh] = y1, x1, y2, x2, area
                kept_box[nk, 0], kept_box[nk, 1], kept_box[nk, 2], kept_box[nk, 3] = y1, x1, y2, x2
                kept_cls[nk] = c
                kept_key[nk] = (((k >> SCORE_SHIFT) & score_mask) << 32) | nk
                nk += 1
                nh += 1
        start = end
    return _image_rows(_Kept(kept_box, kept_cls, kept_key), nk, scores, limits, qsl_idx)


@njit(cache=True, nogil=True)
def box_major(codes: np.ndarray, boxes: np.ndarray, qsl_idx: float, scores: ScoreCodes, coder: BoxCoder,
              limits: NMSLimits) -> np.ndarray:
    """SSD-MobileNet: scores [A, C] box-outer, background column 0 skipped in the scan."""
    a_n, c_n = codes.shape
    flat = codes.reshape(a_n * c_n)
    lo, hi, _, _, _ = scores
    class_shift, _, _, _, _, fold_len, _ = limits
    hits = scan(flat, 0, flat.size, lo, hi, c_n, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    for j in range(hits.size):
        i = hits[j]
        a, c = i // c_n, i % c_n
        keys[j] = (c << class_shift) | ((int(hi) - int(flat[i])) << SCORE_SHIFT) | a
    return _nms_sorted(sort_keys(keys), hits[:0], boxes, scores, coder, CODER_BOX_MAJOR, limits, qsl_idx)


@njit(cache=True, nogil=True)
def class_major(codes: np.ndarray, boxes: np.ndarray, qsl_idx: float, scores: ScoreCodes, coder: BoxCoder,
                limits: NMSLimits) -> np.ndarray:
    """SSD-ResNet34: scores [C, A] class-outer; the background row 0 is not scanned at all."""
    c_n, a_n = codes.shape
    flat = codes.reshape(a_n * c_n)
    lo, hi, _, _, _ = scores
    class_shift, _, _, _, _, fold_len, _ = limits
    hits = scan(flat, a_n, flat.size, lo, hi, 0, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    for j in range(hits.size):
        i = hits[j]
        c, a = i // a_n, i % a_n
        keys[j] = (c << class_shift) | ((int(hi) - int(flat[i])) << SCORE_SHIFT) | a
    return _nms_sorted(sort_keys(keys), hits[:0], boxes, scores, coder, CODER_CLASS_MAJOR, limits, qsl_idx)


@njit(cache=True, nogil=True)
def topk(codes: np.ndarray, boxes: np.ndarray, indices: np.ndarray, qsl_idx: float, scores: ScoreCodes,
         coder: BoxCoder, limits: NMSLimits, levels: TopkLevels) -> np.ndarray:
    """RetinaNet: the card's top-K per level; flat index = anchor * classes + class within a level."""
    k_n = codes.shape[0]
    lo, hi, _, _, _ = scores
    class_shift, _, _, _, _, fold_len, _ = limits
    starts, per_level, num_classes = levels
    hits = scan(codes, 0, k_n, lo, hi, 0, fold_len)
    keys = np.empty(hits.size, dtype=np.int64)
    anchor = np.empty(k_n, dtype=np.int64)
    for j in range(hits.size):
        p = hits[j]
        flat = indices[p]
        c = flat % num_classes
        anchor[p] = starts[p // per_level] + flat // num_classes
        keys[j] = (c << class_shift) | ((int(hi) - int(codes[p])) << SCORE_SHIFT) | p
    return _nms_sorted(sort_keys(keys), anchor, boxes, scores, coder, CODER_TOPK, limits, qsl_idx)


# ------------------------------------------------------------------------------------------------
# YOLO (Ultralytics' ONNX export): one output, 4 box rows (cx, cy, w, h in input pixels) + class scores

@njit(cache=True)
def _yolo_keys_anchor_major(codes: np.ndarray, scores: ScoreCodes, score_shift: int) -> np.ndarray:
    """[A, 4 + C]: each anchor's scores are contiguous: a max reduction, the class only for survivors."""
    a_n, attrs = codes.shape
    c_n = attrs - 4
    lo, hi, _, _, _ = scores
    keys = np.empty(a_n, dtype=np.int64)
    n = 0
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
        keys[n] = ((hi - int(best)) << score_shift) | (c << SCORE_SHIFT) | a
        n += 1
    return keys[:n]


@njit(cache=True)
def _yolo_keys_attribute_major(codes: np.ndarray, scores: ScoreCodes, score_shift: int, block: int
                               ) -> np.ndarray:
    """[4 + C, A]: the best class per anchor by running maxima over the class rows, a block of anchors
    at a time (the first of equal scores wins)."""
    attrs, a_n = codes.shape
    c_n = attrs - 4
    lo, hi, _, _, _ = scores
    keys = np.empty(a_n, dtype=np.int64)
    n = 0
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
                keys[n] = ((hi - int(b)) << score_shift) | (int(bcls[a]) << SCORE_SHIFT) | (start + a)
                n += 1
    return keys[:n]


@njit(cache=True)
def _yolo_box(codes: np.ndarray, a: int, scores: ScoreCodes, yolo: YoloParams) -> Box:
    """Anchor a's box as corners (x1, y1, x2, y2) in input pixels."""
    _, _, kind, _, _ = scores
    _, anchor_major, box_scale, box_zero_point, _, _, _, _ = yolo
    if anchor_major:
        cx = signed_value(codes[a, 0], kind, box_scale, box_zero_point)
        cy = signed_value(codes[a, 1], kind, box_scale, box_zero_point)
        w = signed_value(codes[a, 2], kind, box_scale, box_zero_point)
        h = signed_value(codes[a, 3], kind, box_scale, box_zero_point)
    else:
        cx = signed_value(codes[0, a], kind, box_scale, box_zero_point)
        cy = signed_value(codes[1, a], kind, box_scale, box_zero_point)
        w = signed_value(codes[2, a], kind, box_scale, box_zero_point)
        h = signed_value(codes[3, a], kind, box_scale, box_zero_point)
    return cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0


@njit(cache=True, error_model="numpy")
def _yolo_greedy(codes: np.ndarray, keys: np.ndarray, scores: ScoreCodes, yolo: YoloParams,
                 kept: np.ndarray, kept_key: np.ndarray) -> int:
    """Greedy NMS in the global (score desc, class, anchor) order with per-class kept lists, stopping at
    the per-image cap; kept rows: x1, y1, x2, y2, area. Returns how many were kept."""
    cap = kept_key.size
    score_shift, anchor_major, _, _, _, iou_threshold, _, _ = yolo
    class_mask = (1 << (score_shift - SCORE_SHIFT)) - 1
    c_n = (codes.shape[1] if anchor_major else codes.shape[0]) - 4
    per_class = np.empty((c_n, cap), dtype=np.int32)  # kept indices of each class
    counts = np.zeros(c_n, dtype=np.int32)
    nk = 0
    for t in range(keys.size):
        if nk >= cap:
            break
        k = keys[t]
        c = (k >> SCORE_SHIFT) & class_mask
        x1, y1, x2, y2 = _yolo_box(codes, k & CANDIDATE_MASK, scores, yolo)
        area = (x2 - x1) * (y2 - y1)
        suppressed = False
        for j in range(counts[c]):
            q = per_class[c, j]
            iw = min(x2, kept[2, q]) - max(x1, kept[0, q])
            ih = min(y2, kept[3, q]) - max(y1, kept[1, q])
            inter = ih * iw
            union = area + kept[4, q] - inter
            if (ih > 0.0) & (iw > 0.0) & (union > 0.0) & (inter / union > iou_threshold):
                suppressed = True
                break
        if not suppressed:
            kept[0, nk], kept[1, nk], kept[2, nk], kept[3, nk], kept[4, nk] = x1, y1, x2, y2, area
            kept_key[nk] = k
            per_class[c, counts[c]] = nk
            counts[c] += 1
            nk += 1
    return nk


@njit(cache=True, nogil=True, error_model="numpy")
def yolo(codes: np.ndarray, geo: np.ndarray, qsl_idx: float, scores: ScoreCodes, params: YoloParams
         ) -> np.ndarray:
    """YOLO host NMS on the raw codes: best class per anchor (the loop order follows the layout), the
    threshold on the best code, survivors keyed (score desc, class, anchor) and radix-sorted, then
    greedy NMS in that global order (`_yolo_greedy`), which equals class-aware NMS followed by the
    per-image cap. Boxes are decoded only for candidates whose turn comes; IoU is taken in input pixels,
    then the letterbox `geo` (gain_x, gain_y, pad_x, pad_y, width, height) is undone and the box clipped
    to and normalised by the original image."""
    score_shift, anchor_major, _, _, class_ids, _, max_per_image, block = params
    if anchor_major:
        keys = _yolo_keys_anchor_major(codes, scores, score_shift)
    else:
        keys = _yolo_keys_attribute_major(codes, scores, score_shift, block)
    keys = sort_keys(keys)
    cap = max(max_per_image, 0)
    kept = np.empty((5, cap), dtype=np.float64)
    kept_key = np.empty(cap, dtype=np.int64)
    nk = _yolo_greedy(codes, keys, scores, params, kept, kept_key)
    gain_x, gain_y, pad_x, pad_y, width, height = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    class_mask = (1 << (score_shift - SCORE_SHIFT)) - 1
    _, hi, kind, scale, zero_point = scores
    out = np.empty((nk, 7), dtype=np.float32)
    for r in range(nk):
        k = kept_key[r]
        out[r, 0] = qsl_idx
        out[r, 1] = min(max((kept[1, r] - pad_y) / gain_y, 0.0), height) / height
        out[r, 2] = min(max((kept[0, r] - pad_x) / gain_x, 0.0), width) / width
        out[r, 3] = min(max((kept[3, r] - pad_y) / gain_y, 0.0), height) / height
        out[r, 4] = min(max((kept[2, r] - pad_x) / gain_x, 0.0), width) / width
        out[r, 5] = signed_value(hi - (k >> score_shift), kind, scale, zero_point)
        out[r, 6] = class_ids[(k >> SCORE_SHIFT) & class_mask]
    return out
