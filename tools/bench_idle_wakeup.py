#!/usr/bin/env python3
"""Latency from idle, with and without `--keep-warm`: an OpenVINO card alone, and Server through the harness.

Alone: one OpenVINO card (harness.run.cards.openvino_card, the run's own card: batch 1, 1 infer request, as
many threads as --cpus, the process pinned to them) on the prepared ResNet50; `--queries` queries, each
after an exponential pause of mean P ms (0: back to back), timed from submit to outputs; p50 / p99 per
pause, keep-warm off and on (harness.run.keep_warm: a SCHED_IDLE spinner per CPU).
Harness: Server runs at each --qps (low load: the CPUs idle between queries), batch 1, 1 request per
card, on --cards, keep-warm off and on: LoadGen's p50 / p99 and VALID. Off and on alternate --rounds times,
so drift on the machine hits both alike.

    python tools/bench_idle_wakeup.py --data-dir data --precision int8 --cpus 0-3 --pauses-ms 0,16,50 \\
        --cards emulate:4 --qps 60,200 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.core.scenarios import Mode, Scenario
from harness.core.sysfs import parse_cpulist
from harness.data import benchmarks
from harness.hw import system
from harness.records import detail_log, store
from harness.records.layout import PRECISIONS, Layout, read_model_record
from harness.run import keep_warm
from harness.run.cards import backends
from harness.run.loadgen_settings import Requested
from harness.run.runner import RunOptions, run


def percentiles(ms: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p99": round(float(np.percentile(ms, 99)), 2)}


def card_alone(data_dir: Path, precision: str, cpus: tuple[int, ...], pauses_ms: list[float], queries: int,
               warm: bool, seed: int) -> dict[str, dict[str, float]]:
    """p50 / p99 (ms) of single-sample queries on one OpenVINO card, per mean pause."""
    from harness.run.cards.openvino_card import OpenVinoCard

    bench = benchmarks.get("resnet50")
    layout = Layout(data_dir, bench)
    model = read_model_record(layout, precision)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(data_dir))
    card = OpenVinoCard(0, Path(model.path), bench.input_name, bench.outputs, cpus,
                        inference_precision=model.inference_precision or "f32", backend="openvino")
    sample = np.empty((1, *bench.input_shape), np.uint8)
    data.gather(np.arange(1), sample)
    batch = sample if card.input_dtype == "uint8" else \
        sample.astype(np.float32) - np.asarray(bench.input_mean, np.float32).reshape(-1, 1, 1)
    rng = np.random.default_rng(seed)
    out = {}
    try:
        for _ in range(5):  # compile and warm up
            card.submit(batch, 1)
            card.wait()
        with keep_warm.spinning(cpus) if warm else contextlib.nullcontext(()):
            for pause in pauses_ms:
                ms = []
                for _ in range(queries):
                    if pause:
                        time.sleep(rng.exponential(pause / 1000))
                    start = time.perf_counter()
                    card.submit(batch, 1)
                    card.wait()
                    ms.append(1000 * (time.perf_counter() - start))
                out[f"pause_{pause:g}ms"] = percentiles(ms)
    finally:
        card.close()
    return out


def through_harness(data_dir: Path, precision: str, cards: str, qps: float, duration_ms: int,
                    warm: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested(Scenario.SERVER, Mode.PERFORMANCE, duration_ms=duration_ms,
                                                       target_qps=qps),
                                 data_dir, Path(results), backend=backends.get("openvino"), batch_size=1, cards=cards,
                                 precision=precision, requests=1, keep_warm=warm), echo=lambda m: None)
        detail = detail_log.values(outcome.path / "mlperf_log_detail.txt")
    return {"p50": round(detail["result_50.00_percentile_latency_ns"] / 1e6, 2),
            "p99": round(detail["result_99.00_percentile_latency_ns"] / 1e6, 2),
            "valid": bool(outcome.perf and outcome.perf.valid)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data, e.g. data")
    ap.add_argument("--precision", choices=PRECISIONS, default="int8", help="which prepared model, e.g. int8")
    ap.add_argument("--cpus", default=None, help="the alone card's CPUs, e.g. 0-3 (default: all available)")
    ap.add_argument("--pauses-ms", default="0,16,50", help="mean pauses between queries, e.g. 0,16,50")
    ap.add_argument("--queries", type=int, default=200, help="queries per pause, e.g. 200")
    ap.add_argument("--cards", default="auto", help="harness runs' --cards, e.g. emulate:4 ('' skips them)")
    ap.add_argument("--qps", default="60", help="harness Server target QPS, e.g. 60,200 ('' skips them)")
    ap.add_argument("--duration-ms", type=int, default=10000, help="each harness run's min duration")
    ap.add_argument("--rounds", type=int, default=2, help="off / on alternations, e.g. 2")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    cpus = tuple(sorted(parse_cpulist(args.cpus))) if args.cpus else system.available_cpus()
    pauses = [float(p) for p in args.pauses_ms.split(",") if p]
    qps = [float(q) for q in args.qps.split(",") if q] if args.cards else []
    rounds: list[dict[str, object]] = []
    figures = {"cpu": system.cpu_model(), "cpus": len(system.available_cpus()), "precision": args.precision,
               "alone_cpus": list(cpus), "rounds": rounds}
    for r in range(args.rounds):
        entry: dict[str, object] = {}
        for warm in (False, True):
            key = "keep_warm" if warm else "off"
            allowed = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cpus)  # OpenVINO's threads take the process's CPUs: the card's
            try:
                entry[f"alone_{key}"] = card_alone(args.data_dir, args.precision, cpus, pauses, args.queries, warm, r)
            finally:
                os.sched_setaffinity(0, allowed)
            entry[f"harness_{key}"] = {f"{q:g}_qps": through_harness(args.data_dir, args.precision, args.cards, q,
                                                                     args.duration_ms, warm) for q in qps}
        rounds.append(entry)
        if not args.json:
            print(f"round {r + 1}: {json.dumps(entry)}", flush=True)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
