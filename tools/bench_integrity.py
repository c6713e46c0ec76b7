"""Time the integrity check a run does before LoadGen: sha256 of the model and every prepared file.

    python tools/bench_integrity.py [--data-dir data] [--benchmark resnet50] [--precision fp32]

Prints the bytes hashed, the wall time of the first check in a process (full hashes, page cache as
it is: drop it first for a cold-disk figure) and of a second check in the same process (cached by size,
mtime and inode), and the CPU model.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.data import benchmarks
from harness.data.integrity import verify_prepared
from harness.hw import system
from harness.records import store
from harness.records.layout import Layout, read_model_record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--benchmark", default="resnet50")
    ap.add_argument("--precision", default="fp32")
    args = ap.parse_args()
    layout = Layout(args.data_dir, benchmarks.get(args.benchmark))
    model = Path(read_model_record(layout, args.precision).path)
    data = store.open_prepared(layout.preprocessed, "")
    total = model.stat().st_size + sum((data.root / e["file"]).stat().st_size
                                       for e in store.digested_files(data.manifest))
    times = []
    for _ in range(2):
        start = time.perf_counter()
        bad = verify_prepared(args.data_dir, args.benchmark, args.precision)
        times.append(time.perf_counter() - start)
    print(f"{system.cpu_model()}: {total / 1e6:.0f} MB ({data.count} samples + model), first check "
          f"{times[0]:.2f} s ({total / 1e6 / times[0]:.0f} MB/s), again in the same process {times[1]:.3f} s"
          + (f"; {len(bad)} mismatch(es)" if bad else ""))


if __name__ == "__main__":
    main()
