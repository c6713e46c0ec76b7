"""Issue 36 on the CPU, with simulated cards whose timing the profile sets: cards that share a device are
timed together (tune's figure for the layout is within 10% of a real LoadGen run of it, and 4 cards on one
device are never 4x one card), and Server is chosen by the bound (only small batches meet it: tune picks
one, and a short LoadGen Server run at its choice is VALID)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import appliance, validity_explained

# 4 cards on one device: 40 ms a batch of 8 for all of them together, as 4 sessions on one GPU (slow enough that what
# a loaded 2-core machine adds to a batch is a few percent of tune's short burst)
SHARED = """version: 1
name: steady-40ms-shared
model: test device with a steady 40 ms batch latency, shared by 4 cards
source: tests
input_dtype: uint8
cards_per_device: 4
benchmarks:
  resnet50: {samples_per_second: 200, batch: 8}
"""
# latency grows with the batch: 1 ms + 13 ms a sample (batch 1: 14 ms, 4: 53 ms, 8: 105 ms, 16: 209 ms). Server runs
# on ssd-resnet34, whose 100 ms bound leaves a loaded 2-core machine tens of ms of hiccups (resnet50's 15 ms does not)
GROWING = """version: 1
name: growing
model: test card whose batch latency grows with the batch
source: tests
input_dtype: uint8
benchmarks:
  ssd-resnet34: {samples_per_second: 76.923, batch: 8, fixed_ms: 1}
"""
SERVER = ("--benchmark", "ssd-resnet34")


def _profile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def _tune(data_dir: Path, record: Path, capsys: pytest.CaptureFixture[str], *args: object) -> dict:
    assert appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime", "--precisions", "fp32",
                     "-o", record, "--json", *args) == 0
    return dict(json.loads(capsys.readouterr().out))


def _run(results: Path, scenario: str, benchmark: str = "resnet50") -> Path:
    (run,) = results.glob(f"*/{benchmark}/{scenario}/performance/run_*")
    return run


@pytest.mark.slow
def test_cards_sharing_a_device_are_timed_together_and_the_run_agrees(data_dir, tmp_path, capsys):
    profile = _profile(tmp_path, SHARED)
    record_path = tmp_path / "t" / "resnet50.json"
    record = _tune(data_dir, record_path, capsys, "-s", "Offline", "--batch-sizes", 8,
                   "--cards", f"simulate:{profile}:1,simulate:{profile}:4")
    one, four = (next(m for m in record["measured"] if m["cards"] == n) for n in (1, 4))
    # the device's 200 samples/s, however many cards share it (timed one at a time, as before: 4 x 200)
    assert four["samples_per_second"] < 1.3 * one["samples_per_second"], (one, four)
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", record_path,
                     "--cards", f"simulate:{profile}:4", "--batch-size", 8, "--duration-ms", 2500, "-q") == 0
    measured = float(validity_explained(_run(results, "Offline"))["result_samples_per_second"])
    assert abs(four["samples_per_second"] - measured) <= 0.1 * measured, (four, measured)


def _tune_server(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], batches: str,
                 cards: int) -> tuple[Path, dict]:
    """`tune --server-search` of ssd-resnet34 on `cards` GROWING cards: the record's path and the record."""
    profile = _profile(tmp_path, GROWING)
    record_path = tmp_path / "t" / "ssd-resnet34.json"
    return record_path, _tune(data_dir, record_path, capsys, *SERVER, "-s", "Server", "--batch-sizes", batches,
                              "--cards", f"simulate:{profile}:{cards}", "--server-search")


@pytest.mark.slow
def test_server_picks_a_batch_that_meets_the_bound_and_its_run_is_valid(det_data_dir, tmp_path, capsys):
    record_path, record = _tune_server(det_data_dir, tmp_path, capsys, "1,2,4,8,16", 8)
    rows = {m["batch_size"]: m for m in record["measured"]}
    assert rows[8]["batch_latency_ms"] > 100 and not rows[8]["server_qps"] and not rows[16]["server_qps"]
    assert rows[2]["server_qps"] > 0
    server = record["chosen"]["Server"]
    assert server["batch_size"] in (1, 2, 4) and "within the 100 ms bound" in server["why"], server
    best = max(rows.values(), key=lambda m: m["server_qps"] or 0)
    assert (server["batch_size"], server["server_qps"]) == (best["batch_size"], best["server_qps"])
    assert server["max_wait_us"] == best["max_wait_us"]  # the deadline the ideal queue chose goes with it
    # --server-search: short real LoadGen Server runs at the choice (the first at the ideal queue's figure, the next
    # at half of it, ...): one VALID at least, the highest kept beside the ideal queue's figure
    assert 0 < server["confirmed_qps"] <= best["samples_per_second"] and "--server-search:" in server["why"]
    assert " VALID" in server["why"].split("--server-search:")[1]
    conf = (record_path.parent / record["user_conf"]).read_text()
    assert f"ssd-resnet34.Server.target_qps = {server['confirmed_qps']}" in conf  # the confirmed target, not the ideal


@pytest.mark.slow
def test_a_server_no_batch_of_which_meets_the_bound_says_so_before_running(det_data_dir, tmp_path, capsys):
    record_path, record = _tune_server(det_data_dir, tmp_path, capsys, "8,16", 1)
    server = record["chosen"]["Server"]
    assert server["server_qps"] == 0 and server["confirmed_qps"] is None and "not run" in server["why"]
    appliance("run", *SERVER, "--data-dir", det_data_dir, "--results", tmp_path / "r", "--tuned", record_path,
              "-s", "Server", "--target-qps", 5, "--duration-ms", 200, "-q")
    warned = [line for line in capsys.readouterr().err.splitlines() if "cannot meet its latency bound" in line]
    assert len(warned) == 1 and warned[0].startswith("appliance: warning: Server"), warned


def test_single_stream_takes_one_card_whatever_the_noise():
    """SingleStream sends one query at a time: the layout with the fewest cards, batch 1 (a GPU card's bucket 1,
    its own CUDA graph), even where a 4-card layout's single sample happened to time faster (as on the H100)."""
    from harness.core.scenarios import Scenario
    from harness.data import benchmarks
    from harness.hw import gpu_plan
    from harness.tune.search import Measured, choose

    def row(cards: int, single_ms: float) -> Measured:
        return Measured("fp16", "onnxruntime-cuda", 512, 1, 8000.0, single_ms, 62.0, 1.0, cards, None,
                        f"cuda:allx{cards}")

    best, why = choose(benchmarks.get("resnet50"), Scenario.SINGLE_STREAM, [row(4, 0.929), row(1, 0.94), row(2, 0.95)])
    assert (best.cards, best.layout, best.batch_size) == (1, "cuda:allx1", 1) and "fewest cards" in why
    assert gpu_plan.run_buckets("SingleStream", best.batch_size) == (1,)  # the run's one bucket: its own CUDA graph
