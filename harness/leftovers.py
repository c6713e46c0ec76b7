"""Temporary files and folders that a killed process (SIGKILL, out of memory) could not remove.

Every temporary the appliance makes beside its files is named `.NAME.PID.[random.]tmp`
(`harness.fsutil.tmp_prefix`); the next command that writes in the same folder removes those whose
process is gone and says so, so a killed `prepare` does not keep a disk full with hidden files.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.rundirs import pid_alive

_TMP = re.compile(r"^\..+\.(?P<pid>\d+)\.(?:[A-Za-z0-9_]+\.)?tmp$")


def sweep(folders: Iterable[Path], echo: Callable[[str], None]) -> list[Path]:
    """Remove the temporaries of dead processes in `folders` (not below them); one line per removal."""
    removed = []
    for folder in folders:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:  # not made yet, or unreadable: nothing of ours to remove
            continue
        for entry in entries:
            m = _TMP.match(entry)
            if m is None or pid_alive(int(m["pid"])):
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


def _size(path: Path) -> int:
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
        return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir() or f.is_symlink())
    except OSError:
        return 0
