"""Sysfs readers and every messy case detection must survive, one test each."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from sysfs_fixtures import Machine, build, shared_trees, write_machine

from harness.core.errors import ApplianceError
from harness.core.sysfs import Sysfs, format_cpulist, parse_cpulist, parse_mask
from harness.hw.topology import detect, plan


@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    root = build("messy", shared_trees(tmp_path_factory))
    return root, detect(root)


def test_cpulist_and_mask_parsing() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("") == set()
    assert format_cpulist([199, 64, 65, 66, 192, 67]) == "64-67,192,199"
    assert parse_mask("00000001,80000000") == {31, 32}
    assert parse_mask("ff") == set(range(8))


def test_readers_return_none_not_raise(tmp_path: Path) -> None:
    (tmp_path / "nul").write_bytes(b"0-3\0")
    (tmp_path / "garbage").write_text("x-y")
    fs = Sysfs(tmp_path)
    assert fs.cpulist("nul") == {0, 1, 2, 3}
    assert fs.integer("nul") is None and fs.cpulist("garbage") is None and fs.mask("missing") is None
    assert fs.cpus("missing_list", "missing") is None


def test_nul_terminated_files_and_masks_only(messy) -> None:
    root, topo = messy
    assert (root / "sys/devices/system/cpu/cpu0/topology/core_id").read_bytes().endswith(b"\0")
    assert not (root / "sys/devices/system/cpu/cpu0/topology/thread_siblings_list").exists()
    assert topo.cores[0].cpus == (0, 32)  # siblings from the hex mask
    assert len(topo.cores) == 31  # core 5 is offline


def test_offline_cpus_listed_in_cache_files_are_dropped(messy) -> None:
    root, topo = messy
    shared = (root / "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map").read_text().strip("\0")
    assert 5 in parse_mask(shared)
    assert topo.l3_domains[0] == frozenset({0, 1, 2, 3, 4, 6, 7, 32, 33, 34, 35, 36, 38, 39})
    assert 5 not in topo.online and 37 not in topo.online


def test_l3_found_by_level_not_by_index_name(messy) -> None:
    root, topo = messy
    assert (root / "sys/devices/system/cpu/cpu0/cache/index2/level").read_text().strip("\0") == "3"
    assert len(topo.l3_domains) == 4


def test_cpus_in_no_node_join_their_package_node(messy) -> None:
    root, topo = messy
    assert 30 not in parse_mask((root / "sys/devices/system/node/node1/cpumap").read_text().strip("\0"))
    assert {30, 62} <= topo.numa_nodes[1]


def test_cpuless_node_with_sparse_id(messy) -> None:
    _, topo = messy
    assert sorted(topo.numa_nodes) == [0, 1, 4] and topo.numa_nodes[4] == frozenset()


def test_numa_node_minus_one_falls_back_to_local_cpulist(messy) -> None:
    _, topo = messy
    card = next(d for d in topo.pci_devices if d.address == "0000:21:00.0")
    assert card.numa_node == 1
    assert [c.numa_node for c in plan(topo).cards] == [0, 1, 1, 1]


def test_container_cpuset_restricts_the_map(tmp_path_factory) -> None:
    topo = detect(build("container", shared_trees(tmp_path_factory)))
    assert topo.allowed == frozenset({*range(8), *range(32, 40)})
    assert topo.online == frozenset(range(64))  # the machine is still described whole
    cards = plan(topo).cards
    assert [c.cores for c in cards[:4]] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(c.floating and c.cores == tuple(range(8)) for c in cards[4:])  # node 1 has no allowed core


def test_live_affinity_restricts_allowed(monkeypatch) -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity on this platform")
    first = min(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {first})
    assert detect("/").allowed == frozenset({first})


def test_missing_online_file_and_node_dir(tmp_path: Path) -> None:
    root = write_machine(tmp_path, Machine(sockets=1, cores_per_socket=4, offline={3, 7}))
    (root / "sys/devices/system/cpu/online").unlink()
    shutil.rmtree(root / "sys/devices/system/node")
    topo = detect(root)
    assert topo.online == frozenset({0, 1, 2, 4, 5, 6})
    assert topo.numa_nodes == {0: topo.online}


def test_not_a_sysfs_root(tmp_path: Path) -> None:
    with pytest.raises(ApplianceError, match="contains sys/"):
        detect(tmp_path)
    root = write_machine(tmp_path / "fs", Machine(sockets=1, cores_per_socket=2))
    with pytest.raises(ApplianceError, match="pass its parent"):
        detect(root / "sys")
