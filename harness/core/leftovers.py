"""Temporary files and folders that a killed process (SIGKILL, out of memory) could not remove.

Every temporary the appliance makes beside its files is named `.NAME.PID.[random.]tmp`
(`harness.core.fsutil.tmp_prefix`); the next command that writes in the same folder removes those whose
process is gone and says so, so a killed `prepare` does not keep a disk full with hidden files. A
process that runs under the PID but started after the temporary was made is another one (PIDs are used
again, and in the image the appliance is always PID 1): its temporary is removed too. The calibration
probes' folders in the temporary folder (`.appliance-probe.PID.*.tmp`) are found the same way.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.core.processes import pid_alive, start_ticks
from harness.core.sysfs import Sysfs

_TMP = re.compile(r"^\..+\.(?P<pid>[0-9]+)\.(?:[A-Za-z0-9_]+\.)?tmp$")


PROBES = "appliance-probe"  # the calibration probes' folders, in the temporary folder (`tempfile`)
SLACK_S = 2.0  # the boot time /proc gives is whole seconds


def sweep(folders: Iterable[Path], echo: Callable[[str], None], only: str = "") -> list[Path]:
    """Remove the temporaries of dead processes in `folders` (not below them), those named `.ONLY…` when
    given (the temporary folder holds others' files too); one line per removal."""
    removed = []
    for folder in folders:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:  # not made yet, or unreadable: nothing of ours to remove
            continue
        for entry in entries:
            m = _TMP.match(entry)
            if m is None or not entry.startswith(f".{only}") or _owner_runs(int(m["pid"]), folder / entry):
                continue
            path = folder / entry
            size = _size(path)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            if not path.exists():
                echo(f"removed {path} ({size / 1e6:.1f} MB), left by a process that is gone (PID {m['pid']})")
                removed.append(path)
    return removed


def _owner_runs(pid: int, path: Path) -> bool:
    """Whether the process that made `path` may still run: PID `pid` runs, and started before `path` was made."""
    if not pid_alive(pid):
        return False
    started = _started(pid)
    try:
        return started is None or path.lstat().st_ctime >= started - SLACK_S
    except OSError:
        return True  # gone meanwhile: nothing to remove


def _started(pid: int) -> float | None:
    """When process `pid` started, in seconds since the epoch: the boot time plus its start in clock ticks."""
    ticks = start_ticks(pid)
    stat = Sysfs().text("proc/stat") or ""
    btime = next((line.split()[1] for line in stat.splitlines() if line.startswith("btime ")), None)
    if ticks is None or btime is None:
        return None
    return int(btime) + int(ticks) / os.sysconf("SC_CLK_TCK")


def _size(path: Path) -> int:
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
        return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir() or f.is_symlink())
    except OSError:
        return 0
