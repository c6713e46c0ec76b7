"""Must-show (2): packages, NUMA nodes, L3 domains and PCI functions equal hwloc's, on every fixture and live."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sysfs_fixtures import ALL_SYSTEMS, PAPER_SYSTEMS, build, shared_trees

from harness.core.errors import ApplianceError
from harness.hw.topology import detect, hwloc_xml, plan
from harness.hw.topology.hwloc_xml import differences, parse_bitmap, read_hwloc_xml

LSTOPO = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
needs_lstopo = pytest.mark.skipif(LSTOPO is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")


def lstopo_xml(out: Path, fsroot: Path | None = None) -> Path:
    assert LSTOPO is not None
    return hwloc_xml.lstopo_xml(out, LSTOPO, fsroot)


@needs_lstopo
@pytest.mark.parametrize("system", sorted(ALL_SYSTEMS))
def test_fixture_matches_hwloc(system: str, tmp_path_factory) -> None:
    root = build(system, shared_trees(tmp_path_factory))
    ours = detect(root)
    theirs = read_hwloc_xml(lstopo_xml(tmp_path_factory.mktemp("xml") / f"{system}.xml", root))
    assert differences(ours, theirs) == []
    assert ours.allowed == theirs.allowed
    assert {c.cpus for c in ours.cores} == {c.cpus for c in theirs.cores}


@needs_lstopo
@pytest.mark.parametrize("system", sorted(PAPER_SYSTEMS))
def test_hwloc_xml_input_gives_the_same_card_map(system: str, tmp_path_factory) -> None:
    root = build(system, shared_trees(tmp_path_factory))
    xml = lstopo_xml(tmp_path_factory.mktemp("xml") / f"{system}.xml", root)
    assert plan(detect(hwloc_xml=xml)).to_json_dict() == plan(detect(root)).to_json_dict()


@needs_lstopo
def test_live_machine_matches_hwloc(tmp_path: Path) -> None:
    ours = detect("/")
    theirs = read_hwloc_xml(lstopo_xml(tmp_path / "live.xml"))
    assert differences(ours, theirs) == []


def test_differences_name_what_disagrees(tmp_path_factory) -> None:
    """The comparison the live check (tools/topology_vs_lstopo.py) reports can fail: a GPU's node, an L3
    domain and a missing device each show up, one line each."""
    import dataclasses

    ours = detect(build("nvidia-box", shared_trees(tmp_path_factory)))
    gpu = next(d for d in ours.pci_devices if d.vendor == 0x10DE)
    devices = [d for d in ours.pci_devices if d.class_code != 0x0604]  # hwloc lists no PCI-to-PCI bridges
    gone = next(d for d in devices if d is not gpu)
    theirs = dataclasses.replace(ours, l3_domains=(ours.online,), pci_devices=tuple(
        dataclasses.replace(d, numa_node=(d.numa_node or 0) + 1) if d is gpu else d for d in devices if d is not gone))
    assert differences(ours, dataclasses.replace(ours, pci_devices=tuple(devices))) == []
    found = differences(ours, theirs)
    assert len(found) == 3 and found[0].startswith("L3 domains: ours"), found
    assert f"PCI {gone.address}: only in ours" in found, found
    assert any(line.startswith(f"PCI {gpu.address}: numa_node ours") for line in found), found


def test_unparsable_xml_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine'")
    with pytest.raises(ApplianceError, match="lstopo --of xml"):
        detect(hwloc_xml=bad)
    other = tmp_path / "other.xml"
    other.write_text("<html><body/></html>")
    with pytest.raises(ApplianceError, match="not an hwloc topology"):
        detect(hwloc_xml=other)


def test_bitmap_strings() -> None:
    assert parse_bitmap("0x0") == set()
    assert parse_bitmap("0x000000ff,0x00000001") == {0, *range(32, 40)}
    assert parse_bitmap("0xf...f,0x00000003") == {0, 1}
    assert parse_bitmap("0x00000001,,,0x00000002") == {1, 96}  # empty words are zero words
