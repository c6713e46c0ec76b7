"""OpenVINO card: the `openvino` runtime package compiling the same ONNX file for the CPU plugin.

A separate backend rather than onnxruntime's OpenVINO execution provider: `onnxruntime-openvino` is
its own build of the `onnxruntime` module and cannot share one environment with `onnxruntime`
(README). One compiled model per card, one stream, as many inference threads as the card has CPUs.
OpenVINO's own pinning is off (it pins to the process's CPUs, not the card's). OpenVINO starts its
workers with the process's affinity, not the card thread's (oneTBB does this on purpose), and shares
them between the cards of a process, so the runner refuses more than one openvino card per process
(runner.plan_cards); one card on all the CPUs is unaffected.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from harness.cards.base import CardInfo
from harness.cards.onnxruntime_card import THREADS_ENV
from harness.errors import ApplianceError, DataError


def available() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


class OpenVinoCard:
    """Compiled on the first batch, for that batch size (static shapes are faster than dynamic ones);
    a smaller batch later is padded to it, as a fixed-batch accelerator would do."""

    def __init__(self, index: int, model_path: Path, input_name: str, outputs: tuple[str, ...],
                 cpus: tuple[int, ...]) -> None:
        try:
            import openvino as ov
        except ImportError:
            raise ApplianceError("--backend openvino needs the openvino package (pip install openvino, the "
                                 "version in requirements.lock)") from None
        self.core = ov.Core()
        try:
            self.model = self.core.read_model(str(model_path))
        except Exception as exc:  # OpenVINO raises RuntimeError with a multi-line report
            raise DataError(f"OpenVINO cannot load {model_path}: {str(exc).splitlines()[0][:200]}; "
                            f"rerun `appliance prepare` or pass a valid --model") from None
        self.input_name = input_name
        self.output_names = outputs
        self.input_dtype = "uint8" if self.model.input(input_name).get_element_type() == ov.Type.u8 else "float32"
        # f32: an FP32 model runs in FP32 (on AMX CPUs OpenVINO would otherwise pick bf16 by itself)
        threads = int(os.environ.get(THREADS_ENV) or 0) or max(1, len(cpus))
        self.config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
                       "ENABLE_CPU_PINNING": False, "INFERENCE_PRECISION_HINT": "f32"}
        self.request = None
        self.padded: np.ndarray | None = None
        self.info = CardInfo(index=index, backend="openvino", device="cpu-emulated", cpus=cpus, emulated=True,
                             details={"openvino": ov.get_version(), "input_dtype": self.input_dtype,
                                      "affinity": "card thread pinned; OpenVINO workers use the process's CPUs",
                                      **{k.lower(): v for k, v in self.config.items()}})

    def _compile(self, n: int) -> None:
        dims = [d.get_length() for d in list(self.model.input(self.input_name).get_partial_shape())[1:]]
        self.model.reshape({self.input_name: [n, *dims]})
        compiled = self.core.compile_model(self.model, "CPU", self.config)
        self.request = compiled.create_infer_request()
        self.outputs = [compiled.output(name) for name in self.output_names]
        self.padded = np.zeros((n, *dims), dtype=self.input_dtype)
        self.info.details["compiled_batch"] = n


    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        if self.request is None or n > len(self.padded):
            self._compile(n)
        if n < len(self.padded):
            self.padded[:n] = batch
            batch = self.padded
        # share_inputs: read the staging buffer in place; outputs are copies (the next batch reuses OV's)
        result = self.request.infer([batch], share_inputs=True)
        return [result[o][:n] for o in self.outputs]

    def close(self) -> None:
        self.request = None
