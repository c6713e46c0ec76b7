"""Infer requests per card as a run setting and a tuned choice: `appliance tune --requests` times each
candidate with that many batches in flight (real OpenVINO sessions on the session's tiny model), `run
--tuned` carries the choice to the cards, and bad combinations or old records are refused in one line."""

from __future__ import annotations

import json

import pytest
from helpers import appliance
from test_async_cards import CPUS, SHAPES, _profile, _sut

from harness.run.cards.simulated_card import PipelinedSimulatedCard


def _manifest(results):
    runs = sorted(results.glob("*/resnet50/Offline/performance/run_*/manifest.json"))
    return json.loads(runs[-1].read_text())


def test_time_under_load_gives_the_rate_and_the_latency_of_a_full_card(data_dir):
    """A pipelined card holding 4 batches (a batch every 10 ms, 40 ms through it): kept full, its rate
    is a batch per 10 ms while each batch takes the 40 ms of its place in the pipeline, not one or the other."""
    card = PipelinedSimulatedCard(0, _profile(sps=800, activations=4), SHAPES, (CPUS[0],))
    sut = _sut(data_dir, [card])
    sut.load_cards()
    try:
        sut.warm_up(timed=False)
        ((per_batch, latency),) = sut.time_under_load().cards
    finally:
        sut.stop()
    alone = 4 * 8 / 800
    assert 8 / 800 * 0.9 < per_batch < alone / 2, per_batch
    assert latency > alone * 0.9, latency  # a batch waits behind the card's other three


@pytest.mark.slow
def test_tune_times_requests_per_card_and_run_uses_the_choice(data_dir, tmp_path, capsys):
    pytest.importorskip("openvino")
    record_path = tmp_path / "t" / "resnet50.json"
    assert appliance("tune", "--data-dir", data_dir, "-s", "Offline", "-s", "Server", "--backends", "openvino",
                     "--batch-sizes", 2, "--requests", "1,2", "--precisions", "fp32", "-o", record_path,
                     "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads(record_path.read_text()) and record["format"] == 4
    rows = record["measured"]
    assert [(m["backend"], m["batch_size"], m["requests"]) for m in rows] == [("openvino", 2, 1), ("openvino", 2, 2)]
    assert all(m["samples_per_second"] > 0 and m["batch_latency_ms"] > 0 for m in rows)
    offline = record["chosen"]["Offline"]
    best = max(rows, key=lambda m: m["samples_per_second"])
    assert (offline["batch_size"], offline["requests"]) == (best["batch_size"], best["requests"])
    assert record["chosen"]["Server"]["requests"] in (1, 2)
    conf = (record_path.parent / record["user_conf"]).read_text()
    assert (f"# Offline: openvino, batch 2, {offline['requests']} infer request(s) per card, --cards auto "
            f"(1 card(s)):") in conf

    # the table shows the requests column, one row per candidate
    assert appliance("tune", "--data-dir", data_dir, "-s", "Offline", "--backends", "onnxruntime,openvino",
                     "--batch-sizes", 2, "--requests", "2", "--precisions", "fp32", "-o", record_path, "-q") == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:3] == ["backend", "batch", "requests"], printed
    assert [line.split()[:3] for line in printed[1:3]] == [["onnxruntime", "2", "1"], ["openvino", "2", "2"]]

    # the tuned requests reach the cards: --tuned with openvino given takes its one row's (2 requests) ...
    results = tmp_path / "r"
    run = ("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 300, "--count", 16, "-q")
    assert appliance(*run, "--tuned", record_path, "--backend", "openvino") == 0
    manifest = _manifest(results)
    assert manifest["requests_per_card"] == 2 and manifest["backend_choice"]["requests"] == 2
    assert [(c["infer_requests"], c["batches_in_flight"]) for c in manifest["cards"]] == [(2, 2)]
    # ... and an explicit --requests wins over the record, and the manifest says so
    assert appliance(*run, "--tuned", record_path, "--backend", "openvino", "--requests", 1) == 0
    manifest = _manifest(results)
    assert manifest["requests_per_card"] == 1 and "--requests given" in manifest["backend_choice"]["why"]
    assert [c["batches_in_flight"] for c in manifest["cards"]] == [1]


@pytest.mark.slow
def test_run_tuned_uses_the_chosen_requests(data_dir, tmp_path, capsys):
    """--tuned alone (the backend, batch and requests the record chose): the only candidate, 2 requests."""
    pytest.importorskip("openvino")
    record_path = tmp_path / "rec.json"
    assert appliance("tune", "--data-dir", data_dir, "-s", "Offline", "--backends", "openvino", "--batch-sizes", 2,
                     "--requests", 2, "--precisions", "fp32", "-o", record_path, "-q") == 0
    assert json.loads(record_path.read_text())["chosen"]["Offline"]["requests"] == 2
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 300, "--count", 16,
                     "--tuned", record_path, "-q") == 0
    manifest = _manifest(results)
    assert manifest["backend"] == "openvino" and manifest["requests_per_card"] == 2
    assert [c["batches_in_flight"] for c in manifest["cards"]] == [2] and manifest["cards"][0]["num_streams"] == 2


def test_requests_with_another_backend_refused_in_one_line(data_dir, tmp_path, capsys):
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--backend", "onnxruntime",
                     "--requests", 2, "-q") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--requests 2 is for --backend openvino" in err[0], err
    assert not results.exists() or not list(results.rglob("run_*"))


def test_format_1_tuned_record_refused_in_one_line(data_dir, tmp_path, capsys):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({
        "format": 1, "benchmark": "resnet50", "precision": "fp32", "cards": "auto", "created_utc": "2026-01-01",
        "host": {}, "method": "runner.calibrate", "user_conf": "old.user.conf",
        "measured": [{"backend": "onnxruntime", "batch_size": 8, "samples_per_second": 10.0}],
        "chosen": {"Offline": {"backend": "onnxruntime", "batch_size": 8, "why": "highest throughput"}}}))
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", old, "-q") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "format-1 tune record" in err[0] and "rerun `appliance tune`" in err[0], err
    assert not results.exists() or not list(results.rglob("run_*"))
