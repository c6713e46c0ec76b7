#!/usr/bin/env python3
"""Real CPU card scaling on one machine: 1, 2, 4, 8, 16 cards of (cores / N) cores each, Offline and Server.

ResNet50 on this machine's CPUs. One `appliance tune` over every layout (`--cards emulate:1,emulate:2,...`,
the counts above the physical cores left out) times batch sizes x infer requests per card on each; then
per layout, with tune's own choice among that layout's rows (`harness.tune.search.choose`):
  Offline  one run of --duration-ms with the Offline choice: LoadGen's samples/s;
  Server   the highest VALID target QPS with the Server choice, by bisection between 0 and that layout's
           Offline figure, starting at what the ideal queue allows (tools/bench_cpu_server.py's search).
Printed beside each figure: the ideal queue (`harness.tune.search.server_qps`, recorded per candidate: the Server
QPS the candidate's own latency and batches in flight allow any harness), the ratio to one card on all
cores (emulate:1, the baseline), and the CPU model with its cores.

    python tools/bench_cpu_scaling.py --data-dir data --precision int8 --cards 1,2,4,8,16 --json
    python tools/bench_cpu_scaling.py --precision fp32 --cards 1,2 --batch-sizes 1,2 --requests 1 \\
        --duration-ms 1000 --server-steps 2      # a rehearsal on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NotRequired, TypedDict

from bench_cpu_server import cpu_line, physical_cores, prepare_steps, run_steps, search_server
from bench_harness import Tried, harness_run

from harness.core.errors import ApplianceError
from harness.core.scenarios import Scenario
from harness.data import benchmarks
from harness.records import tuned
from harness.records.layout import PRECISIONS, Layout
from harness.records.tuned import Measured
from harness.tune.search import choose


class OfflineFigures(TypedDict):
    backend: str
    batch: int
    requests: int
    sps: float
    valid: bool
    over_one_card: NotRequired[float | None]


class ServerFigures(TypedDict):
    backend: str
    batch: int
    requests: int
    max_valid_qps: float
    tried: Tried
    over_offline: float | None
    ideal_queue_qps: float
    ideal_over_offline: float | None
    over_one_card_offline: NotRequired[float | None]


class LayoutRow(TypedDict):
    """One layout's figures, as --json prints them."""

    cards: int
    layout: str
    cores_per_card: int
    offline: OfflineFigures
    server: ServerFigures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data, e.g. data")
    ap.add_argument("--precision", choices=PRECISIONS, default="int8", help="which prepared model, e.g. int8")
    ap.add_argument("--cards", default="1,2,4,8,16", help="card counts, e.g. 1,2,4,8,16 (1: one card on all cores)")
    ap.add_argument("--backends", default="openvino", help="tune: backends to time, e.g. openvino")
    ap.add_argument("--batch-sizes", default="1,2,4,8", help="tune: batch sizes to time, e.g. 1,2,4,8")
    ap.add_argument("--requests", default="1,2", help="tune: infer requests per openvino card, e.g. 1,2")
    ap.add_argument("--tuned", type=Path, default=None,
                    help="a record already tuned over these layouts (default: tune now), e.g. data/tuned/scaling.json")
    ap.add_argument("--duration-ms", type=int, default=10000, help="each run's min duration, e.g. 10000")
    ap.add_argument("--server-steps", type=int, default=4, help="bisection steps per Server search, e.g. 4")
    ap.add_argument("--server-retries", type=int, default=0, help="re-runs of an INVALID Server probe, e.g. 1")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    cores = physical_cores()
    counts = [n for n in sorted({int(n) for n in args.cards.split(",")}) if n <= cores]
    if 1 not in counts:
        raise ApplianceError("--cards must include 1: one card on all cores is the baseline")
    layouts = [f"emulate:{n}" for n in counts]
    bench = benchmarks.get("resnet50")
    record_path = args.tuned or Layout(args.data_dir, bench).tuned.with_name("scaling.json")
    steps = prepare_steps(args.data_dir, args.precision)
    if args.tuned is None:
        steps.append(["tune", "--data-dir", str(args.data_dir), "--precisions", args.precision, "--backends",
                      args.backends, "--batch-sizes", args.batch_sizes, "--requests", args.requests, "--cards",
                      ",".join(layouts), "-o", str(record_path), "-q"])
    if not run_steps(steps):
        return 1
    record = tuned.read(record_path)
    rows = [m for m in record.measured if m.precision == args.precision]
    missing = [c for c in layouts if not any(m.layout == c for m in rows)]
    if missing:
        raise ApplianceError(f"{record_path} has no {args.precision} candidates on --cards {', '.join(missing)}; "
                             f"leave out --tuned to tune them")
    cpu = cpu_line()
    table: list[LayoutRow] = []
    for n, layout in zip(counts, layouts, strict=True):
        mine = [m for m in rows if m.layout == layout]
        off, _ = choose(bench, Scenario.OFFLINE, mine)
        srv, _ = choose(bench, Scenario.SERVER, mine)

        def at(scenario: Scenario, qps: float | None, off: Measured = off, srv: Measured = srv,
               cards: str = layout) -> tuple[float, bool]:
            row = off if scenario == Scenario.OFFLINE else srv
            return harness_run(args.data_dir, scenario, qps, args.duration_ms, row.batch_size, cards=cards,
                               backend=row.backend, precision=args.precision, requests=row.requests)

        offline, offline_valid = at(Scenario.OFFLINE, None)
        ideal = srv.server_qps or 0.0
        ((server, tried),) = search_server(at, offline, ideal, args.server_steps, args.server_retries, 1)
        table.append({"cards": n, "layout": layout, "cores_per_card": cores // n,
                      "offline": {"backend": off.backend, "batch": off.batch_size, "requests": off.requests,
                                  "sps": round(offline, 1), "valid": offline_valid},
                      "server": {"backend": srv.backend, "batch": srv.batch_size, "requests": srv.requests,
                                 "max_valid_qps": round(server, 1), "tried": tried,
                                 "over_offline": round(server / offline, 3) if offline else None,
                                 "ideal_queue_qps": round(ideal, 1),
                                 "ideal_over_offline": round(ideal / offline, 3) if offline else None}})
    base = table[0]["offline"]["sps"]
    for row in table:
        row["offline"]["over_one_card"] = round(row["offline"]["sps"] / base, 3) if base else None
        row["server"]["over_one_card_offline"] = round(row["server"]["max_valid_qps"] / base, 3) if base else None
    figures = {"cpu": cpu, "precision": args.precision, "duration_ms": args.duration_ms, "tuned": str(record_path),
               "layouts": table}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"CPU: {cpu}; {args.precision} ResNet50, runs of {args.duration_ms} ms; baseline one card on all cores")
    print(f"{'cards':>5s} {'Offline/s':>10s} {'x 1 card':>8s} {'Server QPS':>10s} {'/Offline':>8s} {'ideal QPS':>9s} "
          f"{'ideal/Off':>9s}  choices (Offline | Server)")
    for row in table:
        o, s = row["offline"], row["server"]
        print(f"{row['cards']:5d} {o['sps']:10.1f} {o['over_one_card']:8.3f} {s['max_valid_qps']:10.1f} "
              f"{s['over_offline']:8.3f} {s['ideal_queue_qps']:9.1f} {s['ideal_over_offline']:9.3f}  "
              f"{o['backend']} b{o['batch']} r{o['requests']}{'' if o['valid'] else ' INVALID'} | "
              f"{s['backend']} b{s['batch']} r{s['requests']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApplianceError as exc:  # a layout this machine cannot place, a failed run: one line
        sys.exit(f"bench_cpu_scaling: {exc}")
