"""Several `--backend openvino` cards in one run: each in a worker process pinned to its card's CPUs.

Pinning is read from /proc during real LoadGen runs: every thread of each worker process (OpenVINO's
stream and oneTBB threads included) must be allowed only its card's CPUs and have last run there, the
two cards' CPU sets disjoint. The batches travel through /dev/shm segments, which must be gone after
the run, also when the workers were killed mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import appliance

from harness.core.errors import DataError
from harness.core.sysfs import format_cpulist, parse_cpulist
from harness.run.cards.openvino_process import SEGMENT_PREFIX, OpenVinoProcessCard

pytest.importorskip("openvino")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs for emulate:2")]

WORKER_MODULE = b"harness.run.cards.openvino_process"


def workers(parent: int | None = None) -> list[int]:
    """The openvino worker processes of `parent` (default: this process), by pid."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and WORKER_MODULE in (proc / "cmdline").read_bytes()
                    and f"PPid:\t{parent or os.getpid()}\n" in (proc / "status").read_text()):
                found.append(int(proc.name))
        except OSError:
            continue  # ended meanwhile
    return found


def segments(parent: int | None = None) -> set[str]:
    return {p.name for p in Path("/dev/shm").glob(f"{SEGMENT_PREFIX}-{parent or os.getpid()}-*")}


def ended(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) in ("Z", "X")
    except OSError:
        return True


class Watch:
    """Every worker thread's Cpus_allowed_list and last CPU (/proc/PID/task/TID/stat field 39), and the
    shared-memory segments seen, sampled every 50 ms while `body` runs."""

    def __init__(self) -> None:
        self.allowed: dict[int, set[str]] = {}   # worker pid -> Cpus_allowed_list values of its threads
        self.ran_on: dict[int, set[int]] = {}    # worker pid -> CPUs its threads were last seen on
        self.threads: dict[int, set[int]] = {}   # worker pid -> thread ids
        self.segments: set[str] = set()

    def sample(self) -> None:
        self.segments |= segments()
        for pid in workers():
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    status = (task / "status").read_text()
                    stat = (task / "stat").read_text()
                except OSError:
                    continue
                allowed = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                               if line.startswith("Cpus_allowed_list:"))
                self.allowed.setdefault(pid, set()).add(allowed)
                self.ran_on.setdefault(pid, set()).add(int(stat[stat.rindex(")") + 2:].split()[36]))
                self.threads.setdefault(pid, set()).add(int(task.name))

    def run(self, body: threading.Thread) -> None:
        body.start()
        while body.is_alive():
            self.sample()
            time.sleep(0.05)
        body.join()


def run_in_thread(*args: object) -> tuple[threading.Thread, list[int]]:
    rc: list[int] = []
    return threading.Thread(target=lambda: rc.append(appliance(*args))), rc


def test_two_openvino_cards_each_pinned_in_its_own_process(data_dir, tmp_path):
    body, rc = run_in_thread("run", "--data-dir", data_dir, "--results", tmp_path, "--backend", "openvino",
                             "--cards", "emulate:2", "--duration-ms", 1000, "--count", 16, "-q")
    watch = Watch()
    watch.run(body)
    assert rc == [0]
    manifest = json.loads(next(tmp_path.glob("*/resnet50/Offline/performance/run_1/manifest.json")).read_text())
    cards = {c["worker_process"]: c for c in manifest["cards"]}
    assert set(cards) == set(watch.allowed), (cards.keys(), watch.allowed)  # both workers seen while running
    cpu_sets = []
    for pid, card in cards.items():
        assert card["samples_completed"] > 0, card
        cpus = format_cpulist(card["cpus"])
        assert watch.allowed[pid] == {cpus}, f"card {card['index']} (cpus {cpus}): threads allowed {watch.allowed[pid]}"
        assert watch.ran_on[pid] <= set(card["cpus"]), f"card {card['index']} ran on {watch.ran_on[pid]}"
        assert len(watch.threads[pid]) >= 2, watch.threads[pid]  # OpenVINO's threads beside the main one
        cpu_sets.append(set(parse_cpulist(cpus)))
    assert len(cpu_sets) == 2 and not cpu_sets[0] & cpu_sets[1], cpu_sets
    assert len(watch.segments) == 4, watch.segments  # input + output per card, while it ran
    assert not segments() and not workers()  # all unlinked and reaped


def accuracy_log(results: Path) -> dict[int, str]:
    """qsl_idx -> the logged class (a float32's bytes in hex, as LoadGen logs the response)."""
    log = json.loads(next(results.glob("*/resnet50/Offline/accuracy/mlperf_log_accuracy.json")).read_text())
    return {entry["qsl_idx"]: entry["data"] for entry in log}


def test_two_worker_process_cards_answer_as_one_in_process_card(data_dir, tmp_path):
    """Same model, same compiled batch: the classes from two worker-process cards, two infer requests in
    flight each (so each card's slots are reused in turn, 24 batches of 2), are those of one in-process
    card (at most one of 48 may differ, a near-tie summed in another order on another thread count)."""
    for cards in ("emulate:1", "emulate:2"):
        assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / cards.replace(":", ""),
                         "--backend", "openvino", "--cards", cards, "--mode", "accuracy", "--batch-size", 2,
                         "--requests", 2 if cards == "emulate:2" else 1, "-q") == 0
    one, two = accuracy_log(tmp_path / "emulate1"), accuracy_log(tmp_path / "emulate2")
    assert len(one) == len(two) == 48 and one.keys() == two.keys()
    assert sum(one[i] != two[i] for i in one) <= 1, [(i, one[i], two[i]) for i in one if one[i] != two[i]]
    manifest = json.loads(next((tmp_path / "emulate2").glob("*/resnet50/Offline/accuracy/manifest.json")).read_text())
    assert [(bool(c.get("worker_process")), c["batches_in_flight"]) for c in manifest["cards"]] == [(True, 2)] * 2
    assert not segments() and not workers()


def test_killed_workers_end_the_run_in_one_line(data_dir, tmp_path, capsys):
    """Both workers killed mid-run: every card failed, one line, non-zero exit, no segment left behind."""
    body, rc = run_in_thread("run", "--data-dir", data_dir, "--results", tmp_path, "--backend", "openvino",
                             "--cards", "emulate:2", "--duration-ms", 60000, "-q")
    body.start()
    deadline = time.monotonic() + 300
    while ((len(segments()) < 4 or not list(tmp_path.rglob("mlperf_log_detail.txt")))
           and body.is_alive() and time.monotonic() < deadline):
        time.sleep(0.1)  # both workers have batches, LoadGen has started (its log is open): past warm-up
    pids = workers()
    assert len(pids) == 2, pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    body.join(timeout=300)
    assert not body.is_alive()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc and rc[0] != 0
    assert len(err) == 1 and "every card failed" in err[0] and "killed by SIGKILL" in err[0], err
    incomplete = next(tmp_path.glob("*/resnet50/Offline/performance/run_1.incomplete"))
    assert "openvino worker process of card" in (incomplete / "INCOMPLETE.txt").read_text()
    assert not segments() and not workers()


def test_killed_appliance_leaves_no_segment_and_no_worker(data_dir, tmp_path):
    """The appliance itself killed mid-run: Python's resource tracker unlinks the segments, and the workers,
    their stdin at EOF, close and exit."""
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--data-dir", str(data_dir), "--results",
                            str(tmp_path), "--backend", "openvino", "--cards", "emulate:2", "--duration-ms", "60000",
                            "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while len(segments(run.pid)) < 4 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # both cards have their segments: batches are flowing
        pids = workers(run.pid)
        assert len(segments(run.pid)) == 4 and len(pids) == 2, (segments(run.pid), pids, run.poll())
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 60
    while (segments(run.pid) or not all(map(ended, pids))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not segments(run.pid), segments(run.pid)
    assert all(map(ended, pids)), [p for p in pids if not ended(p)]


def test_worker_that_cannot_load_the_model_says_so_in_one_line(tmp_path):
    """The worker's startup error comes back as the in-process card's: a DataError naming the file."""
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    with pytest.raises(DataError) as err:
        OpenVinoProcessCard(0, broken, "input_tensor:0", ("ArgMax:0",), (((), "int64"),), (0,), backend="openvino")
    assert str(err.value).startswith(f"OpenVINO cannot load {broken}") and "\n" not in str(err.value), err.value
    assert not workers()
