"""One record per card backend, as benchmarks are records: what computes (the CPU, an NVIDIA GPU, nothing, a
simulation), the package and onnxruntime provider its cards need, the precisions they compute, whether they take
several infer requests, whether `tune` times them, and the functions that make its cards and their settings (from
`Planned`) and check its libraries, its start on a GPU and its presence here. The command line turns a name into its
record once (`get`, at the edge: the CLI for a run, tune's `asked_backends` for tune; a document's names where it is
read); plan, tune, runner, the cards, `make_card` and the system name take the record, read these fields and call
these functions; nothing branches on a backend's name. A new backend is one
record here and its card module (docs/developing.md, "Adding a card backend"); a plugin or a test adds its record
to `RECORDS`.

A card says a batch is too large for its device by raising `harness.core.errors.BatchDoesNotFit` (at load, where it
runs a batch of the run's size, or on the batch): `appliance tune` stops growing that layout's batches there."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.core.errors import ApplianceError
from harness.run.cards import provider_options

if TYPE_CHECKING:
    from harness.hw.gpu import GpuRef

__all__ = ["DEFAULT", "RECORDS", "Backend", "Planned", "Ref", "check_computes", "computing", "default", "get", "on_gpu",
           "resolve", "simulating"]

# "package.module:attribute", imported when first called (so onnxruntime, openvino and CUDA load only for the backend
# that needs them), or the callable itself (a test's fake backend)
Ref = str | Callable[..., Any]


def resolve(ref: Ref) -> Callable[..., Any]:
    """The callable a record names."""
    if callable(ref):
        return ref
    module, _, attr = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return found


@dataclass(frozen=True)
class Planned:
    """What the run's plan decided that a backend's settings are made from (its record's `settings` reads the part
    it needs): facts of the run, not of one backend."""

    cards: int                 # how many cards the run has
    batch: int                 # the run's batch size
    scenario: str              # the LoadGen scenario (which batch sizes arrive)
    benchmark: str             # the benchmark's name
    requests: int = 1          # infer requests per card (a record that takes `--requests`; 1 otherwise)
    gpus: tuple[GpuRef, ...] = ()  # GPU backends: card i's GPU
    provider_options: str = ""  # onnxruntime: the provider options asked or tuned (harness.run.cards.provider_options)
    profile: object | None = None  # simulated cards: the profile (harness.run.cards.simulated_card.Profile)


@dataclass(frozen=True)
class Backend:
    name: str
    device: str                      # cpu | gpu (NVIDIA, by CUDA ordinal: harness.hw.gpu) | none (null) | simulated
    package: str | None              # the Python package its cards need (None: the harness alone)
    provider: str | None = None      # onnxruntime's execution provider
    precisions: tuple[str, ...] = ("fp32", "int8")  # the prepared precisions its cards compute
    # its cards stand in for accelerator cards on the host's CPUs: the system name says cpu-emulated (the cards'
    # own CardInfo.emulated says what the logs call each card)
    stands_in: bool = False
    requests: bool = False           # several infer requests (batches in flight) per card: `--requests`
    padded_copies: bool = False      # its cards copy each batch in flight into a full-size one (fixed-shape requests)
    tuned_unasked: bool = False      # `appliance tune` times it without --backends where it is available (a GPU
                                     # backend: where NVML sees a GPU)
    tunable: bool = False            # `appliance tune --backends NAME` may time it (a tuned_unasked one may anyway)
    # the provider option sets tune times on it unless --provider-options is given ("": the provider's defaults;
    # harness.run.cards.provider_options says which providers take which)
    tune_options: tuple[str, ...] = ("",)
    # an onnxruntime provider's option naming the card's device (device_id: the CUDA ordinal; device_type: the
    # OpenVINO device, "CPU" on a cpu backend); None: the provider takes none (the CPU provider)
    device_option: str | None = None
    label: str = "cpu-emulated"      # a card's device as the logs say it; {i}: its device number
    about: str = ""                  # what its cards are, in a few words (`--backend`'s help lists every record)
    # its cards: (spec: BackendSpec, index, cpus) -> Card | AsyncCard, made on the card's pinned worker thread
    # (harness.run.cards.make_card)
    card: Ref = field(kw_only=True)
    # (record) -> None: one line when the libraries its cards need do not load; before any card or folder
    libraries: Ref | None = field(default=None, kw_only=True)
    # (record, CUDA ordinals) -> None: one line when it does not start on one of the GPUs planned
    starts: Ref | None = field(default=None, kw_only=True)
    # (record) -> bool: whether this installation can make its cards, beyond its package importing (tune)
    available: Ref | None = field(default=None, kw_only=True)
    # (Planned) -> its cards' settings, of the type its card module declares (`spec.settings`); None: they
    # take none
    settings: Ref | None = field(default=None, kw_only=True)

    @property
    def gpu(self) -> bool:
        return self.device == "gpu"

    @property
    def simulated(self) -> bool:
        """Simulated cards (a profile's timings, no model): made by `--cards simulate:PROFILE:N`."""
        return self.device == "simulated"

    @property
    def harness_only(self) -> bool:
        """Its cards neither infer nor model a device (null): a run of it measures the harness alone."""
        return self.device == "none"

    @property
    def infers(self) -> bool:
        """Whether its cards run the model at all (null cards return zeros; simulated ones hold a batch)."""
        return self.device in ("cpu", "gpu")

    def computes(self, precision: str) -> bool:
        return precision in self.precisions

    def check_libraries(self) -> None:
        """One line (ApplianceError) when the libraries its cards need do not load; nothing for a backend
        without such a check."""
        if self.libraries is not None:
            resolve(self.libraries)(self)

    def check_start(self, ordinals: Sequence[int]) -> None:
        """One line (ApplianceError) when it does not start on one of the GPUs `ordinals`."""
        if self.starts is not None:
            resolve(self.starts)(self, list(ordinals))

    def settings_for(self, planned: Planned) -> object:
        """Its cards' settings, made by its card module from what the plan decided (None: it takes none)."""
        return None if self.settings is None else resolve(self.settings)(planned)

    def installed(self) -> bool:
        """Whether this installation can make its cards: its package imports and its own check says so."""
        if self.package is not None and importlib.util.find_spec(self.package) is None:
            return False
        return self.available is None or bool(resolve(self.available)(self))


_ORT = "harness.run.cards.onnxruntime_card"


def _onnxruntime_gpu(name: str, provider: str, label: str, tuned_unasked: bool) -> Backend:
    """onnxruntime on NVIDIA GPUs: IO-binding cards, the provider's libraries and start checked before any card; tf32
    (the FP32 weights in TensorFloat-32: provider_options.numerics) where the provider takes `use_tf32` (CUDA)."""
    tf32 = (provider_options.TF32,) if provider_options.numerics(provider, provider_options.TF32) else ()
    return Backend(name, "gpu", "onnxruntime", provider, ("fp32", "int8", "fp16", *tf32), tuned_unasked=tuned_unasked,
                   tunable=True, tune_options=provider_options.GPU_GRID if provider in provider_options.TUNABLE
                   else ("",), device_option="device_id", label=label,
                   card="harness.run.cards.gpu_iobinding:IoBindingCard",
                   settings="harness.run.cards.gpu_iobinding:gpu_settings",
                   libraries=f"{_ORT}:check_gpu_libraries", starts=f"{_ORT}:check_gpus_start",
                   available=f"{_ORT}:provider_available",
                   about="NVIDIA GPUs by CUDA ordinal; never a CPU fallback")


RECORDS: dict[str, Backend] = {b.name: b for b in (
    Backend("onnxruntime", "cpu", "onnxruntime", "CPUExecutionProvider", stands_in=True, tuned_unasked=True,
            card="harness.run.cards.cpu_card:from_spec", settings="harness.run.cards.cpu_card:settings",
            about="CPU-emulated cards"),
    _onnxruntime_gpu("onnxruntime-cuda", "CUDAExecutionProvider", "cuda:{i}", tuned_unasked=True),
    _onnxruntime_gpu("onnxruntime-tensorrt", "TensorrtExecutionProvider", "tensorrt:{i}",
                     tuned_unasked=False),  # tune: when asked
    # the CPU provider in parallel execution mode (harness.run.cards.parallel_card): tune times it when asked
    Backend("onnxruntime-parallel", "cpu", "onnxruntime", "CPUExecutionProvider", stands_in=True, tunable=True,
            card="harness.run.cards.parallel_card:ParallelCard",
            about="CPU-emulated cards, onnxruntime's parallel execution mode"),
    # onnxruntime-openvino's build: OpenVINO's CPU plugin on the card's CPUs (device_type CPU), as planned
    Backend("onnxruntime-openvino", "cpu", "onnxruntime", "OpenVINOExecutionProvider", device_option="device_type",
            label="openvino-cpu:{i}", card=f"{_ORT}:OnnxRuntimeCard",
            about="onnxruntime's OpenVINO provider on the card's CPUs, when that build is installed"),
    # bf16: OpenVINO's INFERENCE_PRECISION_HINT on CPUs with AVX512_BF16 or AMX (onnxruntime's CPU provider has no
    # bf16 path on x86: harness.prepare.bf16)
    Backend("openvino", "cpu", "openvino", None, ("fp32", "int8", "bf16"), stands_in=True, requests=True,
            padded_copies=True, tuned_unasked=True, card="harness.run.cards.openvino_process:from_spec",
            settings="harness.run.cards.openvino_process:settings",
            about="OpenVINO's CPU plugin, a worker process per card"),
    Backend("null", "none", None, stands_in=True, label="none", card="harness.run.cards.null_card:from_spec",
            about="no inference; the harness's own overhead"),
    Backend("simulated", "simulated", None, label="simulated", card="harness.run.cards.simulated_card:from_spec",
            settings="harness.run.cards.simulated_card:settings",
            about="set by --cards simulate:PROFILE:N"),
)}
DEFAULT = "onnxruntime"  # --backend's default, and --backend auto's without a tuned record


def default() -> Backend:
    """The default backend's record (`RunOptions`' default; --backend auto's without a tuned record)."""
    return RECORDS[DEFAULT]


def described() -> str:
    """Every backend and what its cards are, for `--backend`'s help (the records say it; no list by hand)."""
    return ", ".join(f"{b.name} ({b.about})" for b in RECORDS.values())


def with_requests() -> str:
    """The backends whose cards keep several infer requests in flight (`--requests`), for the help."""
    return " / ".join(b.name for b in RECORDS.values() if b.requests)


def on_gpu(name: str) -> bool:
    """Whether `name` is a GPU backend (False for a name that is no backend: "auto", a typo refused later)."""
    record = RECORDS.get(name)
    return record is not None and record.gpu


def get(name: str) -> Backend:
    try:
        return RECORDS[name]
    except KeyError:
        raise ApplianceError(f"unknown backend {name!r}; choose one of: {', '.join(RECORDS)}") from None


def simulating() -> Backend:
    """The record of the cards `--cards simulate:PROFILE:N` makes."""
    return next(b for b in RECORDS.values() if b.simulated)


def computing(precision: str) -> tuple[str, ...]:
    """The backends whose cards compute `precision`."""
    return tuple(b.name for b in RECORDS.values() if b.computes(precision))


def check_computes(backend: Backend, precision: str) -> None:
    """One line when `backend`'s cards do not compute `precision` (bf16 on onnxruntime, fp16 on a CPU)."""
    if not backend.computes(precision):
        on = computing(precision)
        raise ApplianceError(f"--precision {precision} runs on --backend {' / '.join(on)} only: {backend.name} has no "
                             f"{precision} path (onnxruntime's CPU provider computes FP32); use --backend {on[0]} "
                             f"or --precision fp32")
