"""`appliance tune` over precisions: fp32 and int8 timed with real sessions, a precision chosen only if its
model meets the benchmark's accuracy target as prepare recorded it, `run --tuned` / `--backend auto`
running the chosen precision unless `--precision` is given, and stale or old records refused in one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import appliance, linked_copy

from harness.data import benchmarks
from harness.records import model_record
from harness.records.model_record import eligibility
from harness.tune.search import prepared_precisions

SWEEP = ("-s", "Offline", "-s", "Server", "--backends", "onnxruntime", "--batch-sizes", 2)


def _manifest(results: Path) -> dict:
    runs = sorted(results.glob("*/resnet50/Offline/performance/run_*/manifest.json"),
                  key=lambda p: int(p.parent.name.split("_")[1]))
    return json.loads(runs[-1].read_text())


def _model(data: Path, precision: str) -> dict:
    return json.loads((data / "models" / ("resnet50.json" if precision == "fp32" else
                                          f"resnet50-{precision}.json")).read_text())


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.slow
def test_tune_chooses_an_eligible_precision_and_run_uses_it(int8_data_dir, tmp_path, capsys):
    data = int8_data_dir
    assert prepared_precisions(data, "resnet50") == ("fp32", "int8")  # the default sweep: every prepared one
    assert appliance("tune", "--data-dir", data, *SWEEP, "--json") == 0
    path = data / "tuned" / "resnet50.json"
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads(path.read_text()) and record["format"] == 4
    rows = record["measured"]
    assert [(m["precision"], m["backend"], m["batch_size"]) for m in rows] == \
        [("fp32", "onnxruntime", 2), ("int8", "onnxruntime", 2)]
    assert all(m["samples_per_second"] > 0 and m["batch_latency_ms"] > 0 for m in rows)
    agreement = _model(data, "int8")["quantization"]["agreement_top1_pct"]
    assert agreement >= 99.0  # the prepared int8 model meets resnet50's target (tests/test_int8.py)
    assert {p: e["eligible"] for p, e in record["precisions"].items()} == {"fp32": True, "int8": True}
    assert f"top-1 agreement with FP32 {agreement:.2f}% >= the 99% resnet50 must reach" == \
        record["precisions"]["int8"]["why"]
    assert record["precisions"]["int8"]["model_sha256"] == _model(data, "int8")["sha256"]
    offline = record["chosen"]["Offline"]
    fastest = max(rows, key=lambda m: m["samples_per_second"])
    assert offline["precision"] == fastest["precision"] and offline["why"].startswith(f"{fastest['precision']} (")
    assert record["chosen"]["Server"]["precision"] in ("fp32", "int8")
    assert {p: set(per) for p, per in record["by_precision"].items()} == {"fp32": {"Offline", "Server"},
                                                                          "int8": {"Offline", "Server"}}
    conf = (path.parent / record["user_conf"]).read_text()
    assert (f"# Offline: onnxruntime, batch 2, 1 infer request(s) per card, --cards auto (1 card(s)): "
            f"{offline['precision']} (") in conf

    # --backend auto finds the record and runs the chosen precision's model
    results = tmp_path / "r"
    run = ("run", "--data-dir", data, "--results", results, "--duration-ms", 300, "--count", 16, "-q")
    assert appliance(*run, "--backend", "auto") == 0
    manifest = _manifest(results)
    chosen = offline["precision"]
    assert manifest["precision"] == chosen and manifest["backend_choice"]["precision"] == chosen
    assert manifest["model"]["sha256"] == _model(data, chosen)["sha256"]
    assert Path(manifest["model"]["path"]) == (data / _model(data, chosen)["path"]).resolve()
    assert manifest["backend_choice"]["tuned"]["file"] == str(path.resolve())

    # an explicit --precision wins: the record's best candidate at that precision, not its user.conf
    other = "int8" if chosen == "fp32" else "fp32"
    assert appliance(*run, "--backend", "auto", "--precision", other) == 0
    manifest = _manifest(results)
    assert manifest["precision"] == other and manifest["backend_choice"]["precision"] == other
    assert manifest["model"]["sha256"] == _model(data, other)["sha256"]
    assert f"--precision {other} given (the record chose {chosen})" in manifest["backend_choice"]["why"]
    assert manifest["backend_choice"]["tuned"]["user_conf"] is None

    # the record's precision no longer prepared, or prepared again: one line, nothing run
    gone = linked_copy(data, tmp_path / "gone")
    (gone / "models" / "resnet50-int8.json").unlink()
    assert appliance(*run[:1], "--data-dir", gone, "--results", tmp_path / "r2", "--tuned", path,
                     "--precision", "int8", "-q") == 2
    line = _one_line(capsys)
    assert "no int8 model is prepared for resnet50" in line and "--precision int8`, or `appliance tune` again" in line
    fp32 = model_record.read(gone / "models" / "resnet50.json")
    model_record.write(gone / "models" / "resnet50.json", dataclasses.replace(fp32, sha256="0" * 64))
    assert appliance(*run[:1], "--data-dir", gone, "--results", tmp_path / "r2", "--tuned", path,
                     "--precision", "fp32", "-q") == 2
    assert "fp32 model in" in (line := _one_line(capsys)) and "was prepared again" in line, line
    assert not (tmp_path / "r2").exists() or not list((tmp_path / "r2").rglob("run_*"))


@pytest.mark.slow
def test_int8_below_the_accuracy_target_is_measured_but_never_chosen(int8_data_dir, tmp_path, capsys):
    data = linked_copy(int8_data_dir, tmp_path / "data")
    where = data / "models" / "resnet50-int8.json"
    int8 = model_record.read(where)  # as if prepare had measured 90% agreement (written by its one writer)
    assert int8.quantization is not None
    model_record.write(where, dataclasses.replace(int8, quantization={**int8.quantization,
                                                                      "agreement_top1_pct": 90.0}))
    assert appliance("tune", "--data-dir", data, *SWEEP, "--precisions", "fp32,int8", "-q") == 0
    printed = capsys.readouterr().out
    reason = "top-1 agreement with FP32 90.00% < the 99% resnet50 must reach"
    assert f"{'int8':12s} NOT ELIGIBLE: {reason}" in printed.splitlines(), printed
    record = json.loads((data / "tuned" / "resnet50.json").read_text())
    assert {m["precision"] for m in record["measured"]} == {"fp32", "int8"}  # measured and shown all the same
    assert record["precisions"]["int8"] == {"model_sha256": int8.sha256, "eligible": False, "why": reason}
    assert {s: c["precision"] for s, c in record["chosen"].items()} == {"Offline": "fp32", "Server": "fp32"}
    assert all(f"int8 not considered: {reason}" in c["why"] for c in record["chosen"].values())
    assert set(record["by_precision"]["int8"]) == {"Offline", "Server"}  # still there for --precision int8

    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data, "--results", results, "--duration-ms", 300, "--count", 16,
                     "--backend", "auto", "-q") == 0
    manifest = _manifest(results)
    assert manifest["precision"] == "fp32" and manifest["model"]["sha256"] == _model(data, "fp32")["sha256"]
    assert "int8 not considered" in manifest["backend_choice"]["why"]

    # tuning only precisions that miss the target: refused in one line, before anything is timed or written
    out = tmp_path / "t" / "rec.json"
    assert appliance("tune", "--data-dir", data, *SWEEP, "--precision", "int8", "-o", out, "-q") == 2
    line = _one_line(capsys)
    assert "no precision to tune meets the accuracy target" in line and reason in line, line
    assert not out.exists() and not out.with_suffix(".user.conf").exists()


def test_format_2_tuned_record_refused_in_one_line(data_dir, tmp_path, capsys):
    """A record from before precisions were tuned together (one file per precision)."""
    old = tmp_path / "resnet50-int8.json"
    old.write_text(json.dumps({
        "format": 2, "benchmark": "resnet50", "precision": "int8", "cards": "auto", "created_utc": "2026-01-01",
        "host": {}, "method": "burst", "user_conf": "resnet50-int8.user.conf",
        "measured": [{"backend": "onnxruntime", "batch_size": 8, "requests": 1, "samples_per_second": 10.0}],
        "chosen": {"Offline": {"backend": "onnxruntime", "batch_size": 8, "requests": 1, "why": "fastest"}}}))
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", old, "-q") == 2
    line = _one_line(capsys)
    assert "format-2 tune record; this appliance reads format 4" in line and "rerun `appliance tune`" in line
    assert not results.exists() or not list(results.rglob("run_*"))


def test_unknown_precision_refused_in_one_line(data_dir, tmp_path, capsys):
    assert appliance("tune", "--data-dir", data_dir, "--precisions", "fp32,fp8", "-o", tmp_path / "t.json") == 2
    assert "not allowed: fp8" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(("bench", "quantization", "verdict"), [
    ("yolo-95", {"golden_map_pct": 25.1}, (False, "mAP against the FP32 golden detections 25.10% < the 95% "
                                                  "yolo-95 must reach")),
    ("yolo-99", {"golden_map_pct": 97.0}, (False, "mAP against the FP32 golden detections 97.00% < the 99% "
                                                  "yolo-99 must reach")),
    ("ssd-mobilenet", {"golden_map_pct": 99.5}, (True, "mAP against the FP32 golden detections 99.50% >= the 99% "
                                                       "ssd-mobilenet must reach")),
    ("resnet50", {"method": "Percentile"}, (False, "its model record holds no agreement with FP32: rerun "
                                                   "`appliance prepare --precision int8`")),
])
def test_eligibility_reads_the_recorded_agreement_against_the_benchmark_fraction(bench, quantization, verdict):
    """Detection records hold mAP against the FP32 golden detections; its target is the benchmark's own
    fraction (yolo-95: 95%)."""
    record = model_record.ModelRecord(bench, "m.onnx", "0" * 64, "0" * 32, True, 0, None, "int8", 1, 1, "",
                                      quantization=quantization)
    assert eligibility(benchmarks.get(bench), record) == verdict
    fp32 = dataclasses.replace(record, precision="fp32", quantization=None)
    assert eligibility(benchmarks.get(bench), fp32) == (True, "the FP32 reference model")
