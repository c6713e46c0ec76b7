"""Ways to call the appliance as a user would, shared by the tests."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from harness.cli.main import main
from harness.records import detail_log

SAMPLES = 48  # size of the session's prepared synthetic dataset
# detection: images per benchmark in the session's prepared data (SSD-ResNet34 and RetinaNet take ~5 s
# per image on a slow core, so they get one; SSD-MobileNet's 24 cover the index mapping)
DETECTION_SAMPLES = {"ssd-mobilenet": 24, "ssd-resnet34": 1, "retinanet": 1}

# A simulated card whose speed is its profile's (10 ms per batch of 8), not the busy machine's: slow enough
# that the harness's own CPU time, which a loaded machine stretches, is a small part of it.
STEADY_PROFILE = """version: 1
name: steady-10ms
model: test card with a steady 10 ms batch latency
source: tests
input_dtype: uint8
benchmarks:
  resnet50: {samples_per_second: 800, batch: 8}
  ssd-mobilenet: {samples_per_second: 400, batch: 4}
  ssd-resnet34: {samples_per_second: 100, batch: 1}
  retinanet: {samples_per_second: 100, batch: 1}
"""

# A slower steady card for verdicts that compare two runs' throughput within 10% (compliance): 400 ms per
# batch of 16, so what a loaded 2-core machine adds per batch (thread wake-ups, completions, LoadGen's
# logging: tens of ms at a load of 8) stays a few percent of it. With SLOW_STEADY_OFFLINE every Offline run
# issues exactly 160 samples, 10 full batches, about 4 s, long beside the run's fixed start and end costs.
SLOW_STEADY_PROFILE = """version: 1
name: steady-400ms
model: test card with a steady 400 ms batch latency
source: tests
input_dtype: uint8
benchmarks:
  resnet50: {samples_per_second: 40, batch: 16}
"""
SLOW_STEADY_OFFLINE = ("--target-qps", 80, "--duration-ms", 2000)


MET_FLAGS = ("result_min_duration_met", "result_min_queries_met", "early_stopping_met", "result_perf_constraints_met")


def validity_explained(run: Path) -> dict[str, object]:
    """A performance run's detail log, after checking that its VALID / INVALID is LoadGen's own verdict on
    the run (every constraint met, or one named as not met) and the summary says the same. For runs too
    short for early stopping, where either verdict is right, this is what can be asserted."""
    detail = detail_log.values(run / "mlperf_log_detail.txt")
    validity = detail["result_validity"]
    flags = {k: detail[k] for k in MET_FLAGS if k in detail}
    assert validity in ("VALID", "INVALID") and "result_min_duration_met" in flags, (validity, flags)
    assert (validity == "VALID") == all(v is True for v in flags.values()), (validity, flags)
    assert f"Result is : {validity}" in (run / "mlperf_log_summary.txt").read_text()
    return detail


def linked_copy(data_dir: Path, to: Path) -> Path:
    """A prepared data dir's copy made of hard links (no space), without its tuned records: the appliance
    writes every file anew (fsutil's atomic writes, prepare's staged folders), never into an existing one,
    so what a test does in the copy leaves the original as it was."""
    shutil.copytree(data_dir, to, copy_function=os.link, ignore=shutil.ignore_patterns("tuned"))
    return to


def appliance(*args: object) -> int:
    """Run the CLI in-process; returns the exit code."""
    return main([str(a) for a in args])


def appliance_subprocess(*args: object, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, **kw)


def _snapshot(seen: dict[int, tuple[str, str]]) -> None:
    for task in Path("/proc/self/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            allowed = next(line.split(":", 1)[1].strip() for line in (task / "status").read_text().splitlines()
                           if line.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            continue  # the thread ended meanwhile
        seen[int(task.name)] = (comm, allowed)


def watch_threads(body: Callable[[], int]) -> tuple[int, dict[int, tuple[str, str]]]:
    """Run `body` while sampling every thread's name and Cpus_allowed_list from /proc every 50 ms."""
    seen: dict[int, tuple[str, str]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            _snapshot(seen)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        rc = body()
    finally:
        stop.set()
        watcher.join()
    return rc, seen


def manifest_json(**sections: object) -> dict[str, object]:
    """A complete format-1 run manifest as `appliance run` writes one (harness.records.manifest), `sections`
    replacing its defaults: for tests that lay out runs without running them."""
    body: dict[str, object] = {
        "format": 1, "created_utc": "2026-01-01T00:00:00+00:00", "command": ["appliance", "run"],
        "benchmark": "resnet50", "scenario": "Offline", "mode": "performance", "requested": {}, "batch_size": 8,
        "backend": "null", "card_outputs": "fp32", "backend_choice": {}, "precision": "fp32", "quantization": None,
        "model": {"path": "/data/models/resnet50.onnx", "sha256": "ab" * 32, "synthetic": True, "seed": 0},
        "dataset": {"path": "/data/preprocessed/resnet50", "count": 48, "synthetic": True},
        "configs": {}, "cards": [{"index": 0, "backend": "null", "device": "none", "cpus": [0]}],
        "card_map": {"spec": "auto"}, "sample_buffers": {}, "dispatch": {}, "host": {"cpu_model": "test CPU"},
        "packages": {}, "loadgen": {"version": "6.0"}, "synthetic": {"weights": True, "data": True},
        "result": {}, "notes": [], "energy": None,
    }
    body.update(sections)
    return body


def dotted_name(node: ast.expr) -> str:
    """`os.environ`, `np.load`: the dotted name an AST expression spells (the guard tests' reading of calls)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    return "?"


def tuned_record(data_dir: Path, folder: Path, scenario: str, choice: dict[str, object]) -> tuple[Path, dict]:
    """A tuned record (format 4) for ResNet50's fp32 model in `data_dir` choosing `choice` for `scenario`, written
    to `folder`/r.json beside its user.conf; the record is returned too, for a test that writes it changed."""
    import json

    from harness.data import benchmarks
    from harness.records import model_record
    from harness.records.layout import Layout

    sha = model_record.read(Layout(data_dir, benchmarks.get("resnet50")).record_for("fp32")).sha256
    record = {"format": 4, "benchmark": "resnet50", "layouts": [choice["cards"]], "created_utc": "x", "host": {},
              "method": "m", "user_conf": "r.user.conf", "measured": [],
              "precisions": {"fp32": {"model_sha256": sha, "eligible": True, "why": "fp32"}},
              "chosen": {scenario: choice}, "by_precision": {"fp32": {scenario: choice}}}
    path = folder / "r.json"
    path.write_text(json.dumps(record))
    (folder / "r.user.conf").write_text("")
    return path, record
