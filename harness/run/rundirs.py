"""Numbered result folders (`run_N`, `accuracy_N`, `TEST01_N`) claimed atomically across processes.

Several `appliance run`s, compliance tests and `reproduce` may write one results tree at once. A
number is claimed by creating the symlink `.NAME.owner -> PID:BOOT_ID:START` (creating a link is atomic
and fails when the name exists, and its target names the owner from the first instant: its PID, the
kernel's boot id and the process's start time in clock ticks, /proc/PID/stat field 22, so a PID used again
by another process, after a reboot or in the next container where the appliance is PID 1 again, is not
taken for the owner; a claim of an older version, `-> PID`, is judged by its PID alone); the run then writes
into `.NAME.staging-PID` beside it and renames that to NAME (or NAME.incomplete) when it ends. A
staging folder whose process is gone (SIGKILL, out of memory) is found by the next claim in the
same folder and kept as NAME.incomplete, with INCOMPLETE.txt and a printed line saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.fsutil import disk_fault
from harness.core.outbound import atomic_write_text, free_bytes, make_dirs
from harness.core.processes import identity, owner_alive, owner_pid

Echo = Callable[[str], None]
INCOMPLETE = ".incomplete"


def numbered(stem: str, n: int, bare_first: bool) -> str:
    """`run_3`; with bare_first the first is the stem itself: `accuracy`, `accuracy_2`."""
    return stem if bare_first and n == 1 else f"{stem}_{n}"


class FolderMoved(ApplianceError):
    """The folder a run was claimed in was moved or replaced (by a link) while the run wrote into it."""


@dataclass
class RunFolder:
    """A claimed result folder: LoadGen writes into `staging`; `commit` or `abandon` ends the claim.

    The folder it was claimed in is held open (`home`), and the staging folder too: the run's files after
    LoadGen go through `held` and the renames at the end are made in `home`, never through a path, so a
    parent folder moved or replaced by a link mid-run is said in one line (`FolderMoved`), and nothing is
    written through the link nor left behind (issue 41: `FileNotFoundError`, the claim and staging left)."""

    final: Path
    staging: Path
    owner: Path | None  # the claim's link; None when the caller chose the folder (compliance's inner run)
    home: int = field(init=False)  # descriptors of final's parent folder and of the staging folder
    _staged: int = field(init=False)
    _where: tuple[int, int, str] = field(init=False)  # the parent's device, inode and real path at the claim

    def __post_init__(self) -> None:
        self.home = inbound.open_folder(os.path.realpath(self.final.parent))  # links inside --results followed
        self._staged = inbound.open_folder(self.staging.name, dir_fd=self.home)
        st = os.fstat(self.home)
        self._where = (st.st_dev, st.st_ino, os.path.realpath(self.final.parent))

    @property
    def incomplete(self) -> Path:
        return self.final.with_name(self.final.name + INCOMPLETE)

    @property
    def held(self) -> Path:
        """The staging folder by its descriptor: where it is, whatever became of the path to it."""
        return Path(f"/proc/self/fd/{self._staged}")

    def moved(self) -> str | None:
        """None while final's parent path still leads to the folder claimed in; else what it leads to now."""
        try:
            st = os.stat(self.final.parent)
            real = os.path.realpath(self.final.parent)
        except OSError:
            return "nowhere"
        if (st.st_dev, st.st_ino, real) == self._where:
            return None
        return real

    def commit(self) -> Path:
        self._in_place(self.final.name)
        os.replace(self.staging.name, self.final.name, src_dir_fd=self.home, dst_dir_fd=self.home)
        self._release()
        return self.final

    def abandon(self, why: str, keep: bool) -> Path | None:
        """End the run unfinished: kept as NAME.incomplete with INCOMPLETE.txt (when `keep` and there
        is anything to keep), else removed; returns the kept folder or None."""
        kept = None
        if self.home < 0:  # ended already (a moved folder's run, kept by `commit`)
            return None
        if keep:
            with contextlib.suppress(OSError):  # a full disk may refuse even this; the printed line says why
                atomic_write_text(self.held / "INCOMPLETE.txt", why + "\n")
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile: nothing to keep
                os.replace(self.staging.name, self.incomplete.name, src_dir_fd=self.home, dst_dir_fd=self.home)
                kept = self.incomplete if self.moved() is None else \
                    Path(os.readlink(f"/proc/self/fd/{self.home}")) / self.incomplete.name
        else:
            shutil.rmtree(self.staging.name, ignore_errors=True, dir_fd=self.home)
        self._release()
        return kept

    def _in_place(self, name: str) -> None:
        """Refuse (`FolderMoved`) to finish a run whose folder's path leads elsewhere now; the run is kept as
        NAME.incomplete where its folder went."""
        now = self.moved()
        if now is None:
            return
        said = (f"{self.final.parent} was moved or replaced while the run wrote into it (the path now leads "
                f"{'nowhere' if now == 'nowhere' else 'to ' + now}); nothing was written through it")
        kept = self.abandon(said, keep=True)
        raise FolderMoved(f"{said}; the run is kept as {kept}: put the folder back and run again"
                          if kept else f"{said}; its staging folder was removed meanwhile: run again")

    def _release(self) -> None:
        if self.owner is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.owner.name, dir_fd=self.home)
        for fd in (self._staged, self.home):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.home = self._staged = -1


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
            os.symlink(identity(pid), owner)
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
            return RunFolder(parent / name, staging, owner)
        except BaseException:
            with contextlib.suppress(OSError):
                staging.rmdir()
            os.unlink(owner)
            raise


_ENTRY = re.compile(r"^\.?(?P<name>[A-Za-z0-9]+(?:_[0-9]+)?)(?:\.incomplete|\.owner|\.staging-(?P<pid>[0-9]+))?$")


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
        elif name.startswith(stem + "_") and inbound.is_digits(name[len(stem) + 1:]):
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
            if owner_alive(_staging_owner(parent / f".{m['name']}.owner", pid)):
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
                who = os.readlink(path)
                if not owner_alive(who) and not any(parent.glob(f".{m['name']}.staging-*")):
                    _drop_claim(path, owner_pid(who))
    return kept


def _staging_owner(owner: Path, pid: int) -> str:
    """The identity that claimed a staging folder of `pid`: its claim's link when that names the same PID
    (a compliance test's inner run has none), else the PID alone."""
    try:
        who = os.readlink(owner)
        return who if owner_pid(who) == pid else str(pid)
    except (OSError, ValueError):
        return str(pid)


def _drop_claim(owner: Path, pid: int) -> None:
    with contextlib.suppress(OSError, ValueError):
        if owner_pid(os.readlink(owner)) == pid:
            os.unlink(owner)


def check_free_space(folder: Path, need: int, what: str) -> None:
    """Refuse in one line when `folder`'s file system has less than `need` bytes free."""
    try:
        free = free_bytes(folder)
    except OSError as exc:  # a read-only file system
        raise ApplianceError(f"cannot write in {folder}: {disk_fault(exc, name_file=False) or exc.strerror}; "
                             f"choose another --results folder") from None
    if free < need:
        raise ApplianceError(f"only {_mb(free)} free in {folder}; {what} needs about {_mb(need)} for its logs: "
                             f"free some space or choose another --results folder")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
