"""Standard output's faults as standard output's: `>&-` lost `topology detect`'s map with exit 0, and a
stdout on /dev/full was "no space left on the device ... choose a writable folder", the run abandoned.

While a command runs, sys.stdout is a `Guarded` stream: the first write or flush that fails is kept and the
rest of the output dropped (the command's files, a run's folder, are still written); `main` then says in one
line that the output was lost, and why, and exits non-zero.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from harness.core.outbound import discard_writes


class Guarded:
    """A text stream over `real` that never raises OSError: the first fault is `failed`, then writes are dropped."""

    def __init__(self, real: TextIO) -> None:
        self._real = real
        self.failed: OSError | None = None

    def _guard(self, exc: OSError) -> None:
        self.failed = self.failed or exc
        with contextlib.suppress(OSError, ValueError):  # what it still buffers goes nowhere, not to a failing fd
            discard_writes(self._real.fileno())

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                return self._real.write(text)
            except OSError as exc:
                self._guard(exc)
        return len(text)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self._real.flush()
            except OSError as exc:
                self._guard(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def lost(exc: OSError | None) -> str:
    """The line for output that could not be written."""
    why = exc.strerror if exc is not None and exc.strerror else "it is closed"
    return (f"standard output could not be written ({why}); what the command printed there is lost (files it "
            f"writes are not): give it a file or a pipe that takes it, or use -o where the command has it")


@contextlib.contextmanager
def guarded() -> Iterator[Guarded | None]:
    """sys.stdout guarded while the block runs; None when there is no stdout at all (started with `>&-`)."""
    real = sys.stdout
    if real is None:
        yield None
        return
    guard = Guarded(real)
    sys.stdout = guard
    try:
        yield guard
    finally:
        guard.flush()
        sys.stdout = real
