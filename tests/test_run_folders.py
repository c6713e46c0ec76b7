"""Run folders: claimed atomically across processes, runs killed or stopped by the machine kept as
run_N.incomplete with a line saying why, and nothing hidden left behind."""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import appliance

from harness.core import processes
from harness.run import rundirs

RUN = ["run", "--backend", "null", "-q"]


def _hidden(tree: Path) -> list[Path]:
    return [p for p in tree.rglob(".*") if not p.name.startswith(".write-probe")]


def _claim_and_commit(parent: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    barrier.wait()
    folder = rundirs.claim(Path(parent), "run", echo=lambda _: None)
    (folder.staging / "pid").write_text(str(os.getpid()))
    out.put(folder.commit().name)


def test_concurrent_claims_get_distinct_numbers(tmp_path: Path) -> None:
    """Eight processes released together by a barrier claim run_1 .. run_8, one each."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_claim_and_commit, args=(str(tmp_path), barrier, out)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 8
    names = sorted(out.get(timeout=5) for _ in range(8))
    assert sorted(names, key=lambda n: int(n.split("_")[1])) == [f"run_{i}" for i in range(1, 9)]
    assert len({(tmp_path / n / "pid").read_text() for n in names}) == 8
    assert _hidden(tmp_path) == []


_GATED = """
import os, sys, time
from harness.cli.main import main
gate = sys.argv[1]
open(gate + f".ready-{os.getpid()}", "w").close()
while not os.path.exists(gate):
    time.sleep(0.001)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("attempt", range(3))
def test_two_runs_started_together_both_finish(attempt: int, tmp_path: Path, data_dir: Path) -> None:
    """Two `appliance run`s, imported and waiting on one gate, into one --results: run_1 and run_2."""
    results, gate = tmp_path / "results", tmp_path / "gate"
    args = [*RUN, "--data-dir", str(data_dir), "--results", str(results), "--duration-ms", "300"]
    procs = [subprocess.Popen([sys.executable, "-c", _GATED, str(gate), *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("gate.ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # both have imported the appliance and wait on the gate
    gate.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    (perf,) = results.glob("*/resnet50/Offline/performance")
    assert sorted(p.name for p in perf.iterdir()) == ["run_1", "run_2"]
    assert all((perf / n / "mlperf_log_detail.txt").is_file() for n in ("run_1", "run_2"))
    assert _hidden(results) == []


def test_sigkilled_run_becomes_incomplete_at_the_next_run(tmp_path: Path, data_dir: Path) -> None:
    results = tmp_path / "results"
    args = [*RUN, "--data-dir", str(data_dir), "--results", str(results)]
    child = subprocess.Popen([sys.executable, "-m", "harness.cli", *args, "--duration-ms", "60000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(results.rglob(".run_1.staging-*/mlperf_log_detail.txt")):
        time.sleep(0.2)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    (staging,) = results.rglob(".run_1.staging-*")
    next_run = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--duration-ms", "300"],
                              capture_output=True, text=True, timeout=300)
    assert next_run.returncode == 0, next_run.stderr
    assert f"PID {child.pid}" in next_run.stdout and "run_1.incomplete" in next_run.stdout
    perf = staging.parent
    assert sorted(p.name for p in perf.iterdir()) == ["run_1.incomplete", "run_2"]
    assert f"PID {child.pid}" in (perf / "run_1.incomplete" / "INCOMPLETE.txt").read_text()
    assert (perf / "run_1.incomplete" / "mlperf_log_detail.txt").is_file()
    assert _hidden(results) == []


_INTERRUPTED_WARM_UP = """
import os, signal, sys, time
from harness.run import calibration
from harness.cli.main import main
real = calibration.calibrate
def interrupted_warm_up(*args, **kwargs):  # a real SIGINT, delivered while the cards warm up
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
    return real(*args, **kwargs)
calibration.calibrate = interrupted_warm_up
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_before_loadgen_keeps_nothing_and_says_so(tmp_path: Path, data_dir: Path) -> None:
    """SIGINT while the cards warm up (before LoadGen starts): exit 130, `nothing was kept`, no folder, not even
    the empty folders the run made for its results."""
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_WARM_UP, *RUN, "--data-dir", str(data_dir),
                           "--results", str(tmp_path), "--duration-ms", "300"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert "nothing was kept" in proc.stderr and "incomplete" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # and no empty results tree (issue 26 item 10: it stayed)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_disk_fault_during_a_run_is_one_line_and_an_incomplete_run(code: int, tmp_path: Path, data_dir: Path,
                                                                   capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest write fails as a full (or failing) disk fails it: run_1.incomplete saying why."""
    from harness.records import manifest

    def failing_write(path: Path, data: object) -> None:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(manifest, "atomic_write_json", failing_write)
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path, "--duration-ms", "300") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and errno.errorcode[code] in err[0] and "run_1.incomplete" in err[0], err
    assert "internal error" not in err[0]
    (incomplete,) = tmp_path.rglob("run_1.incomplete")
    assert errno.errorcode[code] in (incomplete / "INCOMPLETE.txt").read_text()
    assert (incomplete / "mlperf_log_detail.txt").is_file()
    assert not list(tmp_path.rglob("run_1")) and _hidden(tmp_path) == []


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of a few MB, where root may mount one; the test is skipped elsewhere."""
    mounts = []

    def make(size: str) -> Path:
        where = tmp_path / f"disk-{size}"
        where.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounts.append(where)
        return where

    yield make
    for where in mounts:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_nearly_full_disk_is_refused_before_the_run(small_disk, tmp_path: Path, data_dir: Path, capsys) -> None:
    disk = small_disk("2m")
    assert appliance(*RUN, "--data-dir", data_dir, "--results", disk, "--duration-ms", "300") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "free" in err[0] and "needs about" in err[0], err
    assert not list(disk.rglob("run_*")) and _hidden(disk) == []


def test_disk_filling_during_a_run_ends_it_incomplete(small_disk, tmp_path: Path, data_dir: Path) -> None:
    """A real full disk: the run passes the free-space check, then the disk fills while LoadGen runs."""
    disk = small_disk("20m")
    child = subprocess.Popen([sys.executable, "-m", "harness.cli", *RUN, "--data-dir", str(data_dir),
                              "--results", str(disk), "--duration-ms", "4000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(disk.rglob(".run_1.staging-*/mlperf_log_detail.txt")):
        time.sleep(0.1)
    with open(disk / "filler", "wb") as f, pytest.raises(OSError) as full:
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
    assert full.value.errno == errno.ENOSPC
    _, err = child.communicate(timeout=300)
    lines = err.strip().splitlines()
    assert child.returncode == 2 and len(lines) == 1 and "ENOSPC" in lines[0], err
    assert "internal error" not in err and "run_1.incomplete" in lines[0]
    assert list(disk.rglob("run_1.incomplete")) and not list(disk.rglob("run_1")) and _hidden(disk) == []


def test_disk_fault_in_a_compliance_test_keeps_it_incomplete(tmp_path: Path, data_dir: Path, capsys,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """TEST04's first run (the reference taken right before the test run) hits a full disk: TEST04.incomplete
    holds it, and the line names that folder."""
    from harness.records import manifest

    args = [*RUN, "--data-dir", data_dir, "--results", tmp_path, "--duration-ms", "300"]
    assert appliance(*args) == 0

    def failing_write(path: Path, data: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(manifest, "atomic_write_json", failing_write)
    capsys.readouterr()
    assert appliance(*args, "--mode", "TEST04") == 2
    err = capsys.readouterr().err.strip().splitlines()
    (kept,) = tmp_path.rglob("TEST04.incomplete")
    assert len(err) == 1 and "ENOSPC" in err[0] and str(kept / "reference" / "run_1.incomplete") in err[0], err
    assert (kept / "INCOMPLETE.txt").is_file() and (kept / "reference" / "run_1.incomplete").is_dir()
    assert not list(tmp_path.rglob("TEST04")) and _hidden(tmp_path) == []


def _left_by(parent: Path, owner: str, pid: int) -> None:
    """What a killed process leaves: its claim naming `owner` and a staging folder with a detail log."""
    parent.mkdir(parents=True, exist_ok=True)
    os.symlink(owner, parent / ".run_1.owner")
    (parent / f".run_1.staging-{pid}").mkdir()
    (parent / f".run_1.staging-{pid}" / "mlperf_log_detail.txt").write_text(":::MLLOG {}\n")


def test_a_claim_whose_pid_runs_again_is_recovered(tmp_path: Path) -> None:
    """Issue 26 item 9: in the image the appliance is PID 1, so a killed container left `.run_1.staging-1`
    that no later container recovered (PID 1 is always alive). The claim names boot id and start time too:
    PID 1 started at another time is another process."""
    assert processes.pid_alive(1)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    _left_by(tmp_path, f"1:{boot}:0", 1)  # PID 1 of a container started at tick 0 of this boot: not this one
    lines: list[str] = []
    folder = rundirs.claim(tmp_path, "run", echo=lines.append)
    assert folder.final.name == "run_2"
    kept = tmp_path / "run_1.incomplete"
    assert lines == [f"found an unfinished run left by a process that is gone (PID 1): kept as {kept}"]
    assert (tmp_path / "run_1.incomplete" / "mlperf_log_detail.txt").is_file()
    assert not (tmp_path / ".run_1.owner").exists() and not (tmp_path / ".run_1.staging-1").exists()


def test_claims_name_their_owner_and_old_claims_are_judged_by_pid(tmp_path: Path) -> None:
    """A live claim (this process, as `claim` names it) stays claimed; an older version's `-> PID` claim is
    judged by its PID alone, as before."""
    mine = rundirs.claim(tmp_path / "a", "run", echo=print)
    pid, boot, start = os.readlink(tmp_path / "a" / ".run_1.owner").split(":")
    assert int(pid) == os.getpid() and boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert start == Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
    assert rundirs.recover(tmp_path / "a") == [] and mine.staging.is_dir()
    _left_by(tmp_path / "b", "1", 1)  # an old claim of PID 1, which runs: kept as it is
    assert rundirs.recover(tmp_path / "b") == [] and (tmp_path / "b" / ".run_1.staging-1").is_dir()


def _in_new_pid_namespace(*args: str) -> subprocess.Popen[str]:
    """The CLI as PID 1 of a new PID namespace, as in the image (`ENTRYPOINT ["appliance"]`); root only."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a PID namespace here (needs root and unshare)")
    return subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "harness.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_run_killed_as_pid_1_is_recovered_by_the_next_pid_1(tmp_path: Path, data_dir: Path) -> None:
    """Issue 26 item 9, as it happens: a container's appliance (PID 1) is killed mid-run; the next container's
    appliance, PID 1 again and alive, keeps the run as run_1.incomplete (it never did)."""
    results = tmp_path / "results"
    args = [*RUN, "--data-dir", str(data_dir), "--results", str(results)]
    first = _in_new_pid_namespace(*args, "--duration-ms", "60000")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(results.rglob(".run_1.staging-1/mlperf_log_detail.txt")):
        assert first.poll() is None, first.communicate()
        time.sleep(0.2)
    (child,) = Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()
    os.kill(int(child), signal.SIGKILL)  # the namespace's PID 1: the container is killed
    first.communicate(timeout=60)
    assert list(results.rglob(".run_1.staging-1"))
    second = _in_new_pid_namespace(*args, "--duration-ms", "300")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert "found an unfinished run left by a process that is gone (PID 1)" in out
    (perf,) = results.rglob("performance")
    assert sorted(p.name for p in perf.iterdir()) == ["run_1.incomplete", "run_2"]
    assert _hidden(results) == []


def test_probe_folders_of_killed_runs_are_removed(tmp_path: Path, data_dir: Path, capsys) -> None:
    """Issue 26 item 10: a run killed while it calibrates leaves its probe folder in the temporary folder;
    the next run removes it (and names it) when its process is gone."""
    import tempfile

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    probe = Path(tempfile.gettempdir()) / f".appliance-probe.{gone}.k1ll3d00.tmp"
    probe.mkdir()
    (probe / "mlperf_log_detail.txt").write_text("x" * 1000)
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path, "--duration-ms", "300") == 0
    assert not probe.exists()
    assert f"removed {probe} (0.0 MB), left by a process that is gone (PID {gone})" in capsys.readouterr().out


def test_runs_on_the_same_cores_warn_of_each_other(tmp_path: Path, data_dir: Path, capsys,
                                                   run_registry: Path) -> None:
    """Issue 26 item 11: two runs at once on one machine's cores were both VALID with no word that they shared
    them. Each now names the other in its manifest (`shared_cores`) and the later one's summary warns; the
    registry is empty once both are done."""
    import json

    first = subprocess.Popen([sys.executable, "-m", "harness.cli", *RUN, "--data-dir", str(data_dir), "--results",
                              str(tmp_path / "a"), "--duration-ms", "15000"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "a").rglob(".run_1.staging-*/mlperf_log_detail.txt")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    assert appliance(*RUN, "--data-dir", data_dir, "--results", tmp_path / "b", "--duration-ms", "300") == 0
    out = capsys.readouterr().out
    assert f"warning: other appliance run(s) worked on this run's cores at the same time: PID {first.pid} " \
           f"(resnet50 Offline performance) on cores" in out, out
    (second,) = (tmp_path / "b").rglob("run_1/manifest.json")
    assert [s.split(" (")[0] for s in json.loads(second.read_text())["shared_cores"]] == [f"PID {first.pid}"]
    assert first.wait(300) == 0, first.communicate()
    (earlier,) = (tmp_path / "a").rglob("run_1/manifest.json")
    assert [s.split(" (")[0] for s in json.loads(earlier.read_text())["shared_cores"]] == [f"PID {os.getpid()}"]
    assert list(run_registry.iterdir()) == []
