"""Types of the native LoadGen SystemUnderTest (harness/_intake.cpp)."""

from typing import final

from typing_extensions import Buffer

@final
class Intake:
    """A LoadGen SystemUnderTest whose IssueQuery queues the samples for the harness to take."""

    def __init__(self) -> None: ...
    def take(self, ids: Buffer, indices: Buffer, min_n: int, max_wait_s: float, timeout_s: float,
             pokeable: bool = ..., /) -> int:
        """Move waiting samples into `ids` (uint64) and `indices` (int64); returns how many."""
    def poke(self) -> None: ...
    def unpoke(self) -> None: ...
    def push(self, ids: Buffer, indices: Buffer, /) -> None:
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
