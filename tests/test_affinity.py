"""Every thread that works for a card runs only on that card's CPUs, read from /proc during a real run.

The card threads name themselves c<i>.feed / c<i>.card (and c<i>.done for NMS benchmarks) (PR_SET_NAME); onnxruntime's
intra-op threads are started by c<i>.card and inherit its name and affinity, so a snapshot of
/proc/self/task/*/{comm,status} taken while LoadGen runs tells which card each thread serves.
"""

from __future__ import annotations

import json
import os

import pytest
from helpers import appliance, watch_threads

from harness.core.sysfs import format_cpulist

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs for emulate:2")


@pytest.mark.slow
def test_card_threads_stay_on_their_cpus(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_INTRA_OP_THREADS", "2")  # so each card's onnxruntime starts a pool thread
    rc, seen = watch_threads(lambda: appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--cards",
                                               "emulate:2", "--duration-ms", 500, "--count", 8, "-q"))
    assert rc == 0
    manifest = json.loads(next(tmp_path.glob("*/resnet50/Offline/performance/run_1/manifest.json")).read_text())
    cards = {c["index"]: format_cpulist(c["cpus"]) for c in manifest["cards"]}
    assert len(cards) == 2 and cards[0] != cards[1], cards
    for index, cpus in cards.items():
        mine = [(tid, comm, allowed) for tid, (comm, allowed) in seen.items() if comm.startswith(f"c{index}.")]
        roles = {comm.split(".", 1)[1] for _, comm, _ in mine}
        assert roles == {"feed", "card"}, mine  # resnet50 completes on the card thread
        # the card thread plus onnxruntime's intra-op pool thread it started
        assert sum(comm == f"c{index}.card" for _, comm, _ in mine) >= 2, mine
        wrong = [(tid, comm, allowed) for tid, comm, allowed in mine if allowed != cpus]
        assert not wrong, f"card {index} (cpus {cpus}): threads elsewhere: {wrong}"
    # the replica for the (one) NUMA node was filled by a thread on that node's CPUs
    replica = manifest["sample_buffers"]["replicas"][0]
    assert replica["filled_on_cpus"] == replica["fill_cpus"] == sorted(os.sched_getaffinity(0))
