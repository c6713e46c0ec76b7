"""onnxruntime's own best loop on one device, no LoadGen, no harness: the baseline the GPU check divides by.

The same prepared model and precision as a run (`--data-dir`, `--precision`; an FP32 model gets the same
Cast + Sub(mean) uint8 input the GPU card gives it, and the run's output casts with `--card-outputs`), the
same batch, onnxruntime at its best options (issue 36), not its defaults: IO binding with input and outputs on
the device, a CUDA graph (`enable_cuda_graph`, one graph id), `--provider-options` (default `prefer_nhwc=1
cudnn_conv_algo_search=EXHAUSTIVE`: NHWC convolutions were 21% faster on an H100), one intra-op thread; the
options are built by the cards' own function (harness.run.cards.provider_options.build). Each of `--sessions`
sessions runs on its own thread (own stream, own buffers), as the appliance's cards per GPU do; they are made,
warmed and their graphs captured one at a time (four capturing at once died with cudaErrorStreamCaptureInvalidated:
CUDA's global capture mode), and only then run side by side. Two loops are timed:

- `device`: the input stays on the device, nothing is copied: the GPU's compute alone (an upper bound);
- `copy`: each batch's uint8 input is copied in (`OrtValue.update_inplace` from a numpy batch) and the host-read
  outputs copied back (`OrtValue.numpy()`): what any real inference loop must at least do.

Prints one JSON object: samples/s of each loop (all sessions together), and for a detection benchmark the
host NMS time per image (the benchmark's own encoder on the real outputs, one core).

    python tools/gpu_baseline.py --data-dir DIR --benchmark resnet50 --precision fp16 --batch 256 --sessions 2
    python tools/gpu_baseline.py --device cpu ...          (the rehearsal: onnxruntime's CPU provider)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from harness.records.benchmark_record import Benchmark

BEST = "prefer_nhwc=1 cudnn_conv_algo_search=EXHAUSTIVE"  # onnxruntime's fastest ResNet50 on an H100 (issue 36)
NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
            "tensor(uint8)": np.uint8}
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--benchmark", default="resnet50")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--card-outputs", default="fp32")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--no-graph", action="store_true", help="no CUDA graph (as the cards with APPLIANCE_CUDA_GRAPH=0)")
    ap.add_argument("--provider-options", default=BEST,
                    help=f"CUDA provider options, key=value space-separated (default: {BEST!r}; '' its defaults)")
    a = ap.parse_args()

    import onnxruntime as ort

    from harness.core.native_lines import quiet_at_source, routed

    quiet_at_source()  # before cuDNN loads (preload_dlls)

    from harness.data import benchmarks, concrete
    from harness.records import store
    from harness.records.layout import Layout, read_model_record
    from harness.run.cards import backends
    from harness.run.cards.gpu_iobinding import u8_model
    from harness.run.cards.provider_options import CUDA, build
    from harness.run.cards.spec import BackendSpec

    layout = Layout(a.data_dir, benchmarks.get(a.benchmark))
    model = read_model_record(layout, a.precision)
    data = store.open_prepared(layout.preprocessed, layout.bench.prepare_hint(a.data_dir))
    bench = concrete.for_run(a.benchmark, card_outputs=a.card_outputs, model=model, data=data)
    spec = BackendSpec(backends.get("onnxruntime"), Path(model.path), bench.input_name, bench.outputs,
                       bench.output_specs, None, output_casts=bench.output_casts)
    source = u8_model(Path(model.path), spec, bench.name)[0] or str(model.path)
    if a.device == "cuda":
        ort.preload_dlls()
        provider: Any = (CUDA, {"device_id": "0", **build(
            CUDA, a.provider_options, model.precision, cudnn_conv_algo_search="EXHAUSTIVE",
            enable_cuda_graph="0" if a.no_graph else "1")})
    else:
        provider = "CPUExecutionProvider"
    reads = bench.outputs_read(len(bench.outputs))
    host_in = np.empty((a.batch, *bench.input_shape), np.uint8)  # the prepared samples, repeated to fill the batch
    data.gather(np.arange(a.batch) % data.count, host_in)
    results: dict[str, list[float]] = {"device": [], "copy": []}
    outputs_seen: list[list[np.ndarray]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(a.sessions)

    job = Job(ort, source, provider, bench, reads, host_in, a, barrier, results, outputs_seen, threading.Lock())

    def loop() -> None:
        try:
            session_loop(job)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=loop) for _ in range(a.sessions)]
    with routed(a.data_dir, "native-gpu_baseline.log", lambda line: print(line, file=sys.stderr)):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        print(f"gpu_baseline: {type(errors[0]).__name__}: {str(errors[0]).splitlines()[0][:300]}", file=sys.stderr)
        raise SystemExit(1)
    out: dict[str, Any] = {"benchmark": bench.name, "precision": a.precision, "card_outputs": a.card_outputs,
                           "batch": a.batch, "sessions": a.sessions, "device": a.device, "seconds": a.seconds,
                           "cuda_graph": a.device == "cuda" and not a.no_graph,
                           "onnxruntime": ort.__version__, "provider": provider if isinstance(provider, str)
                           else provider[0], "provider_options": {} if isinstance(provider, str) else provider[1],
                           "capture": "one session at a time, before any runs",
                           "device_samples_per_second": round(sum(results["device"]), 2),
                           "copy_samples_per_second": round(sum(results["copy"]), 2)}
    if bench.detection is not None and outputs_seen:
        out.update(_nms_per_image(bench, outputs_seen[0], a.batch))
    print(json.dumps(out))


@dataclass
class Job:
    """What every session's thread shares: the model, its inputs, the options, where results go."""

    ort: Any
    source: Any
    provider: Any
    bench: Benchmark
    reads: tuple[bool, ...]
    host_in: np.ndarray
    a: argparse.Namespace
    barrier: threading.Barrier
    results: dict[str, list[float]]
    outputs_seen: list[list[np.ndarray]]
    capture: threading.Lock  # one session made, warmed and captured at a time


def session_loop(job: Job) -> None:
    """One session on this thread: made and warmed up (algorithm search, graph capture) while no other session
    touches the GPU, then each loop for `a.seconds` beside the others."""
    with job.capture:
        session, binding, run_options, inp, outs = _warmed_session(job)
    reads, host_in, a, barrier, results, outputs_seen = (job.reads, job.host_in, job.a, job.barrier, job.results,
                                                         job.outputs_seen)
    for name in ("device", "copy"):
        copy = name == "copy"
        barrier.wait()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < a.seconds:
            if copy:
                inp.update_inplace(host_in)
            session.run_with_iobinding(binding, run_options)
            if copy:
                outputs_seen[:] = [[o.numpy() for o, r in zip(outs, reads, strict=True) if r]]
            n += 1
        results[name].append(n * a.batch / (time.perf_counter() - start))


def _warmed_session(job: Job) -> tuple[Any, Any, Any, Any, list[Any]]:
    """A session with its buffers bound, run 3 times (algorithm search, then the graph's capture)."""
    ort, source, provider, bench, host_in, a = job.ort, job.source, job.provider, job.bench, job.host_in, job.a
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if a.device == "cuda":
        opts.intra_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    session = ort.InferenceSession(source, opts, providers=[provider])
    types = {o.name: NP_TYPES[o.type] for o in session.get_outputs()}
    inp = ort.OrtValue.ortvalue_from_shape_and_type(list(host_in.shape), np.uint8, a.device, 0)
    outs = [ort.OrtValue.ortvalue_from_shape_and_type([a.batch, *shape], types[name], a.device, 0)
            for name, (shape, _) in zip(bench.outputs, bench.output_specs, strict=True)]
    binding = session.io_binding()
    binding.bind_ortvalue_input(bench.input_name, inp)
    for name, value in zip(bench.outputs, outs, strict=True):
        binding.bind_ortvalue_output(name, value)
    run_options = ort.RunOptions()
    if a.device == "cuda" and not a.no_graph:
        run_options.add_run_config_entry("gpu_graph_id", "0")
    inp.update_inplace(host_in)
    for _ in range(3):  # algorithm search, then the graph's capture
        session.run_with_iobinding(binding, run_options)
    return session, binding, run_options, inp, outs


def _nms_per_image(bench: Benchmark, outputs: list[np.ndarray], batch: int) -> dict[str, float]:
    """The benchmark's host NMS (its encoder) on real outputs of the model, per image, on this one thread."""
    indices = np.zeros(batch, np.int64)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        bench.encode_response(outputs, indices)
        times.append((time.perf_counter() - start) / batch)
    return {"nms_ms_per_image": round(1000 * statistics.median(times), 3)}


if __name__ == "__main__":
    main()
