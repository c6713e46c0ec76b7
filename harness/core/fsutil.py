"""File helpers that write nothing: digests, the umask, plain names, one line for a disk fault.

Every write goes through harness.core.outbound."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

from harness.core import inbound
from harness.core.errors import ApplianceError


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with inbound.open_bounded(path, inbound.ARRAY) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def shown(text: str) -> str:
    """`text` for a line on the terminal: control characters (a newline in a folder name would forge a line of
    its own) and bytes that are not UTF-8 (kept by Python as surrogates) escaped, the rest as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF
                   else c.encode("unicode_escape").decode("ascii") for c in text)


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


def tmp_prefix(name: str) -> str:
    """Prefix of every temporary file or folder the appliance makes beside `name`: hidden, with this
    process's PID, so one a killed process left is recognised (harness.core.leftovers) and removed."""
    return f".{name}.{os.getpid()}."


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
