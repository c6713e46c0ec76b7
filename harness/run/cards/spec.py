"""What every card of a run is made from (`BackendSpec`, its backend's record in it), and the environment switches
the card modules share: below the card modules, which read it, and `make_card` (harness.run.cards), which asks the
record to make the card."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.records.benchmark_record import OutputQuant

if TYPE_CHECKING:
    from harness.hw.gpu import GpuRef
    from harness.run.cards.backends import Backend
    from harness.run.cards.kept_sessions import KeptSessions

__all__ = ["IO_BINDING_ENV", "PROCESS_ENV", "THREADS_ENV", "BackendSpec"]


# "1": an openvino card runs in a worker process even alone (runs with several openvino cards always do)
PROCESS_ENV = "APPLIANCE_OPENVINO_PROCESS"
# "1": --backend onnxruntime runs the GPU cards' IO-binding data path on the CPU provider (the GPU check's rehearsal)
IO_BINDING_ENV = "APPLIANCE_IO_BINDING"
THREADS_ENV = "APPLIANCE_INTRA_OP_THREADS"  # threads per CPU-emulated card (onnxruntime, openvino); default: its CPUs


@dataclass(frozen=True)
class BackendSpec:
    """What every card of a run is made from."""

    backend: Backend  # its record: the card module reads its provider, device and label there
    model_path: Path | None
    input_name: str
    outputs: tuple[str, ...]
    output_specs: tuple[tuple[tuple[int, ...], str], ...]
    profile: object | None = None  # simulated_card.Profile for backend "simulated"
    output_casts: tuple[OutputQuant | None, ...] = ()  # per output: the reduced precision a card returns
    processes: bool = False  # openvino: each card in a worker process of its own (runs with several cards)
    requests: int = 1  # openvino: infer requests (one stream each) per card, its depth; `appliance run --requests`
    inference_precision: str = "f32"  # what the runtime computes in: f32, or bf16 (openvino; harness.prepare.bf16)
    gpus: tuple[GpuRef, ...] = ()  # GPU backends: card i's GPU
    warm_batch: int = 1  # GPU backends: the run's batch size, run once at load so one that does not fit is refused
    benchmark: str = ""  # the benchmark's name (IO-binding card: its input mean, the outputs the host reads)
    precision: str = "fp32"  # the prepared model's precision (TensorRT's precision flags, its engine key)
    buckets: tuple[int, ...] = ()  # IO-binding card: the batch sizes it runs and warms (gpu_plan.run_buckets)
    provider_options: str = ""  # onnxruntime GPU: tuned provider options (harness.run.cards.provider_options)
    io_binding: bool = False  # onnxruntime: the IO-binding card (harness.run.cards.gpu_iobinding); GPU backends always
    sessions: KeptSessions | None = None  # onnxruntime, in tune: sessions kept across batch sizes (kept_sessions)
