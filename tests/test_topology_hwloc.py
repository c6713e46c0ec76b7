"""Must-show (2): packages, NUMA nodes and L3 domains equal hwloc's, on every fixture and live."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sysfs_fixtures import ALL_SYSTEMS, PAPER_SYSTEMS, build, shared_trees

from harness.errors import ApplianceError
from harness.topology import detect, plan
from harness.topology.hwloc_xml import parse_bitmap, read_hwloc_xml
from harness.topology.model import Topology

LSTOPO = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
needs_lstopo = pytest.mark.skipif(LSTOPO is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")


def lstopo_xml(out: Path, fsroot: Path | None = None) -> Path:
    """hwloc's view as XML; --disallowed keeps CPUs outside the cpuset, as our description does."""
    env = dict(os.environ)
    if fsroot is not None:
        env.update(HWLOC_FSROOT=str(fsroot), HWLOC_COMPONENTS="linux,stop")
    subprocess.run(
        [LSTOPO, "--of", "xml", "--disallowed", "--whole-io", "-f", str(out)], env=env, check=True, capture_output=True
    )
    return out


def _layout(t: Topology) -> tuple:
    return t.online, set(t.packages), t.numa_nodes, set(t.l3_domains)


@needs_lstopo
@pytest.mark.parametrize("system", sorted(ALL_SYSTEMS))
def test_fixture_matches_hwloc(system: str, tmp_path_factory) -> None:
    root = build(system, shared_trees(tmp_path_factory))
    ours = detect(root)
    theirs = read_hwloc_xml(lstopo_xml(tmp_path_factory.mktemp("xml") / f"{system}.xml", root))
    assert _layout(ours) == _layout(theirs)
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
    assert _layout(ours) == _layout(theirs)


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
