"""onnxruntime's CPU provider in parallel execution mode (`--backend onnxruntime-parallel`): the graph's independent
branches (a ResNet block's shortcut beside its main path, a detector's heads) run at once on an inter-op pool,
each node still on the card's intra-op threads. Whether that beats the sequential `onnxruntime` card depends on the
model and the card's CPUs: `appliance tune --backends onnxruntime,onnxruntime-parallel` measures it.

It is the backend recipe's worked example (docs/developing.md, "Adding a card backend"): its record and this module
are all it took."""

from __future__ import annotations

import onnxruntime as ort

from harness.run.cards.onnxruntime_card import OnnxRuntimeCard
from harness.run.cards.spec import BackendSpec

__all__ = ["INTER_OP_THREADS", "ParallelCard"]

INTER_OP_THREADS = 2  # branches run at once: the most a ResNet block or a YOLO neck has side by side


class ParallelCard(OnnxRuntimeCard):
    """An onnxruntime CPU card whose session runs independent nodes concurrently (ORT_PARALLEL); its inter-op
    threads, made with the session on the card's pinned thread, share the card's CPUs."""

    def __init__(self, spec: BackendSpec[None], index: int, cpus: tuple[int, ...]) -> None:
        self.inter_op = max(1, min(INTER_OP_THREADS, len(cpus)))
        super().__init__(spec, index, cpus)
        self.info.details.update(execution_mode="parallel", inter_op_threads=self.inter_op)

    def _configure(self, opts: ort.SessionOptions, providers: list[str | tuple[str, dict[str, object]]],
                   on_gpu: bool) -> None:
        opts.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        opts.inter_op_num_threads = self.inter_op
