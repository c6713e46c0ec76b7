"""Other appliance runs working on the same cores at the same time, which make each other's results lower.

While its cards work, a run holds an entry in a machine-wide folder (`/run/appliance-runs` where it may
write there, else `appliance-runs` in the temporary folder; `APPLIANCE_RUN_REGISTRY` names another, e.g. a
folder shared by containers): a file naming its PID, cores and what it runs, locked (`flock`) by the run
for as long as it is there. A run that starts reads the entries whose lock is held (their runs are alive;
an entry whose lock it can take is a killed run's, and is removed), notes those whose cores overlap its
own, and appends itself to their files, so the run that started first learns of it too. The manifest
records them (`shared_cores`) and the summary prints a warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

from harness.core import environment, inbound
from harness.core.errors import ApplianceError
from harness.core.sysfs import format_cpulist

REGISTRY_ENV = "APPLIANCE_RUN_REGISTRY"


def registry() -> Path:
    """The machine-wide folder of the runs' entries."""
    named = environment.path(REGISTRY_ENV)
    if named is not None:
        return named
    return (Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())) / "appliance-runs"


def _check_registry(folder: Path) -> None:
    """A registry found is a folder of run entries only: a run folder or the user's own folder named in
    APPLIANCE_RUN_REGISTRY is refused, never written into."""
    if not folder.is_dir():
        raise ApplianceError(f"{REGISTRY_ENV}={folder} is {inbound.what_is(folder)}, not a folder; name a folder "
                             f"of its own for the runs' entries, or unset it")
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise ApplianceError(f"{REGISTRY_ENV}={folder} cannot be read ({exc.strerror}); name a folder of its "
                             f"own for the runs' entries, or unset it") from None
    foreign = [n for n in names if not (n.endswith(".run") or (n.startswith(".") and n.endswith(".tmp")))]
    if foreign:
        raise ApplianceError(f"{REGISTRY_ENV}={folder} holds files that are not run entries ({', '.join(foreign[:3])}"
                             f"{'…' if len(foreign) > 3 else ''}); name an empty folder of its own, or unset it")


class Neighbours:
    """This run's entry, held while the `with` block runs; `seen`: the other live runs on its cores."""

    def __init__(self, cpus: set[int], what: str) -> None:
        self.cpus, self.what = cpus, what
        self.seen: dict[int, str] = {}  # PID -> "PID 123 (resnet50 Offline performance) on cores 0-3"
        self._fd: int | None = None
        self._path: Path | None = None
        self._tmp: Path | None = None

    def __enter__(self) -> Neighbours:
        try:
            self._register()
        except OSError:  # the folder cannot be written (read-only, full): the run goes on without the check
            self._close()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._close()

    def _read_own(self) -> None:
        """Note the runs that started after this one: they appended themselves to its entry."""
        if self._path is not None:
            with contextlib.suppress(OSError, inbound.Refused):
                for line in inbound.read_text(self._path, inbound.RECORD, errors="replace").splitlines()[1:]:
                    self._note(line)

    def _register(self) -> None:
        folder = registry()
        try:
            folder.mkdir(parents=True)
            if environment.path(REGISTRY_ENV) is None:  # the default, made now: every user's runs share it
                with contextlib.suppress(OSError):
                    os.chmod(folder, 0o1777)  # (sticky: each removes only its own); never a folder found
        except FileExistsError:
            _check_registry(folder)
        me = self._line()
        name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self._tmp = folder / f".{name}.tmp"  # locked before it appears under its name: never a killed run's
        self._fd = os.open(tmp, os.O_CREAT | os.O_RDWR | os.O_APPEND, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        os.write(self._fd, (me + "\n").encode())
        self._path = folder / f"{name}.run"
        os.rename(tmp, self._path)
        self._tmp = None
        for other in sorted(folder.glob("*.run")):
            if other != self._path:
                self._visit(other, me)

    def _visit(self, other: Path, me: str) -> None:
        """Note a live run on our cores and tell it of us; remove a killed run's entry."""
        try:
            fd = os.open(other, os.O_RDWR | os.O_APPEND)
        except OSError:
            return  # ended meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its run is alive
                first = os.pread(fd, 4096, 0).decode(errors="replace").split("\n", 1)[0]
                if self._note(first):
                    os.write(fd, (me + "\n").encode())
                return
            other.unlink(missing_ok=True)  # nobody holds it: the run that wrote it was killed
        finally:
            os.close(fd)

    def _note(self, line: str) -> bool:
        """Record the run `line` names if its cores overlap ours; whether they do."""
        try:
            entry = json.loads(line)
            pid, cpus, what = int(entry["pid"]), set(entry["cpus"]), str(entry["what"])
        except (ValueError, KeyError, TypeError):
            return False
        if pid == os.getpid() or not cpus & self.cpus:
            return False
        self.seen[pid] = f"PID {pid} ({what}) on cores {format_cpulist(sorted(cpus))}"
        return True

    def _line(self) -> str:
        return json.dumps({"pid": os.getpid(), "cpus": sorted(self.cpus), "what": self.what})

    def _close(self) -> None:
        for path in (self._path, self._tmp):
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
        self._path = self._tmp = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def warning(self) -> str | None:
        """The summary's line when other runs worked on this run's cores so far, else None."""
        self._read_own()
        if not self.seen:
            return None
        return (f"other appliance run(s) worked on this run's cores at the same time: "
                f"{'; '.join(self.seen[p] for p in sorted(self.seen))}; its result is likely lower than these "
                f"cores alone give: run again alone to compare")
