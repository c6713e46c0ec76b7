"""Issue 36 on the CPU, with simulated cards whose timing the profile sets: cards that share a device are
timed together (tune's figure for the layout is within 10% of a real LoadGen run of it, and 4 cards on one
device are never 4x one card), and Server is chosen by the bound (only small batches meet it: tune picks
one, and a short LoadGen Server run at its choice is VALID)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import STEADY_PROFILE, appliance, validity_explained

# 4 cards on one device: 10 ms a batch of 8 for all of them together, as 4 sessions on one GPU
SHARED = STEADY_PROFILE.replace("name: steady-10ms", "name: steady-10ms-shared") + "cards_per_device: 4\n"
# latency grows with the batch: 1 ms + 2 ms a sample (batch 1: 3 ms, 4: 9 ms, 8: 17 ms > the 15 ms bound)
GROWING = """version: 1
name: growing
model: test card whose batch latency grows with the batch
source: tests
input_dtype: uint8
benchmarks:
  resnet50: {samples_per_second: 500, batch: 8, fixed_ms: 1}
"""


def _profile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def _tune(data_dir: Path, record: Path, capsys: pytest.CaptureFixture[str], *args: object) -> dict:
    assert appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime", "--precisions", "fp32",
                     "-o", record, "--json", *args) == 0
    return dict(json.loads(capsys.readouterr().out))


def _run(results: Path, scenario: str) -> Path:
    (run,) = results.glob(f"*/resnet50/{scenario}/performance/run_*")
    return run


@pytest.mark.slow
def test_cards_sharing_a_device_are_timed_together_and_the_run_agrees(data_dir, tmp_path, capsys):
    profile = _profile(tmp_path, SHARED)
    record_path = tmp_path / "t" / "resnet50.json"
    record = _tune(data_dir, record_path, capsys, "-s", "Offline", "--batch-sizes", 8,
                   "--cards", f"simulate:{profile}:1,simulate:{profile}:4")
    one, four = (next(m for m in record["measured"] if m["cards"] == n) for n in (1, 4))
    # the device's 800 samples/s, however many cards share it (timed one at a time: 4 x 800)
    assert four["samples_per_second"] < 1.3 * one["samples_per_second"], (one, four)
    assert 700 < four["samples_per_second"] < 880, four
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", record_path,
                     "--cards", f"simulate:{profile}:4", "--batch-size", 8, "--duration-ms", 2500, "-q") == 0
    measured = float(validity_explained(_run(results, "Offline"))["result_samples_per_second"])
    assert abs(four["samples_per_second"] - measured) <= 0.1 * measured, (four, measured)


@pytest.mark.slow
def test_server_picks_a_batch_that_meets_the_bound_and_its_run_is_valid(data_dir, tmp_path, capsys):
    profile = _profile(tmp_path, GROWING)
    record_path = tmp_path / "t" / "resnet50.json"
    record = _tune(data_dir, record_path, capsys, "-s", "Server", "--batch-sizes", "1,2,4,8,16",
                   "--cards", f"simulate:{profile}:2")
    rows = {m["batch_size"]: m for m in record["measured"]}
    assert rows[8]["batch_latency_ms"] > 15 and not rows[8]["server_qps"] and not rows[16]["server_qps"]
    assert rows[2]["server_qps"] > 0
    server = record["chosen"]["Server"]
    assert server["batch_size"] in (1, 2, 4) and "within the 15 ms bound" in server["why"], server
    best = max(rows.values(), key=lambda m: m["server_qps"] or 0)
    assert server["batch_size"] == best["batch_size"]
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", record_path, "-s", "Server",
                     "--target-qps", round(0.5 * best["server_qps"]), "--duration-ms", 3000, "-q") == 0
    run = _run(results, "Server")
    detail = validity_explained(run)
    assert detail["result_validity"] == "VALID", detail
    assert json.loads((run / "manifest.json").read_text())["batch_size"] == server["batch_size"]
