#!/usr/bin/env python3
"""Harness efficiency, in one run: against a raw onnxruntime loop, or (--backend null) a bare LoadGen SUT.

--backend onnxruntime (default):

The raw loop is the ceiling: the same model file, batch size, thread count and session options,
fed with batches already converted to float32, no LoadGen, no queues. The appliance number is
LoadGen's own `result_samples_per_second` of a real Offline run. The raw loop is measured before and
after the appliance run and averaged, so drift on a shared machine affects both sides alike.

    python tools/bench_harness.py --data-dir data --duration-ms 20000

--backend null: the harness with null cards (no inference, nothing staged: queues, batching, threads
and batched completions) against a bare LoadGen SUT in the same process whose issue_query completes
every sample inline (Offline: one QuerySamplesComplete per batch-size chunk, the granularity the
harness completes at; Server: each query at once). Both get the same user.conf settings. Offline:
LoadGen's samples/s at the same target QPS; Server: the highest target QPS that is VALID, found by
doubling then bisecting with runs of --duration-ms each. The two sides alternate for --rounds rounds
and the medians are compared, so a burst of load on a shared machine hits one round, not one side.

    python tools/bench_harness.py --backend null --data-dir data --duration-ms 2000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np
import onnxruntime as ort

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
from harness.run.sut import loadgen_window


def raw_loop(model_path: str, bench: Benchmark, data: store.PreparedData, batch: int,
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


def bare_run(bench: Benchmark, data: store.PreparedData, scenario: Scenario, target_qps: float,
             duration_ms: int, batch: int) -> tuple[float, bool]:
    """LoadGen with a SUT that completes inline; returns (LoadGen's metric, VALID)."""
    import mlperf_loadgen as lg

    from harness.records import detail_log
    from harness.records.detail_log import perf_result
    from harness.run.loadgen_settings import effective_user_conf, test_settings

    payload = np.zeros(1, np.float32)
    addr = payload.ctypes.data

    def issue(samples: list[Any]) -> None:
        for start in range(0, len(samples), batch):
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, addr, 4) for s in samples[start:start + batch]])

    with tempfile.TemporaryDirectory() as out:
        conf = Path(out) / "user.conf"
        conf.write_text(effective_user_conf(bench, Requested(scenario, Mode.PERFORMANCE, duration_ms, None,
                                                             target_qps), None, data.count, 1))
        settings = test_settings(conf, bench, scenario, Mode.PERFORMANCE)
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(data.count, min(data.count, bench.performance_sample_count), lambda i: None,
                              lambda i: None)
        with loadgen_window():  # as the harness runs LoadGen: the same conditions for both sides
            lg.StartTestWithLogSettings(sut, qsl, settings, log)
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        perf = perf_result(detail_log.values(Path(out) / "mlperf_log_detail.txt"), scenario)
    return _metric(perf.metric, scenario), perf.valid


def _metric(metric: float | None, scenario: Scenario) -> float:
    """A performance run's metric; a run whose detail log holds none (cut short) is an error, in one line."""
    if metric is None:
        raise ApplianceError(f"the {scenario} run's detail log has no result metric")
    return metric


class RunExtras(TypedDict, total=False):
    """More RunOptions fields for `harness_run`."""

    precision: str | None
    requests: int | None
    tuned: Path | None


Tried = list[tuple[float, bool]]  # (target QPS, VALID) per probe, in the order run
Probe = Callable[[float], bool]   # target QPS -> VALID


def harness_run(data_dir: Path, scenario: Scenario, target_qps: float | None, duration_ms: int, batch: int | None,
                cards: str | None = None, backend: str = "null", **options: Unpack[RunExtras]) -> tuple[float, bool]:
    """A real ResNet50 performance run (`options`: more RunOptions fields, e.g. precision, tuned); `cards`
    None: the tuned record's layout with `tuned`, else auto."""
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested(scenario, Mode.PERFORMANCE, duration_ms=duration_ms,
                                                       target_qps=target_qps),
                                 data_dir, Path(results), backend=backends.get(backend), batch_size=batch, cards=cards,
                                 **options),
                      echo=lambda m: None)
    assert outcome.perf is not None
    return _metric(outcome.perf.metric, scenario), outcome.perf.valid


def retrying(run_at: Callable[[float], tuple[float, bool]], retries: int) -> Probe:
    """`run_at(qps) -> (metric, valid)` as a probe `qps -> valid` that re-runs an INVALID result up to
    `retries` times: on a shared machine a burst of load can fail one run that is well within bounds."""
    def probe(qps: float) -> bool:
        return any(run_at(qps)[1] for _ in range(1 + retries))
    return probe


def _bisect(probe: Probe, lo: float, hi: float, steps: int, tried: Tried) -> float:
    """`steps` halvings of [lo, hi] where `probe(qps) -> valid` holds at lo and fails at hi; appends to `tried`."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        ok = probe(mid)
        tried.append((round(mid, 1), ok))
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


def server_max(probe: Probe, offline: float, steps: int, start: float = 0.5) -> tuple[float, Tried]:
    """Highest VALID Server target QPS by bisection between 0 and the Offline figure, starting at
    `start` x Offline (`probe(qps) -> valid`); 0 when nothing tried is VALID. Returns it and the
    (qps, valid) tried."""
    first = offline * start
    ok = probe(first)
    tried: Tried = [(round(first, 1), ok)]
    lo, hi = (first, offline) if ok else (0.0, first)
    return _bisect(probe, lo, hi, steps, tried), tried


def max_valid_qps(probe: Probe, start: float, bisect_steps: int = 4, cap: float = 1e6) -> tuple[float, Tried]:
    """Highest target QPS `probe(qps) -> valid` accepts: double from `start`, then bisect."""
    tried: Tried = []
    lo, hi, qps = 0.0, None, start
    while qps <= cap:
        ok = probe(qps)
        tried.append((round(qps, 1), ok))
        if not ok:
            hi = qps
            break
        lo, qps = qps, qps * 2
    if hi is None:
        return lo, tried
    return _bisect(probe, lo, hi, bisect_steps, tried), tried


def null_main(args: argparse.Namespace, bench: Benchmark, data: store.PreparedData) -> int:
    """Alternate bare and harness runs for --rounds rounds; medians of each side, ratio of the medians."""
    b, ms, qps = args.batch_size, args.duration_ms, args.offline_target_qps
    bare_off: list[float] = []
    ours_off: list[float] = []
    bare_srv: list[float] = []
    ours_srv: list[float] = []
    tried: list[tuple[str, Tried]] = []
    for _ in range(args.rounds):
        bare_off.append(bare_run(bench, data, Scenario.OFFLINE, qps, ms, b)[0])
        ours_off.append(harness_run(args.data_dir, Scenario.OFFLINE, qps, ms, b, args.cards)[0])
        q, t = max_valid_qps(retrying(lambda q: bare_run(bench, data, Scenario.SERVER, q, ms, b),
                                      args.server_retries), args.server_start)
        bare_srv.append(q)
        tried.append(("bare", t))
        q, t = max_valid_qps(retrying(lambda q: harness_run(args.data_dir, Scenario.SERVER, q, ms, b, args.cards),
                                      args.server_retries), args.server_start)
        ours_srv.append(q)
        tried.append(("harness", t))
    med = statistics.median
    figures = {"offline": {"harness_sps": round(med(ours_off), 1), "bare_sps": round(med(bare_off), 1),
                           "ratio": round(med(ours_off) / med(bare_off), 3), "target_qps": qps,
                           "harness_each": [round(x) for x in ours_off], "bare_each": [round(x) for x in bare_off]},
               "server": {"harness_max_valid_qps": round(med(ours_srv), 1),
                          "bare_max_valid_qps": round(med(bare_srv), 1),
                          "ratio": round(med(ours_srv) / med(bare_srv), 3) if med(bare_srv) else None,
                          "harness_each": ours_srv, "bare_each": bare_srv, "tried": tried},
               "batch": b, "duration_ms": ms, "rounds": args.rounds, "cards": args.cards,
               "cpu": system.cpu_model(), "cpus": len(system.available_cpus()), "load_before": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        off, srv = figures["offline"], figures["server"]
        print(f"Offline  harness (null cards) {off['harness_sps']:10.1f} samples/s   bare inline SUT "
              f"{off['bare_sps']:10.1f}   ratio {off['ratio']:.3f}   "
              f"(each: {off['harness_each']} / {off['bare_each']})")
        print(f"Server   harness max valid    {srv['harness_max_valid_qps']:10.1f} QPS         bare inline SUT "
              f"{srv['bare_max_valid_qps']:10.1f}   ratio {srv['ratio']}   (each: {ours_srv} / {bare_srv})")
        print(f"batch {b}, {ms} ms per run, {args.rounds} rounds (medians), --cards {args.cards}, "
              f"{figures['cpus']} CPUs")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--duration-ms", type=int, default=20000, help="appliance Offline min duration")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--backend", choices=("onnxruntime", "null"), default="onnxruntime")
    ap.add_argument("--cards", default="auto", help="--backend null: the harness's --cards")
    ap.add_argument("--offline-target-qps", type=float, default=200_000, help="--backend null: Offline target")
    ap.add_argument("--server-start", type=float, default=500, help="--backend null: first Server QPS tried")
    ap.add_argument("--server-retries", type=int, default=1,
                    help="--backend null: re-runs of an INVALID Server probe before it counts as INVALID")
    ap.add_argument("--rounds", type=int, default=3, help="--backend null: alternating rounds, medians reported")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    layout = Layout(args.data_dir, bench)
    if not (layout.preprocessed / store.MANIFEST).is_file():
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "-q"])
    model = read_model_record(layout)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(args.data_dir))
    if args.backend == "null":
        return null_main(args, bench, data)
    threads = len(system.available_cpus())
    seconds = args.duration_ms / 1000 / 2

    raw_before = raw_loop(model.path, bench, data, args.batch_size, threads, seconds)
    with tempfile.TemporaryDirectory() as results:
        outcome = run(RunOptions("resnet50", Requested(Scenario.OFFLINE, Mode.PERFORMANCE,
                                                       duration_ms=args.duration_ms),
                                 args.data_dir, Path(results), batch_size=args.batch_size), echo=lambda m: None)
    raw_after = raw_loop(model.path, bench, data, args.batch_size, threads, seconds)
    raw = (raw_before + raw_after) / 2
    ours = outcome.perf.metric if outcome.perf and outcome.perf.metric is not None else float("nan")
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
