"""`run --keep-warm`: one SCHED_IDLE spinner pinned to each card CPU while LoadGen runs, gone afterwards,
and said in the manifest (so `reproduce` re-runs with it)."""

from __future__ import annotations

import json
import os
import time

import psutil
from helpers import appliance

from harness.run import keep_warm


def _spinners() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if "sched_setscheduler" in " ".join(p.cmdline())]


def test_spinners_are_pinned_idle_class_and_gone_after_the_block():
    cpus = sorted(os.sched_getaffinity(0))
    with keep_warm.spinning(cpus) as kept:
        assert kept == tuple(cpus)
        procs = _spinners()
        assert len(procs) == len(cpus)
        deadline = time.monotonic() + 30  # each sets its own class and CPU as it starts
        while time.monotonic() < deadline and not all(
                os.sched_getscheduler(p.pid) == os.SCHED_IDLE and len(os.sched_getaffinity(p.pid)) == 1 for p in procs):
            time.sleep(0.05)
        assert sorted(c for p in procs for c in os.sched_getaffinity(p.pid)) == cpus
        assert all(os.sched_getscheduler(p.pid) == os.SCHED_IDLE for p in procs)
    assert not _spinners() and not any(p.is_running() for p in procs)


def test_run_keep_warm_is_in_the_manifest(data_dir, tmp_path):
    results = tmp_path / "r"
    run = ("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 300, "--count", 16, "-q")
    assert appliance(*run, "--keep-warm") == 0
    assert appliance(*run) == 0
    manifests = sorted(results.rglob("manifest.json"), key=lambda p: p.stat().st_mtime)
    assert [json.loads(m.read_text())["dispatch"]["keep_warm"] for m in manifests] == [True, False]
    assert not _spinners()
