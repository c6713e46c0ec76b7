#!/usr/bin/env python3
"""Host NMS per image on one core, against the paper's budgets and against torchvision, in one run.

Inputs are raw card outputs in the paper's quantised forms (SSD-MobileNet: uint8 scores [1917, 91] and
uint8 boxes; SSD-ResNet34: fp16 scores [81, 15130] and uint8 planar boxes), every image a distinct one:
a background below the score threshold with N candidates above it at random anchors and classes.

The paper's budgets are per-image times of a host keeping up with a card's stream of outputs, so the
images are processed as a stream: they are generated in batches of about 64 MiB (more than the L2
caches, so each image's outputs come from memory as a card's would), then each batch goes through
`harness.nms.postprocess` image after image, each call timed, and then, when torchvision is importable,
through the same steps in torch (threshold, dequantise, decode the survivors, `torchvision.ops.batched_nms`,
per-image cap), also timed per image; the detections of both are compared. Medians over --images.

    python tools/bench_nms.py                         # 1000 images per case
    /tmp/tv/bin/python tools/bench_nms.py --cpu 1     # a venv with torch + torchvision
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import nms

BUDGET_S = {"ssd-mobilenet": 1 / 19363, "ssd-resnet34": 1 / 435}  # the paper's §II.F
DENSITY = {"ssd-mobilenet": {"typical": 50, "dense": 1000}, "ssd-resnet34": {"typical": 4000, "dense": 40000}}


def make_image(bench: str, candidates: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One image's raw outputs, quantised as the paper's cards return them."""
    lay = nms.layout(bench)
    th = nms.params_for(bench).score_threshold
    a_n, c_n = lay.num_anchors, lay.num_classes
    flat = rng.choice(a_n * (c_n - 1), size=candidates, replace=False)
    anchors, classes = flat % a_n, flat // a_n + 1
    if lay.kind == "box-major":
        q = lay.score_quant
        lo = int(np.floor(th / q.scale))
        scores = rng.integers(0, lo, size=(a_n, c_n), dtype=np.uint8)
        scores[anchors, classes] = rng.integers(lo + 1, 256, size=candidates, dtype=np.uint8)
        boxes = np.clip(rng.normal(128, 6, (a_n, 4)), 0, 255).astype(np.uint8)
    else:
        scores = (rng.random((c_n, a_n), dtype=np.float32) * (th * 0.9)).astype(np.float16)
        scores[classes, anchors] = (th + rng.random(candidates, dtype=np.float32) * (1 - th)).astype(np.float16)
        boxes = np.clip(rng.normal(128, 6, (4, a_n)), 0, 255).astype(np.uint8)
    return {"boxes": boxes, "scores": scores}


def torch_pipeline(bench: str):
    """The same post-processing in torch + torchvision.ops.batched_nms (None when not installed)."""
    try:
        import torch
        import torchvision
    except ImportError:
        return None, None
    torch.set_num_threads(1)
    lay, p = nms.layout(bench), nms.params_for(bench)
    priors = torch.from_numpy(lay.priors.copy())  # read-only arrays make torch warn
    class_ids = torch.from_numpy(lay.class_ids.copy())
    bq, sq = lay.box_quant, lay.score_quant

    def run(boxes_np: np.ndarray, scores_np: np.ndarray) -> np.ndarray:
        scores, boxes = torch.from_numpy(scores_np), torch.from_numpy(boxes_np)
        if lay.kind == "box-major":
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
        return out.numpy()

    return run, f"torch {torch.__version__}, torchvision {torchvision.__version__}"


BATCH_BYTES = 64 << 20


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """The same detections, as sets of (box rounded, score, class)?"""
    def key(rows: np.ndarray) -> list[tuple[float, ...]]:
        return sorted(map(tuple, np.round(rows[:, 1:7].astype(np.float64), 4).tolist()))
    return key(a) == key(b)


def bench_case(bench: str, candidates: int, images: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    torch_run, _ = torch_pipeline(bench)
    fast_t, torch_t, agree, counts = [], [], 0, []
    first = make_image(bench, candidates, rng)
    per_batch = max(1, BATCH_BYTES // sum(a.nbytes for a in first.values()))
    done = 0
    while done < images:
        batch = [first] if done == 0 else []
        batch += [make_image(bench, candidates, rng) for _ in range(min(per_batch, images - done) - len(batch))]
        outs = []
        for img in batch:
            t0 = time.perf_counter_ns()
            outs.append(nms.postprocess(bench, img["boxes"], img["scores"]))
            fast_t.append(time.perf_counter_ns() - t0)
        counts += [len(o) for o in outs]
        if torch_run is not None:
            for j, img in enumerate(batch):
                t0 = time.perf_counter_ns()
                ref = torch_run(img["boxes"], img["scores"])
                torch_t.append(time.perf_counter_ns() - t0)
                if done + j < 100:
                    agree += _same(outs[j], ref)
        done += len(batch)
    med = statistics.median(fast_t) / 1e9
    row: dict[str, object] = {
        "benchmark": bench, "candidates": candidates, "images": images, "median_s": med,
        "p90_s": float(np.percentile(fast_t, 90)) / 1e9, "detections_median": statistics.median(counts),
        "budget_s": BUDGET_S[bench], "within_budget": med <= BUDGET_S[bench]}
    if torch_t:
        tmed = statistics.median(torch_t) / 1e9
        row.update(torchvision_median_s=tmed, speedup=tmed / med, same_detections_of_100=agree)
    return row


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=1000, help="images per case (default 1000)")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the first allowed one)")
    ap.add_argument("--benchmark", choices=sorted(BUDGET_S), action="append", help="default: both")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    os.environ["OMP_NUM_THREADS"] = "1"
    nms.warm_up()
    _, torch_desc = torch_pipeline("ssd-mobilenet")
    rows = []
    for bench in args.benchmark or sorted(BUDGET_S):
        for density, n in DENSITY[bench].items():
            row = bench_case(bench, n, args.images, seed=len(rows))
            row["density"] = density
            rows.append(row)
    if args.json:
        print(json.dumps({"cpu": cpu, "machine": platform.processor() or platform.machine(),
                          "torchvision": torch_desc, "rows": rows}, indent=2))
        return 0
    print(f"host NMS, one core (cpu {cpu}), median per image over {args.images} distinct images processed as a "
          f"stream; torchvision: {torch_desc or 'not installed'}")
    print(f"{'benchmark':14} {'density':8} {'cands':>6} {'median':>10} {'p90':>10} {'budget':>10} "
          f"{'torchvision':>12} {'speedup':>8} {'same/100':>8}")
    for r in rows:
        tv = r.get("torchvision_median_s")
        speedup = f"{r['speedup']:.1f}x" if tv else "-"
        print(f"{r['benchmark']:14} {r['density']:8} {r['candidates']:>6} {_fmt(r['median_s']):>10} "
              f"{_fmt(r['p90_s']):>10} {_fmt(r['budget_s']):>10} {(_fmt(tv) if tv else '-'):>12} "
              f"{speedup:>8} {r.get('same_detections_of_100', '-')!s:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
