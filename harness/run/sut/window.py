"""The process settings around LoadGen's timed window, and kernel thread names for the card threads."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Iterator

_libc = ctypes.CDLL(None, use_errno=True)

SWITCH_INTERVAL_S = 0.0005  # the GIL hand-over interval in LoadGen's window (Python's default: 5 ms)


def name_os_thread(name: str) -> None:
    """Give the calling thread a kernel name (/proc/<pid>/task/<tid>/comm), inherited by threads it starts."""
    with contextlib.suppress(AttributeError, OSError):
        _libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


@contextlib.contextmanager
def loadgen_window() -> Iterator[None]:
    """The interpreter set for LoadGen's timed window: cyclic garbage collector off, GIL handed over
    every 0.5 ms instead of every 5 ms.

    A full collection walks every object the process holds (onnxruntime, numpy, the QSL) and stops the
    thread that triggered it: 26 to 31 ms measured with null cards at 40,000 QPS, so the harness stalls
    and the Server p99 misses its bound. The per-query path makes no reference cycles
    (tests/test_runs.py checks), so reference counting frees everything it allocates meanwhile. One
    collection before, and the collector back as it was after.

    The harness's threads (intake, feeders, cards) take turns on the GIL; one that runs Python for long
    keeps the others waiting up to the switch interval, which at 5 ms is a third of ResNet50's 15 ms
    Server bound. LoadGen's own threads never wait for it (the intake is native).
    """
    enabled = gc.isenabled()
    interval = sys.getswitchinterval()
    gc.collect()
    gc.disable()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        if enabled:
            gc.enable()
