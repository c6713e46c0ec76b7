"""One record per card backend, as benchmarks are records: what computes (the CPU, an NVIDIA GPU, nothing, a
simulation), the package and onnxruntime provider its cards need, the precisions they compute, whether they take
several infer requests, and whether `tune` times them unasked. Plan, tune, runner and the system name read these
fields; only `make_card` (harness.run.cards) picks a module by name. A new backend is one record here and one
branch there."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.errors import ApplianceError

__all__ = ["BACKENDS", "GPU_BACKENDS", "RECORDS", "Backend", "check_computes", "computing", "get"]


@dataclass(frozen=True)
class Backend:
    name: str
    device: str                      # cpu | gpu (NVIDIA, by CUDA ordinal: harness.hw.gpu) | none (null) | simulated
    package: str | None              # the Python package its cards need (None: the harness alone)
    provider: str | None = None      # onnxruntime's execution provider
    precisions: tuple[str, ...] = ("fp32", "int8")  # the prepared precisions its cards compute
    emulated: bool = False           # CPU cards standing in for accelerator cards: the system name says cpu-emulated
    requests: bool = False           # several infer requests (batches in flight) per card: `--requests`
    padded_copies: bool = False      # its cards copy each batch in flight into a full-size one (fixed-shape requests)
    tuned_unasked: bool = False      # `appliance tune` times it without --backends, where its package is installed

    @property
    def gpu(self) -> bool:
        return self.device == "gpu"

    @property
    def infers(self) -> bool:
        """Whether its cards run the model at all (null cards return zeros; simulated ones hold a batch)."""
        return self.device in ("cpu", "gpu")

    def computes(self, precision: str) -> bool:
        return precision in self.precisions


RECORDS: dict[str, Backend] = {b.name: b for b in (
    Backend("onnxruntime", "cpu", "onnxruntime", "CPUExecutionProvider", emulated=True, tuned_unasked=True),
    Backend("onnxruntime-cuda", "gpu", "onnxruntime", "CUDAExecutionProvider", ("fp32", "int8", "fp16")),
    Backend("onnxruntime-tensorrt", "gpu", "onnxruntime", "TensorrtExecutionProvider", ("fp32", "int8", "fp16")),
    Backend("onnxruntime-openvino", "cpu", "onnxruntime", "OpenVINOExecutionProvider"),
    # bf16: OpenVINO's INFERENCE_PRECISION_HINT on CPUs with AVX512_BF16 or AMX (onnxruntime's CPU provider has no
    # bf16 path on x86: harness.prepare.bf16)
    Backend("openvino", "cpu", "openvino", None, ("fp32", "int8", "bf16"), emulated=True, requests=True,
            padded_copies=True, tuned_unasked=True),
    Backend("null", "none", None, emulated=True),
    Backend("simulated", "simulated", None),
)}
BACKENDS = tuple(RECORDS)
GPU_BACKENDS = tuple(b.name for b in RECORDS.values() if b.gpu)


def get(name: str) -> Backend:
    try:
        return RECORDS[name]
    except KeyError:
        raise ApplianceError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}") from None


def computing(precision: str) -> tuple[str, ...]:
    """The backends whose cards compute `precision`."""
    return tuple(b.name for b in RECORDS.values() if b.computes(precision))


def check_computes(backend: str, precision: str) -> None:
    """One line when `backend`'s cards do not compute `precision` (bf16 on onnxruntime, fp16 on a CPU)."""
    if not get(backend).computes(precision):
        on = computing(precision)
        raise ApplianceError(f"--precision {precision} runs on --backend {' / '.join(on)} only: {backend} has no "
                             f"{precision} path (onnxruntime's CPU provider computes FP32); use --backend {on[0]} "
                             f"or --precision fp32")
