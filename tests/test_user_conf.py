"""user.conf problems are one line naming the user's own file and line, before any card starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import appliance

from harness.core.errors import ApplianceError
from harness.data import benchmarks
from harness.run import loadgen_settings
from harness.run.loadgen_settings import Calibration, Requested, effective_user_conf, known_keys, read_user_conf


def _run_with(conf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    results = tmp_path / "results"
    rc = appliance("run", "--data-dir", tmp_path / "data", "--results", results, "--user-conf", conf,
                   "--duration-ms", 500, "-q")
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "internal error" not in err and ".staging" not in err, err
    assert not results.exists() or not list(results.rglob("run_*"))
    return err


@pytest.mark.parametrize(("body", "line", "says"), [
    ("# mine\nresnet50.Offline.target_qps 100\n", 2, "expected 'model.scenario.key = value'"),
    ("resnet50.Offline.min_duration = 500\nresnet50.Offlin.target_qps = 5\n", 2, "unknown scenario 'Offlin'"),
    ("resnet50.Offline.target_qsp = 5\n", 1, "LoadGen does not know the key 'target_qsp'"),
    ("\n\nresnet50.Server.target_qps =\n", 3, "an empty value"),
    ("resnet50.Server.target_qps = fast\n", 1, "the value 'fast' is not a number"),
])
def test_bad_line_names_the_users_file_and_line(body, line, says, tmp_path, capsys):
    conf = tmp_path / "my.conf"
    conf.write_text(body)
    err = _run_with(conf, tmp_path, capsys)
    assert f"{conf}, line {line}" in err and says in err, err
    if "does not know" in err:
        assert "target_qps" in err and "min_duration" in err  # the list of known keys


def test_binary_garbage_is_one_line(tmp_path, capsys):
    conf = tmp_path / "random.conf"
    conf.write_bytes(b"\xff\xfe" + os.urandom(256))
    assert "is not a text file" in _run_with(conf, tmp_path, capsys)


@pytest.mark.parametrize("bench", benchmarks.NAMES)
@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream", "MultiStream"])
def test_every_file_the_appliance_writes_passes_the_check(bench, scenario, tmp_path):
    """The derived user.conf (saved with each run, re-read by `reproduce`) uses only known keys, and
    LoadGen reads what the check accepts."""
    b = benchmarks.get(bench)
    if scenario == "Server" and b.server_latency_ms is None:
        pytest.skip("edge benchmark")
    req = Requested(scenario, "performance", duration_ms=1000, count=4, target_qps=3)
    conf = tmp_path / "user.conf"
    conf.write_text(effective_user_conf(b, req, Calibration(50.0, 20.0, 160.0), 8, 2))
    assert read_user_conf(conf) == conf.read_text()
    settings = loadgen_settings.test_settings(conf, b, scenario, "performance")
    assert settings.min_duration_ms == 1000


def test_known_keys_hold_the_rounds_mlperf_conf_keys():
    assert {"target_qps", "min_duration", "performance_sample_count_override", "target_latency"} <= known_keys()
    assert "target_qsp" not in known_keys()
    with pytest.raises(ApplianceError, match="cannot read"):
        read_user_conf(Path("/nonexistent/user.conf"))
