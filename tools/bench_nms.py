#!/usr/bin/env python3
"""Host NMS per image on one core, against the paper's budgets and against torchvision, in one run.

Inputs are raw card outputs in the paper's quantised forms (SSD-MobileNet: uint8 scores [1917, 91] and
uint8 boxes; SSD-ResNet34: fp16 scores [81, 15130] and uint8 planar boxes), every image a distinct one:
a background below the score threshold with N candidates above it at random anchors and classes.
YOLO11l (`--benchmark yolo`): the export's float32 output [84, 8400] of an image of a random original
size, class scores below the reference's 0.001 except at N anchors: half of them clustered on 25
objects (boxes jittered around each, so NMS suppresses), half scattered with lower scores; typical N =
2,000 (the 300 cap is reached), dense N = 8,400 (every anchor passes 0.001). Its torch pipeline is
Ultralytics' documented steps (non_max_suppression: amax over the classes > conf, xywh2xyxy, best
class, `torchvision.ops.batched_nms`, max_det; scale_boxes; clip; normalise) on the very same arrays.

The paper's budgets are per-image times of a host keeping up with a card's stream of outputs, so the
images are processed as a stream: they are generated in batches of about 64 MiB (more than the L2
caches, so each image's outputs come from memory as a card's would), then each batch goes through
`harness.data.nms.postprocess` image after image, each call timed, and then, when torchvision is importable,
through the same steps in torch (threshold, dequantise, decode the survivors, `torchvision.ops.batched_nms`,
per-image cap), also timed per image; the detections of both are compared. Medians over --images.

    python tools/bench_nms.py                                  # 1000 images per case, SSD models
    python tools/bench_nms.py --benchmark yolo --images 1000   # YOLO11l, typical and dense
    python tools/bench_nms.py --torch-venv /tmp/torchvenv      # with torch + torchvision beside
    git show main:harness/data/nms.py > /tmp/nms_main.py        # another version of the module ...
    python tools/bench_nms.py --baseline /tmp/nms_main.py       # ... timed against this one, same images

With --baseline, each image also goes through that copy of harness/data/nms.py, back to back with this
one (which of the two first alternating image by image, so both see the same load and the same caches),
and each case prints the ratio of the medians (this / baseline) and how many images gave the very same
rows: on a loaded machine repeat the run and read the ratios' spread, or give the baseline this module
itself (`--baseline harness/data/nms.py`) to see the noise.

torch is never a dependency of the appliance: make a throwaway venv for the comparison,
    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch torchvision
(PyPI's wheels), and name it with --torch-venv: its site-packages go at the end of the module path, so
the appliance's own numpy and numba stay the ones loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NotRequired, TypedDict

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.core import environment
from harness.data import benchmarks, nms

RECORDS = {name: benchmarks.get(name) for name in benchmarks.NAMES}  # host NMS takes records, not names

# per-image budgets: the paper's §II.F for the SSD models; YOLO11l: a card doing ~1,000 images/s leaves
# the host 1 ms per image per core (issue 20): typical at most 0.5 ms, dense at most 1.5 ms
BUDGET_S = {"ssd-mobilenet": {"typical": 1 / 19363, "dense": 1 / 19363},
            "ssd-resnet34": {"typical": 1 / 435, "dense": 1 / 435},
            "yolo": {"typical": 0.5e-3, "dense": 1.5e-3}}
DENSITY = {"ssd-mobilenet": {"typical": 50, "dense": 1000}, "ssd-resnet34": {"typical": 4000, "dense": 40000},
           "yolo": {"typical": 2000, "dense": 8400}}
YOLO_ORIGINALS = ((480, 640), (640, 480), (427, 640), (640, 427), (375, 500), (612, 612), (333, 500))
YOLO_OBJECTS = 25


def make_image(bench: str, candidates: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One image's raw outputs, quantised as the paper's cards return them."""
    lay = nms.layout(RECORDS[bench])
    th = nms.params_for(RECORDS[bench]).score_threshold
    a_n, c_n = lay.num_anchors, lay.num_classes
    flat = rng.choice(a_n * (c_n - 1), size=candidates, replace=False)
    anchors, classes = flat % a_n, flat // a_n + 1
    if lay.kind == "box-major":
        q = lay.score_quant
        assert q is not None
        lo = int(np.floor(th / q.uniform_scale))
        scores = rng.integers(0, lo, size=(a_n, c_n), dtype=np.uint8)
        scores[anchors, classes] = rng.integers(lo + 1, 256, size=candidates, dtype=np.uint8)
        boxes = np.clip(rng.normal(128, 6, (a_n, 4)), 0, 255).astype(np.uint8)
    else:
        scores = (rng.random((c_n, a_n), dtype=np.float32) * (th * 0.9)).astype(np.float16)
        scores[classes, anchors] = (th + rng.random(candidates, dtype=np.float32) * (1 - th)).astype(np.float16)
        boxes = np.clip(rng.normal(128, 6, (4, a_n)), 0, 255).astype(np.uint8)
    return {"boxes": boxes, "scores": scores}


def make_yolo_image(candidates: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One image's YOLO11l output [84, 8400] float32 (see the module docstring) and its original size."""
    spec = benchmarks.YOLO_DETECTION
    a_n, c_n = spec.num_anchors, spec.num_classes
    th = spec.params().score_threshold
    out = np.empty((4 + c_n, a_n), dtype=np.float32)
    out[4:] = rng.random((c_n, a_n), dtype=np.float32) * np.float32(th * 0.9)
    out[0:2] = rng.random((2, a_n), dtype=np.float32) * 640
    out[2:4] = rng.lognormal(3.5, 0.6, (2, a_n)).astype(np.float32)
    anchors = rng.permutation(a_n)[:candidates]
    half = candidates // 2
    obj_box = np.column_stack([rng.random((YOLO_OBJECTS, 2)) * 640, rng.lognormal(4.0, 0.5, (YOLO_OBJECTS, 2))])
    obj_cls = rng.integers(0, c_n, YOLO_OBJECTS)
    near, far = anchors[:half], anchors[half:]
    which = rng.integers(0, YOLO_OBJECTS, near.size)
    jitter = 1 + rng.normal(0, 0.15, (near.size, 4))
    out[0:4, near] = (obj_box[which] * jitter).T.astype(np.float32)
    out[4 + obj_cls[which], near] = (th + rng.random(near.size) ** 3 * (1 - th)).astype(np.float32)
    out[4 + rng.integers(0, c_n, far.size), far] = (th + rng.random(far.size) ** 6 * 0.2).astype(np.float32)
    h, w = YOLO_ORIGINALS[int(rng.integers(0, len(YOLO_ORIGINALS)))]
    return {"output": out, "original": np.array((h, w))}


def torch_yolo_pipeline() -> Callable[[dict[str, np.ndarray]], np.ndarray] | None:
    """Ultralytics' documented post-processing in torch on one image's [84, 8400] output (None: no torch)."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    torch.set_num_threads(1)
    spec = benchmarks.YOLO_DETECTION
    p = spec.params()
    class_ids = torch.tensor(spec.class_map, dtype=torch.float32)

    def run(img: dict[str, np.ndarray]) -> np.ndarray:
        pred = torch.from_numpy(img["output"])[None]                         # [1, 84, 8400] as exported
        xc = pred[:, 4:].amax(1) > p.score_threshold                         # candidates
        x = pred.transpose(-1, -2)[0][xc[0]]
        box = torch.cat((x[:, :2] - x[:, 2:4] / 2, x[:, :2] + x[:, 2:4] / 2), 1)  # xywh2xyxy
        conf, j = x[:, 4:].max(1, keepdim=True)                              # best class only
        keep = conf.view(-1) > p.score_threshold
        box, conf, j = box[keep], conf[keep].view(-1), j[keep].view(-1)
        i = torchvision.ops.batched_nms(box, conf, j, p.iou_threshold)[:p.max_per_image]
        box, conf, j = box[i], conf[i], j[i]
        h, w = (int(v) for v in img["original"])                             # scale_boxes (8.4) + clip
        gain = min(640 / h, 640 / w)
        new_h, new_w = max(round(h * gain), 1), max(round(w * gain), 1)
        pad_x, pad_y = round((640 - new_w) / 2 - 0.1), round((640 - new_h) / 2 - 0.1)
        x1 = ((box[:, 0] - pad_x) / (new_w / w)).clamp(0, w) / w
        y1 = ((box[:, 1] - pad_y) / (new_h / h)).clamp(0, h) / h
        x2 = ((box[:, 2] - pad_x) / (new_w / w)).clamp(0, w) / w
        y2 = ((box[:, 3] - pad_y) / (new_h / h)).clamp(0, h) / h
        rows: np.ndarray = torch.stack((torch.zeros_like(conf), y1, x1, y2, x2, conf, class_ids[j]), 1).numpy()
        return rows

    return run


def _torch_version() -> str | None:
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    return f"torch {torch.__version__}, torchvision {torchvision.__version__}"


def torch_pipeline(bench: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """The same post-processing in torch + torchvision.ops.batched_nms (None when not installed)."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    torch.set_num_threads(1)
    lay, p = nms.layout(RECORDS[bench]), nms.params_for(RECORDS[bench])
    priors = torch.from_numpy(lay.priors.copy())  # read-only arrays make torch warn
    class_ids = torch.from_numpy(lay.class_ids.copy())
    bq, sq = lay.box_quant, lay.score_quant
    assert bq is not None  # the SSD records' cards return quantised boxes (uint8)

    def run(boxes_np: np.ndarray, scores_np: np.ndarray) -> np.ndarray:
        scores, boxes = torch.from_numpy(scores_np), torch.from_numpy(boxes_np)
        if lay.kind == "box-major":
            assert sq is not None  # box-major (SSD-MobileNet): uint8 scores as well
            values = (scores.to(torch.float64) - sq.zero_point) * sq.scale
            values[:, 0] = 0
            a, c = torch.nonzero(values > p.score_threshold, as_tuple=True)
            s = values[a, c]
            d = (boxes[a].to(torch.float64) - bq.zero_point) * bq.scale
            pr = priors[a]
            yc = d[:, 0] / 10 * pr[:, 2] + pr[:, 0]
            xc = d[:, 1] / 10 * pr[:, 3] + pr[:, 1]
            h, w = torch.exp(d[:, 2] / 5) * pr[:, 2], torch.exp(d[:, 3] / 5) * pr[:, 3]
        else:
            values = scores[1:].to(torch.float64)
            c, a = torch.nonzero(values > p.score_threshold, as_tuple=True)
            s, c = values[c, a], c + 1
            d = (boxes[:, a].to(torch.float64) - bq.zero_point) * bq.scale
            pr = priors[a]
            xc = d[0] * 0.1 * pr[:, 2] + pr[:, 0]
            yc = d[1] * 0.1 * pr[:, 3] + pr[:, 1]
            w, h = torch.exp(d[2] * 0.2) * pr[:, 2], torch.exp(d[3] * 0.2) * pr[:, 3]
        yx = torch.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], dim=1).clamp(0, 1)
        xy = yx[:, [1, 0, 3, 2]].float()
        keep = torchvision.ops.batched_nms(xy, s.float(), c, p.iou_threshold)[:p.max_per_image]
        out = torch.zeros((len(keep), 7), dtype=torch.float32)
        out[:, 1:5], out[:, 5], out[:, 6] = yx[keep].float(), s[keep].float(), class_ids[c[keep]].float()
        rows: np.ndarray = out.numpy()
        return rows

    return run


BATCH_BYTES = 64 << 20


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """The same detections (boxes within 1e-5: float64 here, float32 in torch), in any order?"""
    def ordered(rows: np.ndarray) -> np.ndarray:
        rows = rows[:, 1:7].astype(np.float64)
        return rows[np.lexsort((rows[:, 1], rows[:, 0], rows[:, 5], rows[:, 4]))]
    return a.shape == b.shape and bool(np.allclose(ordered(a), ordered(b), rtol=0, atol=1e-5))


Image = dict[str, np.ndarray]  # one image's raw card outputs (and YOLO's original size)


def _appliance(bench: str, module: ModuleType) -> Callable[[Image], np.ndarray]:
    """The appliance's NMS of one image through `module` (harness.data.nms, or the --baseline copy)."""
    if bench == "yolo":
        post = module.bound(benchmarks.YOLO_DETECTION)
        return lambda img: post.of([img["output"]], 0, (int(img["original"][0]), int(img["original"][1])))
    return lambda img: module.postprocess(RECORDS[bench], img["boxes"], img["scores"])


def _pipelines(bench: str) -> tuple[Callable[[int, np.random.Generator], Image], Callable[[Image], np.ndarray],
                                    Callable[[Image], np.ndarray] | None]:
    """(make an image, the appliance's NMS of it, the torch pipeline's or None) for one benchmark."""
    if bench == "yolo":
        return make_yolo_image, _appliance(bench, nms), torch_yolo_pipeline()
    torch_run = torch_pipeline(bench)
    return (lambda n, rng: make_image(bench, n, rng), _appliance(bench, nms),
            None if torch_run is None else lambda img: torch_run(img["boxes"], img["scores"]))


def load_baseline(path: Path) -> ModuleType:
    """Another copy of harness/data/nms.py (e.g. main's), imported as its own module."""
    name = path.stem if path.stem not in sys.modules else f"{path.stem}_baseline"  # numba's cache keys on it
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot import {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache loads its functions' module by name
    spec.loader.exec_module(module)
    return module


def _timed(run: Callable[[Image], np.ndarray], img: Image) -> tuple[np.ndarray, int]:
    t0 = time.perf_counter_ns()
    out = run(img)
    return out, time.perf_counter_ns() - t0


def _stream(batch: list[Image], first: int, fast: Callable[[Image], np.ndarray],
            base: Callable[[Image], np.ndarray] | None) -> tuple[list[np.ndarray], list[int], list[int], int]:
    """One batch through the appliance, each image timed; with a baseline, each image through both back to
    back (the baseline first on every other image). Returns the rows, both timings and the identical count."""
    outs, fast_t, base_t, identical = [], [], [], 0
    for j, img in enumerate(batch):
        base_first = base is not None and (first + j) % 2 == 1
        if base is not None and base_first:
            ref, tb = _timed(base, img)
        out, t = _timed(fast, img)
        outs.append(out)
        fast_t.append(t)
        if base is not None:
            if not base_first:
                ref, tb = _timed(base, img)
            base_t.append(tb)
            identical += out.dtype == ref.dtype and out.shape == ref.shape and bool(np.array_equal(out, ref))
    return outs, fast_t, base_t, identical


class Case(TypedDict):
    """One benchmark x density, as --json prints it (the torchvision figures when torch is importable)."""

    benchmark: str
    density: str
    candidates: int
    images: int
    median_s: float
    p90_s: float
    detections_median: float
    budget_s: float
    within_budget: bool
    torchvision_median_s: NotRequired[float]
    speedup: NotRequired[float]
    same_detections_of_100: NotRequired[int]
    baseline_median_s: NotRequired[float]
    vs_baseline: NotRequired[float]             # median_s / baseline_median_s
    identical_to_baseline: NotRequired[int]     # images whose rows are bit for bit the baseline's


def bench_case(bench: str, density: str, images: int, seed: int, baseline: ModuleType | None = None) -> Case:
    rng = np.random.default_rng(seed)
    candidates = DENSITY[bench][density]
    make, fast, torch_run = _pipelines(bench)
    base = None if baseline is None else _appliance(bench, baseline)
    fast_t, torch_t, base_t, agree, identical, counts = [], [], [], 0, 0, []
    first = make(candidates, rng)
    per_batch = max(1, BATCH_BYTES // sum(a.nbytes for a in first.values()))
    done = 0
    while done < images:
        batch = [first] if done == 0 else []
        batch += [make(candidates, rng) for _ in range(min(per_batch, images - done) - len(batch))]
        outs, batch_t, batch_base_t, batch_identical = _stream(batch, done, fast, base)
        fast_t += batch_t
        base_t += batch_base_t
        identical += batch_identical
        counts += [len(o) for o in outs]
        if torch_run is not None:
            for j, img in enumerate(batch):
                t0 = time.perf_counter_ns()
                ref = torch_run(img)
                torch_t.append(time.perf_counter_ns() - t0)
                if done + j < 100:
                    agree += _same(outs[j], ref)
        done += len(batch)
    med = statistics.median(fast_t) / 1e9
    budget = BUDGET_S[bench][density]
    row: Case = {
        "benchmark": bench, "density": density, "candidates": candidates, "images": images, "median_s": med,
        "p90_s": float(np.percentile(fast_t, 90)) / 1e9, "detections_median": statistics.median(counts),
        "budget_s": budget, "within_budget": med <= budget}
    if torch_t:
        tmed = statistics.median(torch_t) / 1e9
        row.update({"torchvision_median_s": tmed, "speedup": tmed / med, "same_detections_of_100": agree})
    if base_t:
        bmed = statistics.median(base_t) / 1e9
        row.update({"baseline_median_s": bmed, "vs_baseline": med / bmed, "identical_to_baseline": identical})
    return row


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=1000, help="images per case (default 1000)")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the first allowed one)")
    ap.add_argument("--benchmark", choices=sorted(BUDGET_S), action="append",
                    help="repeatable, e.g. --benchmark yolo (default: ssd-mobilenet and ssd-resnet34)")
    ap.add_argument("--torch-venv", type=Path, default=None,
                    help="a throwaway venv holding torch + torchvision, e.g. --torch-venv /tmp/torchvenv")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another copy of harness/data/nms.py timed against this one on the same images, e.g. "
                         "main's: git show main:harness/data/nms.py > /tmp/nms_main.py")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.torch_venv is not None:
        found = sorted(args.torch_venv.glob("lib/python3*/site-packages"))
        if not found:
            print(f"error: {args.torch_venv} has no lib/python3*/site-packages; give a venv's folder", file=sys.stderr)
            return 2
        sys.path.append(str(found[-1]))
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    environment.assign("OMP_NUM_THREADS", "1")
    chosen: list[str] = args.benchmark or ["ssd-mobilenet", "ssd-resnet34"]  # argparse gives Any: typed here
    specs = [benchmarks.YOLO_DETECTION if b == "yolo" else nms.layout(RECORDS[b]) for b in chosen]
    baseline = None if args.baseline is None else load_baseline(args.baseline)
    for module in (nms,) if baseline is None else (nms, baseline):
        module.warm_up(*specs)
    torch_desc = _torch_version()
    rows = [bench_case(bench, density, args.images, seed=i, baseline=baseline)
            for i, (bench, density) in enumerate((b, d) for b in chosen for d in DENSITY[b])]
    if args.json:
        print(json.dumps({"cpu": cpu, "machine": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
                          "torchvision": torch_desc, "baseline": args.baseline and str(args.baseline), "rows": rows},
                         indent=2))
        return 0
    print(f"host NMS, one core (cpu {cpu}: {cpu_model()}), median per image over {args.images} distinct images "
          f"processed as a stream; torchvision: {torch_desc or 'not installed'}"
          + (f"; baseline: {args.baseline}" if baseline else ""))
    _print_rows(rows, baseline is not None)
    return 0


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (else what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _print_rows(rows: list[Case], baseline: bool) -> None:
    extra = f" {'baseline':>10} {'ratio':>6} {'identical':>10}" if baseline else ""
    print(f"{'benchmark':14} {'density':8} {'cands':>6} {'median':>10} {'p90':>10} {'budget':>10} "
          f"{'torchvision':>12} {'speedup':>8} {'same/100':>8}" + extra)
    for r in rows:
        tv = r.get("torchvision_median_s")
        speedup = f"{r['speedup']:.1f}x" if tv else "-"
        if baseline:
            extra = (f" {_fmt(r['baseline_median_s']):>10} {r['vs_baseline']:>6.3f} "
                     f"{str(r['identical_to_baseline']) + '/' + str(r['images']):>10}")
        print(f"{r['benchmark']:14} {r['density']:8} {r['candidates']:>6} {_fmt(r['median_s']):>10} "
              f"{_fmt(r['p90_s']):>10} {_fmt(r['budget_s']):>10} {(_fmt(tv) if tv else '-'):>12} "
              f"{speedup:>8} {r.get('same_detections_of_100', '-')!s:>8}" + extra)


if __name__ == "__main__":
    sys.exit(main())
