#!/usr/bin/env python3
"""Host cost per image of YOLO's two paths, both through LoadGen (Offline) in the same run.

appliance: the harness's pieces per sample: stage the letterboxed uint8 sample from the prepared shards
  (PreparedData.gather, the copy the cards' staging does), take the card's output, host NMS in the
  card's layout (the record's encoder, harness.data.nms) and complete with the 7-float rows.
reference: what mlcommons/inference yolo_loadgen.py does per sample inside the timed path, one image per
  query: cv2.imread of the JPEG from disk, Ultralytics' letterbox, BGR->RGB, CHW, float /255, then
  Ultralytics' NMS steps (non_max_suppression: best class per anchor over conf 0.001, xywh->xyxy,
  class offsets, torchvision.ops.nms at IoU 0.7, 300 kept; scale_boxes back to the image) in torch, and
  struct.pack of each detection.

The card is the same for both and costs nothing: the FP32 model's real outputs for each image are computed
once before the timed runs (real detection densities for NMS), so the figures are the host's work only.
torch is not a dependency of the appliance: name a throwaway venv holding torch + torchvision with
--torch-venv (python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch torchvision);
without one the reference's NMS steps run as the same operations in numpy, and the output says so.

    python tools/bench_host.py --benchmark yolo-99 --data-dir data --samples 16 --seconds 5 --torch-venv /tmp/torchvenv
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from harness.cli.main import main as appliance
from harness.data import benchmarks, concrete
from harness.data.datasets import coco
from harness.hw import system
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import Layout, read_model_record

CONF, IOU, MAX_DET, MAX_NMS, MAX_WH = 0.001, 0.7, 300, 30000, 7680  # Ultralytics' defaults, conf the reference's


def _torch_nms() -> tuple[str, Callable[[np.ndarray], np.ndarray]] | None:
    try:
        import torch
        import torchvision
    except ImportError:
        return None

    def nms(pred: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(pred)                       # [84, 8400]
        x = x.T[x[4:].amax(0) > CONF]
        box = torch.cat((x[:, :2] - x[:, 2:4] / 2, x[:, :2] + x[:, 2:4] / 2), 1)
        conf, j = x[:, 4:].max(1, keepdim=True)
        x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > CONF]
        if x.shape[0] > MAX_NMS:
            x = x[x[:, 4].argsort(descending=True)[:MAX_NMS]]
        keep = torchvision.ops.nms(x[:, :4] + x[:, 5:6] * MAX_WH, x[:, 4], IOU)[:MAX_DET]
        kept: np.ndarray = x[keep].numpy()
        return kept
    return f"torch {torch.__version__}", nms


def _numpy_nms(pred: np.ndarray) -> np.ndarray:
    """The same steps as the torch pipeline, in numpy (greedy NMS one pick at a time, as torchvision's)."""
    x = pred.T[pred[4:].max(0) > CONF]
    box = np.concatenate((x[:, :2] - x[:, 2:4] / 2, x[:, :2] + x[:, 2:4] / 2), 1)
    j = x[:, 4:].argmax(1)
    conf = x[:, 4:][np.arange(len(x)), j]
    x = np.concatenate((box, conf[:, None], j[:, None].astype(np.float32)), 1)[conf > CONF]
    order = np.argsort(-x[:, 4], kind="stable")[:MAX_NMS]
    b = x[order, :4] + x[order, 5:6] * MAX_WH
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    alive = np.ones(len(order), bool)
    keep: list[int] = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(i)
        if len(keep) == MAX_DET:
            break
        w = np.clip(np.minimum(b[i, 2], b[i + 1:, 2]) - np.maximum(b[i, 0], b[i + 1:, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[i + 1:, 3]) - np.maximum(b[i, 1], b[i + 1:, 1]), 0, None)
        inter = w * h
        alive[i + 1:] &= inter / (area[i] + area[i + 1:] - inter) <= IOU
    kept: np.ndarray = x[order[keep]]
    return kept


def _reference_sample(path: Path, pred: np.ndarray, nms: Callable[[np.ndarray], np.ndarray], idx: int) -> bytes:
    img = cv2.imread(str(path))
    if img is None:
        raise SystemExit(f"bench_host: cannot read {path}; rerun `appliance prepare`")
    h, w = img.shape[:2]
    tensor = np.ascontiguousarray(coco.letterbox(img)[:, :, ::-1].transpose(2, 0, 1)).astype(np.float32) / 255
    del tensor  # the model input the reference hands to the model; the card's output is `pred`
    det = nms(pred)
    gx, gy, px, py = coco.letterbox_geometry(h, w)
    det[:, [0, 2]] = np.clip((det[:, [0, 2]] - px) / gx, 0, w)
    det[:, [1, 3]] = np.clip((det[:, [1, 3]] - py) / gy, 0, h)
    return b"".join(struct.pack("7f", float(idx), d[1] / h, d[0] / w, d[3] / h, d[2] / w, d[4],
                                float(benchmarks.COCO_80_IDS[int(d[5])])) for d in det)


def _card_outputs(model_path: str, bench: Benchmark, data: store.PreparedData) -> list[np.ndarray]:
    """The FP32 model's output for every prepared image ([84, 8400] each), onnxruntime CPU."""
    import onnxruntime as ort

    from harness.core import progress

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    x = np.empty((1, *bench.input_shape), np.uint8)
    out = []
    with progress.bar(data.count, "card outputs (FP32 model, once)") as bar:
        for i in range(data.count):
            data.gather(np.asarray([i]), x)
            out.append(sess.run([bench.outputs[0]], {bench.input_name: x})[0][0])
            bar.update(1)
    return out


def _loadgen(count: int, seconds: float, per_sample: Callable[[int], bytes]) -> dict[str, Any]:
    """One Offline LoadGen run whose SUT handles each sample with `per_sample`; per-image host time."""
    import array

    import mlperf_loadgen as lg

    warm = []  # once over every image: caches and pages in, and the rate LoadGen is told to expect
    for i in range(count):
        t0 = time.perf_counter()
        per_sample(i)
        warm.append(time.perf_counter() - t0)
    spent: list[float] = []
    rows = [0]

    def issue(samples: list[Any]) -> None:
        for s in samples:
            t0 = time.perf_counter()
            payload = array.array("B", per_sample(int(s.index)))
            addr, n = payload.buffer_info()
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, addr, n * payload.itemsize)])
            spent.append(time.perf_counter() - t0)
            rows[0] += n * payload.itemsize // 28

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.offline_expected_qps = 1.0 / max(float(np.median(warm)), 1e-6)  # enough samples for `seconds`
    settings.min_duration_ms = int(seconds * 1000)
    settings.min_query_count = 1
    with tempfile.TemporaryDirectory() as out:
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(count, count, lambda i: None, lambda i: None)
        start = time.perf_counter()
        lg.StartTestWithLogSettings(sut, qsl, settings, log)
        wall = time.perf_counter() - start
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    ms = np.asarray(spent) * 1e3
    return {"images": len(spent), "median_ms": round(float(np.median(ms)), 3), "mean_ms": round(float(ms.mean()), 3),
            "loadgen_wall_s": round(wall, 2), "rows_per_image": round(rows[0] / max(len(spent), 1), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--benchmark", default="yolo-99", choices=("yolo-95", "yolo-99"),
                    help="the YOLO record (e.g. --benchmark yolo-99)")
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data (e.g. --data-dir data)")
    ap.add_argument("--samples", type=int, default=16, help="images prepared and cycled (e.g. --samples 64)")
    ap.add_argument("--seconds", type=float, default=5.0, help="LoadGen min duration per path (e.g. --seconds 60)")
    ap.add_argument("--torch-venv", type=Path, default=None,
                    help="a throwaway venv holding torch + torchvision for the reference's NMS steps "
                         "(e.g. --torch-venv /tmp/torchvenv); appended to the module path, never a dependency")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if args.torch_venv is not None:
        found = sorted(args.torch_venv.glob("lib/python3*/site-packages"))
        if not found:
            print(f"error: {args.torch_venv} has no lib/python3*/site-packages; give a venv's folder", file=sys.stderr)
            return 2
        sys.path.append(str(found[-1]))  # after the appliance's own numpy

    bench = benchmarks.get(args.benchmark)
    layout = Layout(args.data_dir, bench)
    if not (layout.preprocessed / store.MANIFEST).is_file() and appliance(
            ["prepare", "-b", bench.name, "--data-dir", str(args.data_dir), "--samples", str(args.samples), "-q"]):
        return 1
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(args.data_dir))
    bench = concrete.for_prepared(bench, data)
    model = read_model_record(layout)
    count = data.count
    preds = _card_outputs(model.path, bench, data)  # computed once, outside the timed runs
    raw = data.source  # the recorded source, resolved against the data dir
    paths = [raw / n for n in bench.dataset.read(raw, count).names]

    stage = np.empty((1, *bench.input_shape), np.uint8)

    def appliance_sample(i: int) -> bytes:
        data.gather(np.asarray([i]), stage)
        payload, _ = bench.encode_response([preds[i][None]], [i])
        return payload.tobytes()

    torch_nms = _torch_nms()
    label, nms = torch_nms if torch_nms else ("numpy stand-in (torch not installed)", _numpy_nms)
    ours = _loadgen(count, args.seconds, appliance_sample)
    ref = _loadgen(count, args.seconds, lambda i: _reference_sample(paths[i], preds[i].copy(), nms, i))
    figures = {"benchmark": bench.name, "images": count, "appliance": ours, "reference": ref,
               "reference_nms": label, "ratio_median": round(ours["median_ms"] / ref["median_ms"], 4),
               "cpu": system.cpu_model(), "seconds_per_path": args.seconds}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'path':<10} {'images':>7} {'median ms/image':>16} {'mean ms/image':>14} {'rows/image':>11}")
    for name, f in (("appliance", ours), ("reference", ref)):
        print(f"{name:<10} {f['images']:>7} {f['median_ms']:>16.3f} {f['mean_ms']:>14.3f} {f['rows_per_image']:>11}")
    print(f"appliance / reference (median): {figures['ratio_median']:.4f}; reference NMS: {label}; "
          f"{count} distinct images; CPU {figures['cpu']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
