"""Issue 36's device-script tools on the CPU: tools/gpu_baseline.py makes, warms and captures its sessions one at a
time before any of them runs (four capturing at once died with cudaErrorStreamCaptureInvalidated on the H100), and
tools/torch_peer.py says it is skipped, and exits 0, where torch is not installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import gpu_baseline  # noqa: E402  (a tools script, imported as the device script runs it)


class _Value:
    def update_inplace(self, _: object) -> None:
        pass


def test_baseline_sessions_capture_one_at_a_time_before_any_runs(monkeypatch):
    events: list[tuple[str, float]] = []

    class Session:
        def run_with_iobinding(self, *_: object) -> None:
            events.append(("run", time.perf_counter()))

    def warmed(job: Any) -> tuple[Any, None, None, _Value, list[Any]]:
        events.append(("capture", time.perf_counter()))
        time.sleep(0.05)  # another session capturing now would overlap this one
        events.append(("captured", time.perf_counter()))
        return Session(), None, None, _Value(), []

    monkeypatch.setattr(gpu_baseline, "_warmed_session", warmed)
    sessions = 4
    job = gpu_baseline.Job(None, None, None, None, (), None, Namespace(seconds=0.05, batch=1),  # type: ignore[arg-type]
                           threading.Barrier(sessions), {"device": [], "copy": []}, [], threading.Lock())
    threads = [threading.Thread(target=gpu_baseline.session_loop, args=(job,)) for _ in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    captures = [kind for kind, _ in events if kind != "run"]
    assert captures == ["capture", "captured"] * sessions  # never two at once
    last_captured = max(t for kind, t in events if kind == "captured")
    assert min(t for kind, t in events if kind == "run") > last_captured  # every capture before any run
    assert len(job.results["device"]) == len(job.results["copy"]) == sessions


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_the_torch_peer_is_skipped_without_torch():
    done = subprocess.run([sys.executable, str(TOOLS / "torch_peer.py"), "--device", "cpu", "--batches", "2"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr.strip() == "skipped: torch not installed", done
    assert json.loads(done.stdout) == {"peer": "pytorch-eager", "skipped": "torch not installed"}
