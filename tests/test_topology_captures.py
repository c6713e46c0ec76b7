"""Real /sys captures (tests/sysfs_captures/*.tar.xz, made by tools/capture_sysfs.sh on the machines the
appliance was developed on): the detector reads each, and agrees with hwloc's lstopo on the same files, as it
does on the generated fixtures (tests/test_topology_hwloc.py)."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from harness.hw.topology import detect, plan
from harness.hw.topology.hwloc_xml import differences, lstopo_xml, read_hwloc_xml

CAPTURES = Path(__file__).resolve().parent / "sysfs_captures"
NAMES = sorted(p.name.removesuffix(".tar.xz") for p in CAPTURES.glob("*.tar.xz"))
LSTOPO = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")


def unpack(name: str, into: Path) -> Path:
    with tarfile.open(CAPTURES / f"{name}.tar.xz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def test_there_is_a_capture_and_a_readme_line_for_each() -> None:
    assert NAMES
    readme = (CAPTURES / "README.md").read_text()
    assert all(f"`{name}.tar.xz`" in readme for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_detector_reads_the_capture(name: str, tmp_path: Path) -> None:
    root = unpack(name, tmp_path)
    t = detect(root)
    assert t.online and t.packages and t.l3_domains
    assert set().union(*t.packages) == set(t.online)
    assert plan(t).to_json_dict()["packages"]  # a card map can be made from it


@pytest.mark.skipif(LSTOPO is None, reason="hwloc's lstopo is not installed (apt-get install hwloc)")
@pytest.mark.parametrize("name", NAMES)
def test_capture_matches_hwloc(name: str, tmp_path: Path) -> None:
    assert LSTOPO is not None
    root = unpack(name, tmp_path)
    ours = detect(root)
    theirs = read_hwloc_xml(lstopo_xml(tmp_path / f"{name}.xml", LSTOPO, root))
    assert differences(ours, theirs) == []
    assert {c.cpus for c in ours.cores} == {c.cpus for c in theirs.cores}
