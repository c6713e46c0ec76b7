"""Typed readers for files in trees other people's tools wrote: every odd value becomes one problem line.

Nothing here raises on content: `null`, a string where a number belongs, a truncated or empty file, a
file too large to read, an unreadable file each give a `Problem` naming the file (and the key), and the
caller carries on with what could be read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core import inbound
from harness.core.inbound import file_size

MAX_LOG_BYTES = inbound.LOG        # the official checker's limit for any file in a tree (FILE_SIZE_LIMIT_MB)
MAX_TEXT_BYTES = 1024 * 1024       # accuracy.txt, verify_*.txt, user.conf: read at most this much

Problem = Callable[[str], None]


def unreadable(exc: OSError, where: str) -> str:
    """The one problem line for a file that could not be read: missing, a folder, or the OS's reason."""
    if isinstance(exc, FileNotFoundError):
        return f"{where}: missing"
    if isinstance(exc, IsADirectoryError):
        return f"{where}: a folder where a file belongs"
    return f"{where}: cannot read ({exc.strerror or exc})"


def refused(where: str, exc: inbound.Refused) -> str:
    """The one problem line for a file the door refused: "<where>: a character device, not a regular file"."""
    return f"{where}: {exc.reason.removeprefix('is ')}"


def read_text(path: Path, where: str, problem: Problem, limit: int = MAX_TEXT_BYTES,
              within: Path | None = None) -> str | None:
    """The text of a small file (its first `limit` bytes), or None after reporting why not (a link out of
    `within`, a device or a FIFO included)."""
    try:
        with inbound.open_bounded(path, MAX_LOG_BYTES, within=within) as f:
            data = f.read(limit)
    except inbound.Refused as exc:
        problem(refused(where, exc))
        return None
    except OSError as exc:
        problem(unreadable(exc, where))
        return None
    return data.decode("utf-8", errors="replace")


def read_json_object(path: Path, where: str, problem: Problem, within: Path | None = None) -> dict[str, Any] | None:
    """A JSON file that must hold an object."""
    size = file_size(path)
    if size is not None and size > MAX_LOG_BYTES:
        problem(f"{where}: {size} bytes, larger than the {MAX_LOG_BYTES // 2**20} MB a tree may hold per file")
        return None
    text = read_text(path, where, problem, limit=MAX_LOG_BYTES, within=within)
    if text is None:
        return None
    if not text.strip():
        problem(f"{where}: empty")
        return None
    try:
        return inbound.expect_object(inbound.parse_json(text, where), where)
    except inbound.Refused as exc:
        problem(refused(where, exc))
        return None


