"""A run of --duration-ms D spends close to D in LoadGen, and the default Server target is one the card set
sustains: real short LoadGen runs on the CPU card, two CPU-emulated cards and 16 simulated cards.

A short run's Offline target puts it at 1.65 D when the card set runs at its calibrated rate
(loadgen_settings.SHORT_OFFLINE_TARGET_PER_RATE): VALID unless the set turns 1.65x faster than its probes
measured, and within [D, 4 D] unless it turns 2.4x slower, which a load of 4 on 2 cores arriving between
probe and run does not do. The window still catches what it is for: runs sized from a nominal rate 7x too
high, or from a sample minimum that stretches a 3 s run to minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import appliance

from harness.data import benchmarks
from harness.records import detail_log
from harness.run import loadgen_settings
from harness.run.calibration import describe_estimate, estimate_seconds
from harness.run.loadgen_settings import Calibration, Requested, effective_user_conf

D_MS = 3000


def loadgen_seconds(detail: Path) -> float:
    """The time LoadGen ran, from the detail log's own timestamps (its last record)."""
    last = 0.0
    for line in detail.read_text().splitlines():
        if line.startswith(":::MLLOG"):
            last = max(last, float(json.loads(line[len(":::MLLOG"):])["time_ms"]))
    return last / 1000


def _run(data_dir: Path, results: Path, scenario: str, cards: str) -> tuple[Path, str]:
    rc = appliance("run", "--data-dir", data_dir, "--results", results, "-s", scenario, "--cards", cards,
                   "--duration-ms", D_MS, "-q")
    assert rc == 0
    runs = sorted(results.glob(f"*/resnet50/{scenario}/performance/run_1"))
    assert len(runs) == 1
    return runs[0], (runs[0] / "user.conf").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("cards", ["auto", "emulate:2", "simulate:cloud-ai-100:16"])
def test_offline_run_lasts_close_to_its_duration(cards, data_dir, tmp_path, capsys):
    run, conf = _run(data_dir, tmp_path, "Offline", cards)
    out = capsys.readouterr().out
    detail = detail_log.values(run / "mlperf_log_detail.txt")
    seconds = loadgen_seconds(run / "mlperf_log_detail.txt")
    assert detail["result_validity"] == "VALID", detail.get("result_invalid_reason")
    assert D_MS / 1000 <= seconds <= 4 * D_MS / 1000, (seconds, conf)
    assert "calibrated rate x 1.5 (a short run: wider margin)" in conf and "LoadGen Offline probe" in conf
    # the estimate printed before LoadGen started: 1.1 x 1.5 x D at the calibrated rate
    line = next(x for x in out.splitlines() if x.startswith("LoadGen will run about"))
    assert 1.6 * D_MS / 1000 <= float(line.split()[4]) <= 1.7 * D_MS / 1000, line


@pytest.mark.slow
def test_sixteen_simulated_cards_server_default_target_is_what_the_harness_completes(data_dir, tmp_path, capsys):
    """docs/run.md: `appliance run --cards simulate:cloud-ai-100:16 -s Server` (shortened); its target used to
    be half the cards' nominal sum, six times what the harness completes, and the run ended INVALID. The verdict
    here is the rate (completed >= 0.9 x target; the old target completed 0.17 of it), not LoadGen's VALID: 16 card
    threads' p99 against the 15 ms bound is the 2-core machine's scheduling, which a busy CI machine can break (it
    did: INVALID at 6,005 of a 5,937 samples/s target, the rate kept)."""
    run, _ = _run(data_dir, tmp_path, "Server", "simulate:cloud-ai-100:16")
    detail = detail_log.values(run / "mlperf_log_detail.txt")
    nominal = 16 * 22667
    assert detail["effective_target_qps"] < 0.5 * nominal / 2  # the measured rate, not the nominal sum
    assert detail["result_completed_samples_per_sec"] >= 0.9 * detail["effective_target_qps"]
    assert D_MS / 1000 <= loadgen_seconds(run / "mlperf_log_detail.txt") <= 2 * D_MS / 1000
    assert "calibrated rate x 0.3 (a short run: wider margin)" in (run / "user.conf").read_text()
    capsys.readouterr()


def test_full_length_runs_say_so_up_front(tmp_path):
    """Without --duration-ms a run takes the round's 600 s minimum; the line printed before it says so."""
    bench = benchmarks.get("resnet50")
    conf = tmp_path / "user.conf"
    for scenario, rate in (("Offline", 40.0), ("Offline", 40_000.0), ("Server", None), ("SingleStream", None)):
        cal = None if rate is None else Calibration(rate, 1000 / rate, 8000 / rate, method="test")
        conf.write_text(effective_user_conf(bench, Requested(scenario, "performance"), cal, 48, 1))
        settings = loadgen_settings.test_settings(conf, bench, scenario, "performance")
        seconds = estimate_seconds(settings, scenario, rate)
        line = describe_estimate(seconds, settings.min_duration_ms, rate)
        assert seconds >= 600 and line.startswith("full-length run: 600 s minimum, about "), line
        assert int(line.split("about ")[1].split()[0]) == -(-seconds // 60)
    # the round's samples-per-query rule is kept: at 30 samples/s LoadGen's 1.1 x 600 s x 30 = 19,800 is
    # below the round's 24,576-sample minimum, so the run takes 24,576 / 30 = 819 s
    conf.write_text(effective_user_conf(bench, Requested("Offline", "performance", target_qps=30), None, 48, 1))
    settings = loadgen_settings.test_settings(conf, bench, "Offline", "performance")
    assert settings.min_query_count == 24576
    assert 815 <= estimate_seconds(settings, "Offline", 30.0) <= 823
