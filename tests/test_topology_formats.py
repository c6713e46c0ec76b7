"""Renderers, the YAML map read back, the CLI's options and its errors (one line, nothing written)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from sysfs_fixtures import Machine, build, shared_trees, write_machine

from harness.cli.main import main
from harness.core.errors import ApplianceError
from harness.hw.topology import detect, load_card_map, plan
from harness.hw.topology.formats import render_docker, render_numa_config, render_yaml

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> Path:
    return shared_trees(tmp_path_factory)


def test_numa_config_groups_consecutive_cards_by_node(trees: Path) -> None:
    g292 = plan(detect(build("g292-z43-16cards", trees)))
    assert render_numa_config(g292) == "0-7:64-127,192-255&8-15:0-63,128-191\n"
    nvidia = plan(detect(build("nvidia-box", trees)))
    assert render_numa_config(nvidia) == "0-1:0-7,16-23&2-3:8-15,24-31\n"


def test_docker_flags_per_vendor(trees: Path) -> None:
    g292 = render_docker(plan(detect(build("g292-z43-16cards", trees)))).split()
    assert g292[:2] == ["--cpuset-cpus=0-255", "--cpuset-mems=0-1"]
    assert [f for f in g292 if f.startswith("--device")] == [f"--device=/dev/accel/accel{i}" for i in range(16)]
    assert {"--ulimit=memlock=-1", "--cap-add=SYS_NICE"} <= set(g292) and any(f.startswith("--shm-size") for f in g292)
    nvidia = render_docker(plan(detect(build("nvidia-box", trees)))).split()
    assert "'--gpus=\"device=0,1,2,3\"'" in nvidia and not any(f.startswith("--device") for f in nvidia)
    emulated = render_docker(plan(detect(build("nvidia-box", trees)), "emulate:2")).split()
    assert not any(f.startswith(("--device", "'--gpus")) for f in emulated)


def test_no_cards_means_one_emulated_card_per_l3_domain(tmp_path: Path) -> None:
    topo = detect(write_machine(tmp_path, Machine(sockets=2, cores_per_socket=16)))
    cards = plan(topo).cards
    assert [c.cores for c in cards] == [tuple(range(8 * i, 8 * i + 8)) for i in range(4)]
    assert {c.pci for c in cards} == {None} and [c.numa_node for c in cards] == [0, 0, 1, 1]
    assert all(set(c.cpus) == set(c.cores) | {x + 32 for x in c.cores} for c in cards)  # SMT siblings travel
    six = plan(topo, "emulate:6").cards  # 3 per node: one L3 each, the third floats
    assert [len(c.cores) for c in six] == [8, 8, 32, 8, 8, 32]


def test_more_cards_than_cores_and_bad_spec(trees: Path) -> None:
    topo = detect(build("r282-z93-8cards", trees))
    with pytest.raises(ApplianceError, match="only 32 physical cores"):
        plan(topo, "emulate:200")  # within the card bound (256), beyond the cores
    with pytest.raises(ApplianceError, match="emulate:N"):
        plan(topo, "many")


def test_yaml_map_reads_back_and_is_validated(trees: Path, tmp_path: Path) -> None:
    g292 = detect(build("g292-z43-16cards", trees))
    card_map = plan(g292)
    path = tmp_path / "map.yaml"
    path.write_text(render_yaml(card_map))
    assert load_card_map(path, g292).to_json_dict() == card_map.to_json_dict()
    r282 = detect(build("r282-z93-8cards", trees))
    with pytest.raises(ApplianceError, match="card 0 names CPUs 64-71,192-199 that this machine lacks"):
        load_card_map(path, r282)
    container = detect(build("container", trees))
    path.write_text(render_yaml(plan(r282)))
    with pytest.raises(ApplianceError, match="may not use"):
        load_card_map(path, container)
    path.write_text("version: 1\ncards: [{index: 0}]\n")
    with pytest.raises(ApplianceError, match="bad card entry"):
        load_card_map(path, r282)


def test_committed_maps_match_the_tool(trees: Path) -> None:
    spec = importlib.util.spec_from_file_location("regenerate", REPO / "topologies" / "regenerate.py")
    regenerate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regenerate)
    assert regenerate.stale_maps(trees) == []


def test_output_file_is_written_whole(trees: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "map.json"
    assert (
        main(
            [
                "topology",
                "detect",
                "--sysfs-root",
                str(build("r282-z93-8cards", trees)),
                "--format",
                "json",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["cards"][7]["cores"] == "28-31"
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"] and capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sysfs-root", "{tmp}"], "is not a filesystem root"),
        (["--hwloc-xml", "{tmp}/bad.xml"], "cannot read hwloc XML"),
        (["--sysfs-root", "{tree}", "--cards", "emulate:200"], "physical cores are available"),
    ],
)
def test_cli_errors_are_one_line_exit_2_and_write_nothing(args, message, trees, tmp_path, capsys) -> None:
    (tmp_path / "bad.xml").write_text("<topology")
    tree = build("r282-z93-8cards", trees)
    out = tmp_path / "out.yaml"
    argv = [a.format(tmp=tmp_path, tree=tree) for a in args]
    assert main(["topology", "detect", *argv, "--format", "yaml", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("appliance: error: ")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.xml"]


def test_help_explains_every_option_with_an_example(capsys) -> None:
    assert main(["topology", "detect", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--sysfs-root", "--hwloc-xml", "--cards", "--format", "--output"):
        assert option in text
    assert text.count("e.g.") >= 5
