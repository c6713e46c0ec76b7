#!/usr/bin/env python3
"""Real CPU inference, Server against Offline: max valid Server QPS / Offline samples/s, tuned backend.

ResNet50 on this machine's CPUs, as a submitter would run it: `appliance tune` (backends x batch sizes
x infer requests per card, timed on the run's own cards) unless `--tuned FILE` is given, then with
`--tuned` (the record's Offline choice for Offline, its Server choice for Server, each with its batch
and requests per card):
  Offline  one run of --duration-ms: LoadGen's samples/s;
  Server   the highest VALID target QPS, by bisection between 0 and the Offline figure starting at
           what an ideal queue allows (`--server-steps` steps, runs of --duration-ms; an INVALID
           probe is run again `--server-retries` times and counts as INVALID only if every try is),
repeated `--searches` times. Printed: each search's Server / Offline, the lowest and the median, the
tuned choices, the CPU model and its vector extensions, and the yardstick tune recorded per candidate
(`server_qps`: an ideal queue, harness/core/queueing.py, fed with the candidate's samples/s with the card
kept full, its batch latency under that load and its batches in flight): the Server QPS that
candidate's latency allows any harness, for the tuned Server choice and for the best candidate.

    python tools/bench_cpu_server.py --data-dir data --precision int8 --duration-ms 20000 --searches 3
    python tools/bench_cpu_server.py --precision bf16 --cards emulate:1,emulate:4,emulate:8 --json
    python tools/bench_cpu_server.py --tuned data/tuned/resnet50.json --precision int8 --json

`--cards` is the list of card layouts tune chooses from (on a many-core CPU Server wants several cards
of several cores); the runs use the layout the record chose per scenario. tools/bench_cpu_scaling.py
runs the same Offline and Server measurements per layout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from bench_backends import vector_extensions
from bench_harness import Tried, harness_run, retrying, server_max

from harness.cli.main import main as appliance
from harness.core.errors import ApplianceError
from harness.core.scenarios import Scenario
from harness.data import benchmarks
from harness.hw import system
from harness.records import store, tuned
from harness.records.layout import PRECISIONS, Layout


def physical_cores() -> int:
    """The physical cores this process may use: each card needs one of its own."""
    from harness.hw.topology import detect

    cpus = set(system.available_cpus())
    return sum(1 for c in detect().cores if set(c.cpus) & cpus)


def cpu_line() -> str:
    """The CPU model, its vector extensions, physical cores and CPUs this process may use: beside every figure."""
    return (f"{system.cpu_model()} ({' '.join(vector_extensions())}), {physical_cores()} cores, "
            f"{len(system.available_cpus())} CPUs")


def prepare_steps(data_dir: Path, precision: str, samples: int = 256) -> list[list[str]]:
    """The `appliance prepare` commands still missing for ResNet50 at `precision` in `data_dir`."""
    layout = Layout(data_dir, benchmarks.get("resnet50"))
    steps = []
    if not (layout.preprocessed / store.MANIFEST).is_file():
        steps.append(["prepare", "--data-dir", str(data_dir), "--samples", str(samples), "-q"])
    if precision != "fp32" and not layout.record_for(precision).is_file():
        steps.append(["prepare", "--data-dir", str(data_dir), "--samples", str(samples), "--precision", precision,
                      "-q"])
    return steps


def run_steps(steps: list[list[str]]) -> bool:
    """Each `appliance` command in turn; False at the first that fails (it said why in one line)."""
    return all(appliance(step) == 0 for step in steps)


def search_server(at: Callable[[Scenario, float | None], tuple[float, bool]], offline: float, ideal_qps: float,
                  steps: int, retries: int, searches: int) -> list[tuple[float, Tried]]:
    """`searches` bisections of the highest VALID Server target QPS (`at(scenario, qps) -> (metric, valid)`),
    each starting at what the ideal queue allows; returns [(qps, tried)] per search."""
    probe = retrying(lambda q: at(Scenario.SERVER, q), retries)
    start = min(0.95, max(0.05, ideal_qps / offline))
    return [server_max(probe, offline, steps, start) for _ in range(searches)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data, e.g. data")
    ap.add_argument("--precision", choices=PRECISIONS, default="int8",
                    help="which prepared model, e.g. int8 (bf16: openvino on a CPU with AVX512_BF16 or AMX)")
    ap.add_argument("--cards", default="auto",
                    help="tune: card layouts to choose from, e.g. emulate:1,emulate:4,emulate:8")
    ap.add_argument("--backends", default=None, help="tune: backends to time, e.g. openvino (default: installed)")
    ap.add_argument("--tuned", type=Path, default=None,
                    help="an `appliance tune` record to use as it is (default: tune now), e.g. "
                         "data/tuned/resnet50.json")
    ap.add_argument("--batch-sizes", default="1,2,4,8", help="tune: batch sizes to time, e.g. 1,2,4,8")
    ap.add_argument("--requests", default="1,2,4", help="tune: infer requests per openvino card to time, e.g. 1,2,4")
    ap.add_argument("--duration-ms", type=int, default=20000, help="each run's min duration, e.g. 20000")
    ap.add_argument("--server-steps", type=int, default=5, help="bisection steps per Server search, e.g. 5")
    ap.add_argument("--server-retries", type=int, default=1, help="re-runs of an INVALID Server probe, e.g. 1")
    ap.add_argument("--searches", type=int, default=3, help="Server searches (each reported), e.g. 3")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    steps = prepare_steps(args.data_dir, args.precision)
    record_path = args.tuned or Layout(args.data_dir, bench).tuned
    if args.tuned is None:
        steps.append(["tune", "--data-dir", str(args.data_dir), "--precisions", args.precision, "--batch-sizes",
                      args.batch_sizes, "--requests", args.requests, "--cards", args.cards, "-o", str(record_path),
                      "-q", *(["--backends", args.backends] if args.backends else [])])
    if not run_steps(steps):
        return 1
    record = tuned.read(record_path)

    def at(scenario: Scenario, qps: float | None) -> tuple[float, bool]:
        return harness_run(args.data_dir, scenario, qps, args.duration_ms, None, backend="auto",
                           precision=args.precision, tuned=record_path)

    def ideal_qps(m: tuned.Measured) -> float:  # what tune's ideal queue gave the row (harness.core.queueing)
        return float(m.server_qps or 0.0)

    if args.precision not in record.by_precision:
        raise ApplianceError(f"{record_path} has no {args.precision} candidates; rerun `appliance tune "
                             f"--precisions {args.precision}` or leave out --tuned")
    mine = record.by_precision[args.precision]  # what the runs use: --precision is given
    rows = [m for m in record.measured if m.precision == args.precision]
    server = mine["Server"]
    row = next(m for m in rows if (m.backend, m.batch_size, m.requests, m.layout) ==
               (server.backend, server.batch_size, server.requests, server.cards))
    ideal_chosen = ideal_qps(row)
    best_row = max(rows, key=ideal_qps)
    ideal_best = ideal_qps(best_row)
    offline, offline_valid = at(Scenario.OFFLINE, None)
    found = search_server(at, offline, ideal_chosen, args.server_steps, args.server_retries, args.searches)
    ratios = [q / offline for q, _ in found]
    choices = {s: f"{c.precision}, {c.backend}, --cards {c.cards}, batch {c.batch_size}, {c.requests} request(s) "
                  f"per card" for s, c in mine.items()}
    cpu = cpu_line()
    figures = {"precision": args.precision, "duration_ms": args.duration_ms, "tuned": str(record_path),
               "choices": choices, "offline_sps": round(offline, 1), "offline_valid": offline_valid,
               "server_max_valid_qps": [round(q, 1) for q, _ in found], "server_tried": [t for _, t in found],
               "server_over_offline": [round(r, 3) for r in ratios], "lowest": round(min(ratios), 3),
               "median": round(statistics.median(ratios), 3), "cpu": cpu,
               "ideal_queue_over_offline": {"tuned_server_choice": round(ideal_chosen / offline, 3),
                                            "best_candidate": round(ideal_best / offline, 3),
                                            "best": {"backend": best_row.backend, "batch_size": best_row.batch_size,
                                                     "requests": best_row.requests, "layout": best_row.layout}},
               "ideal_queue_qps": {"tuned_server_choice": ideal_chosen, "best_candidate": ideal_best}}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for scenario, choice in choices.items():
        print(f"tuned {scenario}: {choice}")
    print(f"Offline {offline:.1f} samples/s ({'VALID' if offline_valid else 'INVALID'})")
    for (q, tried), r in zip(found, ratios, strict=True):
        print(f"Server max valid {q:.1f} QPS = {r:.3f} of Offline   tried {tried}")
    print(f"an ideal queue: {ideal_chosen / offline:.3f} of Offline with the tuned Server choice, "
          f"{ideal_best / offline:.3f} with the best candidate measured ({best_row.backend}, --cards "
          f"{best_row.layout}, batch {best_row.batch_size}, {best_row.requests} request(s))")
    print(f"server / offline ({args.precision}): lowest {min(ratios):.3f}, median {statistics.median(ratios):.3f} "
          f"of {len(ratios)} search(es); CPU {cpu}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApplianceError as exc:  # a bad tuned record, a failed run: one line
        sys.exit(f"bench_cpu_server: {exc}")
