"""Full-length fleet rehearsal (issue 44): three systems on simulated cards (gamma's slower) run resnet50's edge
scenarios at mlperf.conf's durations with the accuracy run, TEST01 and TEST04, through a real SLURM started as
tests/slurm_cluster.py starts it; the collect job builds one submission with every system, then
`appliance submission check` and, given --checker, the official MLCommons checker.

    nice -n 19 python tools/rehearse_fleet_submission.py DATA_DIR WORK_DIR \\
        [--checker /tmp/inference --checker-python /tmp/venv/bin/python]

Each node (a1: alpha, b1: beta, c1: gamma) gets an accuracy job (compose/slurm/fleet-task.sh with MODES=accuracy,
every scenario), then, once it succeeded, a performance job per scenario, and once that succeeded, the scenario's
TEST01 and TEST04 jobs (a compliance test compares against the performance run), all side by side: the
nodes are declared with 16 CPUs each (more than this machine has), fine for simulated cards, which sleep; with real
cards a node runs one job at a time. The collect job (compose/slurm/collect.sh) runs after all of them (afterany).
Takes about an hour (the performance runs, then the three runs of each compliance test);
docs/submission-rehearsal.md has a run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from slurm_cluster import cluster, missing  # noqa: E402  (tests/ holds the one way this project starts SLURM)

SLURM = REPO / "compose" / "slurm"
SCENARIOS = ("Offline", "SingleStream", "MultiStream")
SLOW = """version: 1
name: rehearsal-150
model: slower simulated card for the fleet rehearsal (rehearsal-200 at three quarters of its rate)
source: chosen, not measured
input_dtype: uint8
benchmarks:
  resnet50: {samples_per_second: 150, batch: 8}
"""


def stamp(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} {text}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a data dir prepared with `appliance prepare -b resnet50`")
    ap.add_argument("work", type=Path, help="a new folder: RESULTS/, collect/ (the tree, the report), logs/")
    ap.add_argument("--checker", type=Path, help="a checkout of mlcommons/inference (its tools/submission)")
    ap.add_argument("--checker-python", default="python3", help="a Python with the checker's requirements")
    a = ap.parse_args()
    if (why := missing()) is not None:
        print(f"rehearse_fleet_submission: no SLURM here: {why}", file=sys.stderr)
        return 2
    work = a.work.resolve()
    work.mkdir(parents=True)
    (work / "logs").mkdir()
    (work / "rehearsal-150.yaml").write_text(SLOW)
    nodes = {"a1": ("alpha", "simulate:rehearsal-200:1"), "b1": ("beta", "simulate:rehearsal-200:1"),
             "c1": ("gamma", f"simulate:{work / 'rehearsal-150.yaml'}:1")}
    node_map = work / "nodes.txt"
    node_map.write_text("".join(f"{n} {s} {c}\n" for n, (s, c) in nodes.items()))
    env = {"RESULTS": str(work / "RESULTS"),
           "DATA": str(a.data.resolve()), "NODE_MAP": str(node_map), "SUBMITTER": "Rehearsal",
           "FLEET_DIR": str(SLURM), "COLLECT_DIR": str(work / "collect"), "BENCHMARKS": "resnet50"}
    with cluster(work / "slurm", list(nodes), cpus=16) as c:
        c.env.update(env)  # the cluster's environment is this process's (tests/slurm_cluster.py) plus SLURM_CONF
        c.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{c.env['PATH']}"  # this venv's appliance first

        def sbatch(node: str, name: str, script: str, *opts: str, **extra: str) -> str:
            cmd = ["sbatch", "--parsable", "-D", str(work), "-J", name, "-o", str(work / "logs" / f"{name}-%j.out"),
                   *opts, str(SLURM / script)]
            done = subprocess.run(cmd, env={**c.env, **extra}, capture_output=True, text=True, check=True, timeout=60)
            return done.stdout.strip().split(";")[0]

        jobs = []
        for node in nodes:
            # not --exclusive (fleet-task.sh's default): the node's runs share it, one CPU each
            share = ("-w", node, "--oversubscribe")
            acc = sbatch(node, f"{node}-accuracy", "fleet-task.sh", *share, MODES="accuracy",
                         SCENARIOS=" ".join(SCENARIOS))
            jobs.append(acc)
            for s in SCENARIOS:  # a compliance test compares against the scenario's finished performance run
                perf = sbatch(node, f"{node}-{s}-performance", "fleet-task.sh", *share, f"--dependency=afterok:{acc}",
                              MODES="performance", SCENARIOS=s)
                jobs.append(perf)
                for m in ("TEST01", "TEST04"):
                    jobs.append(sbatch(node, f"{node}-{s}-{m}", "fleet-task.sh", *share,
                                       f"--dependency=afterok:{perf}", MODES=m, SCENARIOS=s))
        collect = sbatch("a1", "collect", "collect.sh", f"--dependency=afterany:{':'.join(jobs)}")
        stamp(f"{len(jobs)} jobs on {', '.join(nodes)}, collect job {collect}")
        last = ""
        while queue := c.jobs():
            now = f"{sum(' R ' in q for q in queue)} running, {len(queue)} queued or running"
            if now != last:
                stamp(now)
                last = now
            time.sleep(30)
        stamp("collect job done")
    print((next((work / "logs").glob(f"collect-{collect}.out"))).read_text())
    tree = work / "collect" / "submission"
    check = subprocess.run(["appliance", "submission", "check", str(tree)], env=c.env)
    if a.checker is not None:
        stamp("official checker")
        subprocess.run([a.checker_python, "-m", "submission_checker.main", "--input", str(tree), "--version", "v6.1"],
                       cwd=a.checker / "tools" / "submission")
    stamp("done")
    return check.returncode


if __name__ == "__main__":
    sys.exit(main())
