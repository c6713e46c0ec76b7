"""Issue 41: the system folder replaced by a link while a run writes into it. The run's files after LoadGen and
the renames at its end go through the folders it holds open, never through the path: one line, exit 2, the run
kept as `run_1.incomplete` where its folder went, no claim or staging folder left, nothing written through the
link (before: `internal error: FileNotFoundError`, `.run_1.owner` and `.run_1.staging-PID` left; a link to a
folder holding the staging name got the manifest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_interrupts import _one_line

# LoadGen's test done, the system folder is moved aside and a link to a look-alike folder put in its place
_MOVED_AFTER_LOADGEN = """
import os, sys
from pathlib import Path
from harness.cli.main import main
from harness.run import runner
results, elsewhere = Path(sys.argv[1]), Path(sys.argv[2])
real = runner._loadgen_test
def then_moved(*args, **kwargs):
    done = real(*args, **kwargs)
    os.rename(results / "box", results / "box.moved")
    (elsewhere / "resnet50" / "Offline" / "performance" / f".run_1.staging-{os.getpid()}").mkdir(parents=True)
    os.symlink(elsewhere, results / "box")
    return done
runner._loadgen_test = then_moved
sys.exit(main(sys.argv[3:]))
"""


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def test_the_system_folder_replaced_by_a_link_mid_run(data_dir: Path, tmp_path: Path) -> None:
    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    done = subprocess.run([sys.executable, "-c", _MOVED_AFTER_LOADGEN, str(results), str(elsewhere), "run",
                           "--backend", "null", "-q", "--duration-ms", "300", "--data-dir", str(data_dir),
                           "--results", str(results), "--system", "box"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    perf = results / "box.moved" / "resnet50" / "Offline" / "performance"
    line = _one_line(done.stderr)
    assert line == (f"appliance: error: {results}/box/resnet50/Offline/performance was moved or replaced while "
                    f"the run wrote into it (the path now leads to {elsewhere}/resnet50/Offline/performance); "
                    f"nothing was written through it; the run is kept as {perf}/run_1.incomplete: put the folder "
                    f"back and run again"), line
    assert _files(elsewhere) == []  # the look-alike staging folder got nothing
    assert sorted(os.listdir(perf)) == ["run_1.incomplete"]  # no claim, no staging folder
    kept = perf / "run_1.incomplete"
    assert {"manifest.json", "mlperf_log_detail.txt", "INCOMPLETE.txt"} <= set(os.listdir(kept))
    assert "was moved or replaced" in (kept / "INCOMPLETE.txt").read_text()


def test_a_run_whose_folder_stays_is_committed(data_dir: Path, tmp_path: Path) -> None:
    """The control: the same run, its folder left alone, is `run_1` with no claim or staging beside it."""
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "null", "-q", "--duration-ms",
                           "300", "--data-dir", str(data_dir), "--results", str(results), "--system", "box"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(results / "box" / "resnet50" / "Offline" / "performance")) == ["run_1"]
