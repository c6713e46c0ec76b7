"""Issue 41, signals from the first instruction and stdout's faults: each break as the trial ran it (or its
equivalent, named), and SIGTERM at seeded moments of each command.

A stop is one line and the shell's code (130 SIGINT, 143 SIGTERM) however early it comes; a command stopped
waits at most harness.run.sut.dispatch.STOP_GRACE_S for its cards; standard output that cannot be written is
said to be standard output's. Each child runs under a timeout: a hang fails the test, never the machine.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import appliance
from submission_fixtures import make_tree

from harness.core.errors import Terminated

# The command as its console script starts it, with a signal sent to itself at the first import of a module
# (the heavy imports: numpy comes with the CLI): deterministic, where a timer would race the machine's load.
_AT_IMPORT = """
import importlib, importlib.abc, os, signal, sys
sig, target = getattr(signal, sys.argv[1]), sys.argv[2]
class Stop(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target_=None):
        if name == target:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), sig)
        return None
sys.meta_path.insert(0, Stop())
try:
    from harness.cli.entry import main      # the console script's entry
except ImportError:
    from harness.cli.main import main       # before it had one
sys.argv = ["appliance", *sys.argv[3:]]
sys.exit(main())
"""


def _at_import(sig: str, module: str, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _AT_IMPORT, sig, module, *map(str, args)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if ".staging" in p.name or p.name.endswith((".owner", ".tmp")))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", [["topology", "detect"], ["submission", "check", "/nonexistent"],
                                     ["run", "--backend", "null", "-q"]])
def test_a_signal_during_the_imports_is_one_line(sig: str, command: list[str], tmp_path: Path) -> None:
    """SIGINT in the first 0.3-0.5 s printed a 30-line KeyboardInterrupt traceback (topology, check, run)."""
    args = [*command, "--results", tmp_path / "r"] if command[0] == "run" else command
    proc = _at_import(sig, "numpy", *args)
    code = 128 + getattr(signal, sig)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    how = "interrupted" if sig == "SIGINT" else f"terminated ({sig})"
    assert proc.stderr == f"appliance: {how} before it started; nothing was done\n", proc.stderr
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


def test_an_error_a_library_raised_while_handling_a_signal_is_the_stop(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """SIGHUP / SIGTERM during report's matplotlib import: `internal error: RuntimeError` (matplotlib turned
    the interrupt into its own error). Equivalent: the report's drawing raises RuntimeError while the
    SIGTERM's Terminated is handled."""
    from harness.report import html

    def drawn(*_a: object, **_k: object) -> None:
        try:
            raise Terminated(signal.SIGTERM)
        except Terminated:
            raise RuntimeError("Could not import matplotlib") from None

    monkeypatch.setattr(html, "render", drawn)
    (tmp_path / "r").mkdir()
    code = appliance("report", tmp_path / "r", "-o", tmp_path / "rep.html")
    err = capsys.readouterr().err
    assert "internal error" not in err and "RuntimeError" not in err, err
    assert code == 143 and err.strip() == "appliance: terminated (SIGTERM)", (code, err)


SLOW = "version: 1\nname: slow\nmodel: x\nsource: x\ninput_dtype: uint8\nbenchmarks:\n  resnet50: " \
       "{samples_per_second: 0.1, batch: 8}\n"  # the slowest a profile may be (records/fields)


def test_sigterm_is_honoured_while_a_card_takes_minutes_per_batch(data_dir: Path, tmp_path: Path) -> None:
    """A simulated profile with samples_per_second 0.001 hung in calibration and ignored SIGTERM for 620 s
    (killed, owner and staging left); such a profile is refused now, and at the slowest allowed (0.1/s: 80 s a
    batch) the stop waits STOP_GRACE_S for the card's thread, then leaves it."""
    from harness.run.sut.dispatch import STOP_GRACE_S

    profile = tmp_path / "slow.yaml"
    profile.write_text(SLOW)
    results = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--data-dir", str(data_dir), "--results",
                             str(results), "--cards", f"simulate:{profile}:1", "-q", "--duration-ms", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:  # the warm-up's first batch (80 s) has begun once the card is listed
        assert proc.stdout is not None
        while "card 0" not in proc.stdout.readline():
            assert proc.poll() is None
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=STOP_GRACE_S + 50)  # a hang detector, not a timing verdict
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("appliance: run terminated (SIGTERM)"), err
    assert _leftovers(tmp_path) == []


def _lost(proc: subprocess.CompletedProcess[str], why: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"appliance: error: standard output could not be written ({why}); what the command printed there is lost "
        f"(files it writes are not): give it a file or a pipe that takes it, or use -o where the command has it")
    assert "choose a writable folder" not in proc.stderr


def test_a_closed_stdout_is_said(tmp_path: Path) -> None:
    """`topology detect >&-` exited 0 with the map lost."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "topology", "detect"], stdout=None, text=True,
                          stderr=subprocess.PIPE, timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=lambda: __import__("os").close(1))
    _lost(subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr), "it is closed")


def test_a_full_stdout_is_stdouts_and_the_run_is_kept(data_dir: Path, tmp_path: Path) -> None:
    """stdout on /dev/full: "no space left on the device ... choose a writable folder" and the run abandoned."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--data-dir", str(data_dir), "--results",
                               str(tmp_path / "r"), "--backend", "null", "--duration-ms", "300"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300, stdin=subprocess.DEVNULL)
    _lost(subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr), "No space left on device")
    assert list((tmp_path / "r").rglob("run_1/mlperf_log_detail.txt"))


def _commands(data_dir: Path, tmp_path: Path) -> dict[str, list[object]]:
    make_tree(tmp_path / "tree", "v6.1")
    return {
        "topology": ["topology", "detect", "--format", "json", "-o", tmp_path / "out" / "map.json"],
        "check": ["submission", "check", tmp_path / "tree"],
        "run": ["run", "--data-dir", data_dir, "--results", tmp_path / "out", "--backend", "null",
                "--duration-ms", "300", "-q"],
        "prepare": ["prepare", "--data-dir", tmp_path / "data", "--samples", "8", "-q"],
    }


@pytest.mark.slow
def test_sigterm_at_seeded_moments_of_each_command(data_dir: Path, tmp_path: Path) -> None:
    """SIGTERM at three moments of each command (seeded: the same moments every time): it ends within the
    hang detector's bound, at the shell's code in one line or finished, no traceback, nothing half-made."""
    moments = random.Random(41).sample([0.05, 0.2, 0.4, 0.7, 1.0, 1.5, 2.5, 4.0], 3)
    for name, args in _commands(data_dir, tmp_path).items():
        for moment in moments:
            for made in ("out", "data"):
                shutil.rmtree(tmp_path / made, ignore_errors=True)
            proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *map(str, args)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            time.sleep(moment)
            proc.send_signal(signal.SIGTERM)
            try:
                _, err = proc.communicate(timeout=120)
            finally:
                proc.kill()
            where = f"{name} at {moment} s: rc {proc.returncode}, {err!r}"
            assert proc.returncode in (0, 1, 143), where  # finished (check: 1 is its verdict), or stopped
            assert "Traceback" not in err and "internal error" not in err, where
            if proc.returncode == 143:
                assert len(err.strip().splitlines()) == 1 and "terminated (SIGTERM)" in err, where
            assert _leftovers(tmp_path) == [], where
