"""Numbered result folders (`run_N`, `accuracy_N`, `TEST01_N`) claimed atomically across processes.

Several `appliance run`s, compliance tests and `reproduce` may write one results tree at once. A
number is claimed by creating the symlink `.NAME.owner -> PID` (creating a link is atomic and fails
when the name exists, and its target names the owner from the first instant); the run then writes
into `.NAME.staging-PID` beside it and renames that to NAME (or NAME.incomplete) when it ends. A
staging folder whose process is gone (SIGKILL, out of memory) is found by the next claim in the
same folder and kept as NAME.incomplete, with INCOMPLETE.txt and a printed line saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import ApplianceError
from harness.fsutil import atomic_write_text, make_dirs
from harness.topology.sysfs import Sysfs

Echo = Callable[[str], None]
INCOMPLETE = ".incomplete"
# errors of the machine, not of the run: the disk is full, over quota, read-only or failing
DISK_FAULTS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
               errno.EIO: "input/output error (a failing disk?)", errno.EROFS: "the file system is read-only"}


def numbered(stem: str, n: int, bare_first: bool) -> str:
    """`run_3`; with bare_first the first is the stem itself: `accuracy`, `accuracy_2`."""
    return stem if bare_first and n == 1 else f"{stem}_{n}"


def pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, killed but not yet reaped, does not)."""
    stat = Sysfs().text(f"proc/{pid}/stat")
    if stat is not None:
        return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


@dataclass
class RunFolder:
    """A claimed result folder: LoadGen writes into `staging`; `commit` or `abandon` ends the claim."""

    final: Path
    staging: Path
    owner: Path | None  # the claim's link; None when the caller chose the folder (compliance's inner run)

    @property
    def incomplete(self) -> Path:
        return self.final.with_name(self.final.name + INCOMPLETE)

    def commit(self) -> Path:
        os.replace(self.staging, self.final)
        self._release()
        return self.final

    def abandon(self, why: str, keep: bool) -> Path | None:
        """End the run unfinished: kept as NAME.incomplete with INCOMPLETE.txt (when `keep` and there
        is anything to keep), else removed; returns the kept folder or None."""
        kept = None
        if keep and self.staging.is_dir():
            os.replace(self.staging, self.incomplete)
            kept = self.incomplete
            with contextlib.suppress(OSError):  # a full disk may refuse even this; the printed line says why
                atomic_write_text(kept / "INCOMPLETE.txt", why + "\n")
        else:
            shutil.rmtree(self.staging, ignore_errors=True)
        self._release()
        return kept

    def _release(self) -> None:
        if self.owner is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.owner)


def fixed(final: Path) -> RunFolder:
    """A folder the caller owns (a compliance test's inner run): staged beside it, not numbered."""
    final = final.resolve()
    staging = final.with_name(f".{final.name}.staging-{os.getpid()}")
    staging.mkdir(parents=True)
    return RunFolder(final, staging, None)


def claim(parent: Path, stem: str, bare_first: bool = False, echo: Echo = print) -> RunFolder:
    """Claim the next free NAME in `parent` for this process, after keeping what dead processes left."""
    make_dirs(parent)
    recover(parent, echo)
    pid = os.getpid()
    n = max(_taken(parent, stem), default=0) + 1
    while True:
        name = numbered(stem, n, bare_first)
        owner = parent / f".{name}.owner"
        try:
            os.symlink(str(pid), owner)
        except FileExistsError:
            n += 1
            continue
        except FileNotFoundError:  # a failed command beside us removed the folder it made, empty: make it again
            make_dirs(parent)
            continue
        if any((parent / f"{name}{s}").exists() for s in ("", INCOMPLETE)):  # made by a version without claims
            os.unlink(owner)
            n += 1
            continue
        staging = parent / f".{name}.staging-{pid}"
        try:
            staging.mkdir()
        except BaseException:
            os.unlink(owner)
            raise
        return RunFolder(parent / name, staging, owner)


_ENTRY = re.compile(r"^\.?(?P<name>[A-Za-z0-9]+(?:_\d+)?)(?:\.incomplete|\.owner|\.staging-(?P<pid>\d+))?$")


def _taken(parent: Path, stem: str) -> list[int]:
    """Numbers in use in `parent` for `stem`: finished, incomplete, claimed or being written."""
    numbers = []
    for entry in os.listdir(parent):
        m = _ENTRY.match(entry)
        if m is None:
            continue
        name = m["name"]
        if name == stem:
            numbers.append(1)
        elif name.startswith(stem + "_") and name[len(stem) + 1:].isdigit():
            numbers.append(int(name[len(stem) + 1:]))
    return numbers


def recover(parent: Path, echo: Echo = print) -> list[Path]:
    """Keep staging folders of dead processes in `parent` as NAME.incomplete and drop their claims."""
    kept = []
    for entry in sorted(os.listdir(parent)):
        m = _ENTRY.match(entry)
        if m is None or not entry.startswith("."):
            continue
        path = parent / entry
        if m["pid"] is not None:
            pid = int(m["pid"])
            if pid_alive(pid):
                continue
            target = parent / (m["name"] + INCOMPLETE)
            try:
                os.rename(path, target)  # fails if another process got there first
            except OSError:
                continue
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            with contextlib.suppress(OSError):
                atomic_write_text(target / "INCOMPLETE.txt",
                                  f"the process that wrote this run (PID {pid}) ended without finishing it "
                                  f"(killed, e.g. SIGKILL or out of memory); found by PID {os.getpid()} at {stamp}\n")
            echo(f"found an unfinished run left by a process that is gone (PID {pid}): kept as {target}")
            kept.append(target)
            _drop_claim(parent / f".{m['name']}.owner", pid)
        elif entry.endswith(".owner"):
            with contextlib.suppress(OSError, ValueError):
                if not pid_alive(int(os.readlink(path))) and not any(parent.glob(f".{m['name']}.staging-*")):
                    _drop_claim(path, int(os.readlink(path)))
    return kept


def _drop_claim(owner: Path, pid: int) -> None:
    with contextlib.suppress(OSError, ValueError):
        if int(os.readlink(owner)) == pid:
            os.unlink(owner)


def check_free_space(folder: Path, need: int, what: str) -> None:
    """Refuse in one line when `folder`'s file system has less than `need` bytes free."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise ApplianceError(f"only {_mb(free)} free in {probe}; {what} needs about {_mb(need)} for its logs: "
                             f"free some space or choose another --results folder")


def disk_fault(exc: BaseException, name_file: bool = True) -> str | None:
    """One line for an error of the machine (full disk, I/O error), None for anything else; `name_file`:
    with the file it was writing (not when that was a temporary the caller has removed)."""
    if isinstance(exc, OSError) and exc.errno in DISK_FAULTS:
        target = exc.filename2 or exc.filename  # a copy's or rename's destination, else the file
        where = f" writing {target}" if target and name_file else ""
        return f"{DISK_FAULTS[exc.errno]} ({errno.errorcode[exc.errno]}){where}"
    return None


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
