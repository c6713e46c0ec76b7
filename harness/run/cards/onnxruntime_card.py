"""onnxruntime card: a CPU-emulated card, or one device of an execution provider (CUDA, TensorRT, OpenVINO).

A GPU card (a backend whose record says gpu) runs on its GPU or not at all. onnxruntime quietly runs a graph on the CPU
when its CUDA provider cannot start (a library missing, no driver) and places nodes the provider has no
kernel for on the CPU; the card forbids both with the session option `session.disable_cpu_ep_fallback`
= "1": with it (and the CPU provider not listed, which onnxruntime 1.31 refuses as conflicting)
session creation fails whenever any node of the optimised graph would be assigned to the CPU provider
(onnxruntime checks every node's assignment after partitioning, inference_session.cc), which is also
what happens when the GPU provider could not be created at all. After creation the card checks that
`session.get_providers()[0]` is the provider asked for. Why a session failed is told in one line: before
any card, `check_gpu_provider` loads the provider's shared library itself (`ctypes`, as onnxruntime
does) so the library that did not load is named (libcuda.so.1: no driver; libcublasLt.so.13, libcudnn:
the CUDA / cuDNN wheels; libnvinfer: TensorRT), then starts the provider once per GPU on a one-node
graph with onnxruntime's log captured (`native_log`: a driver older than the CUDA runtime, a missing
device); the card's own failure is then the model's (no GPU kernel for a node, out of GPU memory).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from harness.core import environment, inbound
from harness.core.errors import ApplianceError, BatchDoesNotFit, DataError
from harness.core.outbound import unnamed_file
from harness.hw import gpu
from harness.records.benchmark_record import OutputQuant
from harness.run.cards import provider_options
from harness.run.cards.base import CardInfo, PageableHostBuffers
from harness.run.cards.kept_sessions import Kept, KeptSessions
from harness.run.cards.spec import THREADS_ENV, BackendSpec

if TYPE_CHECKING:
    import onnx

    from harness.run.cards.backends import Backend

_PROVIDER_LIBS = {"CUDAExecutionProvider": "libonnxruntime_providers_cuda.so",
                  "TensorrtExecutionProvider": "libonnxruntime_providers_tensorrt.so"}
NO_CPU_FALLBACK = "session.disable_cpu_ep_fallback"
SPINNING = "session.intra_op.allow_spinning"
_OOM = re.compile(r"out of memory|Failed to allocate memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
                  re.IGNORECASE)
_NATIVE_LOG = threading.Lock()


@dataclass(frozen=True)
class GpuSettings:
    """What an onnxruntime card on NVIDIA GPUs takes beside the model (its IO-binding settings hold it: the GPU
    records' cards are IO-binding cards): each card's GPU and the provider options asked or tuned."""

    gpus: tuple[gpu.GpuRef, ...] = ()  # card i's GPU (empty: card i on CUDA ordinal i, a card made without a plan)
    provider_options: str = ""         # harness.run.cards.provider_options


class OnnxRuntimeCard(PageableHostBuffers):
    """One inference session. On CPU its intra-op threads are the card's CPUs.

    Create it on the card's (already pinned) worker thread: onnxruntime starts its thread pool when
    the session is made, and new threads inherit the creating thread's affinity (and its name).
    An accelerator provider gets the card's device id: a GPU card its CUDA ordinal (`gpu`: its `GpuSettings`,
    found by bus id), OpenVINO the card index; the GPU card (gpu_iobinding.IoBindingCard) warms its batch sizes
    before it is ready. With
    `output_casts` the session's graph ends in QuantizeLinear / Cast nodes, so the card returns uint8 /
    fp16 outputs as a real card's compiled network does. Inside `appliance tune` (`spec.sessions`) it takes the
    session the last card of its slot kept, where one differing only in batch size did (kept_sessions).
    """

    kept: Kept | None = None  # the session taken from `spec.sessions`, and what came with it
    kept_key: tuple[object, ...] | None = None
    spec_sessions: KeptSessions | None = None

    def __init__(self, spec: BackendSpec[object], index: int, cpus: tuple[int, ...],
                 on: GpuSettings | None = None) -> None:
        record, outputs, input_name = spec.backend, spec.outputs, spec.input_name
        assert spec.model_path is not None
        model_path = spec.model_path
        on = on or GpuSettings()
        gpu_ref = on.gpus[index] if on.gpus else None
        provider, id_key, on_gpu = str(record.provider), record.device_option, record.gpu
        require_provider(record)
        device = (gpu_ref.ordinal if gpu_ref is not None else index) if on_gpu else index
        threads, spin = self._threads(cpus, on_gpu)
        opts = session_options(threads, spin, on_gpu)
        providers: list[str | tuple[str, dict[str, object]]] = ["CPUExecutionProvider"]
        if on_gpu:
            options = provider_options.build(provider, on.provider_options, spec.precision)
            providers = [(provider, {id_key or "device_id": str(device), **options})]
        elif id_key is not None:  # a provider on the card's CPUs (OpenVINO's CPU plugin), the CPU provider beside it
            providers = [(provider, {id_key: "CPU"}), "CPUExecutionProvider"]
        label = f"card {index} ({record.label.format(i=device)}{_gpu_words(gpu_ref)})"
        self.label = label
        self._take_kept(spec, index, cpus)
        if self.kept is not None:  # tune: the session the last card of this slot left, for another batch size
            self.session = self.kept.session
        else:
            self.session = self._new_session(spec, model_path, opts, providers, on_gpu)
        in_session = self.session.get_providers()
        if in_session[0] != provider:
            raise ApplianceError(f"{label}: the session runs on {in_session[0]}, not the {provider} asked for; "
                                 f"a card never reports another device's result")
        self.input_name = input_name
        # an int8 / fp16 model built by `prepare --precision …` reads the stored uint8 samples as they are
        self.input_dtype = "uint8" if self._input_type(input_name) == "tensor(uint8)" else "float32"
        self.outputs = list(outputs)
        self.label = label
        details: dict[str, object] = {
            "provider": provider, "providers_in_session": in_session,
            "output_dtypes": [o.type for o in self.session.get_outputs()],
            "intra_op_threads": threads, "onnxruntime": ort.__version__}
        if on_gpu:
            details.update(gpu.card_facts(gpu_ref, device), cpu_fallback="refused (session.disable_cpu_ep_fallback=1)",
                           provider_options=self.session.get_provider_options().get(provider, {}))
        self.info = CardInfo(index=index, backend=record.name, device=record.label.format(i=device), cpus=cpus,
                             emulated=not on_gpu, details=details)

    def _take_kept(self, spec: BackendSpec[object], index: int, cpus: tuple[int, ...]) -> None:
        """The kept session of this card's slot (`kept_sessions`), if tune holds one; once (a subclass may take it
        before the base's constructor runs, to reuse what it made with the session)."""
        if self.kept_key is not None:
            return
        key = _session_key(spec, self._session_settings())
        self.spec_sessions, self.kept_key = spec.sessions, (type(self), key, index, cpus)
        if spec.sessions is not None:
            self.kept = spec.sessions.take(self.kept_key)

    def _new_session(self, spec: BackendSpec[object], model_path: Path, opts: ort.SessionOptions,
                     providers: list[str | tuple[str, dict[str, object]]], on_gpu: bool) -> ort.InferenceSession:
        provider, label = providers[0] if isinstance(providers[0], str) else providers[0][0], self.label
        source = self._model_source(spec, model_path)
        self._configure(opts, providers, on_gpu)  # the IO-binding card's session settings (gpu_iobinding)
        log: list[str] = []
        try:
            with contextlib.ExitStack() as held, native_log(on_gpu) as log:
                if isinstance(source, str):  # the file checked, held open: never a FIFO put at its name since
                    source = held.enter_context(inbound.held(source, inbound.ARRAY, what="model"))
                session = ort.InferenceSession(source, opts, providers=providers)
        except inbound.Refused:
            raise
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            first = one_line(str(exc))
            if on_gpu and ("fallback to CPU EP" in first or _OOM.search(first) or _provider_failed(log)):
                raise _gpu_load_error(label, provider, model_path, first, log) from None
            raise DataError(f"onnxruntime cannot load {model_path}: {first}; "
                            f"rerun `appliance prepare` or pass a valid --model") from None
        if self.spec_sessions is not None:
            self.spec_sessions.made_one()
        return session

    def keepable(self) -> bool:
        """Whether tune may keep this card's session for the next batch size (`kept_sessions`): its input's batch
        dimension is dynamic and it runs on a provider that compiles nothing for one batch (not TensorRT)."""
        shape = next(i.shape for i in self.session.get_inputs() if i.name == self.input_name)
        return bool(shape) and not isinstance(shape[0], int) and \
            self.session.get_providers()[0] != "TensorrtExecutionProvider"

    def _session_settings(self) -> object:
        """What of the card's settings its session is made from (`_session_key`): none for this card, which reads
        none; a subclass leaves out what differs between batch sizes."""
        return None

    def _kept_state(self) -> Kept:
        """What the next card of this slot takes with the session (a subclass adds what it made with it)."""
        return Kept(self.session)

    def _threads(self, cpus: tuple[int, ...], on_gpu: bool) -> tuple[int, bool]:
        """Intra-op threads and whether they spin: the card's CPUs (APPLIANCE_INTRA_OP_THREADS overrides); threads
        that outnumber them do not spin, which would take the CPUs from the card's feeder and completion."""
        del on_gpu
        threads = environment.threads(THREADS_ENV) or max(1, len(cpus))  # 1 to the machine's CPUs
        return threads, threads <= len(cpus)

    def _model_source(self, spec: BackendSpec[object], model_path: Path) -> str | bytes:
        """What the session loads: the model file, or its bytes with the output casts in-graph."""
        return with_output_casts(model_path, spec.outputs, spec.output_casts) if spec.output_casts else str(model_path)

    def _configure(self, opts: ort.SessionOptions, providers: list[str | tuple[str, dict[str, object]]],
                   on_gpu: bool) -> None:
        """Change the session options or provider options before the session is made (a subclass's hook)."""

    def _input_type(self, name: str) -> str:
        kind: str = next(i.type for i in self.session.get_inputs() if i.name == name)
        return kind

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        try:
            outputs: list[np.ndarray] = self.session.run(self.outputs, {self.input_name: batch})
        except Exception as exc:  # one line naming the card (the worker ends the run as .incomplete if all fail)
            raise ApplianceError(f"{self.label}: {one_line(str(exc))}") from None
        return outputs

    def close(self) -> None:
        if self.spec_sessions is not None and self.keepable():
            self.spec_sessions.keep(self.kept_key, self._kept_state())
        del self.session


def _session_key(spec: BackendSpec[object], settings: object) -> tuple[object, ...]:
    """What a session is made from: the model, and the card's `settings` less what differs between batch sizes."""
    return (spec.backend.name, spec.model_path, spec.input_name, spec.outputs, spec.output_casts, spec.precision,
            spec.inference_precision, settings)


def batch_fault(label: str, batch: int, exc: Exception) -> ApplianceError:
    """A GPU card's warm-up batch that failed, in one line: `BatchDoesNotFit` where the GPU's memory ran out (tune
    then times no larger batch on that layout)."""
    first = one_line(str(exc))
    if _OOM.search(str(exc)):
        return BatchDoesNotFit(f"{label}: a batch of {batch} does not fit in the GPU's memory ({first}); "
                               f"use a smaller --batch-size")
    return ApplianceError(f"{label}: a warm-up batch of {batch} failed: {first}")


def session_options(threads: int, spin: bool, on_gpu: bool) -> ort.SessionOptions:
    """A card's session options, each config entry set once (onnxruntime warns on every session where a key is
    set twice, as the IO-binding card once did): `threads` intra-op threads, spinning or not; a GPU card refuses
    onnxruntime's silent CPU fallback."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    opts.add_session_config_entry(SPINNING, "1" if spin else "0")
    if on_gpu:
        opts.add_session_config_entry(NO_CPU_FALLBACK, "1")
    return opts


def _gpu_words(ref: gpu.GpuRef | None) -> str:
    return "" if ref is None else f" {ref.model} {ref.pci}"


def provider_available(backend: Backend) -> bool:
    """Whether this onnxruntime build has the backend's provider and its library loads (a GPU backend's record's
    `available`): onnxruntime-gpu lists CUDA and TensorRT without a driver, and `tune --backends` offered them,
    then refused them."""
    provider = str(backend.provider)
    if provider not in ort.get_available_providers():
        return False
    with contextlib.redirect_stdout(io.StringIO()):  # it prints each library it cannot find
        ort.preload_dlls()  # CUDA / cuDNN from NVIDIA's wheels first, as a card loads them
    return provider_library_error(provider) is None


def require_provider(backend: Backend) -> None:
    """The backend's provider is in this onnxruntime build, or one line saying which package has it."""
    provider = str(backend.provider)
    if provider not in ort.get_available_providers():
        raise ApplianceError(f"--backend {backend.name} needs onnxruntime's {provider}, which this onnxruntime "
                             f"({ort.__version__}) lacks (has: {', '.join(ort.get_available_providers())}); "
                             f"install the matching onnxruntime package (onnxruntime-gpu: requirements-gpu.lock) "
                             f"or use --backend onnxruntime")


def check_gpu_libraries(backend: Backend) -> None:
    """Before any card or folder: the provider's shared library loads (CUDA / cuDNN preloaded from NVIDIA's
    wheels), or one line naming the library that did not, what that means, and the driver."""
    provider = str(backend.provider)
    require_provider(backend)
    gpu.cuda_order()
    with contextlib.redirect_stdout(io.StringIO()):  # it prints each library it cannot find
        ort.preload_dlls()  # CUDA / cuDNN from NVIDIA's wheels (requirements-gpu.lock), else the system's
    missing = provider_library_error(provider)
    if missing is not None:
        lib = missing.split(":")[0]
        why = ("no NVIDIA driver is installed (the driver's libcuda.so.1 is missing)" if lib.startswith("libcuda.") else
               "TensorRT is not installed" if lib.startswith("libnvinfer") else
               "a CUDA / cuDNN library is missing: install NVIDIA's wheels from requirements-gpu.lock")
        raise ApplianceError(f"--backend {backend.name}: {_build()} cannot load its {provider}: {missing}; {why}; "
                             f"{gpu.driver_line()}")


def check_gpus_start(backend: Backend, ordinals: Sequence[int]) -> None:
    """The provider starts on each GPU (a one-node graph, CPU fallback refused), or one line with the CUDA
    error onnxruntime logged (no device, a driver older than the CUDA runtime) and the driver's versions."""
    provider = str(backend.provider)
    probe = _probe_model()
    for ordinal in ordinals:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.add_session_config_entry(NO_CPU_FALLBACK, "1")
        log: list[str] = []
        try:
            with native_log(True) as log:
                ort.InferenceSession(probe, opts, providers=[(provider, {"device_id": str(ordinal)})])
        except Exception as exc:
            raise ApplianceError(f"--backend {backend.name}: {provider} failed to start on cuda:{ordinal}: "
                                 f"{_reason(log, str(exc))}; {_build()}, {gpu.driver_line()}") from None


def _build() -> str:
    return f"onnxruntime-gpu {ort.__version__} (built for CUDA {cuda_build() or '?'}, cuDNN 9)"


def cuda_build() -> str | None:
    """The CUDA version onnxruntime-gpu was built for ("13.0"); None for a CPU build."""
    from onnxruntime.capi import onnxruntime_validation

    version: str | None = onnxruntime_validation.get_package_name_and_version_info()[2] or None
    return version


def provider_library_error(provider: str) -> str | None:
    """dlopen the provider's shared library as onnxruntime will: None if it loads, else the loader's reason
    (which library is missing)."""
    name = _PROVIDER_LIBS.get(provider)
    if name is None:
        return None
    try:
        ctypes.CDLL(str(Path(ort.__file__).parent / "capi" / name))
    except OSError as exc:
        return str(exc)
    return None


def _probe_model() -> bytes:
    """A one-node graph (Relu on 4 floats) every GPU provider has a kernel for."""
    from onnx import TensorProto, helper

    from harness.data.models import IR_VERSION

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model: bytes = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                     ir_version=IR_VERSION).SerializeToString()
    return model


@contextlib.contextmanager
def native_log(capture: bool = True) -> Iterator[list[str]]:
    """The lines native code and onnxruntime's Python layer write meanwhile (which library did not load,
    which CUDA call failed), kept off the terminal and in the list yielded (filled when the block ends).
    File descriptor 2 is process-wide, so captures are serialised."""
    lines: list[str] = []
    if not capture:
        yield lines
        return
    with _NATIVE_LOG, unnamed_file() as tmp, contextlib.redirect_stdout(io.StringIO()) as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace") + out.getvalue()
            lines += [line for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines() if line.strip()]


def _provider_failed(log: list[str]) -> bool:
    return any("Failed to create" in line or "Failed to load library" in line or "CUDA failure" in line
               for line in log)


def _reason(log: list[str], error: str) -> str:
    """The most telling line onnxruntime logged: a library's load error, a CUDA error, else its exception."""
    for pattern in (r"with error: (.*)", r"(CUDA failure \d+: .*?)(?: ; GPU=| file=|$)", r"(CUDA error.*)",
                    r"(cuda\w*Error\w*.*)", r"\[E:onnxruntime[^\]]*\] (?:\S+ )?(.*)"):
        for line in log:
            match = re.search(pattern, line)
            if match and "fallback to CPU EP" not in match.group(1):
                return match.group(1).strip()[:300]
    return one_line(error)


def one_line(error: str, limit: int = 400) -> str:
    """onnxruntime's exception text on one line: its reason often follows a first line that ends in a bare
    "Unsupported" or "FAIL", so the lines are joined, not cut at the first."""
    text = " ".join(error.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _gpu_load_error(label: str, provider: str, model_path: Path, first: str, log: list[str]) -> ApplianceError:
    if _OOM.search(first) or any(_OOM.search(line) for line in log):  # the other cards' batches on the GPU took it
        return BatchDoesNotFit(f"{label}: the model does not fit in the GPU's memory ({_reason(log, first)})")
    if _provider_failed(log):
        return ApplianceError(f"{label}: {provider} failed to start: {_reason(log, first)}; {gpu.driver_line()}")
    return ApplianceError(f"{label}: {provider} has no kernel for some nodes of {model_path.name}, and onnxruntime "
                          f"would run them on the CPU, which a GPU card refuses ({NO_CPU_FALLBACK}); use a model the "
                          f"provider runs whole (e.g. `prepare --precision fp16` or fp32)")


def with_output_casts(model_path: Path, outputs: tuple[str, ...], casts: tuple[OutputQuant | None, ...]) -> bytes:
    """The model with outputs converted in-graph: QuantizeLinear to uint8 (scale, zero point) or Cast to fp16."""

    try:
        model = inbound.load_onnx(str(model_path))
    except Exception as exc:  # onnx raises DecodeError and others
        raise DataError(f"onnx cannot read {model_path} ({type(exc).__name__}); rerun `appliance prepare`") from None
    return cast_outputs(model, outputs, casts)


def cast_outputs(model: onnx.ModelProto, outputs: tuple[str, ...], casts: tuple[OutputQuant | None, ...]) -> bytes:
    """`model` (changed in place) with outputs converted in-graph, serialized (`with_output_casts`)."""
    from onnx import TensorProto, helper, numpy_helper

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
