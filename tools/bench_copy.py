#!/usr/bin/env python3
"""Batch assembly speed: SampleLibrary.stage from a replica into a card's staging buffer, over a plain
single-thread numpy copy of the same bytes, measured in the same run.

The replica holds `--samples` ResNet50 samples (224x224x3 uint8, 150,528 bytes each; 1024 = the
performance sample count, 154 MB). Each round times `--batches` batches of `--batch` samples:

  assembly (contiguous): stage() of consecutive samples into the 256-byte-aligned staging buffer
                         (the single-copy path)
  assembly (gather):     stage() of random samples (one row copy per run of consecutive samples)
  plain copy:            np.copyto of a block of the same size from the same replica into an equally
                         large destination (what a bare memcpy of those bytes costs here)

Rounds run the measurements in alternating order (the uint8 ones and the float32 ones in rounds of
their own); the medians of the per-round rates give the ratios. Also printed for information: the
float32 staging of an FP32 model (mean subtraction fused with the copy) against a plain np.subtract
of the same bytes.

    python tools/bench_copy.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np

from harness.data import benchmarks
from harness.hw import system
from harness.records import store
from harness.run.qsl import SampleLibrary


def _memory_data(count: int, shape: tuple[int, ...]) -> store.PreparedData:
    """Stands in for the prepared shards: random uint8 samples generated once, held in memory as shards."""
    rows = np.random.default_rng(0).integers(0, 256, size=(count, *shape), dtype=np.uint8)
    shards = [rows[i:i + store.SHARD_SIZE] for i in range(0, count, store.SHARD_SIZE)]
    manifest = cast(store.PreparedManifest, {"count": count, "synthetic": True})  # all the copy benchmark reads
    return store.PreparedData(Path("(memory)"), manifest, shards,
                              labels=np.zeros(count, np.int64), golden=None)


def _rate(fn: Callable[[int], None], reps: int, nbytes: int) -> float:
    t0 = time.perf_counter()
    for i in range(reps):
        fn(i)
    return reps * nbytes / (time.perf_counter() - t0) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--batches", type=int, default=50, help="batches per measurement")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    bench = benchmarks.get("resnet50")
    qsl = SampleLibrary(bench, _memory_data(args.samples, bench.input_shape))
    qsl.load(list(range(args.samples)))
    replica = qsl.replicas[0].buffer
    b = args.batch
    stage8 = qsl.staging_buffer(b, "uint8")
    stage32 = qsl.staging_buffer(b, "float32")
    assert stage8 is not None and stage32 is not None  # None only for a card that reads no samples (dtype None)
    nbytes = stage8.nbytes
    rng = np.random.default_rng(1)
    starts = rng.integers(0, args.samples - b, size=args.batches)
    randoms = [rng.choice(args.samples, size=b, replace=False) for _ in range(args.batches)]
    contiguous = [np.arange(s, s + b) for s in starts]
    plain_dst = np.empty_like(stage8)  # numpy's own allocation, as a plain copy would use
    plain_dst32 = np.empty_like(stage32)
    flat = replica.reshape(-1)
    offsets = [int(s) * replica[0].nbytes for s in starts]

    def plain(i: int) -> None:
        np.copyto(plain_dst.reshape(-1), flat[offsets[i]:offsets[i] + nbytes])

    def assemble_contiguous(i: int) -> None:
        qsl.stage(contiguous[i], stage8)

    def assemble_gather(i: int) -> None:
        qsl.stage(randoms[i], stage8)

    def plain32(i: int) -> None:
        np.subtract(replica[starts[i]:starts[i] + b], qsl.mean, out=plain_dst32)

    def assemble32(i: int) -> None:
        qsl.stage(contiguous[i], stage32)

    for fn in (plain, assemble_contiguous, assemble_gather, plain32, assemble32):  # warm-up, pages touched
        _rate(fn, args.batches, nbytes)
    rates: dict[str, list[float]] = {k: [] for k in ("plain", "contiguous", "gather", "plain32", "stage32")}
    # the uint8 and the float32 comparisons in separate rounds: a float32 pass writes 4x the bytes and
    # leaves the cache to whatever runs next, which put the gather (next to it every other round) at
    # 0.85-0.91 of the plain copy where it measures 0.94-0.95 alone
    groups = [[("plain", plain), ("contiguous", assemble_contiguous), ("gather", assemble_gather)],
              [("plain32", plain32), ("stage32", assemble32)]]
    for order in groups:
        for r in range(args.rounds):
            for key, fn in order if r % 2 == 0 else order[::-1]:  # alternate, so drift hits both sides alike
                rates[key].append(_rate(fn, args.batches, nbytes))
    med = {k: statistics.median(v) for k, v in rates.items()}
    figures = {
        "plain_copy_gbps": round(med["plain"], 2),
        "assembly_contiguous_gbps": round(med["contiguous"], 2),
        "assembly_gather_gbps": round(med["gather"], 2),
        "ratio_contiguous": round(med["contiguous"] / med["plain"], 3),
        "ratio_gather": round(med["gather"] / med["plain"], 3),
        "float32_plain_subtract_gbps_in": round(med["plain32"], 2),
        "float32_staging_gbps_in": round(med["stage32"], 2),
        "ratio_float32": round(med["stage32"] / med["plain32"], 3),
        "batch": b, "bytes_per_batch": nbytes, "replica_mb": round(replica.nbytes / 1e6, 1),
        "rounds": args.rounds, "cpu": system.cpu_model(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"replica {figures['replica_mb']} MB, batch {b} x {replica[0].nbytes} B = {nbytes} B, "
              f"median of {args.rounds} rounds x {args.batches} batches")
        print(f"plain numpy copy, same bytes      : {med['plain']:6.2f} GB/s")
        print(f"assembly, contiguous (one copy)   : {med['contiguous']:6.2f} GB/s  "
              f"ratio {figures['ratio_contiguous']:.3f}")
        print(f"assembly, random samples (gather) : {med['gather']:6.2f} GB/s  ratio {figures['ratio_gather']:.3f}")
        print(f"float32 staging / plain subtract  : {med['stage32']:6.2f} / {med['plain32']:.2f} GB/s (uint8 in)  "
              f"ratio {figures['ratio_float32']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
