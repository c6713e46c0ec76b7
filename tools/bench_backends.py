#!/usr/bin/env python3
"""ResNet50 images/s through the full appliance Offline run per backend x precision, beside OpenVINO alone.

"OpenVINO alone" is what its benchmark_app does: the same ONNX file compiled for the CPU plugin with
the THROUGHPUT hint (its own stream count), fed preconverted batches by as many async infer requests
as it asks for, no LoadGen; measured twice: at the inference precision the appliance's openvino card
compiles each precision for (INFERENCE_PRECISION_HINT f32 for fp32 and int8, bf16 for bf16), which the
per-precision ratio compares against, and on the FP32 file at OpenVINO's own default precision (bf16 on
AMX / AVX-512-BF16 CPUs), which is what a user running `benchmark_app` on the FP32 model sees: the
appliance's best run of the FP32 weights (fp32 or bf16 precision, not int8) is divided by it.
Both are measured before and after the appliance runs and averaged, so drift on a shared machine hits
both sides alike. The appliance figure is LoadGen's own result of a real
Offline run (`appliance run`, `--cards` as given: by default auto, one card per L3 domain, so one card
on all CPUs on a single-L3 machine; several openvino cards each run in a worker process pinned to its
CPUs, tools/bench_openvino_cards.py compares those with one card); an openvino card runs each count of infer
requests in `--requests` (its batches in flight, one stream each).

Every figure is printed with the CPU model and its vector extensions (AVX2, AVX-512, VNNI, AMX...):
the best backend on one CPU family is not the best on another. `--runs N` repeats the whole
comparison and reports the median and the spread of the ratio.

    python tools/bench_backends.py --data-dir data --duration-ms 20000 --runs 5 --requests 1,2,4 \
        --precisions fp32,int8,bf16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

import numpy as np

from harness.cli.main import main as appliance
from harness.core.errors import ApplianceError
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks
from harness.hw import system
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import Layout, read_model_record
from harness.run.cards import backends
from harness.run.loadgen_settings import Requested
from harness.run.runner import RunOptions, run

VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")


CARD_HINT = {"fp32": "f32", "int8": "f32", "bf16": "bf16"}  # the openvino card's INFERENCE_PRECISION_HINT
FP32_WEIGHTS = ("fp32", "bf16")  # precisions that run the FP32 model's weights (bf16: computed in bf16)


def median_spread(values: list[float]) -> dict[str, float]:
    """The median, min and max of several runs' figure: what every speed goal here reports."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def vector_extensions() -> list[str]:
    """The CPU's vector extensions that decide which kernels a runtime picks, from /proc/cpuinfo."""
    flags = system.cpu_flags()
    return [v for v in VECTOR_FLAGS if v in flags]


def openvino_alone(model_path: str, bench: Benchmark, data: store.PreparedData, batch: int,
                   seconds: float, precision_hint: str | None) -> float:
    """Images/s of OpenVINO's own throughput loop (benchmark_app-like) on the ONNX file; `precision_hint`:
    its INFERENCE_PRECISION_HINT (None: OpenVINO's default for the CPU)."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(model_path)
    model.reshape({bench.input_name: [batch, *bench.input_shape]})
    config = {"PERFORMANCE_HINT": "THROUGHPUT"}
    if precision_hint:
        config["INFERENCE_PRECISION_HINT"] = precision_hint
    compiled = core.compile_model(model, "CPU", config)
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


def appliance_offline(data_dir: Path, backend: str, precision: str, batch: int, duration_ms: int,
                      requests: int = 1, cards: str = "auto") -> tuple[float, bool]:
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested(Scenario.OFFLINE, Mode.PERFORMANCE, duration_ms=duration_ms),
                                 data_dir, Path(results), backend=backends.get(backend), batch_size=batch,
                                 precision=precision, cards=cards, requests=requests),
                      echo=lambda m: None)
    assert outcome.perf is not None
    return float(outcome.perf.metric or 0.0), outcome.perf.valid


class Round(TypedDict):
    """One comparison's figures, as --json prints them (keys: backend/precision[/Nreq], or precision)."""

    appliance_offline_sps: dict[str, float]
    valid: dict[str, bool]
    openvino_alone_sps: dict[str, float]
    openvino_alone_fp32_file_default_precision_sps: float
    openvino_alone_before_after: dict[str, list[float]]
    best: str
    ratio_best_vs_openvino_alone_best: float
    ratio_best_vs_openvino_alone_per_precision: dict[str, float]
    best_fp32_weights: str
    ratio_fp32_weights_vs_openvino_default: float


def compare(args: argparse.Namespace, bench: Benchmark, data: store.PreparedData,
            models: dict[str, str], precisions: list[str]) -> Round:
    """One round: OpenVINO alone before, every appliance configuration, OpenVINO alone after."""
    seconds = args.duration_ms / 1000 / 2
    def alone() -> tuple[dict[str, float], float]:  # ({precision: images/s at the card's hint}, FP32 file at default)
        return ({p: openvino_alone(models[p], bench, data, args.batch_size, seconds, CARD_HINT[p]) for p in precisions},
                openvino_alone(models["fp32"], bench, data, args.batch_size, seconds, None))

    before = alone()
    configs = [(b, p, r) for b in args.backends.split(",") for p in precisions if backends.get(b).computes(p)
               for r in ([int(x) for x in args.requests.split(",")] if b == "openvino" else [1])]
    ours = {f"{b}/{p}" + (f"/{r}req" if b == "openvino" else ""):
            appliance_offline(args.data_dir, b, p, args.batch_size, args.duration_ms, r, args.cards)
            for b, p, r in configs}
    after = alone()
    at_hint = {p: (before[0][p] + after[0][p]) / 2 for p in precisions}
    default = (before[1] + after[1]) / 2
    best = max(ours, key=lambda k: ours[k][0])
    per_precision = {p: round(max(v for k, (v, _) in ours.items() if f"/{p}" in k) / at_hint[p], 3)
                     for p in precisions}
    fp32_weights = {k: v for k, (v, _) in ours.items() if k.split("/")[1] in FP32_WEIGHTS}
    best_fp32_weights = max(fp32_weights, key=lambda k: fp32_weights[k])
    return {"appliance_offline_sps": {k: round(v, 2) for k, (v, _) in ours.items()},
            "valid": {k: ok for k, (_, ok) in ours.items()},
            "openvino_alone_sps": {p: round(v, 2) for p, v in at_hint.items()},
            "openvino_alone_fp32_file_default_precision_sps": round(default, 2),
            "openvino_alone_before_after": {p: [round(before[0][p], 2), round(after[0][p], 2)] for p in precisions},
            "best": best, "ratio_best_vs_openvino_alone_best": round(ours[best][0] / max(at_hint.values()), 3),
            "ratio_best_vs_openvino_alone_per_precision": per_precision,
            "best_fp32_weights": best_fp32_weights,
            "ratio_fp32_weights_vs_openvino_default": round(fp32_weights[best_fp32_weights] / default, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data, e.g. --data-dir data")
    ap.add_argument("--duration-ms", type=int, default=20000, help="min duration of each appliance run, e.g. 20000")
    ap.add_argument("--batch-size", type=int, default=8, help="batch for every configuration, e.g. 8")
    ap.add_argument("--backends", default="onnxruntime,openvino", help="e.g. onnxruntime,openvino")
    ap.add_argument("--precisions", default="fp32,int8", help="e.g. fp32,int8,bf16 (fp32 is always added)")
    ap.add_argument("--requests", default="1,2", help="openvino infer requests per card to try, e.g. 1,2,4")
    ap.add_argument("--cards", default="auto", help="the appliance runs' cards, e.g. emulate:1 (one on all CPUs)")
    ap.add_argument("--runs", type=int, default=1, help="whole comparisons to run, median and spread, e.g. 5")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    layout = Layout(args.data_dir, bench)
    precisions = list(dict.fromkeys(["fp32", *args.precisions.split(",")]))
    samples = [] if layout.record_for("fp32").is_file() else ["--samples", "256"]  # keep a prepared dataset
    for p in precisions:
        if not layout.record_for(p).is_file() and appliance(
                ["prepare", "--data-dir", str(args.data_dir), *samples, "--precision", p, "-q"]):
            return 2  # prepare said why in one line
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(args.data_dir))
    models = {p: read_model_record(layout, p).path for p in precisions}
    cpu = f"{system.cpu_model()} [{' '.join(vector_extensions()) or 'no vector extensions listed'}]"
    rounds = []
    for i in range(args.runs):
        rounds.append(compare(args, bench, data, models, precisions))
        if not args.json:
            r = rounds[-1]
            for k, v in r["appliance_offline_sps"].items():
                print(f"run {i + 1}: appliance Offline {k:24s} {v:8.2f} images/s "
                      f"({'VALID' if r['valid'][k] else 'INVALID'})  on {cpu}")
            for p, v in r["openvino_alone_sps"].items():
                print(f"run {i + 1}: OpenVINO alone    {p + ' (' + CARD_HINT[p] + ')':24s} {v:8.2f} images/s  on {cpu}")
            print(f"run {i + 1}: OpenVINO alone    {'fp32 file (its default)':24s} "
                  f"{r['openvino_alone_fp32_file_default_precision_sps']:8.2f} images/s  on {cpu}")
            print(f"run {i + 1}: best appliance ({r['best']}) / OpenVINO alone, per precision: "
                  f"{r['ratio_best_vs_openvino_alone_per_precision']}; best of the FP32 weights "
                  f"({r['best_fp32_weights']}) / OpenVINO alone on the FP32 file at its default precision: "
                  f"{r['ratio_fp32_weights_vs_openvino_default']}  on {cpu}", flush=True)
    spread = {p: sorted(float(r["ratio_best_vs_openvino_alone_per_precision"][p])
                        for r in rounds) for p in precisions}
    ratios = {p: median_spread(v) for p, v in spread.items()}
    vs_default = median_spread([float(r["ratio_fp32_weights_vs_openvino_default"]) for r in rounds])
    figures = {"rounds": rounds, "cpu": system.cpu_model(), "vector_extensions": vector_extensions(),
               "cpus": len(system.available_cpus()), "batch": args.batch_size, "duration_ms": args.duration_ms,
               "cards": args.cards,
               "ratio_per_precision": ratios, "ratio_fp32_weights_vs_openvino_default": vs_default}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for p, spread_p in ratios.items():
        print(f"{p}: best appliance / OpenVINO alone over {args.runs} run(s): median {spread_p['median']:.3f} "
              f"(min {spread_p['min']:.3f}, max {spread_p['max']:.3f})  on {cpu}, {figures['cpus']} CPUs, "
              f"batch {args.batch_size}")
    print(f"FP32 weights (fp32 or bf16): best appliance / OpenVINO alone on the FP32 file at its default precision "
          f"over {args.runs} run(s): median {vs_default['median']:.3f} (min {vs_default['min']:.3f}, "
          f"max {vs_default['max']:.3f})  on {cpu}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApplianceError as exc:  # missing or bad prepared data: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
