"""What every card of a run is made from (`BackendSpec`: the model, its backend's record, and that backend's own
settings), and the environment switches the card modules share: below the card modules, which read it, and
`make_card` (harness.run.cards), which asks the record to make the card."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from harness.core.errors import ApplianceError
from harness.records.benchmark_record import OutputQuant

if TYPE_CHECKING:
    from harness.run.cards.backends import Backend
    from harness.run.cards.kept_sessions import KeptSessions

__all__ = ["PROCESS_ENV", "THREADS_ENV", "BackendSpec", "own"]


# "1": an openvino card runs in a worker process even alone (runs with several openvino cards always do)
PROCESS_ENV = "APPLIANCE_OPENVINO_PROCESS"
THREADS_ENV = "APPLIANCE_INTRA_OP_THREADS"  # threads per CPU-emulated card (onnxruntime, openvino); default: its CPUs

S = TypeVar("S", covariant=True)  # a backend's settings: the type its card module declares
T = TypeVar("T")


@dataclass(frozen=True)
class BackendSpec(Generic[S]):
    """What every card of a run is made from: the model and its outputs (every backend's), and `settings`, the
    backend's own (the type its card module declares, made by its record's `settings`; None where it has none)."""

    backend: Backend  # its record: the card module reads its provider, device and label there
    model_path: Path | None
    input_name: str
    outputs: tuple[str, ...]
    output_specs: tuple[tuple[tuple[int, ...], str], ...]
    settings: S
    output_casts: tuple[OutputQuant | None, ...] = ()  # per output: the reduced precision a card returns
    precision: str = "fp32"  # the prepared model's precision (a GPU provider's precision flags, TensorRT's engine key)
    # what the prepared model asks the runtime to compute in (the model record's: bf16 for OpenVINO, tf32 for CUDA);
    # None: the model's own numerics
    inference_precision: str | None = None
    # in `appliance tune`: sessions an onnxruntime card keeps across batch sizes (harness.run.cards.kept_sessions); a
    # cache the caller holds, not a backend's setting
    sessions: KeptSessions | None = None


def own(spec: BackendSpec[object], kind: type[T]) -> T:
    """The spec's settings as the card module's own type `kind`, or one line: a spec made with another backend's
    settings (its record's `settings` and `card` name different card modules) is refused before any card starts."""
    if not isinstance(spec.settings, kind):
        raise ApplianceError(f"{spec.backend.name}'s cards take {kind.__name__} settings, not "
                             f"{type(spec.settings).__name__}: its record's `settings` must make what its `card` "
                             f"reads")
    return spec.settings
