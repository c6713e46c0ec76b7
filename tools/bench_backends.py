#!/usr/bin/env python3
"""ResNet50 images/s through the full appliance Offline run per backend x precision, beside OpenVINO alone.

"OpenVINO alone" is what its benchmark_app does: the same ONNX file compiled for the CPU plugin with
its own defaults (THROUGHPUT hint, its own stream count and inference precision, which is bf16 on
AMX CPUs for an FP32 model), fed preconverted batches by as many async infer requests as it asks
for, no LoadGen. It is measured before and after the appliance runs and averaged, so drift on a
shared machine hits both sides alike. The appliance figure is LoadGen's own result of a real
Offline run (`appliance run`, one card on all CPUs).

    python tools/bench_backends.py --data-dir data --duration-ms 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import benchmarks, system
from harness.cli import main as appliance
from harness.datasets import store
from harness.loadgen_settings import Requested
from harness.prepare import Layout, read_model_record
from harness.runner import RunOptions, run


def openvino_alone(model_path: str, bench: benchmarks.Benchmark, data: store.PreparedData, batch: int,
                   seconds: float) -> float:
    """Images/s of OpenVINO's own throughput loop (benchmark_app-like) on the ONNX file."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(model_path)
    model.reshape({bench.input_name: [batch, *bench.input_shape]})
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    dtype = np.uint8 if compiled.input(bench.input_name).get_element_type() == ov.Type.u8 else np.float32
    u8 = np.empty((batch, *bench.input_shape), np.uint8)
    data.gather(np.arange(batch) % data.count, u8)
    x = u8 if dtype == np.uint8 else u8.astype(np.float32) - np.asarray(bench.input_mean, np.float32).reshape(-1, 1, 1)
    queue = ov.AsyncInferQueue(compiled, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    for _ in range(len(queue)):  # warm-up
        queue.start_async({0: x})
    queue.wait_all()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        queue.start_async({0: x})
        done += batch
    queue.wait_all()
    return done / (time.perf_counter() - start)


def appliance_offline(data_dir: Path, backend: str, precision: str, batch: int, duration_ms: int) -> tuple[float, bool]:
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested("Offline", "performance", duration_ms=duration_ms),
                                 data_dir, Path(results), backend=backend, batch_size=batch, precision=precision),
                      echo=lambda m: None)
    assert outcome.perf is not None
    return outcome.perf.metric, outcome.perf.valid


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--duration-ms", type=int, default=20000, help="min duration of each appliance run")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--backends", default="onnxruntime,openvino")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    layout = Layout(args.data_dir, bench)
    precisions = args.precisions.split(",")
    if not all(layout.record_for(p).is_file() for p in precisions):
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "--precision",
                   "int8" if "int8" in precisions else "fp32", "-q"])
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(args.data_dir))
    models = {p: read_model_record(layout, p)["path"] for p in precisions}
    seconds = args.duration_ms / 1000 / 2
    alone_before = {p: openvino_alone(models[p], bench, data, args.batch_size, seconds) for p in precisions}
    ours = {f"{b}/{p}": appliance_offline(args.data_dir, b, p, args.batch_size, args.duration_ms)
            for b in args.backends.split(",") for p in precisions}
    alone_after = {p: openvino_alone(models[p], bench, data, args.batch_size, seconds) for p in precisions}
    alone = {p: (alone_before[p] + alone_after[p]) / 2 for p in precisions}
    best_alone = max(alone.values())
    best = max(ours, key=lambda k: ours[k][0])
    figures = {"appliance_offline_sps": {k: round(v, 2) for k, (v, _) in ours.items()},
               "valid": {k: ok for k, (_, ok) in ours.items()},
               "openvino_alone_sps": {p: round(v, 2) for p, v in alone.items()},
               "openvino_alone_before_after": {p: [round(alone_before[p], 2), round(alone_after[p], 2)]
                                               for p in precisions},
               "best": best, "ratio_best_vs_openvino_alone_best": round(ours[best][0] / best_alone, 3),
               "batch": args.batch_size, "duration_ms": args.duration_ms, "cpu": system.cpu_model(),
               "cpus": len(system.available_cpus())}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for k, (v, ok) in ours.items():
        print(f"appliance Offline {k:22s} {v:8.2f} images/s ({'VALID' if ok else 'INVALID'})")
    for p, v in alone.items():
        print(f"OpenVINO alone    {p:22s} {v:8.2f} images/s (before {alone_before[p]:.2f}, after {alone_after[p]:.2f})")
    print(f"best appliance ({best}) / best OpenVINO alone: {figures['ratio_best_vs_openvino_alone_best']:.3f}  "
          f"(batch {args.batch_size}, {figures['cpus']} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
