"""Types of the native LoadGen SystemUnderTest (harness/_intake.cpp). The C++ takes any C-contiguous buffer of
8-byte integers; the harness passes numpy arrays."""

from typing import Any, final

import numpy as np
from numpy.typing import NDArray

@final
class Intake:
    """A LoadGen SystemUnderTest whose IssueQuery queues the samples for the harness to take."""

    def __init__(self) -> None: ...
    def take(self, ids: NDArray[np.uint64 | Any], indices: NDArray[np.int64 | Any], min_n: int, max_wait_s: float,
             timeout_s: float, pokeable: bool = ..., /) -> int:
        """Move waiting samples into `ids` (uint64) and `indices` (int64); returns how many."""
    def poke(self) -> None: ...
    def unpoke(self) -> None: ...
    def push(self, ids: NDArray[np.uint64 | Any], indices: NDArray[np.int64 | Any], /) -> None:
        """Issue samples from Python, as LoadGen's IssueQuery does."""
    def flush(self) -> None: ...
    def close(self) -> None: ...
    @property
    def handle(self) -> int:
        """The SUT's address for mlperf_loadgen.StartTest."""
    @property
    def waiting(self) -> int: ...
    @property
    def issued(self) -> int: ...
