"""Answering LoadGen: a batch's outputs encoded and its samples completed (harness.run.sut.respond), counted; for
NMS benchmarks on the card's own `done` thread, pipelined with the card, which counts its CPU time
(harness/run/completion_meter.py reads it: the host's share of the run).
"""

from __future__ import annotations

import time

from harness.run.cards.base import Outputs
from harness.run.sut.messages import Batch
from harness.run.sut.worker.state import WorkerState


class Completing(WorkerState):
    """Completing batches, on the card thread or (`to_done` set) the done thread."""

    def _complete(self, samples: Batch, outputs: Outputs) -> None:
        """Encode a batch's outputs and complete all its samples in one QuerySamplesComplete call."""
        self.respond(samples, outputs)
        self.completed += len(samples)
        self.batches += 1

    def _done_loop(self) -> None:
        """The done thread (`c<i>.done`): complete what the card thread hands over until it says None."""
        self._pin("done")
        assert self.to_done is not None
        clock = time.thread_time_ns  # this thread's CPU time: what host NMS costs, not the time it waits
        while (item := self.to_done.get()) is not None:
            before = clock()
            self._complete(*item)
            self.complete_cpu_ns += clock() - before
