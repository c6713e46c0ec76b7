"""`submission build` on an ordinary results folder: one system folder per card setup/backend, failed ones."""

from __future__ import annotations

import shutil

from helpers import appliance
from test_submission_tree import shared_runs


def test_results_with_several_systems_and_a_failed_one(data_dir, tmp_path_factory, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), results)
    shutil.copytree(results / "box", results / "box-4cards")                   # another card setup
    (results / "cuda" / "resnet50" / "Offline" / "performance").mkdir(parents=True)  # a failed backend: empty
    args = ("submission", "build", "--submitter", "Org", "--system", "edge1", results)

    assert appliance(*args, "-o", tmp_path / "a") == 2
    err = capsys.readouterr().err
    assert "runs come from 2 system folders" in err and "box (" in err and "box-4cards (" in err
    assert "--system-dir NAME" in err and "cuda" not in err.split("system folders")[1].split(";")[0]
    assert not (tmp_path / "a").exists()

    assert appliance(*args, "--system-dir", "box", "-o", tmp_path / "b") == 0
    out = capsys.readouterr().out
    assert "skipped box-4cards: another system than --system-dir box" in out
    assert "skipped cuda: no complete run in it (empty or failed runs only)" in out
    assert (tmp_path / "b" / "closed" / "Org" / "results" / "edge1" / "resnet50" / "Offline").is_dir()
    assert "-b resnet50 -s Offline --mode TEST01" in out and "--backend null" in out


def test_missing_run_hint_keeps_every_recorded_flag(data_dir, tmp_path_factory, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), results)
    for acc in (results / "box" / "resnet50" / "Offline").glob("accuracy*"):
        shutil.rmtree(acc)
    assert appliance("submission", "build", "--submitter", "Org", "--system", "e", results, "-o", tmp_path / "o") == 2
    err = capsys.readouterr().err
    hint = next(line for line in err.splitlines() if "Offline: no complete accuracy run" in line)
    for flag in ("-b resnet50", "-s Offline", "--mode accuracy", "--backend null", "--system box",
                 "--duration-ms 300"):
        assert flag in hint, hint
