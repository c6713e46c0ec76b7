"""Write-then-rename helpers, so an interrupted command never leaves a half-written file behind."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core import inbound
from harness.core.errors import ApplianceError


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with inbound.open_bounded(path, inbound.ARRAY) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def umask() -> int:
    """The process's umask, read without changing it (Linux /proc; else set and restored at once)."""
    try:
        for line in inbound.read_text("/proc/self/status", inbound.SYSFS).splitlines():
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def public_mode(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Give a file (0666) or folder (0777) from `tempfile`, which makes them 0600 / 0700, the mode an
    ordinary open() or mkdir() would: minus the umask, so results and data stay readable by others."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


_MADE: list[Path] = []  # folders this command made, in the order made


def make_dirs(path: Path) -> Path:
    """`path.mkdir(parents=True, exist_ok=True)`, remembering the folders it made, so a command that then
    fails or is interrupted removes them again if it left them empty (`remove_made_if_empty`)."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    _MADE.extend(reversed(missing))
    return path


def forget_made() -> None:
    """Start a command: the folders an earlier command of this process made are its own."""
    _MADE.clear()


def remove_made_if_empty() -> None:
    """After a failed or interrupted command: remove the folders it made that it left empty, deepest first
    (a results tree of empty folders is a leftover; one that holds anything stays)."""
    for folder in reversed(_MADE):
        with contextlib.suppress(OSError):
            folder.rmdir()
    _MADE.clear()


def tmp_prefix(name: str) -> str:
    """Prefix of every temporary file or folder the appliance makes beside `name`: hidden, with this
    process's PID, so one a killed process left is recognised (harness.core.leftovers) and removed."""
    return f".{name}.{os.getpid()}."


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder (mode as open() gives it);
    on any error (a full disk included) the temporary file is removed and `path` is left as it was."""
    make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        public_mode(tmp)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder (mode as open() gives it)."""
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside `final`; on success it replaces `final` in one rename.

    On any error (Ctrl-C included) the temporary folder is removed and `final` is left as it was.
    """
    make_dirs(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix(final.name), suffix=".tmp", dir=final.parent))
    try:
        public_mode(tmp, directory=True)
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = final.with_name(f"{tmp_prefix(final.name)}old.tmp")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


NAME_MAX = 255  # bytes in one path component (Linux NAME_MAX)


def plain_name(name: str, what: str) -> str:
    """`name` when it is one plain folder or file name, else ApplianceError (one line). Every name a user
    or a tree gives that becomes part of a path goes through here, so none can climb out of the folder it
    is joined to (`..`, `/`), hide (a leading `.`) or break the file system call (NUL, over NAME_MAX)."""
    bad = ("it is empty" if not name else
           "it holds '/'" if "/" in name else
           "it starts with '.'" if name.startswith(".") else
           "it holds a NUL byte or a control character" if any(ord(c) < 32 for c in name) else
           f"it is longer than {NAME_MAX} bytes" if len(name.encode(errors="surrogateescape")) > NAME_MAX else None)
    if bad is not None:
        raise ApplianceError(f"{what} {name[:80]!r} must be a plain folder name ({bad}), e.g. my-server")
    return name


def ensure_writable_dir(path: Path, what: str) -> Path:
    """Create `path` if needed and prove it is writable, or say so in one line."""
    try:
        make_dirs(path)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise ApplianceError(f"{what} {path} is not writable ({exc.strerror}); "
                             f"choose another with the option or fix its permissions") from None
    return path


# errors of the machine, not of the run: the disk is full, over quota, read-only or failing
DISK_FAULTS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
               errno.EIO: "input/output error (a failing disk?)", errno.EROFS: "the file system is read-only"}



def disk_fault(exc: BaseException, name_file: bool = True) -> str | None:
    """One line for an error of the machine (full disk, I/O error), None for anything else; `name_file`:
    with the file it was writing (not when that was a temporary the caller has removed)."""
    if isinstance(exc, OSError) and exc.errno in DISK_FAULTS:
        target = exc.filename2 or exc.filename  # a copy's or rename's destination, else the file
        where = f" writing {target}" if target and name_file else ""
        return f"{DISK_FAULTS[exc.errno]} ({errno.errorcode[exc.errno]}){where}"
    return None
