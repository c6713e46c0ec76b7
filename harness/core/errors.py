"""Errors the user can act on: the CLI prints them as one line, without a traceback."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class ApplianceError(Exception):
    """A problem the user can fix; the message says what is wrong and what to do."""

    exit_code = 2
    traceback = True  # --debug shows where it was raised; False for a verdict (a failed check), not a fault


class DataError(ApplianceError):
    """Missing, corrupt or mismatching data, model or configuration."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`docker stop`, `kill`): raised where Ctrl-C raises KeyboardInterrupt, so both stop a command
    the same clean way; the exit code says which (143 = 128 + SIGTERM, 130 = 128 + SIGINT)."""


def interrupt_exit_code(exc: BaseException) -> int:
    """The shell's code for the signal that stopped the command: 143 for SIGTERM, else 130 (Ctrl-C)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def stopped_by(exc: BaseException) -> str:
    """How the user's line names the stop: "interrupted" (Ctrl-C) or "terminated (SIGTERM)"."""
    code = exc.exit_code if isinstance(exc, Interrupted) else interrupt_exit_code(exc)
    return "terminated (SIGTERM)" if code == 128 + signal.SIGTERM else "interrupted"


class Interrupted(ApplianceError):
    """Ctrl-C or SIGTERM stopped a command; what was done so far is kept and marked incomplete."""

    exit_code = 130

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.exit_code = cause.exit_code if isinstance(cause, Interrupted) else \
            interrupt_exit_code(cause) if cause is not None else 130


def _raise_terminated(_signum: int, _frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def interrupts_raised() -> Iterator[None]:
    """Ctrl-C and SIGTERM both raise in the main thread while the block runs (elsewhere: nothing changes).
    SIGINT is set explicitly: a shell starts background jobs with it ignored, and Python then never raises
    KeyboardInterrupt; SIGTERM's default would kill the process with its temporaries and claims in place."""
    previous = {sig: signal.signal(sig, handler) for sig, handler in
                ((signal.SIGTERM, _raise_terminated), (signal.SIGINT, signal.default_int_handler))} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
