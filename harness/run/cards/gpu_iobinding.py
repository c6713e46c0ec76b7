"""The GPU card's data path: IO binding with device-resident buffers, one CUDA stream, CUDA graphs per batch size.

An `OnnxRuntimeCard` (same session checks: a GPU card runs on its GPU or is refused in one line, CPU fallback
refused) whose batches never go through `session.run` with numpy:

- Input: the stored uint8 samples as they are. An FP32 model that reads float32 gets Cast + Sub(mean) in
  front (`uint8_front.uint8_input`, as the int8 / bf16 models have): the arithmetic is the host's, bit for bit,
  and a ResNet50 sample crosses PCIe as 150 KB, not 600 KB. The samples are copied as stored from the replica
  of the card's NUMA node (harness.run.qsl), with no host copy: each time LoadGen loads samples the card
  page-locks that replica with the CUDA runtime (`replica_loaded`, the qsl's watch, on the loading thread;
  cudaHostRegister once per process however many cards read it, cudaHostUnregister on unload and close), and
  its worker hands it each batch as runs of consecutive replica rows (`ReplicaRows`, `infer_rows`): one
  cudaMemcpyAsync per run on the card's stream, a DMA, into the bucket's device buffer. Where the replica
  cannot be page-locked (the driver refuses) or read as it is (a model that reads float32), the batches are
  staged as for any card into the worker's staging buffers, page-locked then (`register_host_buffers`), and
  the n rows staged are one DMA. The manifest (`io_binding.input_path`) says which path ran and why, with the
  copies per batch.
- Buckets: a batch of n runs in the smallest of `gpu_plan.bucket_sizes(batch)` holding n; each bucket has
  its own device input and output buffers (OrtValues on the card's device) bound once (`io_binding`), so
  their addresses never change, and its own CUDA graph (`gpu_graph_id` = the bucket's index).
- Warm-up, in the constructor, before the card is ready: every bucket runs `WARM_RUNS` times, largest first
  (out of memory is refused at once), so cuDNN's algorithm search (`cudnn_conv_algo_search`, EXHAUSTIVE by
  default) and each bucket's CUDA graph capture happen here, never mid-run.
- Output: only what the host reads (the benchmark record's `host_reads`; ResNet50: the ArgMax, 8 bytes a
  sample) is copied back, n rows; the others stay on the device and are returned as read-only NaN / -1
  placeholders that the encoder never reads (tests check the encoder against them).
- Threads: a GPU card's session has one intra-op thread that never spins (`intra_op_num_threads=1`,
  `session.intra_op.allow_spinning=0`): the graph runs on the GPU, the card's CPUs feed and complete.
- Stream: onnxruntime computes on the card's own stream (`has_user_compute_stream`, `user_compute_stream`), so
  copy-in, graph and copy-out are ordered on it without a host wait between them; several cards on one GPU
  (`--cards cuda:allx4`, harness.hw.gpu_plan) are several sessions, streams and buffer sets.

On the CPU provider (`--backend onnxruntime` with APPLIANCE_IO_BINDING=1, and the tests) the same code runs
with OrtValues in host memory and memmove copies (harness.run.cards.cuda_runtime.HostCopies).

Loading: a process's GPU cards load (session, buffers, warm-up), page-lock and unlock host memory (replicas,
staging buffers) and close one at a time (`_GPU_LOAD`): onnxruntime captures its CUDA graphs in CUDA's global
capture mode, in which another thread's cudaMalloc or cudaHostRegister on the same device would invalidate the
capture. Once captured, graphs replay side by side.

CUDA graphs (`graph_rule`): onnxruntime replays a captured graph without building an execution frame
(`InferenceSession::Run` goes straight to the provider's `ReplayGraph`: cudaGraphLaunch, then cudaStreamSynchronize,
cuda_graph.cc), so every address and shape of the capturing run is replayed as it was. Two patterns make a replay
read memory the capture no longer owns, and a GPU card with either runs without graphs:
- a MatMul whose batch dimensions cannot be one strided batched GEMM (matmul.cc's fallback): its pointer arrays
  are built on the host each run and copied to the device from a pinned buffer released after the run, so a
  replay copies whatever that buffer holds by then;
- an op whose output shape depends on the data (NonZero, NonMaxSuppression, ...) or control flow: the replay
  keeps the capture's shapes, and onnxruntime refuses control flow under graphs.
The YOLO11l FP32 model with FP32 outputs has neither (tests/test_graph_rule.py), yet its replay faulted with
CUDA error 700 on the H100 (2026-11-27); an error 700 is sticky, the process aborts in the provider's teardown
(cudaGraphExecDestroy throws in a destructor), so no in-process check can catch it. Hence graphs are on by
default only for a (precision, outputs) of a benchmark a GPU run has replayed (its record's
`graphs_replayed`); elsewhere off,
and tools/gpu_check.sh tries the formerly crashing case first, in a child process, to prove or refute it.

Escape hatches, recorded in the manifest: APPLIANCE_CUDA_GRAPH=0 (no graphs) or =1 (graphs even where not proven,
never past a hazard), APPLIANCE_CUDA_USER_STREAM=0
(onnxruntime's own stream; the card then waits for its copy-in before running), APPLIANCE_CUDNN_SEARCH=
EXHAUSTIVE | HEURISTIC | DEFAULT.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from harness.core import environment, inbound
from harness.core.errors import ApplianceError, DataError
from harness.data import benchmarks
from harness.hw import gpu, gpu_plan
from harness.run.cards import provider_options
from harness.run.cards.backends import Planned
from harness.run.cards.cuda_runtime import Copies, CudaCopies, HostCopies
from harness.run.cards.kept_sessions import Kept
from harness.run.cards.onnxruntime_card import (
    SPINNING,
    GpuSettings,
    OnnxRuntimeCard,
    batch_fault,
    cast_outputs,
    one_line,
)
from harness.run.cards.spec import BackendSpec, own
from harness.run.qsl import ReplicaRows

__all__ = ["GRAPH_ENV", "REPLAY_TOLERANCE", "SEARCH_ENV", "STREAM_ENV", "WARM_RUNS",
           "IoBindingCard", "IoBindingSettings", "binding_problem", "capture_hazards", "check_outputs", "cuda_settings",
           "gpu_settings", "graph_rule", "u8_model"]

REPLAY_TOLERANCE = 0.01  # relative: a graph replays the same kernels as the regular run it was captured from
WARM_RUNS = 3  # onnxruntime runs a graph id normally first, then captures it: 3 leaves it captured and replayed
GRAPH_ENV, STREAM_ENV, SEARCH_ENV = "APPLIANCE_CUDA_GRAPH", "APPLIANCE_CUDA_USER_STREAM", "APPLIANCE_CUDNN_SEARCH"
_GPU_LOAD = threading.Lock()  # one GPU card loading (allocating, capturing, pinning) at a time
_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(uint8)": np.uint8, "tensor(int8)": np.int8, "tensor(int32)": np.int32}


@dataclass(frozen=True)
class IoBindingSettings:
    """The IO-binding card's settings: the GPU records' (`gpu_settings`), and the onnxruntime CPU record's with
    APPLIANCE_IO_BINDING=1 (harness.run.cards.cpu_card: the same card on CPU OrtValues, `gpu` None)."""

    batch: int                     # the run's batch size: the largest bucket, a batch of it run at load
    buckets: tuple[int, ...] = ()  # the batch sizes it binds and warms (gpu_plan.run_buckets); () every power of 2
    benchmark: str = ""            # its input's mean (uint8 samples converted in the graph), the outputs the host reads
    gpu: GpuSettings | None = None  # on NVIDIA GPUs: each card's GPU and the provider options; None: the CPU provider


def gpu_settings(planned: Planned) -> IoBindingSettings:
    """An onnxruntime GPU record's `settings`: the IO-binding card on each card's GPU, with the run's buckets."""
    return IoBindingSettings(planned.batch, gpu_plan.run_buckets(planned.scenario, planned.batch), planned.benchmark,
                             GpuSettings(planned.gpus, planned.provider_options))


def cuda_settings() -> dict[str, Any]:
    """The CUDA provider settings a GPU card uses (from the environment's escape hatches), one line each wrong;
    `cuda_graph` is what APPLIANCE_CUDA_GRAPH asks (None: unset, `graph_rule` decides)."""
    return {"cuda_graph": environment.tristate(GRAPH_ENV), "user_stream": environment.switch(STREAM_ENV),
            "cudnn_conv_algo_search": environment.choice(SEARCH_ENV)}


_DATA_SHAPED = {"NonZero", "NonMaxSuppression", "Unique", "Compress", "TopK", "Loop", "If", "Scan"}


def capture_hazards(model: Any, batch: int = 2) -> list[str]:
    """What in `model` (an onnx ModelProto) a replayed CUDA graph would get wrong (see the module's docstring):
    MatMuls that take onnxruntime's pointer-array path at `batch`, ops with data-shaped outputs."""
    from onnx import helper, shape_inference

    found = [f"{n.op_type} {n.name or n.output[0]!r} (its output's shape depends on the data)"
             for n in model.graph.node if n.op_type in _DATA_SHAPED
             and not (n.op_type == "TopK" and _constant(model, n.input[1]))]
    if not any(n.op_type == "MatMul" for n in model.graph.node):
        return found
    graph = model.graph  # shapes only: the weights stand in as inputs of their shape (no 100 MB copy)
    small = [i for i in graph.initializer if int(np.prod(i.dims)) <= 64]  # Reshape's shapes and such: their values
    named = {i.name for i in graph.input}  # an older model lists its weights as inputs too
    weights = [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in graph.initializer
               if int(np.prod(i.dims)) > 64 and i.name not in named]
    slim = helper.make_model(helper.make_graph(list(graph.node), graph.name, [*graph.input, *weights],
                                               list(graph.output), small),
                             opset_imports=list(model.opset_import), ir_version=model.ir_version)
    for value in slim.graph.input[:len(graph.input)]:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = batch
    try:
        inferred = shape_inference.infer_shapes(slim).graph
    except Exception as exc:  # onnx raises its own errors: a MatMul's path then cannot be excluded
        return [*found, f"the graph's shapes, which onnx cannot infer ({type(exc).__name__})"]
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
              for v in (*inferred.value_info, *inferred.input, *inferred.output)}
    shapes.update({i.name: list(i.dims) for i in graph.initializer})
    for node in graph.node:
        if node.op_type == "MatMul" and _pointer_arrays(shapes.get(node.input[0]), shapes.get(node.input[1])):
            found.append(f"MatMul {node.name or node.output[0]!r} {shapes[node.input[0]]} x {shapes[node.input[1]]} "
                         f"(no strided batched GEMM: pointer arrays copied from the host each run)")
    return found


def _constant(model: Any, name: str) -> bool:
    return any(i.name == name for i in model.graph.initializer) or \
        any(n.op_type == "Constant" and name in n.output for n in model.graph.node)


def _pointer_arrays(left: list[int] | None, right: list[int] | None) -> bool:
    """Whether onnxruntime's CUDA MatMul (matmul.cc) runs these shapes as cublasGemmBatched over pointer arrays:
    more than one output matrix, and not expressible as a strided batch (left rank >= 3, the right operand 2-D or
    with as many matrices as the left)."""
    if not left or not right or -1 in left or -1 in right:
        return False
    batches = int(np.prod(np.broadcast_shapes(tuple(left[:-2]), tuple(right[:-2])))) if len(left) > 1 else 1
    if batches <= 1:
        return False
    if len(left) < 3:
        return True
    return len(right) >= 3 and int(np.prod(left[:-2])) != int(np.prod(right[:-2]))


def graph_rule(model: Any, benchmark: str, precision: str, out_types: tuple[str, ...],
               asked: bool | None) -> tuple[bool, str]:
    """Whether a GPU card captures CUDA graphs for this model, and why (the manifest's `graph_rule`): never past
    a hazard (`capture_hazards`); APPLIANCE_CUDA_GRAPH (`asked`) where set; else only where proven on a GPU."""
    if asked is False:
        return False, f"{GRAPH_ENV}=0"
    hazards = capture_hazards(model)
    if hazards:
        return False, "no CUDA graphs: a replay would get " + "; ".join(hazards[:3]) + " wrong"
    record = benchmarks.get(benchmark) if benchmark else None  # the GPU runs: the benchmark record's facts
    replayed = {(p, o): run for p, o, run in (record.graphs_replayed if record else ())}
    faulted = {(p, o): run for p, o, run in (record.graphs_faulted if record else ())}
    key = (precision, out_types)
    if asked:
        return True, f"{GRAPH_ENV}=1 (no hazard found in the graph)" + \
            (f"; note: {faulted[key]}" if key in faulted else "")
    if key in replayed:
        return True, f"proven: {replayed[key]}"
    outputs = "/".join(out_types)
    if key in faulted:
        return False, f"no CUDA graphs: {benchmark} {precision} with {outputs} outputs: {faulted[key]}"
    return False, (f"no CUDA graphs: {benchmark} {precision} with {outputs} outputs has not been replayed on a GPU "
                   f"({GRAPH_ENV}=1 to try)")


def u8_model(model_path: Path, spec: BackendSpec[object], benchmark: str) -> tuple[bytes | None, bool]:
    """The model reading uint8 samples (Cast + Sub(mean) of `benchmark`) with the spec's output casts, and whether
    it was converted (the file read float32); (None, False) when the file needs no change at all."""
    from onnx import TensorProto

    from harness.data.models.uint8_front import uint8_input

    try:
        model = inbound.load_onnx(str(model_path))
    except Exception as exc:  # onnx raises DecodeError and others
        raise DataError(f"onnx cannot read {model_path} ({type(exc).__name__}); rerun `appliance prepare`") from None
    first = next((i for i in model.graph.input if i.name == spec.input_name), None)
    floats = first is not None and first.type.tensor_type.elem_type != TensorProto.UINT8
    if not floats and not spec.output_casts:
        return None, False
    if floats:
        model = uint8_input(model, benchmarks.get(benchmark))
    if not spec.output_casts:
        serialized: bytes = model.SerializeToString()
        return serialized, floats
    return cast_outputs(model, spec.outputs, spec.output_casts), floats


def binding_problem(session: ort.InferenceSession, input_name: str, sample_shape: tuple[int, ...],
                    in_dtype: np.dtype[Any], outputs: list[str], out_shapes: list[tuple[int, ...]],
                    out_types: list[np.dtype[Any]]) -> str | None:
    """What the card is about to bind (per-sample shapes and dtypes of the input and each output) against the
    session's own metadata, or None when they agree. A bound buffer smaller than, or of another type than, what
    a captured CUDA graph writes is an illegal address on the GPU: refused here, in words, at load. A symbolic
    dimension (the batch, or a named one) is not checked statically; the first warm-up run checks it."""
    meta = {i.name: i for i in session.get_inputs()}
    if input_name not in meta:
        return f"the model has no input {input_name!r} (it has {', '.join(meta)})"
    checks = [("input", input_name, meta[input_name], sample_shape, in_dtype)]
    outs = {o.name: o for o in session.get_outputs()}
    for name, shape, dtype in zip(outputs, out_shapes, out_types, strict=True):
        if name not in outs:
            return f"the model has no output {name!r} (it has {', '.join(outs)})"
        checks.append(("output", name, outs[name], shape, dtype))
    for role, name, node, shape, dtype in checks:
        found = _TYPES.get(node.type)
        if found is None or np.dtype(found) != dtype:
            return f"{role} {name!r} is {node.type} in the model, and the card would bind {dtype}"
        dims = list(node.shape[1:]) if node.shape else []
        if len(dims) != len(shape) or any(isinstance(d, int) and d != s for d, s in zip(dims, shape, strict=True)):
            bound = ", ".join(map(str, shape))
            return f"{role} {name!r} is {node.shape} in the model, and the card would bind [batch, {bound}]"
    return None


def check_outputs(got: list[np.ndarray], size: int, out_shapes: list[tuple[int, ...]],
                  out_types: list[np.dtype[Any]]) -> str | None:
    """The outputs of a run onnxruntime allocated itself (no binding) against what the card binds for `size`
    samples: the check of the dimensions the metadata leaves symbolic."""
    for i, (value, shape, dtype) in enumerate(zip(got, out_shapes, out_types, strict=True)):
        if value.shape != (size, *shape) or value.dtype != dtype:
            return (f"output {i} comes out as {value.dtype} {list(value.shape)} for {size} sample(s), and the card "
                    f"would bind {dtype} {[size, *shape]}")
    return None


def _no_graph() -> ort.RunOptions:
    """Run options that skip CUDA graphs (onnxruntime's `gpu_graph_id` -1): a regular run."""
    options = ort.RunOptions()
    options.add_run_config_entry("gpu_graph_id", "-1")
    return options


@dataclass(frozen=True)
class _WithSession:
    """What an IO-binding card made with its session that the next card of its slot takes with it (tune's kept
    sessions): the stream its provider options name, and what was decided making the session."""

    copies: Copies
    u8_converted: bool
    graph_why: str
    spinning: str | None


class IoBindingCard(OnnxRuntimeCard):
    """A card whose batches run through IO binding on device-resident buffers, one bucket per batch size."""

    def __init__(self, spec: BackendSpec[IoBindingSettings | None], index: int, cpus: tuple[int, ...]) -> None:
        self.io = io = own(spec, IoBindingSettings)  # None (the CPU record's plain card) refused in one line
        self.on_gpu = spec.backend.gpu
        on = io.gpu or GpuSettings()
        ref = on.gpus[index] if on.gpus else None
        self.ordinal = (ref.ordinal if ref is not None else index) if self.on_gpu else 0
        self.settings = cuda_settings() if self.on_gpu else {"cuda_graph": False, "user_stream": False}
        self.graph_why = "the CPU provider: no CUDA graphs" if not self.on_gpu else "not a CUDA provider card"
        self.batch = max(1, io.batch)
        self.sizes = tuple(sorted(io.buckets)) if io.buckets else gpu_plan.bucket_sizes(self.batch)
        if self.sizes[-1] != self.batch:
            raise ValueError(f"buckets {self.sizes} do not end at the batch {self.batch}")
        self.spec = spec
        self.u8_converted = False
        self.copies: Copies = HostCopies()  # the card's CUDA stream, made under the loading lock on a GPU
        self.engine: dict[str, Any] = {}
        self.ref = ref
        self._source_bytes: bytes | None = None
        self.opts_spinning: str | None = None
        self._staging: list[np.ndarray] = []  # the worker's staging buffers, page-locked once a batch is staged
        self._staging_pinned = False
        self._replica: np.ndarray | None = None  # the replica it copies from, page-locked on a GPU
        self._node: int | None = None
        self._direct: bool | None = None  # the path of the last load: None before one
        self._why = "no samples loaded yet"  # why batches are staged
        self.rows_batches = self.rows_copies = 0  # since the last load: batches from the replica, copies for them
        self.replica_loads = self.staged_loads = 0
        try:
            with _GPU_LOAD if self.on_gpu else contextlib.nullcontext():
                self._take_kept(spec, index, cpus)
                if self.kept is not None:  # tune: the session of the last card of this slot, on its stream
                    self._restore(self.kept)
                elif self.on_gpu:
                    self.copies = CudaCopies(self.ordinal, f"card {index} (cuda:{self.ordinal})")
                super().__init__(spec, index, cpus, on)
                self._bind()
                warm_ms = self._warm_all()
        except BaseException:
            self.copies.close()
            raise
        same = [i for i, g in enumerate(on.gpus) if ref is not None and g.pci == ref.pci]  # this GPU's cards
        self.info.details.update(
            intra_op_threads=1 if self.on_gpu else self.info.details.get("intra_op_threads"),
            io_binding={
                "device": f"{self.copies.device}:{self.ordinal}", "buckets": list(self.sizes),
                "cuda_graph": self.settings["cuda_graph"], "graph_rule": self.graph_why,
                "graph_ids": {str(s): i for i, s in enumerate(self.sizes)} if self.settings["cuda_graph"] else None,
                "cudnn_conv_algo_search": self.settings.get("cudnn_conv_algo_search"),
                "user_compute_stream": self.settings["user_stream"],
                "allow_spinning": self.opts_spinning,
                "input": ("uint8 as stored; Cast + Sub(mean) in the graph (converted at load)" if self.u8_converted
                          else f"{self.input_dtype} as the model reads it"),
                "outputs_to_host": [o for o, r in zip(self.outputs, self.reads, strict=True) if r],
                "outputs_on_device": [o for o, r in zip(self.outputs, self.reads, strict=True) if not r],
                "warm_up": f"every bucket {WARM_RUNS} times at load, largest first (algorithm search, graph capture)",
                "warm_up_ms": warm_ms, "graph_check": self.graph_check,
                "host_buffers_pinned": 0, "replica_bytes_pinned": 0,
                "slot_on_gpu": f"{same.index(index) + 1} of {len(same)}" if index in same else None,
                **({"tensorrt_engine": self.engine} if self.engine else {})})
        self._describe()

    # the session -----------------------------------------------------------------------------------
    def keepable(self) -> bool:
        """The base card's rule, and never a session with CUDA graphs enabled: its captured graphs replay the
        addresses of this card's buffers, which close frees (onnxruntime's graphs are per thread and per
        `gpu_graph_id`; that a later card's thread never meets them is not shown, so such sessions end here)."""
        options = self.session.get_provider_options().get("CUDAExecutionProvider", {})
        return super().keepable() and not self.settings["cuda_graph"] and options.get("enable_cuda_graph", "0") == "0"

    def _kept_state(self) -> Kept:
        """The session with its stream (`copies`, which its provider options name) and what was decided making it."""
        copies, loading = self.copies, self._loading

        def release() -> None:
            with loading():
                copies.close()

        return Kept(self.session, _WithSession(copies, self.u8_converted, self.graph_why, self.opts_spinning), release)

    def _session_settings(self) -> object:
        """Its settings less the batch and buckets, which differ between the batch sizes a kept session serves."""
        return dataclasses.replace(self.io, batch=0, buckets=())

    def _restore(self, kept: Kept) -> None:
        state = kept.state
        assert isinstance(state, _WithSession)  # left by a card of this class (the key holds its type)
        self.copies, self.u8_converted, self.graph_why, self.opts_spinning = \
            state.copies, state.u8_converted, state.graph_why, state.spinning
        self.settings["cuda_graph"] = False  # a kept session never has graphs (`keepable`)

    def _threads(self, cpus: tuple[int, ...], on_gpu: bool) -> tuple[int, bool]:
        """On a GPU one intra-op thread that never spins: the graph runs on the GPU, the card's CPUs feed and
        complete."""
        return (1, False) if on_gpu else super()._threads(cpus, on_gpu)

    def _model_source(self, spec: BackendSpec[object], model_path: Path) -> str | bytes:
        benchmark = self.io.benchmark  # set before the base card asks
        source, self.u8_converted = u8_model(model_path, spec, benchmark) if benchmark else (None, False)
        self._source_bytes = source
        return super()._model_source(spec, model_path) if source is None else source

    def _configure(self, opts: ort.SessionOptions, providers: list[str | tuple[str, dict[str, object]]],
                   on_gpu: bool) -> None:
        self.opts_spinning = opts.get_session_config_entry(SPINNING)
        if not on_gpu:
            return
        entry = providers[0]  # a GPU card lists its one provider, with its options
        assert isinstance(entry, tuple)
        provider, options = entry
        stream = {"has_user_compute_stream": "1", "user_compute_stream": str(self.copies.stream)} \
            if self.settings["user_stream"] else {}
        if provider == "CUDAExecutionProvider":
            self.settings["cuda_graph"], self.graph_why = graph_rule(
                self._onnx_model(), self.io.benchmark, self.spec.precision,
                tuple(dtype for _, dtype in self.spec.output_specs), self.settings["cuda_graph"])
            options.update(provider_options.build(provider, (self.io.gpu or GpuSettings()).provider_options,
                                                  self.spec.precision,
                                                  cudnn_conv_algo_search=str(self.settings["cudnn_conv_algo_search"]),
                                                  enable_cuda_graph="1" if self.settings["cuda_graph"] else "0",
                                                  **stream))
        elif provider == "TensorrtExecutionProvider":
            self.settings["cuda_graph"] = self.settings["cuda_graph"] is not False
            options.update(self._tensorrt_options(), **stream)

    def _onnx_model(self) -> Any:
        """The model the session loads, as an onnx ModelProto (for `graph_rule`)."""
        import onnx

        if self._source_bytes is not None:
            return onnx.load_from_string(self._source_bytes)
        assert self.spec.model_path is not None
        return inbound.load_onnx(str(self.spec.model_path))

    def _tensorrt_options(self) -> dict[str, str]:
        from harness.core.fsutil import sha256_file
        from harness.records import engine_cache

        version = engine_cache.require_tensorrt()
        spec = self.spec
        assert spec.model_path is not None
        source = self._source_bytes
        digest = hashlib.sha256(source).hexdigest() if source is not None else sha256_file(spec.model_path)
        facts = gpu.nvml()
        ref = self.ref
        found = None if isinstance(facts, str) or ref is None else facts.by_pci(ref.pci)
        key = engine_cache.EngineKey(
            model_sha256=digest, gpu=found.name if found else (ref.model if ref else "unknown"), tensorrt=version,
            precision=spec.precision, input_name=spec.input_name,
            sample_shape=tuple(benchmarks.get(self.io.benchmark).input_shape), min_batch=1, opt_batch=self.batch,
            max_batch=self.batch)
        models_dir = spec.model_path.parent
        self.engine = {"key": key.digest(), "folder": str(key.folder(models_dir)),
                       "found": engine_cache.cached(key, models_dir), "tensorrt": version}
        engine_cache.write_key(key, models_dir)
        return engine_cache.provider_options(key, models_dir)

    # buffers ---------------------------------------------------------------------------------------
    def _bind(self) -> None:
        session = self.session
        inputs = {i.name: i for i in session.get_inputs()}
        if self.input_name not in inputs:
            raise ApplianceError(f"{self.label}: the model has no input {self.input_name!r}")
        shape = inputs[self.input_name].shape
        self.sample_shape = tuple(d if isinstance(d, int) else 1 for d in shape[1:])
        if self.io.benchmark:
            self.sample_shape = tuple(benchmarks.get(self.io.benchmark).input_shape)
        self.in_dtype = np.dtype(np.uint8 if self.input_dtype == "uint8" else np.float32)
        self.out_shapes = [shape for shape, _ in self.spec.output_specs]
        self.out_types = [np.dtype(dtype) for _, dtype in self.spec.output_specs]
        problem = binding_problem(session, self.input_name, self.sample_shape, self.in_dtype, self.outputs,
                                  self.out_shapes, self.out_types)
        if problem is not None:  # a buffer smaller than, or of another type than, what the graph writes
            raise self._misfit(problem)
        n_out = len(self.outputs)
        self.reads = benchmarks.get(self.io.benchmark).outputs_read(n_out) if self.io.benchmark else (True,) * n_out
        device, ordinal = self.copies.device, self.ordinal
        self.buckets: dict[int, tuple[ort.OrtValue, list[ort.OrtValue], Any, ort.RunOptions]] = {}
        for graph_id, size in enumerate(self.sizes):
            try:
                inp = ort.OrtValue.ortvalue_from_shape_and_type([size, *self.sample_shape], self.in_dtype, device,
                                                                ordinal)
                outputs = [ort.OrtValue.ortvalue_from_shape_and_type([size, *shape], dtype, device, ordinal)
                           for shape, dtype in zip(self.out_shapes, self.out_types, strict=True)]
            except Exception as exc:
                raise self._fault(size, exc) from None
            binding = session.io_binding()
            binding.bind_ortvalue_input(self.input_name, inp)
            for name, value in zip(self.outputs, outputs, strict=True):
                binding.bind_ortvalue_output(name, value)
            run_options = ort.RunOptions()
            if self.settings["cuda_graph"]:
                run_options.add_run_config_entry("gpu_graph_id", str(graph_id))
            self.buckets[size] = (inp, outputs, binding, run_options)
        self.row_bytes = int(np.prod(self.sample_shape)) * self.in_dtype.itemsize
        self.runs = dict.fromkeys(self.sizes, 0)  # runs per bucket, warm-up included

    def _fault(self, size: int, exc: Exception) -> ApplianceError:
        return batch_fault(self.label, size, exc)

    def _warm_all(self) -> dict[str, float]:
        """Every bucket WARM_RUNS times, largest first; the milliseconds of each bucket's first run (where the
        algorithm search is) and of its last (a replay)."""
        zeros = np.zeros((self.batch, *self.sample_shape), self.in_dtype)
        took: dict[str, float] = {}
        reference = self._check_outputs(zeros[:self.sizes[0]])
        for size in sorted(self.sizes, reverse=True):
            times = []
            for _ in range(WARM_RUNS):
                start = time.perf_counter()
                try:
                    self._run(zeros, size)
                except ApplianceError:
                    raise
                except Exception as exc:
                    raise self._fault(size, exc) from None
                times.append(round(1000 * (time.perf_counter() - start), 3))
            took[str(size)] = times[0]
            took[f"{size} replay"] = times[-1]
        self.graph_check = self._replay_check(zeros[:self.sizes[0]], reference)
        return took

    def _check_outputs(self, batch: np.ndarray) -> list[np.ndarray]:
        """One regular run, outputs allocated by onnxruntime (no binding, no graph: `gpu_graph_id` -1), against
        the buffers bound for that size: the dimensions the metadata left symbolic, before any graph is captured."""
        try:
            got: list[np.ndarray] = self.session.run(self.outputs, {self.input_name: batch}, _no_graph())
        except Exception as exc:
            raise self._fault(len(batch), exc) from None
        problem = check_outputs(got, len(batch), self.out_shapes, self.out_types)
        if problem is not None:
            raise self._misfit(problem)
        return got

    def _misfit(self, problem: str) -> ApplianceError:
        """The one-line refusal of a buffer the model's graph would not fit (`binding_problem`, `check_outputs`)."""
        return ApplianceError(f"{self.label}: {problem}; the card binds no buffer the graph does not fit "
                              f"(rerun `appliance prepare`, or check --card-outputs / --output-layout)")

    def _replay_check(self, batch: np.ndarray, reference: list[np.ndarray]) -> str:
        """The smallest bucket through the card's own path (bound buffers; on a GPU its captured graph's replay)
        against the regular run before capture, on the same input: a graph that computes something else is not
        used (every bucket runs without graphs from then on, and the manifest says why)."""
        got = self._run(batch, len(batch))
        worst = 0.0
        for mine, ref, read in zip(got, reference, self.reads, strict=True):
            if not read or not np.size(ref):
                continue
            if np.asarray(ref).dtype.kind in "iub":  # classes, indices: exactly
                worst = max(worst, 0.0 if np.array_equal(mine, ref) else float("inf"))
            else:
                a, b = np.asarray(mine, np.float64), np.asarray(ref, np.float64)
                worst = max(worst, float(np.max(np.abs(a - b) / (1.0 + np.abs(b)))))
        if worst <= REPLAY_TOLERANCE:
            return f"the bound path agrees with a regular run (largest relative difference {worst:.2g})"
        if self.settings["cuda_graph"]:
            self.settings["cuda_graph"] = False
            for size, (inp, outputs, binding, _) in list(self.buckets.items()):
                self.buckets[size] = (inp, outputs, binding, _no_graph())
            return (f"a graph replay differed from a regular run (largest relative difference {worst:.3g}): "
                    f"the card runs without CUDA graphs")
        raise ApplianceError(f"{self.label}: the IO-binding path differs from a regular run of the same input "
                             f"(largest relative difference {worst:.3g}); run with APPLIANCE_IO_BINDING=0")

    def register_host_buffers(self, buffers: list[np.ndarray]) -> None:
        """The worker's staging buffers (alive as long as the card): page-locked at once where every batch is
        staged (a model that reads float32), else only once the replica cannot be (`replica_loaded`), so the
        copies from them are DMAs. Host memory on the CPU provider: nothing to do."""
        self._staging = buffers
        if self.in_dtype != np.uint8:
            with self._loading():
                self._pin_staging()

    def _loading(self) -> contextlib.AbstractContextManager[object]:
        return _GPU_LOAD if self.on_gpu else contextlib.nullcontext()

    def _pin_staging(self) -> None:
        """Page-lock the staging buffers, once (hold `_loading`)."""
        if self._staging_pinned or not self.copies.needs_pinning:
            return
        self._staging_pinned = True
        self.info.details["io_binding"]["host_buffers_pinned"] = sum(
            b.nbytes for b in self._staging if self.copies.pin(b.ctypes.data, b.nbytes) is None)

    def replica_loaded(self, replica: np.ndarray | None, node: int | None) -> bool:
        """The replica this card reads was loaded (None: emptied), on the loading thread with nothing in flight:
        let go of the last one, page-lock this one; True if the card copies its batches from it (`infer_rows`),
        False if they are to be staged (why: the manifest's `input_path`). Never raises: a refusal is a fallback."""
        with self._loading():
            if self._replica is not None:
                self.copies.unpin(self._replica.ctypes.data)
                self._replica = None
            if replica is None:
                self._describe()
                return False
            self.replica_loads += 1
            self.rows_batches = self.rows_copies = 0
            pinned = 0  # bytes of this load's replica page-locked
            try:
                why = self._unreadable(replica)
                if why is None and self.copies.needs_pinning:
                    why = self.copies.pin(replica.ctypes.data, replica.nbytes)
                    pinned = 0 if why else int(replica.nbytes)
            except Exception as exc:  # a fallback, not a failure: LoadGen's load callback must not raise
                why = f"page-locking the replica raised {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            self._direct = why is None
            self.info.details["io_binding"]["replica_bytes_pinned"] = pinned
            if why is None:
                self._replica, self._node = replica, node
            else:
                self._why = why
                self.staged_loads += 1
                self._pin_staging()
        self._describe()
        return why is None

    def _unreadable(self, replica: np.ndarray) -> str | None:
        """Why the card cannot copy its batches from `replica` as it is, or None."""
        if self.in_dtype != np.uint8:
            return f"the model reads {self.in_dtype}: the mean is subtracted on the host"
        if replica.dtype != np.uint8 or tuple(replica.shape[1:]) != tuple(self.sample_shape):
            return f"the replica's samples are {replica.dtype} {tuple(replica.shape[1:])}, the card reads uint8 " \
                   f"{tuple(self.sample_shape)}"
        if not replica.nbytes:
            return "no samples loaded"
        return None

    def _describe(self) -> None:
        """The manifest's account of the input path of the last load."""
        io = self.info.details["io_binding"]
        if self._direct:
            pinned = self.copies.needs_pinning
            where = f"node {self._node}" if self._node is not None else "no NUMA node"
            per = f"{self.rows_copies / self.rows_batches:.2f} copies per batch on average" if self.rows_batches \
                else "no batch yet"
            io["input_path"] = f"{'DMA from the page-locked' if pinned else 'memmoves from the'} replica ({where}), " \
                               f"{per}{'' if pinned else '; the CPU provider: host memory, nothing page-locked'}"
        else:
            io["input_path"] = f"staged ({self._why})"
        io["replica_loads"], io["replica_loads_staged"] = self.replica_loads, self.staged_loads

    # batches ---------------------------------------------------------------------------------------
    def _run(self, batch: np.ndarray, n: int) -> list[np.ndarray]:
        """A staged batch: one copy of its n rows into the bucket's device input, then the bucket's run."""
        size = gpu_plan.bucket_for(n, self.sizes)
        if batch.dtype != self.in_dtype or not batch.flags.c_contiguous or len(batch) < n:
            raise ApplianceError(f"{self.label}: staged batch {batch.dtype} {batch.shape} is not {n} contiguous "
                                 f"{self.in_dtype} samples")
        self.copies.to_device(self.buckets[size][0].data_ptr(), batch.ctypes.data, n * self.row_bytes)
        return self._compute(size, n)

    def _run_rows(self, rows: ReplicaRows) -> list[np.ndarray]:
        """A batch in the replica: one copy per run of consecutive rows into the bucket's device input."""
        if rows.replica is not self._replica:
            raise ApplianceError(f"{self.label}: a batch from a replica the card did not page-lock (loaded again?)")
        n = rows.n
        size = gpu_plan.bucket_for(n, self.sizes)
        dst, src, row, copy = self.buckets[size][0].data_ptr(), rows.replica.ctypes.data, self.row_bytes, \
            self.copies.to_device
        for first, at, k in rows.runs:
            copy(dst + at * row, src + first * row, k * row)
        self.rows_batches += 1
        self.rows_copies += len(rows.runs)
        return self._compute(size, n)

    def _compute(self, size: int, n: int) -> list[np.ndarray]:
        """Run bucket `size` on what was copied into its input; the n rows the host reads back."""
        _, outputs, binding, run_options = self.buckets[size]
        if not self.settings["user_stream"]:
            self.copies.sync()  # onnxruntime computes on its own stream: the copy must be done first
        self.session.run_with_iobinding(binding, run_options)
        self.runs[size] += 1
        result: list[np.ndarray] = []
        for value, shape, dtype, read in zip(outputs, self.out_shapes, self.out_types, self.reads, strict=True):
            if read:
                host = np.empty((n, *shape), dtype)
                self.copies.to_host(host.ctypes.data, value.data_ptr(), host.nbytes)
                result.append(host)
            else:  # left on the device: a placeholder no encoder reads
                fill = np.array(np.nan if dtype.kind == "f" else -1, dtype)
                result.append(np.broadcast_to(fill, (n, *shape)))
        self.copies.sync()
        return result

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        assert batch is not None  # the card reads input (input_dtype is never None)
        return self._one_line(lambda: self._run(batch, n))

    def infer_rows(self, rows: ReplicaRows) -> list[np.ndarray]:
        return self._one_line(lambda: self._run_rows(rows))

    def _one_line(self, run: Callable[[], list[np.ndarray]]) -> list[np.ndarray]:
        try:
            return run()
        except ApplianceError:
            raise
        except Exception as exc:  # one line naming the card (the worker ends the run as .incomplete if all fail)
            raise ApplianceError(f"{self.label}: {one_line(str(exc))}") from None

    def close(self) -> None:
        self.buckets.clear()
        kept = self.spec_sessions is not None and self.keepable()
        super().close()  # the session kept for tune's next batch size, or ended
        with self._loading():
            if kept:  # the stream stays with the session; what this card page-locked does not
                self.copies.unpin_all()
            else:
                self.copies.close()  # unpins the replica and the staging buffers
        self._replica = None
        self._describe()
