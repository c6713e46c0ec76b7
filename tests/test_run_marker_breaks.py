"""Issue 41, run folders by their own marker: a folder is a run's by what the appliance and LoadGen write there
(LoadGen's logs, INCOMPLETE.txt, our staging names, a manifest.json that is ours), never by a file name others
use (a web app's manifest.json in a parent folder) or a folder's name (`run_3`). Each break as the trial ran it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import appliance, linked_copy

from harness.core.outbound import run_folder

RUN = ["run", "--backend", "null", "-q", "--duration-ms", "300"]


@pytest.fixture
def webapp(tmp_path: Path) -> Path:
    """A web app's folder: its own manifest.json (https://developer.mozilla.org/docs/Web/Manifest)."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "manifest.json").write_text(json.dumps({"name": "My App", "start_url": "."}) + "\n")
    return app


def test_run_and_report_write_below_a_web_apps_manifest(webapp: Path, data_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Any parent folder holding a `manifest.json` was taken for a run folder: `run --results`, `report -o`
    refused."""
    assert appliance(*RUN, "--data-dir", data_dir, "--results", webapp / "results") == 0, capsys.readouterr().err
    assert appliance("report", webapp / "results", "-o", webapp / "report.html") == 0, capsys.readouterr().err
    assert (webapp / "report.html").is_file()


@pytest.mark.parametrize("name", ["run_3", "run_2.incomplete", "TEST04.incomplete"])
def test_a_users_folder_named_like_a_run_is_written_into(name: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A user's folder named `run_3` was refused for `topology detect -o`."""
    out = tmp_path / name / "map.json"
    assert appliance("topology", "detect", "--format", "json", "-o", out) == 0, capsys.readouterr().err
    assert json.loads(out.read_text())


def test_prepare_into_a_folder_named_run_2(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`prepare --data-dir run_2/data` was refused for the folder's name."""
    local = linked_copy(data_dir, tmp_path / "run_2" / "data")
    assert appliance("prepare", "--data-dir", local, "--samples", 48, "-q") == 0, capsys.readouterr().err


def test_a_run_folder_is_still_known_by_what_is_written_there(webapp: Path, tmp_path: Path) -> None:
    assert run_folder(webapp) is None and run_folder(tmp_path / "run_3" / "x") is None
    for marker in ("mlperf_log_detail.txt", "INCOMPLETE.txt"):
        folder = tmp_path / marker.split(".")[0]
        folder.mkdir()
        (folder / marker).write_text("x\n")
        assert run_folder(folder / "sub") == folder
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "manifest.json").write_text(json.dumps({"appliance": {}, "benchmark": "resnet50"}, indent=2,
                                                   sort_keys=True))
    assert run_folder(ours) == ours
    assert run_folder(tmp_path / ".run_1.staging-123") == tmp_path / ".run_1.staging-123"
    shutil.rmtree(ours)
