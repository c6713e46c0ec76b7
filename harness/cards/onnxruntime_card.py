"""onnxruntime card: a CPU-emulated card (or an execution-provider device) running the ONNX model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from harness.cards.base import CardInfo
from harness.errors import DataError


class OnnxRuntimeCard:
    """One inference session whose intra-op threads are the card's CPUs.

    Create it on the card's (already pinned) worker thread: onnxruntime starts its thread pool when
    the session is made, and new threads inherit the creating thread's affinity.
    """

    def __init__(self, index: int, model_path: Path, input_name: str, outputs: tuple[str, ...],
                 cpus: tuple[int, ...], spin: bool = True) -> None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, len(cpus))
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        try:
            self.session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise DataError(f"onnxruntime cannot load {model_path}: {str(exc).splitlines()[0][:200]}; "
                            f"rerun `appliance prepare` or pass a valid --model") from None
        self.input_name = input_name
        self.outputs = list(outputs)
        self.info = CardInfo(index=index, backend="onnxruntime", device="cpu-emulated", cpus=cpus,
                             emulated=True, details={"provider": "CPUExecutionProvider",
                                                     "intra_op_threads": opts.intra_op_num_threads,
                                                     "onnxruntime": ort.__version__})

    def infer(self, batch: np.ndarray) -> list[np.ndarray]:
        return self.session.run(self.outputs, {self.input_name: batch})

    def close(self) -> None:
        del self.session
