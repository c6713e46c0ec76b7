"""Issue 41, the environment: each break as the trial ran it (or its equivalent, named).

Every variable is read by harness.core.environment, parsed as its kind and bounded by the machine; a wrong
value is one line before any work. Nothing changes the mode of a folder it did not make; a counter file
that turns into a FIFO or a device mid-run ends the energy measurement, never the run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import appliance

from harness.hw.energy import EnergyMeter
from harness.run.neighbours import REGISTRY_ENV

RUN = ["run", "--backend", "null", "-q", "--duration-ms", "300"]


def _cli(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, **env})


@pytest.mark.parametrize("value", ["100000", "abc", "٣", "0", "-1", " 2"])
def test_intra_op_threads_is_a_count_up_to_the_machines_cpus(value: str, tmp_path: Path) -> None:
    """`APPLIANCE_INTRA_OP_THREADS=100000 appliance run`: 32,174 threads, 17 GB; `=abc`: ValueError; `=٣`
    taken for 3. Refused in one line before any work (topology detect reads no thread count: still refused)."""
    for args in ([*RUN, "--results", tmp_path / "r", "--data-dir", tmp_path / "d"], ["topology", "detect"]):
        proc = _cli({"APPLIANCE_INTRA_OP_THREADS": value}, *args)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line == (f"appliance: error: APPLIANCE_INTRA_OP_THREADS={value!r} is not understood: it takes a whole "
                        f"number from 1 to {len(os.sched_getaffinity(0))} in ASCII digits; set it so or unset it")
        assert proc.stdout == ""
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("name", "value"), [("APPLIANCE_CUDA_GRAPH", "yes"), ("APPLIANCE_IO_BINDING", "١"),
                                             ("APPLIANCE_CUDNN_SEARCH", "fast"), ("APPLIANCE_OPENVINO_PROCESS", "2")])
def test_every_appliance_switch_and_choice_is_parsed(name: str, value: str) -> None:
    proc = _cli({name: value}, "topology", "detect")
    assert proc.returncode == 2 and f"{name}={value!r} is not understood" in proc.stderr, proc.stderr


def test_tune_batch_sizes_take_ascii_digits_only(data_dir: Path) -> None:
    """`tune --batch-sizes ٨` (an Arabic-Indic eight) was taken for 8."""
    assert appliance("tune", "--data-dir", data_dir, "--batch-sizes", "1,٨", "-s", "Offline") == 2


def test_reproduce_tolerance_takes_ascii_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`reproduce --tolerance ٥%` was taken for 5%."""
    (tmp_path / "tree").mkdir()
    assert appliance("reproduce", tmp_path / "tree", "--tolerance", "٥%", "-o", tmp_path / "out") == 2
    assert "--tolerance '٥%' is not a number" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_registry_folder_found_keeps_its_mode(data_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`APPLIANCE_RUN_REGISTRY` at the user's 0700 folder made it 1777 (world-writable), without a word."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv(REGISTRY_ENV, str(mine))
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r") == 0
    assert _mode(mine) == 0o700


def test_a_registry_at_a_run_folder_is_refused_and_not_written(data_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Pointed at a run folder, the registry wrote its entries into it."""
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r") == 0
    run = next((tmp_path / "r").rglob("run_1"))
    before = sorted(p.name for p in run.iterdir())
    mode = _mode(run)
    monkeypatch.setenv(REGISTRY_ENV, str(run))
    capsys.readouterr()
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path / "r2") == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{REGISTRY_ENV}={run} holds files that are not run entries" in line, line
    assert sorted(p.name for p in run.iterdir()) == before and _mode(run) == mode


def _zone(root: Path, max_uj: int = 262143328850) -> Path:
    z = root / "sys/class/powercap/intel-rapl:0"
    z.mkdir(parents=True)
    (z / "name").write_text("package-0\n")
    (z / "energy_uj").write_text("1000000\n")
    (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return z


@pytest.mark.parametrize("swap", ["fifo", "dev_zero"])
def test_a_counter_turned_into_a_fifo_ends_only_the_measurement(swap: str, tmp_path: Path) -> None:
    """An energy counter turned into a FIFO or /dev/zero mid-run ended the benchmark run (the code said it
    ends only the measurement): the meter is stopped as the runner stops it, after the timed part."""
    counter = _zone(tmp_path) / "energy_uj"
    meter = EnergyMeter(tmp_path)
    meter.start()
    counter.unlink()
    if swap == "fifo":
        os.mkfifo(counter)
    else:
        counter.symlink_to("/dev/zero")
    meter.stop()
    assert meter.result(1000)["available"] is False


def test_a_counter_range_of_minus_one_is_no_domain(tmp_path: Path) -> None:
    """A powercap `max_energy_range_uj` of -1: ZeroDivisionError after the run."""
    _zone(tmp_path, max_uj=-1)
    meter = EnergyMeter(tmp_path)
    meter.start()
    meter.stop()
    assert meter.result(1000)["available"] is False


def test_a_counter_range_of_minus_one_through_a_real_run(data_dir: Path, tmp_path: Path) -> None:
    """The same zone under a real `appliance run` (APPLIANCE_POWERCAP_ROOT, as the trial ran it): the run
    finishes and its manifest says energy was not measured (it was `ZeroDivisionError` after the run)."""
    import json

    _zone(tmp_path / "pc", max_uj=-1)
    results = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness.cli", *RUN, "--data-dir", str(data_dir), "--results",
                           str(results), "--json"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "APPLIANCE_POWERCAP_ROOT": str(tmp_path / "pc")})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    (manifest,) = results.rglob("run_1/manifest.json")
    energy = json.loads(manifest.read_text())["energy"]
    assert energy["available"] is False and "energy not measured" in energy["note"], energy


@pytest.mark.parametrize("value", ["/dev/zero", "a-file"])
def test_a_powercap_root_that_is_no_folder_is_one_line(value: str, tmp_path: Path) -> None:
    """APPLIANCE_POWERCAP_ROOT=/dev/zero (hostile round 6, row 72): exit 0 with energy silently not measured, the
    bad value never said; now one line before any work, and no results folder made."""
    (tmp_path / "a-file").write_text("x\n")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--backend", "null", "--results",
                           str(tmp_path / "r"), "--data-dir", str(tmp_path / "none")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env={**os.environ, "APPLIANCE_POWERCAP_ROOT": value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"appliance: error: APPLIANCE_POWERCAP_ROOT={value!r} is not understood: it takes an existing folder; "
        "set it so or unset it"], done.stderr
    assert not (tmp_path / "r").exists()
