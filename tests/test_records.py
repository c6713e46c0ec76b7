"""The model record and the tune record: versioned, one writer and one reader each; a record of an
unknown format or a malformed one is one line telling what to rerun."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import appliance, manifest_json

import harness
from harness.core.errors import DataError
from harness.records import manifest as run_manifest
from harness.records import model_record, tuned

MODEL = model_record.ModelRecord(
    benchmark="resnet50", path="models/resnet50-seeded-s0.onnx", sha256="ab" * 32, md5="cd" * 16, synthetic=True,
    seed=0, official_artefact=None, precision="fp32", params=25_557_032, macs_per_sample=4_089_184_256,
    stats="25.56M parameters", builder_sha256="ef" * 32)

TUNED = tuned.TunedRecord(
    benchmark="resnet50", layouts=["auto"], created_utc="2026-11-23T22:00:00+00:00",
    host={"cpu_model": "test", "available_cpus": [0, 1]}, method="test", user_conf="resnet50.user.conf",
    precisions={"fp32": tuned.Precision("ab" * 32, True, "the FP32 reference model")},
    measured=[tuned.Measured("fp32", "onnxruntime", 2, 1, 10.0, 1.0, 2.0, 2.0)],
    chosen={"Offline": tuned.Choice("fp32", "onnxruntime", 2, 1, "fastest", "auto")},
    by_precision={"fp32": {"Offline": tuned.Choice("fp32", "onnxruntime", 2, 1, "fastest", "auto")}})


def test_model_record_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "resnet50.json"
    model_record.write(path, MODEL)
    on_disk = json.loads(path.read_text())
    assert on_disk["format"] == model_record.FORMAT and "quantization" not in on_disk
    assert model_record.read(path) == MODEL


def test_model_record_without_format_is_read_as_format_1(tmp_path: Path) -> None:
    path = tmp_path / "resnet50.json"
    data = MODEL.to_json()
    del data["format"]
    path.write_text(json.dumps(data))
    assert model_record.read(path) == MODEL


@pytest.mark.parametrize(("change", "message"), [
    ({"format": 7}, "format-7 model record; this appliance reads format 1"),
    ({"sha256": None}, "not a valid model record: 'sha256' is None"),
    ({"params": True}, "not a valid model record: 'params' is True"),
    ({"precision": 16}, "not a valid model record: 'precision' is 16"),  # read as attributes: typed here
    ({"quantization": [1]}, "not a valid model record: 'quantization' is \\[1\\]"),
    ({"input_dtype": 8}, "not a valid model record: 'input_dtype' is 8"),
])
def test_bad_model_records_are_one_line(tmp_path: Path, change: dict[str, object], message: str) -> None:
    path = tmp_path / "resnet50.json"
    path.write_text(json.dumps({**MODEL.to_json(), **change}))
    with pytest.raises(DataError, match=message) as err:
        model_record.read(path)
    assert "\n" not in str(err.value)


def test_damaged_model_record_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "resnet50.json"
    path.write_bytes(b"\xff\x00{not json")
    with pytest.raises(DataError, match="is damaged") as err:
        model_record.read(path)
    assert "\n" not in str(err.value)


def test_tune_record_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "resnet50.json"
    tuned.write(path, TUNED)
    written = {"precision": "fp32", "backend": "onnxruntime", "batch_size": 2, "requests": 1, "why": "fastest",
               "cards": "auto", "provider_options": "", "max_wait_us": None, "server_qps": None, "confirmed_qps": None}
    assert json.loads(path.read_text())["chosen"]["Offline"] == written
    assert tuned.read(path) == TUNED
    # issue 36's keys: kept when set, their defaults when a record written before them lacks them
    server = tuned.Choice("fp16", "onnxruntime-cuda", 32, 1, "bound", "cuda:allx2", "prefer_nhwc=1", 750, 900.5, 850.0)
    tuned.write(path, dataclasses.replace(TUNED, chosen={"Server": server}))
    assert tuned.read(path).chosen["Server"] == server
    data = json.loads(path.read_text())
    data["chosen"]["Server"] = {k: v for k, v in data["chosen"]["Server"].items() if k in written and k in (
        "precision", "backend", "batch_size", "requests", "why", "cards")}
    path.write_text(json.dumps(data))
    assert tuned.read(path).chosen["Server"] == dataclasses.replace(server, provider_options="", max_wait_us=None,
                                                                    server_qps=None, confirmed_qps=None)


@pytest.mark.parametrize(("change", "message"), [
    ({"format": 1}, "format-1 tune record; this appliance reads format 4"),
    ({"format": 2}, "format-2 tune record; this appliance reads format 4"),
    ({"format": 3}, "format-3 tune record; this appliance reads format 4"),
    ({"format": 5}, "format-5 tune record; this appliance reads format 4"),
    ({"format": None}, "not a tune record: it has no 'format' key"),  # round 6: "is a format-None tune record"
    ({"layouts": "auto"}, "malformed tune record"),
    ({"precisions": {"fp32": {"eligible": True}}}, "malformed tune record"),
    ({"chosen": {"Offline": {"backend": "onnxruntime"}}}, "malformed tune record"),
    ({"measured": "fast"}, "malformed tune record"),
    ({"measured": [{"precision": "fp32", "backend": "onnxruntime", "batch_size": 2}]}, "malformed tune record"),
    ({"measured": [{**TUNED.to_json()["measured"][0], "samples_per_second": "fast"}]}, "malformed tune record"),
    ({"measured": [{**TUNED.to_json()["measured"][0], "batch_size": 0}]}, "malformed tune record"),
])
def test_bad_tune_records_are_one_line(tmp_path: Path, change: dict[str, object], message: str) -> None:
    path = tmp_path / "resnet50.json"
    path.write_text(json.dumps({**TUNED.to_json(), **change}))
    with pytest.raises(DataError, match=message) as err:
        tuned.read(path)
    assert "\n" not in str(err.value) and "rerun `appliance tune`" in str(err.value)


def test_a_run_manifest_reads_back_with_version_and_commit(data_dir: Path, tmp_path: Path) -> None:
    assert appliance("run", "--cards", "simulate:cloud-ai-100:2", "--duration-ms", 300, "--data-dir", data_dir,
                     "--results", tmp_path / "results", "-q") == 0
    (run,) = (tmp_path / "results").rglob("run_1")
    manifest = run_manifest.read(run)
    assert manifest.benchmark == "resnet50" and manifest.synthetic.cards == "SIMULATED (cloud-ai-100)"
    assert manifest.appliance is not None and manifest.appliance["version"] == harness.__version__
    assert manifest.appliance["commit"] and manifest.appliance["commit_from"] in ("build", "git")
    data = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**data, "format": 9}))
    with pytest.raises(DataError, match="format-9 run manifest; this appliance reads format 1"):
        run_manifest.read(run)
    del data["dataset"]
    (run / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"manifest\.json: dataset is missing"):
        run_manifest.read(run)
    with pytest.raises(ValueError, match=r"not in harness\.records\.manifest\.RunManifest"):
        run_manifest.write(tmp_path, {**data, "surprise": 1})


def test_a_manifest_written_before_the_typed_record_reads(tmp_path: Path) -> None:
    """A format-1 manifest of an older appliance (no appliance / requests_per_card / shared_cores / ... keys, a
    card without its counters, nulls where a section's key was unset) reads; written back, it reads the same."""
    old = manifest_json(cards=[{"index": 0, "backend": "onnxruntime", "device": "cpu", "cpus": [0, 1]}],
                        dispatch={"server_max_wait_us": None, "keep_warm": False})
    for key in ("appliance", "requests_per_card", "inference_precision", "shared_cores", "precision_eligibility",
                "native_log"):
        old.pop(key, None)
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    manifest = run_manifest.read(tmp_path)
    assert manifest.cards[0].cpus == (0, 1) and manifest.cards[0].samples_completed is None
    assert manifest.precision_eligibility is None and manifest.not_submittable is None
    assert run_manifest.parse(manifest.to_json(), "again") == manifest
