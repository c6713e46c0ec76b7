"""Scenario and mode are enums inside, the same strings outside: CLI spellings, JSON, folder names."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict

import pytest
from helpers import appliance
from submission_fixtures import make_tree, mllog, perf_values

from harness.audit.reproduce import find_targets
from harness.audit.submission.check import check_tree
from harness.core.errors import ApplianceError
from harness.core.scenarios import Mode, Scenario
from harness.run.loadgen_settings import Requested


def test_text_becomes_enums_that_still_read_as_the_same_strings():
    req = Requested("SingleStream", "accuracy")
    assert req.scenario is Scenario.SINGLE_STREAM and req.mode is Mode.ACCURACY
    assert req.scenario == "SingleStream" and f"{req.scenario}/{req.mode}" == "SingleStream/accuracy"
    assert json.loads(json.dumps(asdict(req)))["scenario"] == "SingleStream"  # manifest.json's `requested`
    assert Requested(Scenario.SERVER, Mode.PERFORMANCE) == Requested("Server", "performance")


@pytest.mark.parametrize(("scenario", "mode", "says"), [
    ("Ofline", "performance", "unknown scenario 'Ofline'; choose one of: Offline, Server, SingleStream, MultiStream"),
    ("offline", "performance", "unknown scenario 'offline'"),  # the CLI's spelling is the LoadGen name
    ("Offline", "TEST01", "unknown mode 'TEST01'; choose one of: performance, accuracy"),
])
def test_unknown_text_is_one_line_naming_the_choices(scenario, mode, says):
    with pytest.raises(ApplianceError) as err:
        Requested(scenario, mode)
    assert str(err.value) == says or str(err.value).startswith(says), err.value
    assert "\n" not in str(err.value)


def test_cli_spellings_unchanged(capsys):
    assert appliance("run", "--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "[Offline|Server|SingleStream|MultiStream]" in text
    assert "[performance|accuracy|TEST01|TEST04|TEST05]" in text
    assert appliance("run", "-s", "OFFLINE", "--data-dir", "/nonexistent") == 2  # click: not a choice
    assert "'OFFLINE' is not one of 'Offline', 'Server', 'SingleStream', 'MultiStream'" in \
        " ".join(capsys.readouterr().err.split())


def test_readers_of_other_trees_report_unknown_scenarios_and_never_raise(tmp_path):
    sub = make_tree(tmp_path, "v5.1")
    bench = sub / "results" / "sys1" / "resnet50"
    shutil.copytree(bench / "Offline", bench / "Offlin")                 # a misspelt scenario folder
    logged = perf_values("v5.1", "resnet", "Offline") | {"effective_scenario": "Bogus"}
    (bench / "SingleStream" / "performance" / "run_1" / "mlperf_log_detail.txt").write_text(mllog(logged))
    problems = "\n".join(check_tree(tmp_path).problems)
    assert "resnet50/Offlin: unknown scenario folder (known: SingleStream, MultiStream, Server, Offline" in problems
    assert "scenario Bogus logged, in a SingleStream folder" in problems
    targets = find_targets(tmp_path)                                      # reproduce: only known folders
    assert sorted(t.scenario for t in targets) == ["MultiStream", "Offline", "SingleStream"]
    assert all(isinstance(t.scenario, Scenario) for t in targets)
