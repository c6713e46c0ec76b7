"""Topology input sanity: garbage in a sysfs copy is named (file and value) and refused unless --force,
and hints never suggest overwriting a map that ships with the appliance."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import appliance
from sysfs_fixtures import Machine, write_machine

from harness.core.errors import ApplianceError
from harness.hw.topology import detect, load_card_map

CPU = "sys/devices/system/cpu"
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("rel", "value"), [
    (f"{CPU}/cpu3/topology/core_cpus_list", "3,x"),           # a card would silently lose CPU 3's sibling
    (f"{CPU}/cpu0/cache/index3/shared_cpu_list", "0-3;4-7"),  # an L3 domain
    (f"{CPU}/cpu0/cache/index3/level", "three"),
    (f"{CPU}/cpu1/topology/physical_package_id", "\x01\x02"),
])
def test_garbage_is_named_and_refused_unless_forced(rel, value, tmp_path, capsys):
    root = write_machine(tmp_path / "host", Machine(sockets=1, cores_per_socket=8, cores_per_l3=4))
    good = detect(root)
    (root / rel).write_text(value)
    with pytest.raises(ApplianceError) as err:
        detect(root)
    assert f"{root / rel} holds {value!r}" in str(err.value) and "--force" in str(err.value)

    assert appliance("topology", "detect", "--sysfs-root", root) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and str(root / rel) in out.err

    warnings: list[str] = []
    forced = detect(root, force=True, warn=warnings.append)
    assert len(warnings) == 1 and str(root / rel) in warnings[0]
    assert forced.online == good.online
    assert appliance("topology", "detect", "--sysfs-root", root, "--force") == 0
    out = capsys.readouterr()
    assert "card" in out.out and "warning:" in out.err and str(root / rel) in out.err


def test_a_clean_copy_detects_without_a_word(tmp_path, capsys):
    root = write_machine(tmp_path / "host", Machine(sockets=2, cores_per_socket=4, cores_per_l3=4))
    assert appliance("topology", "detect", "--sysfs-root", root) == 0
    assert capsys.readouterr().err == ""


def test_hint_never_suggests_overwriting_a_shipped_map(tmp_path, monkeypatch):
    small = detect(write_machine(tmp_path / "host", Machine(sockets=1, cores_per_socket=2)))
    for cwd in (REPO, tmp_path):
        monkeypatch.chdir(cwd)
        shipped = Path("harness/hw/topology/maps/g292-z43-16cards.yaml")  # as a user in the checkout types it
        for given in (REPO / shipped, shipped) if cwd == REPO else (REPO / shipped,):
            with pytest.raises(ApplianceError) as err:
                load_card_map(given, small)
            hint = str(err.value).split("; ", 1)[1]
            target = Path(hint.split("-o ", 1)[1].split("`", 1)[0])
            assert target.name == "my-g292-z43-16cards.yaml"
            assert not target.resolve().is_relative_to(REPO), hint
    # a map of the user's own, outside the appliance, is regenerated in place
    mine = tmp_path / "mine.yaml"
    mine.write_text((REPO / "harness" / "hw" / "topology" / "maps" / "g292-z43-16cards.yaml").read_text())
    with pytest.raises(ApplianceError, match=f"-o {mine}`"):
        load_card_map(mine, small)
