#!/usr/bin/env python3
"""Scaling with simulated cards: Offline samples/s and Server max valid QPS for 1, 2, 4, 8, 16 cards.

Every card is a simulated card with a per-card rate (`--per-card-rate` samples/s at `--batch`),
chosen so that 16 cards stay well under the harness's own ceiling on the machine (on a 2-CPU VM the
16 cards share the 2 CPUs, 8 to a CPU; they sleep for their batch latency, so they can). The runs
are real appliance runs (LoadGen, pinned card threads, replicas, staging copies, batched completions).

By default the cards are pipelined as a Cloud AI 100 is (DMA in, compute on one of `--activations`
activations, DMA out, as overlapping stages; activations + 1 batches in flight per card: the harness
stages and completes while the card works); `--activations 0` gives the old synchronous card (one
batch at a time, the card idle while the host completes and stages). A batch takes activations x
batch / rate on the card: the default (1 activation, batch 2, 400 samples/s) is 5 ms, a third of
ResNet50's 15 ms bound. A real Cloud AI 100 (4 activations, batch 8, 22,667 samples/s) takes 1.4 ms;
the simulated cards are slower so that 16 of them stay within what 2 host CPUs can carry, and more
activations at this rate would make a batch take longer than the bound leaves room for.

Printed ratios, all from this one run:
  offline scaling  = Offline(16 cards) / (16 x Offline(1 card))
  server / offline = max valid Server QPS / Offline samples/s, per card count (Server found by
                     bisection from 50% of that count's Offline figure)
  ideal queue      = the same ratio for an ideal harness over the same cards: a discrete-event model
                     (Poisson arrivals, full batches, each to the earliest-free activation at once, no
                     host time), the highest load whose p99 latency is within the bound; what the
                     cards' own latency allows, the yardstick for the measured Server ratio

A Server probe that comes out INVALID is run again (`--server-retries`, default 1) and counts as
INVALID only if every try is: on a shared machine one burst of load fails a run that is otherwise
well within the bound, and one such failure would send the bisection down for good.

It also saves the scaling curve as a PNG (`--png`, matplotlib).

    python tools/bench_scaling.py --data-dir data --png scaling.png
    python tools/bench_scaling.py --duration-ms 10000 --searches 5      # the issue-21 figures
    python tools/bench_scaling.py --activations 2 --cards 16            # 10 ms batches: see the ideal
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import NotRequired, TypedDict

from bench_harness import Tried, harness_run, retrying, server_max

from harness.cli.main import main as appliance
from harness.core.scenarios import Scenario
from harness.data import benchmarks
from harness.hw import system
from harness.records import store
from harness.records.layout import Layout
from harness.tune.search import server_qps


class Row(TypedDict):
    """One card count's figures, as --json prints them (the server ones where Server was searched)."""

    cards: int
    offline_sps: float
    offline_valid: bool
    server_max_valid_qps: NotRequired[float]
    server_over_offline: NotRequired[float]
    server_searches: NotRequired[list[float]]
    server_tried: NotRequired[list[Tried]]
    ideal_queue_server_over_capacity: NotRequired[float]


def write_profile(folder: Path, rate: float, batch: int, activations: int = 0, dma_in_us: float = 0.0,
                  dma_out_us: float = 0.0) -> Path:
    """A simulated card profile; `activations` > 0: a pipelined card (harness/run/cards/simulated_card.py)."""
    path = folder / "scaling-card.yaml"
    pipeline = (f"pipeline: {{activations: {activations}, dma_in_us_per_sample: {dma_in_us}, "
                f"dma_out_us_per_sample: {dma_out_us}}}\n") if activations > 0 else ""
    path.write_text(f"version: 1\nname: scaling-card\nmodel: bench_scaling card (simulated)\n"
                    f"source: tools/bench_scaling.py\ninput_dtype: uint8\n"
                    f"benchmarks:\n  resnet50: {{samples_per_second: {rate}, batch: {batch}}}\n{pipeline}")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--per-card-rate", type=float, default=400.0, help="simulated samples/s per card")
    ap.add_argument("--batch", type=int, default=2, help="simulated card batch (latency = batch / rate)")
    ap.add_argument("--cards", default="1,2,4,8,16")
    ap.add_argument("--duration-ms", type=int, default=2000)
    ap.add_argument("--server-steps", type=int, default=5, help="bisection steps for the Server search")
    ap.add_argument("--server-retries", type=int, default=1,
                    help="re-runs of a Server probe that came out INVALID before it counts as INVALID")
    ap.add_argument("--server-cards", default="16", help="card counts to search Server for ('all': every count); "
                    "few cards give few queries per run, too few for early stopping at short durations")
    ap.add_argument("--activations", type=int, default=1,
                    help="pipelined card: batches computing at once (0: a synchronous card), e.g. 2; a batch "
                         "takes activations x batch / rate on the card, which must stay well within the "
                         "Server latency bound (15 ms for ResNet50)")
    ap.add_argument("--dma-in-us", type=float, default=12.5, help="pipelined card: DMA in per sample, e.g. 12.5")
    ap.add_argument("--dma-out-us", type=float, default=0.5, help="pipelined card: DMA out per sample, e.g. 0.5")
    ap.add_argument("--searches", type=int, default=1,
                    help="consecutive Server searches at each searched card count (each one reported), e.g. 5")
    ap.add_argument("--png", type=Path, default=Path("scaling.png"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    if not (Layout(args.data_dir, bench).preprocessed / store.MANIFEST).is_file():
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "-q"])
    counts = [int(c) for c in args.cards.split(",")]
    latency_ms = 1000 * max(1, args.activations) * args.batch / args.per_card_rate
    if latency_ms > (bench.server_latency_ms or 100) / 2:
        print(f"warning: a batch takes {latency_ms:.1f} ms on a card, more than half the "
              f"{bench.server_latency_ms} ms Server bound: Server searches will find little; lower "
              f"--activations or --batch, or raise --per-card-rate", file=sys.stderr)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        profile = write_profile(Path(tmp), args.per_card_rate, args.batch, args.activations, args.dma_in_us,
                                args.dma_out_us)
        for n in counts:
            spec = f"simulate:{profile}:{n}"
            offline, valid = harness_run(args.data_dir, Scenario.OFFLINE, None, args.duration_ms, args.batch, spec,
                                         backend="onnxruntime")
            row: Row = {"cards": n, "offline_sps": round(offline, 1), "offline_valid": valid}
            line = f"{n:2} cards: Offline {offline:9.1f} samples/s ({offline / n:7.1f} per card)"
            if args.server_cards == "all" or str(n) in args.server_cards.split(","):
                def server_at(q: float, spec: str = spec) -> tuple[float, bool]:
                    return harness_run(args.data_dir, Scenario.SERVER, q, args.duration_ms, args.batch, spec,
                                       backend="onnxruntime")

                probe = retrying(server_at, args.server_retries)
                found = [server_max(probe, offline, args.server_steps) for _ in range(args.searches)]
                srv = min(q for q, _ in found)
                service_s = max(1, args.activations) * args.batch / args.per_card_rate \
                    + args.batch * (args.dma_in_us + args.dma_out_us) / 1e6
                capacity = n * max(1, args.activations) * args.batch / service_s
                ideal = (server_qps(bench, args.batch, service_s, n * max(1, args.activations), capacity) or 0.0) \
                    / capacity
                row.update({"server_max_valid_qps": round(srv, 1), "server_over_offline": round(srv / offline, 3),
                            "server_searches": [round(q / offline, 3) for q, _ in found],
                            "server_tried": [t for _, t in found], "ideal_queue_server_over_capacity": round(ideal, 3)})
                line += (f"   Server max valid {srv:9.1f} QPS  ({srv / offline:.3f} of Offline, the lowest of "
                         f"{args.searches} search(es): {row['server_searches']}; an ideal queue: {ideal:.3f})")
            rows.append(row)
            print(line, flush=True, file=sys.stderr if args.json else sys.stdout)  # --json: stdout is the JSON
    one = rows[0]["offline_sps"] / counts[0]
    last = rows[-1]
    figures = {"per_card_rate": args.per_card_rate, "batch": args.batch, "duration_ms": args.duration_ms,
               "activations": args.activations, "dma_in_us": args.dma_in_us, "dma_out_us": args.dma_out_us,
               "rows": rows, "nominal_total_at_max": args.per_card_rate * last["cards"],
               "offline_scaling": round(last["offline_sps"] / (last["cards"] * one), 3),
               "server_over_offline_at_max": last.get("server_over_offline"), "cpu": system.cpu_model(),
               "cpus": len(system.available_cpus()), "png": str(args.png)}
    plot_png(args.png, counts, [r["offline_sps"] for r in rows],
             [(r["cards"], r["server_max_valid_qps"]) for r in rows if "server_max_valid_qps" in r], one)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"offline scaling {last['cards']} cards / ({last['cards']} x 1 card): {figures['offline_scaling']:.3f}")
        print(f"server / offline at {last['cards']} cards: {figures['server_over_offline_at_max']} "
              f"(an ideal queue over the same cards: {last.get('ideal_queue_server_over_capacity')})")
        card = f"pipelined, {args.activations} activations" if args.activations > 0 else "synchronous"
        print(f"per-card rate {args.per_card_rate:g} samples/s at batch {args.batch} (simulated, {card}); "
              f"CPU {figures['cpu']}; "
              f"{figures['cpus']} CPUs; plot: {args.png}")
    return 0


def plot_png(path: Path, counts: list[int], offline: list[float], server: list[tuple[int, float]],
             one: float) -> None:
    """Samples/s against cards: ideal (grey), Offline (blue), Server max valid (red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    ax.plot([0, max(counts)], [0, one * max(counts)], color="0.65", label="ideal (n x one card)")
    ax.plot(counts, offline, "o-", color="tab:blue", label="Offline samples/s")
    if server:
        ax.plot(*zip(*server, strict=True), "s", color="tab:red", label="Server max valid QPS")
    ax.set_xlabel("simulated cards")
    ax.set_ylabel("samples/s")
    ax.set_xticks(counts)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
