#!/usr/bin/env python3
"""Harness efficiency: the appliance's Offline samples/s over a raw onnxruntime loop, in one run.

The raw loop is the ceiling: the same model file, batch size, thread count and session options,
fed with batches already converted to float32, no LoadGen, no queues. The appliance number is
LoadGen's own `result_samples_per_second` of a real Offline run. The raw loop is measured before and
after the appliance run and averaged, so drift on a shared machine affects both sides alike.

    python tools/bench_harness.py --data-dir data --duration-ms 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from harness import benchmarks, system
from harness.cli import main as appliance
from harness.datasets import store
from harness.loadgen_settings import Requested
from harness.prepare import Layout, read_model_record
from harness.runner import RunOptions, run


def raw_loop(model_path: str, bench: benchmarks.Benchmark, data: store.PreparedData, batch: int,
             threads: int, seconds: float) -> float:
    """Samples/s of session.run on preconverted batches, nothing else."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    mean = np.asarray(bench.input_mean, np.float32).reshape(-1, 1, 1)
    n = min(data.count, 8 * batch)
    u8 = np.empty((n, *bench.input_shape), np.uint8)
    data.gather(np.arange(n), u8)
    batches = [u8[i:i + batch].astype(np.float32) - mean for i in range(0, n - batch + 1, batch)]
    outputs = list(bench.outputs)
    sess.run(outputs, {bench.input_name: batches[0]})  # warm-up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sess.run(outputs, {bench.input_name: batches[(done // batch) % len(batches)]})
        done += batch
    return done / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--duration-ms", type=int, default=20000, help="appliance Offline min duration")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    layout = Layout(args.data_dir, bench)
    if not (layout.preprocessed / store.MANIFEST).is_file():
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "-q"])
    model = read_model_record(layout)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(args.data_dir))
    threads = len(system.available_cpus())
    seconds = args.duration_ms / 1000 / 2

    raw_before = raw_loop(model["path"], bench, data, args.batch_size, threads, seconds)
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested("Offline", "performance", duration_ms=args.duration_ms),
                                 args.data_dir, Path(results), batch_size=args.batch_size), echo=lambda m: None)
    raw_after = raw_loop(model["path"], bench, data, args.batch_size, threads, seconds)
    raw = (raw_before + raw_after) / 2
    ours = outcome.perf.metric if outcome.perf else float("nan")
    figures = {"appliance_offline_sps": round(ours, 2), "raw_onnxruntime_sps": round(raw, 2),
               "raw_before": round(raw_before, 2), "raw_after": round(raw_after, 2),
               "ratio": round(ours / raw, 3), "batch": args.batch_size, "threads": threads,
               "valid": outcome.perf.valid if outcome.perf else False, "cpu": system.cpu_model()}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        validity = "VALID" if figures["valid"] else "INVALID"
        print(f"appliance Offline : {ours:8.2f} samples/s (LoadGen result, {validity})")
        print(f"raw onnxruntime   : {raw:8.2f} samples/s (before {raw_before:.2f}, after {raw_after:.2f})")
        print(f"ratio             : {figures['ratio']:.3f}  (batch {args.batch_size}, {threads} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
