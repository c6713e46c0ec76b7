"""Issue 35, one signal policy: what is not a signal is never reported as an interrupt, and what a stopped
compliance test says it kept is read from the disk, not from the inner run that stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import appliance, linked_copy
from test_interrupts import RUN, _hidden

# a real signal, sent by the process to itself on the N-th call of one of its steps (module, function)
_SIGNAL_ON_CALL = """
import importlib, os, signal, sys, time
from harness.cli.main import main
module, attr, sig, nth = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3]), int(sys.argv[4])
mod = importlib.import_module(module)
real = getattr(mod, attr)
calls = []
def signalled(*args, **kwargs):
    calls.append(1)
    if len(calls) == nth:
        os.kill(os.getpid(), sig)
        time.sleep(30)
    return real(*args, **kwargs)
setattr(mod, attr, signalled)
sys.exit(main(sys.argv[5:]))
"""


def test_compliance_stopped_in_its_second_run_names_the_runs_kept(data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM as TEST04's second inner run (the test run) starts: it said "LoadGen had not started, so
    nothing was kept" while TEST04.incomplete held the finished reference run."""
    args = [*RUN, "--data-dir", data_dir, "--results", tmp_path, "--duration-ms", 300]
    assert subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True).returncode == 0
    done = subprocess.run([sys.executable, "-c", _SIGNAL_ON_CALL, "harness.run.runner", "_loadgen_test", "SIGTERM",
                           "2", *map(str, args), "--mode", "TEST04"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 143, done.stderr
    (kept,) = tmp_path.rglob("TEST04.incomplete")
    assert done.stderr.strip().splitlines()[-1] == \
        f"appliance: TEST04 terminated (SIGTERM); its runs so far are kept in {kept} (reference/run_1)"
    assert _hidden(tmp_path) == []


def test_a_truncated_shard_is_a_data_error_not_an_interrupt(data_dir: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A shard truncated to 0 bytes ended `appliance: interrupted`, exit 130: numpy's EOFError became click's
    Abort, though no signal came."""
    local = linked_copy(data_dir, tmp_path / "data")
    shard = local / "preprocessed" / "resnet50" / "samples-00000.npy"
    shard.unlink()  # a hard link to the session's data: replaced, never truncated in place
    shard.write_bytes(b"")
    assert appliance(*RUN, "--data-dir", local, "--results", tmp_path / "r", "--duration-ms", 300) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "samples-00000.npy is truncated" in err, err
    assert not (tmp_path / "r").exists()


def test_sighup_is_left_ignored_under_nohup() -> None:
    """`nohup appliance run &` must outlive the terminal: an ignored SIGHUP stays ignored."""
    from harness.core.errors import interrupts_raised

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interrupts_raised():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with interrupts_raised():
            assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_IGN, signal.SIG_DFL)
    finally:
        signal.signal(signal.SIGHUP, old)
