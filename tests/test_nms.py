"""The fast host NMS against a plain, obviously-correct NMS written here, on random inputs (hypothesis)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import DataError
from harness.data import benchmarks, nms, nms_kernels
from harness.records.benchmark import NMS_PARAM_SETS, DetectionSpec, OutputQuant, _variant

RECORDS = {name: benchmarks.get(name) for name in benchmarks.NAMES}  # host NMS takes records, not names

# ---------------------------------------------------------------------------------------------
# the plain reference: a direct transcription of the semantics in harness/data/nms.py's docstring


def _dequant(arr: np.ndarray, quant: nms.Quant | None) -> np.ndarray:
    if arr.dtype == np.uint8:
        return quant.scale * (arr.astype(np.float64) - quant.zero_point)
    return arr.astype(np.float64)


def _decode(lay: nms.Layout, b: np.ndarray, cand: int, anchor: int) -> tuple[float, ...]:
    pr, var = lay.priors[anchor], lay.variances
    if lay.kind == "box-major":
        ty, tx, th, tw = (float(v) for v in b[cand])
        yc = ty / var[0] * pr[2] + pr[0]
        xc = tx / var[1] * pr[3] + pr[1]
        h = math.exp(th / var[2]) * pr[2]
        w = math.exp(tw / var[3]) * pr[3]
        box = (yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0)
        return tuple(min(max(v, 0.0), 1.0) for v in box)
    if lay.kind == "class-major":
        dx, dy, dw, dh = (float(v) for v in b[:, cand])
        cx = dx * var[0] * pr[2] + pr[0]
        cy = dy * var[0] * pr[3] + pr[1]
        w = math.exp(dw * var[1]) * pr[2]
        h = math.exp(dh * var[1]) * pr[3]
        box = (cy - h / 2.0, cx - w / 2.0, cy + h / 2.0, cx + w / 2.0)
        return tuple(min(max(v, 0.0), 1.0) for v in box)
    size = float(lay.image_size)
    dx, dy = float(b[cand, 0]) / var[0], float(b[cand, 1]) / var[1]
    dw = min(float(b[cand, 2]) / var[2], math.log(1000.0 / 16))
    dh = min(float(b[cand, 3]) / var[3], math.log(1000.0 / 16))
    aw, ah = pr[2] - pr[0], pr[3] - pr[1]
    cx, cy = dx * aw + (pr[0] + 0.5 * aw), dy * ah + (pr[1] + 0.5 * ah)
    w, h = math.exp(dw) * aw, math.exp(dh) * ah
    box = (cy - 0.5 * h, cx - 0.5 * w, cy + 0.5 * h, cx + 0.5 * w)
    return tuple(min(max(v, 0.0), size) / size for v in box)


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ih = min(a[2], b[2]) - max(a[0], b[0])
    iw = min(a[3], b[3]) - max(a[1], b[1])
    if ih <= 0.0 or iw <= 0.0:
        return 0.0
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0.0 else 0.0


def reference_nms(bench: str, boxes: np.ndarray, scores: np.ndarray, indices: np.ndarray | None = None,
                  params: str = "reference") -> np.ndarray:
    lay, p = nms.layout(RECORDS[bench]), nms.params_for(RECORDS[bench], params)
    sv, bv = _dequant(scores, lay.score_quant), _dequant(boxes, lay.box_quant)
    cands: dict[int, list[tuple[float, int, int]]] = {}  # class -> (score, candidate index, anchor)
    if lay.kind == "box-major":
        for a, c in zip(*np.nonzero(sv > p.score_threshold), strict=True):
            if c >= 1:
                cands.setdefault(int(c), []).append((sv[a, c], int(a), int(a)))
    elif lay.kind == "class-major":
        for c, a in zip(*np.nonzero(sv > p.score_threshold), strict=True):
            if c >= 1:
                cands.setdefault(int(c), []).append((sv[c, a], int(a), int(a)))
    else:
        starts = np.concatenate([[0], np.cumsum(lay.level_anchors)[:-1]])
        for q in np.nonzero(sv > p.score_threshold)[0]:
            flat = int(indices[q])
            anchor = int(starts[q // lay.topk_per_level]) + flat // lay.num_classes
            cands.setdefault(flat % lay.num_classes, []).append((sv[q], int(q), anchor))
    dets = []
    for c in sorted(cands):
        ordered = sorted(cands[c], key=lambda t: (-t[0], t[1]))
        if p.pre_nms_per_class:
            ordered = ordered[:p.pre_nms_per_class]
        kept: list[tuple[float, ...]] = []
        for score, cand, anchor in ordered:
            if len(kept) == p.max_per_class:
                break
            box = _decode(lay, bv, cand, anchor)
            if all(_iou(box, k) <= p.iou_threshold for k in kept):
                dets.append((score, c, len(kept), box))
                kept.append(box)
    dets.sort(key=lambda d: (-d[0], d[1], d[2]))
    rows = [(0.0, *box, score, lay.class_ids[c]) for score, c, _, box in dets[:p.max_per_image]]
    return np.asarray(rows, dtype=np.float32).reshape(-1, 7)


# ---------------------------------------------------------------------------------------------
# random inputs: few candidates on clustered anchors, scores and deltas from small sets (ties, overlaps)

def _raw_arrays(bench: str, quantised: bool) -> dict[str, np.ndarray]:
    lay = nms.layout(RECORDS[bench])
    out = {"boxes": np.zeros(lay.shapes["boxes"], np.float32), "scores": np.zeros(lay.shapes["scores"], np.float32)}
    if "indices" in lay.shapes:
        out["indices"] = np.zeros(lay.shapes["indices"], np.int64)
    return nms.quantise(RECORDS[bench], out) if quantised else out


@st.composite
def detection_inputs(draw, bench: str, quantised: bool):
    lay = nms.layout(RECORDS[bench])
    arrays = _raw_arrays(bench, quantised)
    p = nms.params_for(RECORDS[bench])
    th = p.score_threshold
    score_pool = draw(st.lists(st.sampled_from([0.0, th * 0.5, th, th + 1e-3, 0.31, 0.5, 0.5, 0.77, 0.9, 1.0]),
                               min_size=1, max_size=4))
    delta_pool = [-1.0, -0.25, 0.0, 0.0, 0.1, 0.5, 2.0]
    base = draw(st.integers(0, lay.num_anchors - 64)) if lay.kind != "topk" else 0
    n = draw(st.integers(0, 60))
    scores = np.zeros(lay.shapes["scores"], np.float32)
    boxes = np.zeros(lay.shapes["boxes"], np.float32)
    indices = np.zeros(lay.shapes.get("indices", (0,)), np.int64)
    classes = draw(st.lists(st.integers(1, lay.num_classes - 1), min_size=1, max_size=3))
    for _ in range(n):
        c = draw(st.sampled_from(classes))
        s = draw(st.sampled_from(score_pool))
        d = [draw(st.sampled_from(delta_pool)) for _ in range(4)]
        if lay.kind == "box-major":
            a = base + draw(st.integers(0, 40))
            scores[a, c], boxes[a] = s, d
        elif lay.kind == "class-major":
            a = base + draw(st.integers(0, 40))
            scores[c, a], boxes[:, a] = s, d
        else:
            q = draw(st.integers(0, 4999))
            level = q // lay.topk_per_level
            anchor = draw(st.integers(0, min(30, lay.level_anchors[level] - 1)))
            scores[q], boxes[q], indices[q] = s, d, anchor * lay.num_classes + c
    raw = {"boxes": boxes, "scores": scores}
    if lay.kind == "topk":
        raw["indices"] = indices
    if quantised:
        raw = nms.quantise(RECORDS[bench], raw)
    for k, v in raw.items():
        arrays[k] = v
    return arrays


def _check(bench: str, arrays: dict[str, np.ndarray], params: str = "reference") -> None:
    fast = nms.postprocess(RECORDS[bench], arrays["boxes"], arrays["scores"], arrays.get("indices"), params=params)
    ref = reference_nms(bench, arrays["boxes"], arrays["scores"], arrays.get("indices"), params=params)
    assert fast.dtype == np.float32 and fast.shape[1] == 7
    np.testing.assert_array_equal(fast, ref)


_settings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])
CASES = [("ssd-mobilenet", False), ("ssd-mobilenet", True), ("ssd-resnet34", False), ("ssd-resnet34", True),
         ("retinanet", False)]


@pytest.mark.parametrize(("bench", "quantised"), CASES)
def test_fast_nms_equals_reference(bench: str, quantised: bool) -> None:
    @_settings
    @given(detection_inputs(bench, quantised), st.sampled_from(NMS_PARAM_SETS))
    def prop(arrays, params):
        _check(bench, arrays, params)

    prop()


@pytest.mark.parametrize(("bench", "quantised"), CASES)
def test_empty_and_all_below_threshold(bench: str, quantised: bool) -> None:
    arrays = _raw_arrays(bench, quantised)
    assert nms.postprocess(RECORDS[bench], arrays["boxes"], arrays["scores"], arrays.get("indices")).shape == (0, 7)
    lay = nms.layout(RECORDS[bench])
    below = {k: v.copy() for k, v in _raw_arrays(bench, False).items()}
    th = nms.params_for(RECORDS[bench]).score_threshold
    at = np.float32(th) if float(np.float32(th)) <= th else np.nextafter(np.float32(th), np.float32(0))
    below["scores"][...] = at  # the largest float32 not above the threshold
    if quantised:
        below = nms.quantise(RECORDS[bench], below)
        if lay.score_quant is not None:  # the code at or below the threshold
            threshold = nms.params_for(RECORDS[bench]).score_threshold
            below["scores"][...] = np.uint8(np.floor(threshold / lay.score_quant.scale))
    _check(bench, below)
    assert nms.postprocess(RECORDS[bench], below["boxes"], below["scores"], below.get("indices")).shape == (0, 7)


@pytest.mark.parametrize("bench", ["ssd-mobilenet", "ssd-resnet34"])
def test_all_overlapping_keeps_one_per_class(bench: str) -> None:
    """Every anchor of the first cell decodes to the same box: one detection per class survives."""
    lay = nms.layout(RECORDS[bench])
    arrays = _raw_arrays(bench, False)
    same = 6
    pr = lay.priors
    for a in range(same):  # deltas that move each anchor onto anchor 0's box
        if lay.kind == "box-major":
            arrays["boxes"][a] = [(pr[0, 0] - pr[a, 0]) / pr[a, 2] * 10, (pr[0, 1] - pr[a, 1]) / pr[a, 3] * 10,
                                  math.log(pr[0, 2] / pr[a, 2]) * 5, math.log(pr[0, 3] / pr[a, 3]) * 5]
            arrays["scores"][a, 1] = arrays["scores"][a, 2] = 0.9 - 0.01 * a
        else:
            arrays["boxes"][:, a] = [(pr[0, 0] - pr[a, 0]) / pr[a, 2] * 10, (pr[0, 1] - pr[a, 1]) / pr[a, 3] * 10,
                                     math.log(pr[0, 2] / pr[a, 2]) * 5, math.log(pr[0, 3] / pr[a, 3]) * 5]
            arrays["scores"][1, a] = arrays["scores"][2, a] = 0.9 - 0.01 * a
    out = nms.postprocess(RECORDS[bench], arrays["boxes"], arrays["scores"])
    _check(bench, arrays)
    assert len(out) == 2 and set(out[:, 6]) == {lay.class_ids[1], lay.class_ids[2]}


def test_caps_and_order() -> None:
    """Many separate boxes of one class: per-class cap, then the per-image cap, scores descending."""
    bench = "ssd-resnet34"
    arrays = _raw_arrays(bench, False)
    rng = np.random.default_rng(1)
    arrays["scores"][1:4, :] = rng.random((3, 15130)).astype(np.float32)
    arrays["boxes"][...] = rng.normal(0, 1, (4, 15130)).astype(np.float32)
    out = nms.postprocess(RECORDS[bench], arrays["boxes"], arrays["scores"])
    p = nms.params_for(RECORDS[bench])
    assert len(out) == p.max_per_image
    assert (np.diff(out[:, 5]) <= 0).all()
    assert (out[:, 1:5] >= 0).all() and (out[:, 1:5] <= 1).all()
    _check(bench, arrays)
    _check(bench, arrays, "krai")


def test_qsl_idx_and_wrong_shapes() -> None:
    arrays = _raw_arrays("ssd-mobilenet", False)
    arrays["scores"][5, 3] = 0.9
    out = nms.postprocess(benchmarks.get("ssd-mobilenet"), arrays["boxes"], arrays["scores"], qsl_idx=17)
    assert out.shape == (1, 7) and out[0, 0] == 17 and out[0, 6] == 3
    with pytest.raises(DataError, match=r"scores have shape \(91, 1917\), expected \(1917, 91\)"):
        nms.postprocess(benchmarks.get("ssd-mobilenet"), arrays["boxes"], arrays["scores"].T)
    with pytest.raises(DataError, match="not a detection benchmark"):
        nms.postprocess(benchmarks.get("resnet50"), arrays["boxes"], arrays["scores"])
    with pytest.raises(DataError, match="unknown NMS parameter set"):
        nms.postprocess(benchmarks.get("ssd-mobilenet"), arrays["boxes"], arrays["scores"], params="fast")


def test_raw_threshold_codes_match_values() -> None:
    """The raw-code comparison admits exactly the values above the threshold, for every code."""
    for th in (0.0, 0.05, 0.3, 0.5):
        lo, _ = nms._threshold_codes("uint8", th, 1 / 255, 0)
        vals = (np.arange(256) - 0) / 255
        assert ((np.arange(256) >= lo) == (vals > th)).all()
        lo, _ = nms._threshold_codes("float16", th, 1.0, 0)
        codes = np.arange(0x7C00, dtype=np.uint16)
        assert ((codes >= lo) == (codes.view(np.float16).astype(np.float64) > th)).all()


@pytest.mark.parametrize("n", [0, 1, 2, 64, 65, 300, 5000])
def test_sort_keys_matches_numpy(n: int) -> None:
    """The kernels' key sort (insertion / LSD radix) on keys up to 63 bits, duplicates included."""
    rng = np.random.default_rng(n)
    for top in (1 << 8, 1 << 40, (1 << 63) - 1):
        keys = rng.integers(0, top, n, dtype=np.int64)
        keys[: n // 4] = keys[n // 2: n // 2 + n // 4]
        np.testing.assert_array_equal(nms_kernels.sort_keys(keys.copy()), np.sort(keys))


def test_raw_float_codes_exclude_negative_nan_and_keep_inf() -> None:
    """fp32 / fp16 scores compared as unsigned codes: negatives and NaN are never candidates, +inf is."""
    for quantised in (False, True):
        arrays = _raw_arrays("ssd-resnet34", False)
        arrays["scores"][1, 10] = -0.9
        arrays["scores"][2, 20] = np.nan
        arrays["scores"][3, 30] = np.inf
        arrays["scores"][4, 40] = 0.7
        if quantised:
            arrays = nms.quantise(benchmarks.get("ssd-resnet34"), arrays)
        _check("ssd-resnet34", arrays)
        out = nms.postprocess(benchmarks.get("ssd-resnet34"), arrays["boxes"], arrays["scores"])
        ids = nms.layout(benchmarks.get("ssd-resnet34")).class_ids
        assert sorted(out[:, 6].tolist()) == [ids[3], ids[4]]


def test_postprocessor_keeps_one_plan_per_dtype() -> None:
    """One bound Postprocessor fed float then quantised outputs of the same image: each form as postprocess."""
    pp = nms.Postprocessor(RECORDS["ssd-mobilenet"], "krai")
    arrays = _raw_arrays("ssd-mobilenet", False)
    arrays["scores"][7, 5], arrays["scores"][9, 5], arrays["scores"][300, 12] = 0.8, 0.75, 0.5
    for form in (arrays, nms.quantise(benchmarks.get("ssd-mobilenet"), arrays), arrays):
        out = pp(form["boxes"], form["scores"], qsl_idx=3)
        ref = nms.postprocess(benchmarks.get("ssd-mobilenet"), form["boxes"], form["scores"], params="krai", qsl_idx=3)
        np.testing.assert_array_equal(out, ref)
        assert len(out) == 3 and (out[:, 0] == 3).all()
    assert len(pp._plans) == 2


def test_kernel_records_are_plain_tuples_and_compile_once() -> None:
    """The kernels' parameter records go to numba as plain tuples (it types a NamedTuple in Python, at a
    microsecond and more a call) and the kernel is compiled once per form, not once per image."""
    spec = nms.layout(RECORDS["ssd-mobilenet"])
    q = nms.quantise(spec, _raw_arrays("ssd-mobilenet", False))
    for qsl in range(3):
        nms.postprocess(spec, q["boxes"], q["scores"], qsl_idx=qsl)
    plan = nms._plan(spec, spec.params("reference"), "uint8", "uint8")
    assert [type(r) for r in plan.records] == [tuple] * 3
    before = len(nms_kernels.box_major.signatures)
    for qsl in range(3):
        nms.postprocess(spec, q["boxes"], q["scores"], qsl_idx=qsl)
    assert len(nms_kernels.box_major.signatures) == before


# ---------------------------------------------------------------------------------------------
# YOLO: one output [84, 8400] (attribute-major) or [8400, 84] (anchor-major), letterboxed input

YOLO = benchmarks.YOLO_DETECTION
YOLO_ANCHOR_MAJOR = _variant(YOLO, "anchor-major")
_UINT8 = OutputQuant("uint8", (2.5,) * 4 + (1 / 255,) * 80, 0)  # box rows 2.5 px, scores 1/255
_YOLO_UINT8 = replace(YOLO, quantised={"output": _UINT8})
YOLO_SPECS = {("attribute-major", "uint8"): _YOLO_UINT8,
              ("anchor-major", "uint8"): _variant(_YOLO_UINT8, "anchor-major"),  # scales along axis 1
              **{(kind, form): spec for kind, spec in (("attribute-major", YOLO), ("anchor-major", YOLO_ANCHOR_MAJOR))
                 for form in ("float32", "float16")}}


def _dequantise(q: OutputQuant, codes: np.ndarray) -> np.ndarray:
    """uint8 codes back to values: scale x (code - zero point), one scale per attribute along `q.axis`."""
    scale = np.asarray(q.scale, dtype=np.float64)
    if scale.ndim:
        shape = [1] * codes.ndim
        shape[q.axis] = scale.size
        scale = scale.reshape(shape)
    return scale * (codes.astype(np.float64) - q.zero_point)


def reference_yolo(spec: DetectionSpec, output: np.ndarray, original: tuple[int, int]) -> np.ndarray:
    """Ultralytics' steps written plainly: best class per anchor (the first of equal scores), score >
    threshold, per-class greedy NMS (score desc, ties by anchor), all kept sorted by score desc, class,
    rank; the first 300; boxes through scale_boxes (8.4) and clip, normalised to the original image."""
    p = spec.params("reference")
    q = spec.quantised.get("output")
    vals = _dequantise(q, output) if output.dtype == np.uint8 else output.astype(np.float64)
    if spec.kind == "anchor-major":
        vals = vals.T
    cls = np.argmax(vals[4:], axis=0)
    conf = vals[4:][cls, np.arange(vals.shape[1])]
    per_class: dict[int, list[int]] = {}
    for a in np.nonzero(conf > p.score_threshold)[0]:
        per_class.setdefault(int(cls[a]), []).append(int(a))
    dets = []
    for c, anchors in per_class.items():
        kept: list[tuple[float, ...]] = []
        for a in sorted(anchors, key=lambda a: (-conf[a], a)):
            cx, cy, w, h = vals[:4, a]
            box = (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)  # ymin, xmin, ymax, xmax: _iou's order
            if all(_iou(box, k) <= p.iou_threshold for k in kept):
                dets.append((conf[a], c, len(kept), box))
                kept.append(box)
    dets.sort(key=lambda d: (-d[0], d[1], d[2]))
    height, width = original
    gain = min(640 / height, 640 / width)
    new_h, new_w = max(round(height * gain), 1), max(round(width * gain), 1)
    pad_x, pad_y = round((640 - new_w) / 2 - 0.1), round((640 - new_h) / 2 - 0.1)

    def back(v: float, pad: int, g: float, side: int) -> float:
        return min(max((v - pad) / g, 0.0), side) / side

    rows = [(0.0, back(b[0], pad_y, new_h / height, height), back(b[1], pad_x, new_w / width, width),
             back(b[2], pad_y, new_h / height, height), back(b[3], pad_x, new_w / width, width), s,
             benchmarks.COCO_80_IDS[c]) for s, c, _, b in dets[:p.max_per_image]]
    return np.asarray(rows, dtype=np.float32).reshape(-1, 7)


def _yolo_raw(kind: str, form: str, attr_major: np.ndarray) -> np.ndarray:
    """[84, 8400] float values -> the output as the card returns it in this layout and dtype."""
    out = attr_major if kind == "attribute-major" else np.ascontiguousarray(attr_major.T)
    if form == "uint8":
        return YOLO_SPECS[(kind, form)].quantised["output"].quantise(out)
    return out.astype(np.float16) if form == "float16" else out.astype(np.float32)


def _check_yolo(kind: str, form: str, raw: np.ndarray, original: tuple[int, int]) -> np.ndarray:
    spec = YOLO_SPECS[(kind, form)]
    fast = nms.bound(spec).of([raw], 0, original)
    assert fast.dtype == np.float32 and fast.shape[1] == 7
    np.testing.assert_array_equal(fast, reference_yolo(spec, raw, original))
    return fast


@st.composite
def yolo_inputs(draw):
    """Few candidates on a cluster of anchors; scores, centres and sizes from small pools (ties between
    anchors and between classes of one anchor, heavy overlaps, scores at and around the threshold)."""
    vals = np.zeros((84, 8400), np.float32)
    base = draw(st.integers(0, 8400 - 64))
    classes = draw(st.lists(st.integers(0, 79), min_size=1, max_size=3))
    score_pool = draw(st.lists(st.sampled_from([0.0, 0.0005, 0.001, 0.0011, 0.004, 0.3, 0.5, 0.5, 0.9, 1.0]),
                               min_size=1, max_size=4))
    for _ in range(draw(st.integers(0, 60))):
        a = base + draw(st.integers(0, 40))
        vals[4 + draw(st.sampled_from(classes)), a] = draw(st.sampled_from(score_pool))
        vals[:4, a] = [draw(st.sampled_from([-5.0, 0.0, 100.0, 102.5, 320.0, 637.5])) if i < 2
                       else draw(st.sampled_from([0.0, 5.0, 20.0, 22.5, 200.0])) for i in range(4)]
    original = draw(st.sampled_from([(480, 640), (640, 480), (333, 500), (640, 640), (1, 7), (1200, 50)]))
    return vals, original


@pytest.mark.parametrize("kind", ["attribute-major", "anchor-major"])
@pytest.mark.parametrize("form", ["float32", "float16", "uint8"])
def test_yolo_nms_equals_reference(kind: str, form: str) -> None:
    @_settings
    @given(yolo_inputs())
    def prop(case):
        vals, original = case
        _check_yolo(kind, form, _yolo_raw(kind, form, vals), original)

    prop()


@pytest.mark.parametrize("kind", ["attribute-major", "anchor-major"])
def test_yolo_empty_below_threshold_and_all_overlapping(kind: str) -> None:
    vals = np.zeros((84, 8400), np.float32)
    assert _check_yolo(kind, "float32", _yolo_raw(kind, "float32", vals), (480, 640)).shape == (0, 7)
    vals[:4, :] = [[320], [320], [50], [50]]
    for form, dtype in (("float32", np.float32), ("float16", np.float16)):
        at = dtype(0.001)
        vals[4:, :] = at if float(at) <= 0.001 else np.nextafter(at, dtype(0))  # the largest not above 0.001
        assert _check_yolo(kind, form, _yolo_raw(kind, form, vals), (480, 640)).shape == (0, 7)
    vals[4:, :] = 0.0
    vals[4 + 7, :] = np.linspace(0.2, 0.9, 8400, dtype=np.float32)  # every anchor the same box, class 7 best
    vals[4 + 9, ::2] = 0.95                                           # ... or class 9 on every other anchor
    out = _check_yolo(kind, "float32", _yolo_raw(kind, "float32", vals), (480, 640))
    assert out[:, 6].tolist() == [benchmarks.COCO_80_IDS[9], benchmarks.COCO_80_IDS[7]]
    assert out[0, 5] == np.float32(0.95) and out[1, 5] == np.float32(0.9)


@pytest.mark.parametrize("kind", ["attribute-major", "anchor-major"])
def test_yolo_cap_and_ties(kind: str) -> None:
    """900 separate boxes above the threshold, scores from a small pool (many ties): 300 kept, in order."""
    rng = np.random.default_rng(3)
    vals = np.zeros((84, 8400), np.float32)
    anchors = rng.choice(8400, 900, replace=False)
    for j, a in enumerate(anchors):
        vals[:4, a] = [10 + 21 * (j % 30), 10 + 21 * (j // 30), 20, 20]
        vals[4 + rng.integers(0, 80), a] = rng.choice([0.25, 0.5, 0.75])
    for form in ("float32", "float16", "uint8"):
        out = _check_yolo(kind, form, _yolo_raw(kind, form, vals), (427, 640))
        assert len(out) == 300 and (np.diff(out[:, 5]) <= 0).all()


def test_yolo_record_layouts_and_encoder() -> None:
    """The record's anchor-major variant, the image sizes of the encoder and the shape check."""
    vals = np.zeros((84, 8400), np.float32)
    vals[:4, 100], vals[4 + 3, 100] = [320, 320, 100, 50], 0.9
    enc = benchmarks.DetectionEncoder(YOLO, image_sizes=np.array([[480, 640], [640, 640]]))
    payload, offsets = enc([np.stack([vals, vals])], [0, 1])
    rows = payload.reshape(-1, 7)
    assert offsets.tolist() == [0, 7, 14] and rows[:, 0].tolist() == [0, 1]
    np.testing.assert_allclose(rows[0, 1:5], [215 / 480, 270 / 640, 265 / 480, 370 / 640], rtol=1e-6)
    np.testing.assert_allclose(rows[1, 1:5], [295 / 640, 270 / 640, 345 / 640, 370 / 640], rtol=1e-6)
    assert rows[0, 6] == 4  # class 3 -> COCO id 4
    transposed = nms.bound(YOLO_ANCHOR_MAJOR).of([np.ascontiguousarray(vals.T)], 0, (480, 640))
    np.testing.assert_array_equal(transposed, nms.bound(YOLO).of([vals], 0, (480, 640)))
    with pytest.raises(DataError, match=r"output have shape \(8400, 84\), expected \(84, 8400\)"):
        nms.bound(YOLO).of([np.ascontiguousarray(vals.T)])
    with pytest.raises(DataError, match="unknown NMS parameter set 'krai'; choose one of: reference"):
        nms.bound(YOLO, "krai")
