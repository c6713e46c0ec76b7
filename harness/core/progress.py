"""Progress bars on stderr for a person at a terminal; silent for scripts, CI and --quiet."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from tqdm import tqdm

__all__ = ["bar", "enabled", "set_quiet", "spinner"]

_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


def bar(total: int | None, desc: str, unit: str = "img") -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled(), leave=False, file=sys.stderr,
                dynamic_ncols=True)


@contextlib.contextmanager
def spinner(desc: str) -> Iterator[None]:
    """For a step of unknown length: a one-line note while it runs."""
    if enabled():
        sys.stderr.write(f"{desc} ...\r")
        sys.stderr.flush()
    try:
        yield
    finally:
        if enabled():
            sys.stderr.write(" " * (len(desc) + 4) + "\r")
