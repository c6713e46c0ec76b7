"""OpenVINO card: the `openvino` runtime package compiling the same ONNX file for the CPU plugin.

A separate backend rather than onnxruntime's OpenVINO execution provider: `onnxruntime-openvino` is
its own build of the `onnxruntime` module and cannot share one environment with `onnxruntime`
(docs/run.md). One compiled model per card, as many inference threads as the card has CPUs, and
`requests` infer requests (one stream each) kept in flight as an `AsyncCard` of that depth.
OpenVINO's own pinning is off (it pins by its own CPU map, not the card's CPUs). In one process
OpenVINO's stream threads take the process's CPUs, not the compiling card thread's (docs/run.md), so a run
with several openvino cards runs each of these in a worker process of its own, pinned to the card's
CPUs before OpenVINO is imported (openvino_process.py); one card on all the CPUs runs in-process.

Why a ring of infer requests and not `AsyncInferQueue`: the queue hands a finished request to a
callback on OpenVINO's own threads and picks the next idle request itself; the card contract needs
the outputs back in submission order on the card thread (so completion stays on the card's CPUs).
A ring of `create_infer_request()`s, each `start_async`ed in turn, is the same primitive with that
order. No OpenVINO callback at all: a Python callback needs the GIL on OpenVINO's thread, and a
`start_async` on a request whose callback has not finished waits for it while holding the GIL — a
deadlock, seen in a run. A small waiter thread of the card's own (started on the card thread, so on
its CPUs) waits on each request in turn, the GIL released, and signals ready.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import environment, inbound
from harness.core.errors import ApplianceError, DataError
from harness.run.cards.base import CardInfo, PageableHostBuffers
from harness.run.cards.spec import THREADS_ENV

__all__ = ["OpenVinoCard"]


class OpenVinoCard(PageableHostBuffers):
    """Compiled on the first batch, for that batch size (static shapes are faster than dynamic ones);
    a smaller batch later is padded to it, as a fixed-batch accelerator would do. An `AsyncCard` with
    `depth` = its infer requests, one stream each (OpenVINO's throughput mode)."""

    def __init__(self, index: int, model_path: Path, input_name: str, outputs: tuple[str, ...],
                 cpus: tuple[int, ...], requests: int = 1, inference_precision: str = "f32", *,
                 backend: str) -> None:
        try:
            import openvino as ov
        except ImportError:
            raise ApplianceError("--backend openvino needs the openvino package (pip install openvino, the "
                                 "version in requirements.lock)") from None
        self.core = ov.Core()
        try:
            with inbound.held(model_path, inbound.ARRAY, what="model") as name:  # the file checked, not its name
                self.model = self.core.read_model(name)
        except inbound.Refused:
            raise
        except Exception as exc:  # OpenVINO raises RuntimeError with a multi-line report
            raise DataError(f"OpenVINO cannot load {model_path}: {str(exc).splitlines()[0][:200]}; "
                            f"rerun `appliance prepare` or pass a valid --model") from None
        self.input_name = input_name
        self.output_names = outputs
        self.input_dtype = "uint8" if self.model.input(input_name).get_element_type() == ov.Type.u8 else "float32"
        self.depth = max(1, requests)  # `appliance run --requests N` (or the tuned record's choice)
        # f32: an FP32 model runs in FP32 (on bf16 CPUs OpenVINO would otherwise pick bf16 by itself); bf16
        # only when the prepared model says so (`prepare --precision bf16`), on a CPU that has it
        if inference_precision != "f32":
            from harness.hw.bf16_support import HINT, require

            if inference_precision != HINT:
                raise DataError(f"the model record asks for inference precision {inference_precision!r}; "
                                f"OpenVINO cards compute f32 or {HINT}: rerun `appliance prepare`")
            require(f"openvino card {index} cannot compute bf16")
        threads = environment.threads(THREADS_ENV) or max(1, len(cpus))  # 1 to the machine's CPUs
        self.config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": self.depth,
                       "PERFORMANCE_HINT": "LATENCY" if self.depth == 1 else "THROUGHPUT",
                       "ENABLE_CPU_PINNING": False, "INFERENCE_PRECISION_HINT": inference_precision}
        self.requests: list[Any] = []
        self.padded: list[np.ndarray] = []
        self.outputs: list[Any] = []
        self.batch = 0
        self._next = 0  # ring slot the next submit uses
        self._flight: deque[tuple[int, int]] = deque()  # (ring slot, n), submission order
        self._ready: Callable[[], None] = lambda: None
        self._waits: queue.SimpleQueue[Any] = queue.SimpleQueue()  # requests started, for the waiter
        self._waiter = threading.Thread(target=self._signal_when_done, daemon=True)
        self._waiter.start()
        self.info = CardInfo(index=index, backend=backend, device="cpu-emulated", cpus=cpus, emulated=True,
                             details={"openvino": ov.get_version(), "input_dtype": self.input_dtype,
                                      "infer_requests": self.depth,
                                      "affinity": "card thread pinned; OpenVINO workers use the process's CPUs",
                                      **{k.lower(): v for k, v in self.config.items()}})

    def set_ready_callback(self, ready: Callable[[], None]) -> None:
        self._ready = ready

    def _compile(self, n: int) -> None:
        dims = [d.get_length() for d in list(self.model.input(self.input_name).get_partial_shape())[1:]]
        self.model.reshape({self.input_name: [n, *dims]})
        compiled = self.core.compile_model(self.model, "CPU", self.config)
        if self.config["INFERENCE_PRECISION_HINT"] != "f32":
            from harness.hw.bf16_support import check_compiled

            check_compiled(compiled)  # never a silent FP32 result labelled bf16
        self.requests = [compiled.create_infer_request() for _ in range(self.depth)]
        self.outputs = [compiled.output(name) for name in self.output_names]
        self.padded = [np.zeros((n, *dims), dtype=self.input_dtype) for _ in range(self.depth)]
        self.batch = n
        self.info.details["compiled_batch"] = n

    def submit(self, batch: np.ndarray | None, n: int) -> None:
        if n > self.batch:
            if self._flight:
                raise RuntimeError(f"batch of {n} with batches in flight on a card compiled for {self.batch}")
            self._compile(n)
        slot = self._next
        self._next = (slot + 1) % self.depth
        if n < self.batch:
            self.padded[slot][:n] = batch
            batch = self.padded[slot]
        # share_inputs: read the staging buffer in place (the harness leaves it alone until the batch is back)
        request = self.requests[slot]
        request.start_async([batch], share_inputs=True)
        self._flight.append((slot, n))
        self._waits.put(request)

    def _signal_when_done(self) -> None:
        """The waiter: each started request in turn, waited for with the GIL released, then ready."""
        while (request := self._waits.get()) is not None:
            request.wait()
            self._ready()

    def _take(self) -> list[np.ndarray]:
        slot, n = self._flight.popleft()
        request = self.requests[slot]
        return [request.get_tensor(o).data[:n].copy() for o in self.outputs]  # copies: the request is reused

    def poll(self) -> list[np.ndarray] | None:
        if not self._flight or not self.requests[self._flight[0][0]].wait_for(0):
            return None
        return self._take()

    def wait(self) -> list[np.ndarray]:
        self.requests[self._flight[0][0]].wait()
        return self._take()

    def close(self) -> None:
        for slot, _ in self._flight:
            self.requests[slot].wait()
        self._waits.put(None)
        self._waiter.join()
        self.requests = []
