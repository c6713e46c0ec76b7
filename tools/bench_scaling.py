#!/usr/bin/env python3
"""Scaling with simulated cards: Offline samples/s and Server max valid QPS for 1, 2, 4, 8, 16 cards.

Every card is a simulated card with a per-card rate (`--per-card-rate` samples/s at `--batch`),
chosen so that 16 cards stay well under the harness's own ceiling on the machine (on a 2-CPU VM the
16 cards share the 2 CPUs, 8 to a CPU; they sleep for their batch latency, so they can). The runs
are real appliance runs (LoadGen, pinned card threads, replicas, staging copies, batched completions).

Printed ratios, all from this one run:
  offline scaling  = Offline(16 cards) / (16 x Offline(1 card))
  server / offline = max valid Server QPS / Offline samples/s, per card count (Server found by
                     bisection between 50% and 100% of that count's Offline figure)

It also saves the scaling curve as a PNG (`--png`; drawn without plotting libraries).

    python tools/bench_scaling.py --data-dir data --png scaling.png
"""

from __future__ import annotations

import argparse
import itertools
import json
import struct
import sys
import tempfile
import zlib
from pathlib import Path

from bench_harness import harness_run

from harness import benchmarks, system
from harness.cli import main as appliance
from harness.datasets import store
from harness.prepare import Layout


def write_profile(folder: Path, rate: float, batch: int) -> Path:
    path = folder / "scaling-card.yaml"
    path.write_text(f"version: 1\nname: scaling-card\nmodel: bench_scaling card (simulated)\n"
                    f"source: tools/bench_scaling.py\ninput_dtype: uint8\n"
                    f"benchmarks:\n  resnet50: {{samples_per_second: {rate}, batch: {batch}}}\n")
    return path


def server_max(data_dir: Path, cards: str, offline: float, ms: int, batch: int, steps: int) -> tuple[float, list]:
    lo, hi, tried = 0.0, offline, []
    first = offline * 0.5
    _, ok = harness_run(data_dir, "Server", first, ms, batch, cards, backend="onnxruntime")
    tried.append((round(first, 1), ok))
    if not ok:
        hi = first
    else:
        lo = first
    for _ in range(steps):
        mid = (lo + hi) / 2
        _, ok = harness_run(data_dir, "Server", mid, ms, batch, cards, backend="onnxruntime")
        tried.append((round(mid, 1), ok))
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo, tried


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--per-card-rate", type=float, default=400.0, help="simulated samples/s per card")
    ap.add_argument("--batch", type=int, default=2, help="simulated card batch (latency = batch / rate)")
    ap.add_argument("--cards", default="1,2,4,8,16")
    ap.add_argument("--duration-ms", type=int, default=2000)
    ap.add_argument("--server-steps", type=int, default=4, help="bisection steps for the Server search")
    ap.add_argument("--server-cards", default="16", help="card counts to search Server for ('all': every count); "
                    "few cards give few queries per run, too few for early stopping at short durations")
    ap.add_argument("--png", type=Path, default=Path("scaling.png"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    if not (Layout(args.data_dir, bench).preprocessed / store.MANIFEST).is_file():
        appliance(["prepare", "--data-dir", str(args.data_dir), "--samples", "256", "-q"])
    counts = [int(c) for c in args.cards.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        profile = write_profile(Path(tmp), args.per_card_rate, args.batch)
        for n in counts:
            spec = f"simulate:{profile}:{n}"
            offline, valid = harness_run(args.data_dir, "Offline", None, args.duration_ms, args.batch, spec,
                                         backend="onnxruntime")
            row = {"cards": n, "offline_sps": round(offline, 1), "offline_valid": valid}
            line = f"{n:2} cards: Offline {offline:9.1f} samples/s ({offline / n:7.1f} per card)"
            if args.server_cards == "all" or str(n) in args.server_cards.split(","):
                srv, tried = server_max(args.data_dir, spec, offline, args.duration_ms, args.batch, args.server_steps)
                row.update(server_max_valid_qps=round(srv, 1), server_over_offline=round(srv / offline, 3),
                           server_tried=tried)
                line += f"   Server max valid {srv:9.1f} QPS  ({srv / offline:.3f} of Offline)"
            rows.append(row)
            print(line, flush=True)
    one = rows[0]["offline_sps"] / counts[0]
    last = rows[-1]
    figures = {"per_card_rate": args.per_card_rate, "batch": args.batch, "duration_ms": args.duration_ms,
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
        print(f"server / offline at {last['cards']} cards: {figures['server_over_offline_at_max']}")
        print(f"per-card rate {args.per_card_rate:g} samples/s at batch {args.batch} (simulated); "
              f"{figures['cpus']} CPUs; plot: {args.png}")
    return 0


# a PNG without plotting libraries -------------------------------------------------------------------
_DIGITS = {  # 3x5 pixel font
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", "k": "100101110101101",
}


def plot_png(path: Path, counts: list[int], offline: list[float], server: list[tuple[int, float]],
             one: float) -> None:
    """Samples/s against cards: ideal (grey), Offline (blue), Server max valid (red); axis ticks in digits."""
    w, h, left, bottom, top, right = 640, 420, 60, 40, 20, 20
    img = [[(255, 255, 255)] * w for _ in range(h)]
    ymax = max(max(offline), one * max(counts)) * 1.1
    xmax = max(counts)

    def px(n: float, v: float) -> tuple[int, int]:
        return (left + int((w - left - right) * n / xmax), h - bottom - int((h - bottom - top) * v / ymax))

    def dot(x: int, y: int, c: tuple[int, int, int], r: int = 1) -> None:
        for yy in range(y - r, y + r + 1):
            for xx in range(x - r, x + r + 1):
                if 0 <= xx < w and 0 <= yy < h:
                    img[yy][xx] = c

    def line(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int, int], r: int = 1) -> None:
        steps = max(abs(b[0] - a[0]), abs(b[1] - a[1]), 1)
        for i in range(steps + 1):
            dot(a[0] + (b[0] - a[0]) * i // steps, a[1] + (b[1] - a[1]) * i // steps, c, r)

    def text(x: int, y: int, s: str) -> None:
        for k, ch in enumerate(s):
            glyph = _DIGITS.get(ch)
            for i, bit in enumerate(glyph or ""):
                if bit == "1":
                    for dy in range(2):
                        for dx in range(2):
                            img[y + (i // 3) * 2 + dy][x + k * 8 + (i % 3) * 2 + dx] = (0, 0, 0)

    line(px(0, 0), px(xmax, 0), (0, 0, 0))
    line(px(0, 0), px(0, ymax), (0, 0, 0))
    for n in counts:
        x, y = px(n, 0)
        line((x, y), (x, y + 5), (0, 0, 0), 0)
        text(x - 4, y + 10, str(n))
    step = 10 ** max(0, len(str(int(ymax))) - 1)
    for v in range(0, int(ymax), step):
        x, y = px(0, v)
        line((x - 5, y), (x, y), (0, 0, 0), 0)
        text(4, y - 5, f"{v // 1000}k" if v >= 1000 else str(v))
    line(px(0, 0), px(xmax, one * xmax), (170, 170, 170))
    for series, colour in ((list(zip(counts, offline, strict=True)), (30, 90, 200)), (server, (200, 40, 40))):
        pts = [px(n, v) for n, v in series]
        for a, b in itertools.pairwise(pts):
            line(a, b, colour)
        for p in pts:
            dot(*p, colour, 3)
    raw = b"".join(b"\x00" + bytes(v for pix in row for v in pix) for row in img)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    sys.exit(main())
