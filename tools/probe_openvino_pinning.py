#!/usr/bin/env python3
"""Can OpenVINO's CPU plugin keep two cards of one process on their own CPUs? Read from /proc.

Two "cards" in one process, each on a thread pinned to one CPU (card 0 to the last CPU, card 1 to the
first, so OpenVINO's own CPU order cannot match by luck) compiles the model with the given properties
and infers with `start_async` / `wait` as the openvino card does. The compiles run one after the
other, so the threads that appear during a card's compile and first batch are that card's. While both
infer, every thread's Cpus_allowed_list and last-run CPU (/proc/self/task/TID/stat field 39) are
sampled. A card is held to its CPU only when all its threads are allowed that CPU alone. docs/run.md's
"--backend openvino" item has what OpenVINO 2026.4.1 did; run this again on another version:

    python tools/probe_openvino_pinning.py data/models/resnet50-seeded-s0.onnx ENABLE_CPU_PINNING=1
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np


def tasks() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


def thread_state(tid: int) -> tuple[str, int, int] | None:
    """(Cpus_allowed_list, last CPU, user ticks) of one of this process's threads; None once it ended."""
    try:
        status = Path(f"/proc/self/task/{tid}/status").read_text()
        stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    except OSError:
        return None
    allowed = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                   if line.startswith("Cpus_allowed_list"))
    fields = stat[stat.rindex(")") + 2:].split()
    return allowed, int(fields[36]), int(fields[11])


def sample(seconds: float) -> dict[int, tuple[str, set[int], int]]:
    """Every thread's (Cpus_allowed_list, CPUs it was last seen on, user ticks), every 50 ms for `seconds`."""
    seen: dict[int, tuple[str, set[int], int]] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for tid in tasks():
            if (state := thread_state(tid)) is not None:
                seen[tid] = (state[0], seen.get(tid, ("", set(), 0))[1] | {state[1]}, state[2])
        time.sleep(0.05)
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("model", help="an ONNX model with one [N, C, H, W] input, e.g. data/models/resnet50-seeded-s0.onnx")
    ap.add_argument("properties", nargs="*", help="CPU plugin properties KEY=VALUE, e.g. ENABLE_CPU_PINNING=1")
    ap.add_argument("--seconds", type=float, default=3.0, help="sampling time while both infer, e.g. 3")
    args = ap.parse_args()
    import openvino as ov

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        ap.error("needs at least 2 CPUs")
    config: dict[str, Any] = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    config.update({k: {"0": False, "1": True}.get(v, v) for k, _, v in (kv.partition("=") for kv in args.properties)})
    owner: dict[int, str] = {}
    compiled = [threading.Event(), threading.Event()]
    stop = threading.Event()

    def card(i: int, cpu: int) -> None:
        if i == 1:
            compiled[0].wait()
        os.sched_setaffinity(0, {cpu})
        before = tasks()
        core = ov.Core()
        model = core.read_model(args.model)
        model.reshape({model.inputs[0].get_any_name(): [1, *list(model.inputs[0].get_partial_shape())[1:]]})
        request = core.compile_model(model, "CPU", config).create_infer_request()
        x = np.zeros([d.get_length() for d in model.inputs[0].get_partial_shape()], np.float32)
        request.start_async([x])
        request.wait()
        for tid in tasks() - before:
            owner[tid] = f"card {i} (pinned to CPU {cpu}): OpenVINO thread"
        owner[threading.get_native_id()] = f"card {i} (pinned to CPU {cpu}): card thread"
        compiled[i].set()
        while not stop.is_set():
            request.start_async([x])
            request.wait()

    threads = [threading.Thread(target=card, args=(0, cpus[-1])), threading.Thread(target=card, args=(1, cpus[0]))]
    for t in threads:
        t.start()
    compiled[1].wait()
    seen = sample(args.seconds)
    stop.set()
    for t in threads:
        t.join()
    print(f"OpenVINO {ov.get_version()}, process CPUs {cpus}, properties {config}")
    for tid, (allowed, ran_on, ticks) in sorted(seen.items()):
        if tid in owner and ticks > 0:
            print(f"  thread {tid:7d} {owner[tid]:45s} allowed {allowed:8s} ran on {sorted(ran_on)}  ({ticks} ticks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
