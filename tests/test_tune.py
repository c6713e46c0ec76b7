"""`appliance tune`: a real (tiny) sweep on the session's data, its user.conf read by LoadGen, its record
used by a following `appliance run`, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import appliance

from harness.data import benchmarks
from harness.run import loadgen_settings


def _manifest(results, scenario="Offline"):
    runs = sorted((results).glob(f"*/resnet50/{scenario}/performance/run_*/manifest.json"))
    return json.loads(runs[-1].read_text())


@pytest.mark.slow
def test_tune_writes_user_conf_and_record_that_run_uses(data_dir, tmp_path, capsys):
    results = tmp_path / "r"
    run = ("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 500, "-q")
    # no record yet: auto falls back to onnxruntime and says so
    assert appliance(*run, "--backend", "auto") == 0
    fallback = _manifest(results)
    assert fallback["backend"] == "onnxruntime" and fallback["backend_choice"]["tuned"] is None
    assert "no tuned record" in fallback["backend_choice"]["why"]
    capsys.readouterr()

    try:
        assert appliance("tune", "--data-dir", data_dir, "-s", "Offline", "-s", "SingleStream", "--precisions", "fp32",
                         "--batch-sizes", "1,2", "--backends", "onnxruntime", "--json") == 0
        printed = json.loads(capsys.readouterr().out)
        path = data_dir / "tuned" / "resnet50.json"
        record = json.loads(path.read_text())
        assert record == printed and list(record["precisions"]) == ["fp32"]
        assert [(m["backend"], m["batch_size"]) for m in record["measured"]] == [("onnxruntime", 1), ("onnxruntime", 2)]
        assert all(m["samples_per_second"] > 0 and m["single_latency_ms"] > 0 for m in record["measured"])
        offline = record["chosen"]["Offline"]
        best = max(record["measured"], key=lambda m: m["samples_per_second"])
        assert offline["batch_size"] == best["batch_size"] and record["chosen"]["SingleStream"]["batch_size"] == 1

        conf = path.parent / record["user_conf"]
        keys = {line.split("=")[0].strip(): float(line.split("=")[1]) for line in conf.read_text().splitlines()
                if line and not line.startswith("#")}
        assert set(keys) == {"resnet50.Offline.target_qps", "resnet50.SingleStream.target_latency"}
        bench = benchmarks.get("resnet50")
        def read(scenario):  # what LoadGen takes from the file
            return loadgen_settings.test_settings(conf, bench, scenario, "performance")

        # values written as decimals and parsed back: equal to rounding, not bit for bit
        assert read("Offline").offline_expected_qps == pytest.approx(keys["resnet50.Offline.target_qps"])
        assert keys["resnet50.Offline.target_qps"] == pytest.approx(1.1 * best["samples_per_second"], abs=1e-3)
        assert read("SingleStream").single_stream_expected_latency_ns == \
            pytest.approx(keys["resnet50.SingleStream.target_latency"] * 1e6, abs=1)

        # --backend auto finds the record in the data dir; the run names it and uses its batch and user.conf
        assert appliance(*run, "--backend", "auto") == 0
        manifest = _manifest(results)
        assert manifest["backend"] == offline["backend"] and manifest["batch_size"] == offline["batch_size"]
        tuned = manifest["backend_choice"]["tuned"]
        assert tuned["file"] == str(path.resolve()) and tuned["user_conf"] == str(conf)
        run_dir = results.glob("*/resnet50/Offline/performance/run_2")
        assert f"resnet50.Offline.target_qps = {keys['resnet50.Offline.target_qps']}" in \
            (next(run_dir) / "user.conf").read_text()
        # an explicit --batch-size wins over the record, and the manifest says so
        assert appliance(*run, "--tuned", path, "--batch-size", 3) == 0
        manifest = _manifest(results)
        assert manifest["batch_size"] == 3 and "--batch-size given" in manifest["backend_choice"]["why"]
        # the record has no Server choice: one line, nothing run
        assert appliance(*run, "--tuned", path, "-s", "Server") == 2
        assert "has no Server choice" in capsys.readouterr().err
    finally:
        shutil.rmtree(data_dir / "tuned", ignore_errors=True)  # other tests' --backend auto stays the default


def test_tune_bad_input_one_line(data_dir, tmp_path, capsys):
    out = tmp_path / "t" / "rec.json"
    assert appliance("tune", "--data-dir", tmp_path / "empty", "-o", out, "-q") == 2
    err = capsys.readouterr().err
    assert "no fp32 model prepared" in err and len(err.strip().splitlines()) == 1
    assert appliance("tune", "--data-dir", data_dir, "--backends", "nosuch", "-o", out, "-q") == 2
    assert "nosuch not available here" in capsys.readouterr().err
    assert appliance("tune", "--data-dir", data_dir, "--batch-sizes", "0,x", "-o", out) == 2
    assert "--batch-sizes" in capsys.readouterr().err
    assert appliance("tune", "-b", "ssd-mobilenet", "-s", "Server", "--data-dir", data_dir, "-o", out) == 2
    assert "no Server scenario" in capsys.readouterr().err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a record"}')
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--tuned", bad, "-q") == 2
    assert "is not an `appliance tune` record" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("run_*"))


def test_tune_prints_each_result_once(data_dir, tmp_path, capsys):
    """The sweep used to echo a line per configuration and then the summary table with the same rows."""
    out = tmp_path / "rec.json"
    assert appliance("tune", "--data-dir", data_dir, "-s", "Offline", "--batch-sizes", "1,2", "--precisions", "fp32",
                     "--backends", "onnxruntime", "-o", out, "-q") == 0
    printed = capsys.readouterr().out.splitlines()
    rows = [line for line in printed if line.startswith("onnxruntime")]
    assert [row.split()[:2] for row in rows] == [["onnxruntime", "1"], ["onnxruntime", "2"]], printed
    assert sum("Offline" in line and "->" in line for line in printed) == 1


def test_server_choice_is_what_an_ideal_queue_sustains():
    """Server takes the candidate whose own latency lets the most QPS through the bound, not the fastest:
    figures as tune measured them on a 2-vCPU VM (int8 ResNet50, openvino)."""
    from harness.core.scenarios import Scenario
    from harness.tune.search import Measured, choose, server_qps, user_conf_text

    bench = benchmarks.get("resnet50")

    def row(batch: int, requests: int, sps: float, latency_ms: float) -> Measured:
        return Measured("int8", "openvino", batch, requests, sps, latency_ms, latency_ms, latency_ms, 1,
                        server_qps(bench, batch, latency_ms / 1000, requests, sps))

    fast, half, quick = row(8, 4, 460.3, 67.2), row(2, 1, 352.0, 5.64), row(1, 2, 285.7, 5.97)
    assert fast.server_qps == 0.0 and 0 < (half.server_qps or 0) < (quick.server_qps or 0) < quick.samples_per_second
    best, why = choose(bench, Scenario.SERVER, [fast, half, quick])
    assert best is quick and "ideal queue" in why
    target = float(user_conf_text(bench, {Scenario.SERVER: (best, why)}).splitlines()[-1].split("=")[1])
    assert target <= (quick.server_qps or 0) + 1e-6  # the user.conf asks for no more than that
    best, why = choose(bench, Scenario.SERVER, [fast, row(8, 1, 420.0, 18.7)])
    assert best.batch_latency_ms == 18.7 and "cannot meet" in why
    # no candidate meets the bound (ideal queue 0): the user.conf still asks LoadGen for a positive target
    # (0.0 is refused as LoadGen would replace it), and its comment says the bound cannot be met
    text = user_conf_text(bench, {Scenario.SERVER: (best, why)})
    assert best.server_qps == 0.0 and float(text.splitlines()[-1].split("=")[1]) > 0
    assert "not even an ideal queue keeps p99 within the bound" in text
