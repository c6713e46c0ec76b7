"""Time topology detection on the 256-CPU G292-Z43 fixture against hwloc's lstopo on the same tree.

    python tools/bench_topology.py [--repeat 10]

Prints the median wall time of: detect() + plan() in-process, the `topology detect --format json`
command in a fresh interpreter (start-up included), and `lstopo-no-graphics --of xml` on the same
fixture, with the ratios. The fixture goes to /dev/shm when it exists, so the disk's file-creation
speed does not matter and both tools read the same page-cached tree.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sysfs_fixtures import build  # noqa: E402

from harness.core import environment  # noqa: E402
from harness.hw.topology import detect, plan  # noqa: E402


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    run()  # warm the page cache and imports
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per measurement (median is reported)")
    args = parser.parse_args()
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        root = build("g292-z43-16cards", Path(tmp))
        ncpus = len(detect(root).online)
        ours = median_seconds(lambda: plan(detect(root)), args.repeat)
        # The topology command alone in a fresh interpreter (the main CLI also imports the other commands).
        entry = "import sys; from harness.cli.topology import topology; topology(sys.argv[1:])"
        cli = [sys.executable, "-c", entry, "detect", "--sysfs-root", str(root), "--format", "json"]
        ours_cli = median_seconds(lambda: subprocess.run(cli, cwd=REPO, check=True, capture_output=True), args.repeat)
        print(f"fixture: g292-z43-16cards, {ncpus} CPUs, 16 cards, {tmp}")
        print(f"detect()+plan() in-process:        {ours * 1000:8.1f} ms")
        print(f"topology detect command (json):    {ours_cli * 1000:8.1f} ms")
        if lstopo is None:
            print("lstopo: not installed (apt-get install hwloc); no baseline")
            return 0
        env = environment.child(HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="linux,stop")
        cmd = [lstopo, "--of", "xml", "--whole-io", "-"]
        theirs = median_seconds(lambda: subprocess.run(cmd, env=env, check=True, capture_output=True), args.repeat)
        print(f"lstopo-no-graphics --of xml:       {theirs * 1000:8.1f} ms")
        print(f"ratio in-process / lstopo:         {ours / theirs:8.2f}")
        print(f"ratio command / lstopo:            {ours_cli / theirs:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
