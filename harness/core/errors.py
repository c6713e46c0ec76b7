"""Errors the user can act on: the CLI prints them as one line, without a traceback."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["STOP_SIGNALS", "ApplianceError", "DataError", "Interrupted", "Terminated", "interrupt_exit_code",
           "interrupts_raised", "stopped_by"]


class ApplianceError(Exception):
    """A problem the user can fix; the message says what is wrong and what to do."""

    exit_code = 2
    traceback = True  # --debug shows where it was raised; False for a verdict (a failed check), not a fault


class DataError(ApplianceError):
    """Missing, corrupt or mismatching data, model or configuration."""


class BatchDoesNotFit(ApplianceError):
    """A card cannot take a batch this large (its device's memory): raised by the card, at load or on the batch.
    `appliance tune` stops growing that layout's batches on it; a run says it in one line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`docker stop`, `kill`) or SIGHUP (the terminal closed): raised where Ctrl-C raises
    KeyboardInterrupt, so all three stop a command the same clean way; the exit code says which
    (143 = 128 + SIGTERM, 129 = 128 + SIGHUP, 130 = 128 + SIGINT)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__()
        self.signum = signum


# the signals a long command stops on, each the same way (`interrupts_raised`)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupt_exit_code(exc: BaseException) -> int:
    """The shell's code for the signal that stopped the command: 143 SIGTERM, 129 SIGHUP, else 130 (Ctrl-C)."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)


def stopped_by(exc: BaseException) -> str:
    """How the user's line names the stop: "interrupted" (Ctrl-C) or "terminated (SIGTERM)" / "(SIGHUP)"."""
    code = exc.exit_code if isinstance(exc, Interrupted) else interrupt_exit_code(exc)
    return "interrupted" if code == 128 + signal.SIGINT else f"terminated ({signal.Signals(code - 128).name})"


class Interrupted(ApplianceError):
    """Ctrl-C or SIGTERM stopped a command; what was done so far is kept and marked incomplete."""

    exit_code = 130

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.exit_code = cause.exit_code if isinstance(cause, Interrupted) else \
            interrupt_exit_code(cause) if cause is not None else 130


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def interrupts_raised() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP all raise in the main thread while the block runs (elsewhere: nothing
    changes). SIGINT is set explicitly: a shell starts background jobs with it ignored, and Python then never
    raises KeyboardInterrupt; SIGTERM's and SIGHUP's defaults would kill the process with its temporaries and
    claims in place."""
    previous = {sig: signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else _raise_terminated)
                for sig in STOP_SIGNALS if not (sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN)} \
        if threading.current_thread() is threading.main_thread() else {}  # under `nohup`, SIGHUP stays ignored
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
