"""A card that fails mid-run: its samples run on the other cards, or the run ends INVALID in one line."""

from __future__ import annotations

import json

from helpers import appliance


def test_failed_card_samples_go_to_the_other_card(data_dir, tmp_path, capsys):
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--cards", "simulate:cloud-ai-100-failing:2",
                   "--duration-ms", 300, "-q")
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    run = next(tmp_path.glob("*SIMULATED*/resnet50/Offline/performance/run_1"))
    manifest = json.loads((run / "manifest.json").read_text())
    failures = manifest["dispatch"]["card_failures"]
    assert len(failures) == 1 and failures[0].startswith("card 0 (SIMULATED") and "injected failure" in failures[0]
    assert manifest["result"]["valid"] is True  # every sample was answered by card 1
    assert "re-dispatched" in captured.out and "SIMULATED" in captured.out


def test_last_card_failing_ends_run_invalid_in_one_line(data_dir, tmp_path, capsys):
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--cards", "simulate:cloud-ai-100-failing:1",
                   "--duration-ms", 300, "-q")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and "every card failed" in err[0] and "INVALID" in err[0], err
    incomplete = next(tmp_path.glob("*/resnet50/Offline/performance/run_1.incomplete"))
    assert "injected failure" in (incomplete / "INCOMPLETE.txt").read_text()


def test_failing_card_in_server_scenario(data_dir, tmp_path, capsys):
    rc = appliance("run", "-s", "Server", "--data-dir", data_dir, "--results", tmp_path, "--cards",
                   "simulate:cloud-ai-100-failing:2", "--duration-ms", 500, "--target-qps", 400, "-q")
    assert rc == 0, capsys.readouterr().err
    run = next(tmp_path.glob("*SIMULATED*/resnet50/Server/performance/run_1"))
    assert len(json.loads((run / "manifest.json").read_text())["dispatch"]["card_failures"]) == 1
