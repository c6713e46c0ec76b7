"""Ctrl-C and SIGTERM stop every long-running command the same clean way (issue 26): one line, exit 130
(SIGINT) or 143 (SIGTERM), a run in progress kept as `.incomplete`, no temporaries, no empty folders.

Each command runs as a process of its own and gets a real signal: from outside, once a marker file shows
it is where the test wants it, or from inside one of its own steps (`_SIGNAL_IN`), so the moment is exact."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import linked_copy
from test_reproduce import _tree

RUN = ["run", "--backend", "null", "-q"]
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "terminated (SIGHUP)"}

# a real signal, sent by the process to itself while one of its steps (module, function) runs
_SIGNAL_IN = """
import importlib, os, signal, sys, time
from harness.cli.main import main
module, attr, sig = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3])
mod = importlib.import_module(module)
real = getattr(mod, attr)
def signalled(*args, **kwargs):
    os.kill(os.getpid(), sig)
    time.sleep(30)
    return real(*args, **kwargs)
setattr(mod, attr, signalled)
sys.exit(main(sys.argv[4:]))
"""


def _signalled_in(step: str, sig: signal.Signals, *args: object) -> subprocess.CompletedProcess[str]:
    module, attr = step.rsplit(".", 1)
    return subprocess.run([sys.executable, "-c", _SIGNAL_IN, module, attr, sig.name, *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def _hidden(tree: Path) -> list[Path]:
    return [p for p in tree.rglob(".*")]


def _wait_for(pattern: str, under: Path, proc: subprocess.Popen[str], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not list(under.glob(pattern)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_reproduce_stops_whole_on_a_signal(sig: signal.Signals, data_dir: Path, tmp_path: Path) -> None:
    """Issue 26 item 4: the signal during the first re-run stops the reproduce (it was recorded as a NOT
    REPRODUCIBLE row, the next row started, and the process aborted in C++ with exit 134)."""
    tree = _tree(tmp_path, data_dir)
    out = tmp_path / "audit"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "reproduce", str(tree), "--data-dir",
                             str(data_dir), "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_for(".audit.*.tmp/runs/**/.run_1.staging-*/mlperf_log_detail.txt", tmp_path, proc)
    proc.send_signal(sig)
    stdout, err = proc.communicate(timeout=300)
    assert proc.returncode == CODES[sig], (stdout, err)
    line = _one_line(err)
    assert line.startswith(f"appliance: reproduce {WORDS[sig]} during resnet50 Offline performance (row 1 of 2)")
    assert "accuracy ..." not in stdout and "NOT REPRODUCIBLE" not in stdout, stdout  # no further rows
    assert not out.exists() and [p.name for p in tmp_path.glob(".*")] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_run_stopped_during_loadgen_is_kept_incomplete(sig: signal.Signals, data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM (`docker stop`) ends a run as Ctrl-C does, with its own exit code (it was 130 for both);
    SIGHUP (the terminal closed) too (issue 35: no line, `.run_1.owner` and `.run_1.staging-*` were left)."""
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *RUN, "--data-dir", str(data_dir), "--results",
                             str(results), "--duration-ms", "60000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for("**/.run_1.staging-*/mlperf_log_detail.txt", results, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == CODES[sig], err
    (kept,) = results.rglob("run_1.incomplete")
    assert _one_line(err) == f"appliance: run {WORDS[sig]}; logs so far kept in {kept}"
    assert WORDS[sig] in (kept / "INCOMPLETE.txt").read_text()
    assert _hidden(results) == []


def test_tune_stopped_by_sigterm_writes_nothing(data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM while tune times its first configuration: exit 143 and no record, no empty folder (it was
    130, `interrupted`, and the record's folder stayed, empty)."""
    out = tmp_path / "tuned" / "t.json"
    done = _signalled_in("harness.tune.search._measure", signal.SIGTERM, "tune", "--data-dir", data_dir, "--cards",
                         "emulate:1", "--batch-sizes", "1", "--backends", "onnxruntime", "-o", out, "-q")
    assert done.returncode == 143, done.stderr
    # tune says how many candidates it will time before it starts (on stderr, -q or not); then the one line
    said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("tune: ")]
    assert _one_line("\n".join(said)) == "appliance: terminated (SIGTERM)"
    assert list(tmp_path.iterdir()) == []


def test_prepare_stopped_by_sigterm_keeps_the_old_data(data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM while prepare writes the shards: the staged folder is removed and the prepared data stays
    as it was (SIGTERM killed it, leaving its hidden temporary folder)."""
    local = linked_copy(data_dir, tmp_path / "data")
    manifest = local / "preprocessed" / "resnet50" / "manifest.json"
    before = manifest.read_bytes()
    done = _signalled_in("harness.records.store.close_array", signal.SIGTERM, "prepare", "--data-dir", local,
                         "--samples", 24, "-q")
    assert done.returncode == 143, done.stderr
    assert _one_line(done.stderr) == "appliance: terminated (SIGTERM)"
    assert manifest.read_bytes() == before
    assert [p for p in local.rglob(".*") if p.name != ".synthetic.json"] == []


def test_compliance_stopped_between_its_runs_keeps_them(data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM after TEST04's three runs, before the verdict: they are kept in TEST04.incomplete and the line
    names it (the process was killed, leaving .TEST04.staging-PID and its claim)."""
    args = [*RUN, "--data-dir", data_dir, "--results", tmp_path, "--duration-ms", 300]
    assert subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True).returncode == 0
    done = _signalled_in("harness.audit.compliance.verify_bracketed", signal.SIGTERM, *args, "--mode", "TEST04")
    assert done.returncode == 143, done.stderr
    (kept,) = tmp_path.rglob("TEST04.incomplete")
    assert done.stderr.strip().splitlines()[-1] == f"appliance: TEST04 terminated (SIGTERM); its runs so far are " \
        f"kept in {kept} (performance/run_1, reference/run_1, reference/run_2)"
    assert (kept / "reference" / "run_2" / "mlperf_log_detail.txt").is_file()
    assert "terminated (SIGTERM)" in (kept / "INCOMPLETE.txt").read_text()
    assert _hidden(tmp_path) == []


@pytest.fixture(scope="module")
def offline_runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Offline performance and accuracy run of the null backend: what `submission build` needs."""
    root = tmp_path_factory.mktemp("offline-runs")
    for mode in ("performance", "accuracy"):
        done = subprocess.run([sys.executable, "-m", "harness.cli", *RUN, "--mode", mode, "--data-dir",
                               str(data_dir), "--results", str(root), "--duration-ms", "300", "--system", "box"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    return root


def test_submission_build_stopped_by_sigterm_leaves_nothing(offline_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "tree"
    done = _signalled_in("harness.audit.submission.tree._write_scenario", signal.SIGTERM, "submission", "build",
                         "--submitter", "Org", "--system", "edge1", offline_runs, "-o", out)
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "appliance: terminated (SIGTERM)"
    assert list(tmp_path.iterdir()) == []
