"""Issue 41, round 6 (tools/hostile_round.py): the breaks it found that are fixed, each the round's command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import appliance


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return err.strip().splitlines()[-1]


def test_fleet_node_map_a_dangling_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was `internal error: FileNotFoundError`."""
    (tmp_path / "n.txt").symlink_to("nowhere")
    assert appliance("fleet", tmp_path, "--node-map", tmp_path / "n.txt") == 2
    assert _line(capsys) == f"appliance: error: node map {tmp_path}/n.txt is a link to nothing, not a regular file"


def test_fleet_node_map_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty node map was taken as a map of no node: exit 0."""
    (tmp_path / "n.txt").write_text("# no node yet\n")
    assert appliance("fleet", tmp_path, "--node-map", tmp_path / "n.txt") == 2
    assert f"node map {tmp_path}/n.txt names no node" in _line(capsys)


def test_topology_show_of_a_fifo_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO named as the map was "no card map …", as if nothing were there."""
    os.mkfifo(tmp_path / "m.yaml")
    assert appliance("topology", "show", tmp_path / "m.yaml") == 2
    line = _line(capsys)
    assert f"card map {tmp_path}/m.yaml is a FIFO (named pipe), not a regular file" in line, line


def test_a_card_map_without_a_key_names_it_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A version-1 map without its l3_domains said only "…: 'l3_domains'"."""
    (tmp_path / "m.yaml").write_text("version: 1\ncards: []\n")
    assert appliance("topology", "show", tmp_path / "m.yaml") == 2
    assert _line(capsys).endswith(f"cannot read card map {tmp_path}/m.yaml: its key 'l3_domains' is missing")


def test_fleet_threshold_nan_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fleet --threshold nan` passed click's range (nan compares false) and flagged no node: exit 0."""
    assert appliance("fleet", tmp_path, "--threshold", "nan") == 2
    assert "'nan' is not a finite number" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["x" * 5000, "9" * 30])
def test_a_system_override_longer_than_any_published_is_refused(value: str, tmp_path: Path) -> None:
    """`--system-overrides` with a 5,000-character value was published in the system JSON, exit 0."""
    from harness.audit.submission.system_json import load_overrides
    from harness.core.errors import DataError

    (tmp_path / "o.yaml").write_text(f"host_processor_core_count: {value}\n")
    with pytest.raises(DataError, match="host_processor_core_count longer than 1000 characters") as err:
        load_overrides(tmp_path / "o.yaml")
    assert "\n" not in str(err.value)


def _tree(root: Path) -> Path:
    """The layout `submission build` makes (and every published round has): <division>/<submitter>/{systems,results}."""
    for part in ("systems", "results"):
        (root / "sub/closed/Org" / part).mkdir(parents=True)
    return root / "sub"


def test_a_run_aimed_into_a_submission_tree_is_refused(data_dir: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`run --results sub/closed/r` wrote a run into a tree for publication, exit 0 (round 6, break 7)."""
    sub = _tree(tmp_path)
    before = sorted(sub.rglob("*"))
    assert appliance("run", "--backend", "null", "--duration-ms", 300, "--data-dir", data_dir,
                     "--results", sub / "closed/r") == 2
    line = _line(capsys)
    assert f"lies in the submission tree {sub}, whose files are published" in line, line
    assert sorted(sub.rglob("*")) == before


def test_a_data_dir_aimed_into_a_submission_tree_is_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`prepare --data-dir sub/closed/Org/data` started building a 100 MB model inside the tree (break 8)."""
    sub = _tree(tmp_path)
    before = sorted(sub.rglob("*"))
    assert appliance("prepare", "--data-dir", sub / "closed/Org/data", "--samples", 8, "-q") == 2
    assert f"lies in the submission tree {sub}, whose files are published" in _line(capsys)
    assert sorted(sub.rglob("*")) == before
