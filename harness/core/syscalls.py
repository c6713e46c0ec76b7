"""Linux system calls that glibc wraps only in libnuma, by number per architecture, called through ctypes."""

from __future__ import annotations

import ctypes
import platform
from typing import Any

# unistd.h of each architecture; a call missing here is reported as unavailable, never guessed
NUMBERS: dict[str, dict[str, int]] = {
    "set_mempolicy": {"x86_64": 238, "aarch64": 237, "ppc64le": 261, "s390x": 270},
    "move_pages": {"x86_64": 279, "aarch64": 239, "ppc64le": 301},
}


def number(name: str, machine: str | None = None) -> int | None:
    """The syscall number of `name` on this machine's architecture (or `machine`); None if unknown."""
    return NUMBERS[name].get(machine or platform.machine())


def call(name: str, *args: Any) -> tuple[int, int] | None:
    """(return value, errno) of syscall `name`; None where this architecture's number is unknown."""
    nr = number(name)
    if nr is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *args)
    return rc, ctypes.get_errno()
