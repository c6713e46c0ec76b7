"""Must-show (1): the tool reproduces the paper's Table IV card by card, from sysfs alone."""

from __future__ import annotations

import json

import pytest
from sysfs_fixtures import build, shared_trees

from harness.cli.main import main

TABLE_IV = {
    "r282-z93-5cards": ["0-7", "8-15", "16-23", "24-31", "0-31"],
    "r282-z93-8cards": ["0-3", "4-7", "8-11", "12-15", "16-19", "20-23", "24-27", "28-31"],
    "g292-z43-16cards": [f"{64 + 8 * i}-{71 + 8 * i}" for i in range(8)] + [f"{8 * i}-{8 * i + 7}" for i in range(8)],
}
PHYSICAL_CORES = {"r282-z93-5cards": 32, "r282-z93-8cards": 32, "g292-z43-16cards": 128}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["topology", "detect", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _with_siblings(cores: str, ncores: int) -> str:
    lo, hi = map(int, cores.split("-"))
    return f"{lo}-{hi},{lo + ncores}-{hi + ncores}" if hi < ncores - 1 or lo > 0 else f"{lo}-{hi + ncores}"


@pytest.mark.parametrize("system", sorted(TABLE_IV))
def test_table_iv_cores_card_by_card(system: str, tmp_path_factory, capsys) -> None:
    root = build(system, shared_trees(tmp_path_factory))
    cards = _json(capsys, "--sysfs-root", str(root))["cards"]
    assert [c["cores"] for c in cards] == TABLE_IV[system]
    assert [c["cpus"] for c in cards] == [_with_siblings(c, PHYSICAL_CORES[system]) for c in TABLE_IV[system]]
    assert [c["index"] for c in cards] == list(range(len(cards)))
    assert [c["pci"] for c in cards] == sorted(c["pci"] for c in cards)  # numbered in PCI address order
    assert {(c["vendor"], c["model"]) for c in cards} == {("Qualcomm", "Cloud AI 100")}  # NIC/NVMe/VGA ignored


def test_json_shape_is_exactly_the_documented_one(tmp_path_factory, capsys) -> None:
    root = build("g292-z43-16cards", shared_trees(tmp_path_factory))
    doc = _json(capsys, "--sysfs-root", str(root))
    assert list(doc) == ["packages", "numa_nodes", "l3_domains", "cards"]
    assert doc["packages"] == ["0-63,128-191", "64-127,192-255"]
    assert doc["numa_nodes"] == {"0": "0-63,128-191", "1": "64-127,192-255"}
    assert len(doc["l3_domains"]) == 16 and doc["l3_domains"][8] == "64-71,192-199"
    assert doc["cards"][0] == {
        "index": 0,
        "pci": "0000:01:00.0",
        "vendor": "Qualcomm",
        "model": "Cloud AI 100",
        "numa_node": 1,
        "cores": "64-71",
        "cpus": "64-71,192-199",
    }


def test_r282_five_cards_table_shows_the_fifth_floating(tmp_path_factory, capsys) -> None:
    root = build("r282-z93-5cards", shared_trees(tmp_path_factory))
    assert main(["topology", "detect", "--sysfs-root", str(root)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line[:1].isdigit()}
    assert "floats" in rows["4"] and "0000:41:00.0" in rows["4"] and rows["4"].endswith("0-31   0-63")
    assert all("floats" not in rows[i] for i in "0123")
