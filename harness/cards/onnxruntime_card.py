"""onnxruntime card: a CPU-emulated card, or one device of an execution provider (CUDA, TensorRT, OpenVINO)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort

from harness.benchmarks import OutputQuant
from harness.cards.base import CardInfo
from harness.errors import ApplianceError, DataError

# backend name -> (execution provider, option naming the device, device label); CPU has no device id
PROVIDERS: dict[str, tuple[str, str | None, str]] = {
    "onnxruntime": ("CPUExecutionProvider", None, "cpu-emulated"),
    "onnxruntime-cuda": ("CUDAExecutionProvider", "device_id", "cuda:{i}"),
    "onnxruntime-tensorrt": ("TensorrtExecutionProvider", "device_id", "tensorrt:{i}"),
    "onnxruntime-openvino": ("OpenVINOExecutionProvider", "device_type", "openvino:{i}"),
}
THREADS_ENV = "APPLIANCE_INTRA_OP_THREADS"  # threads per CPU-emulated card (onnxruntime, openvino); default: its CPUs


class OnnxRuntimeCard:
    """One inference session. On CPU its intra-op threads are the card's CPUs.

    Create it on the card's (already pinned) worker thread: onnxruntime starts its thread pool when
    the session is made, and new threads inherit the creating thread's affinity (and its name).
    An accelerator provider gets the card's device id (card index = device ordinal). With `output_casts`
    the session's graph ends in QuantizeLinear / Cast nodes, so the card returns uint8 / fp16 outputs as
    a real card's compiled network does (SPEC §3).
    """

    def __init__(self, index: int, model_path: Path, input_name: str, outputs: tuple[str, ...],
                 cpus: tuple[int, ...], backend: str = "onnxruntime",
                 output_casts: tuple[OutputQuant | None, ...] = ()) -> None:
        if backend not in PROVIDERS:
            raise ApplianceError(f"unknown onnxruntime backend {backend!r}; choose one of: {', '.join(PROVIDERS)}")
        provider, id_key, device_fmt = PROVIDERS[backend]
        if provider not in ort.get_available_providers():
            raise ApplianceError(f"--backend {backend} needs onnxruntime's {provider}, which this onnxruntime "
                                 f"({ort.__version__}) lacks (has: {', '.join(ort.get_available_providers())}); "
                                 f"install the matching onnxruntime package or use --backend onnxruntime")
        opts = ort.SessionOptions()
        threads = int(os.environ.get(THREADS_ENV) or 0) or max(1, len(cpus))
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        # spinning threads that outnumber the card's CPUs would take them from its feeder and completion
        spin = threads <= len(cpus)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        providers: list[str | tuple[str, dict[str, object]]] = ["CPUExecutionProvider"]
        if id_key is not None:
            value = str(index) if id_key == "device_id" else "GPU" if index == 0 else f"GPU.{index}"
            providers = [(provider, {id_key: value}), "CPUExecutionProvider"]
        try:
            source = with_output_casts(model_path, outputs, output_casts) if output_casts else str(model_path)
            self.session = ort.InferenceSession(source, opts, providers=providers)
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise DataError(f"onnxruntime cannot load {model_path}: {str(exc).splitlines()[0][:200]}; "
                            f"rerun `appliance prepare` or pass a valid --model") from None
        self.input_name = input_name
        # an int8 model built by `prepare --precision int8` reads the stored uint8 samples as they are
        self.input_dtype = "uint8" if self._input_type(input_name) == "tensor(uint8)" else "float32"
        self.outputs = list(outputs)
        emulated = id_key is None
        self.info = CardInfo(index=index, backend=backend,
                             device=device_fmt.format(i=index), cpus=cpus, emulated=emulated,
                             details={"provider": provider, "providers_in_session": self.session.get_providers(),
                                      "output_dtypes": [o.type for o in self.session.get_outputs()],
                                      "intra_op_threads": threads, "onnxruntime": ort.__version__})

    def _input_type(self, name: str) -> str:
        kind: str = next(i.type for i in self.session.get_inputs() if i.name == name)
        return kind

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        outputs: list[np.ndarray] = self.session.run(self.outputs, {self.input_name: batch})
        return outputs

    def close(self) -> None:
        del self.session


def with_output_casts(model_path: Path, outputs: tuple[str, ...], casts: tuple[OutputQuant | None, ...]) -> bytes:
    """The model with outputs converted in-graph: QuantizeLinear to uint8 (scale, zero point) or Cast to fp16."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    try:
        model = onnx.load(str(model_path))
    except Exception as exc:  # onnx raises DecodeError and others
        raise DataError(f"onnx cannot read {model_path} ({type(exc).__name__}); rerun `appliance prepare`") from None
    graph = model.graph
    for name, cast in zip(outputs, casts, strict=True):
        if cast is None:
            continue
        raw = f"{name}/before_cast"
        for node in graph.node:
            node.output[:] = [raw if o == name else o for o in node.output]
            node.input[:] = [raw if i == name else i for i in node.input]
        out = next(o for o in graph.output if o.name == name)
        if cast.dtype == "uint8":
            graph.initializer.extend([numpy_helper.from_array(np.array(cast.scale, np.float32), f"{name}/scale"),
                                      numpy_helper.from_array(np.array(cast.zero_point, np.uint8), f"{name}/zp")])
            graph.node.append(helper.make_node("QuantizeLinear", [raw, f"{name}/scale", f"{name}/zp"], [name]))
            out.type.tensor_type.elem_type = TensorProto.UINT8
        else:
            graph.node.append(helper.make_node("Cast", [raw], [name], to=TensorProto.FLOAT16))
            out.type.tensor_type.elem_type = TensorProto.FLOAT16
    serialized: bytes = model.SerializeToString()
    return serialized
