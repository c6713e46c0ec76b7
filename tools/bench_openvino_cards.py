#!/usr/bin/env python3
"""ResNet50 Offline images/s: N openvino cards, each in a worker process pinned to its own CPUs, against
one openvino card on all the CPUs, in the same run of this script.

Three full appliance Offline runs per round (LoadGen's own result each, `--backend openvino`):

- one card on all CPUs, in-process (`--cards emulate:1`: what a single-card run does);
- N cards (`--cards emulate:N`), each in its own worker process pinned to its CPUs before OpenVINO is
  imported, batches through shared memory (harness/run/cards/openvino_process.py);
- one card on all CPUs in a worker process (APPLIANCE_OPENVINO_PROCESS=1): the process path's own cost
  (one more copy of each batch, a pipe message each way), beside the in-process card.

Printed: images/s of each, N cards / one card (issue 21 asks for at least 1.0), worker process / in-process
for one card, with the CPU model and its vector extensions. `--runs R` repeats the round; the median and
spread of each ratio close the output.

    python tools/bench_openvino_cards.py --data-dir data --duration-ms 20000 --cards 2 --runs 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_backends import median_spread, vector_extensions

from harness.cli.main import main as appliance
from harness.core import environment
from harness.core.errors import ApplianceError
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks
from harness.hw import system
from harness.records.layout import Layout
from harness.run.cards import backends
from harness.run.cards.spec import PROCESS_ENV
from harness.run.loadgen_settings import Requested
from harness.run.runner import RunOptions, run


def offline(args: argparse.Namespace, cards: str, process: bool) -> dict[str, Any]:
    """One Offline performance run: LoadGen's images/s, its verdict and each card's CPUs."""
    environment.assign(PROCESS_ENV, "1" if process else "0")
    try:
        with tempfile.TemporaryDirectory() as results:
            outcome = run(RunOptions("resnet50", Requested(Scenario.OFFLINE, Mode.PERFORMANCE,
                                                           duration_ms=args.duration_ms),
                                     args.data_dir, Path(results), backend=backends.get("openvino"),
                                     batch_size=args.batch_size, precision=args.precision, cards=cards,
                                     requests=args.requests),
                        echo=lambda m: None)
            manifest = json.loads((outcome.path / "manifest.json").read_text())
    finally:
        environment.assign(PROCESS_ENV, None)
    assert outcome.perf is not None
    return {"images_per_s": round(float(outcome.perf.metric or 0.0), 2), "valid": outcome.perf.valid,
            "card_cpus": [c["cpus"] for c in manifest["cards"]],
            "worker_processes": sum(1 for c in manifest["cards"] if c.get("worker_process"))}


def one_round(args: argparse.Namespace) -> dict[str, Any]:
    one = offline(args, "emulate:1", process=False)
    many = offline(args, f"emulate:{args.cards}", process=True)
    one_process = offline(args, "emulate:1", process=True)
    base = float(one["images_per_s"]) or float("nan")
    return {"one_card_in_process": one, f"{args.cards}_cards_worker_processes": many,
            "one_card_worker_process": one_process,
            "ratio_cards_vs_one": round(float(many["images_per_s"]) / base, 3),
            "ratio_process_vs_in_process": round(float(one_process["images_per_s"]) / base, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="prepared data, e.g. --data-dir data")
    ap.add_argument("--duration-ms", type=int, default=20000, help="min duration of each run, e.g. 20000")
    ap.add_argument("--cards", type=int, default=2, help="pinned openvino cards to compare with one, e.g. 2")
    ap.add_argument("--batch-size", type=int, default=8, help="batch for every run, e.g. 8")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "int8"), help="model, e.g. int8")
    ap.add_argument("--requests", type=int, default=1, help="infer requests per card, e.g. 2")
    ap.add_argument("--runs", type=int, default=1, help="rounds to run, median and spread, e.g. 5")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if args.cards < 1 or args.runs < 1 or args.duration_ms < 1:
        raise ApplianceError("--cards, --runs and --duration-ms must be at least 1")
    if not Layout(args.data_dir, benchmarks.get("resnet50")).record_for(args.precision).is_file():
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "--precision", args.precision,
                   "-q"])
    cpu = f"{system.cpu_model()} [{' '.join(vector_extensions()) or 'no vector extensions listed'}]"
    rounds = []
    for i in range(args.runs):
        r = one_round(args)
        rounds.append(r)
        if not args.json:
            for k in ("one_card_in_process", f"{args.cards}_cards_worker_processes", "one_card_worker_process"):
                f = r[k]
                print(f"run {i + 1}: {k:32s} {f['images_per_s']:8.2f} images/s ({'VALID' if f['valid'] else 'INVALID'})"
                      f"  cards' CPUs {f['card_cpus']}", flush=True)
            print(f"run {i + 1}: {args.cards} pinned cards / one card = {r['ratio_cards_vs_one']}, one card in a "
                  f"worker process / in-process = {r['ratio_process_vs_in_process']}  on {cpu}", flush=True)
    summary = {k: median_spread([float(r[k]) for r in rounds])
               for k in ("ratio_cards_vs_one", "ratio_process_vs_in_process")}
    if args.json:
        print(json.dumps({"rounds": rounds, "summary": summary, "cpu": system.cpu_model(),
                          "vector_extensions": vector_extensions(), "cpus": len(system.available_cpus()),
                          "cards": args.cards, "batch": args.batch_size, "precision": args.precision,
                          "requests": args.requests, "duration_ms": args.duration_ms}, indent=2))
        return 0
    for k, v in summary.items():
        print(f"{k} over {args.runs} run(s): median {v['median']:.3f} (min {v['min']:.3f}, max {v['max']:.3f})  "
              f"on {cpu}, {len(system.available_cpus())} CPUs, batch {args.batch_size}, {args.precision}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApplianceError as exc:  # missing or bad prepared data: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
