"""`appliance prepare`: the model and the preprocessed dataset, made once, offline, before any run.

Data dir layout::

    models/<benchmark>.json        which model runs: path, digests, synthetic or official, size
    models/<file>.onnx             the seeded model (or the fetched official one)
    <dataset>/                     raw dataset in its official layout (synthetic unless --source)
    preprocessed/<benchmark>/      uint8 shards + manifest (harness.records.store)

Records name files inside the data dir relative to it (`stored_path`), so a prepared data dir can be
copied, moved or mounted read-only anywhere and used from any working directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from harness.core import inbound, leftovers, progress
from harness.core.errors import ApplianceError, DataError
from harness.core.fsutil import disk_fault, sha256_file, tmp_prefix
from harness.core.outbound import (
    all_or_nothing,
    atomic_write_bytes,
    atomic_write_json,
    make_dirs,
    move_into_place,
    save_onnx,
    scratch_dir,
    staged_dir,
)
from harness.data import benchmarks
from harness.data.models import registry
from harness.data.models.stats import model_stats
from harness.data.models.uint8_front import uint8_input
from harness.records import model_record, store
from harness.records.benchmark_record import Benchmark, Listing
from harness.records.layout import Layout, existing_record, stored_path

Echo = Callable[[str], None]
DATASET_SEED = 2026
MODEL_SEED = 0


def space_needed(layout: Layout, samples: int | None, source: Path | None, precision: str,
                 model_file: Path | None, fetch: bool) -> dict[str, int]:
    """Bytes `prepare` will write, per part not made yet: the model (the record's parameters x 4 bytes:
    seeded, fetched or an adopted copy of --model; plus the int8 copy and its uint8-input FP32
    intermediate, or bf16's uint8-input FP32 copy), the raw synthetic dataset (bounded by the decoded
    image size) and the uint8 shards (samples x input bytes)."""
    bench = layout.bench
    count = samples or bench.performance_sample_count
    sample = int(np.prod(bench.input_shape))
    params = int(bench.params_reference)
    need = {}
    seeded = model_file is None and not fetch
    if fetch or (model_file is not None and bench.adopt_model is not None) or (seeded and not _seeded_recorded(layout)):
        need["model"] = 4 * params
    if precision == "int8" and not layout.record_for("int8").is_file():
        need["int8 model"] = 5 * params
    if precision == "fp16" and not layout.record_for("fp16").is_file():
        need["fp16 model"] = 6 * params  # the fp16 file, and its FP32 emulation while the agreement is measured
    if precision in ("bf16", "tf32") and not layout.record_for(precision).is_file():
        need[f"{precision} model (FP32 weights, uint8 input)"] = 4 * params
    if precision == "tf32" and not layout.record_for(precision).is_file():
        need["tf32 emulation"] = 4 * params  # the FP32 graph with TF32 rounding, while the agreement is measured
    if source is None and not _json_or_empty(layout.raw / ".synthetic.json").get("count", 0) >= count:
        need["raw dataset"] = count * sample
    if _json_or_empty(layout.preprocessed / store.MANIFEST).get("count") != count:
        need["shards"] = count * sample
    return need


def _seeded_recorded(layout: Layout) -> bool:
    """Whether the seeded model is there with its record (a model file alone is built, and written, again)."""
    path = layout.model_record.parent / f"{layout.bench.name}-seeded-s{MODEL_SEED}.onnx"
    record = _json_or_empty(layout.model_record)
    return path.is_file() and isinstance(record.get("path"), str) and \
        (layout.data_dir / record["path"]).resolve() == path.resolve()


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        data = inbound.read_json(path, inbound.RECORD)
    except (OSError, inbound.Refused):
        return {}
    return data if isinstance(data, dict) else {}


def check_space(layout: Layout, need: dict[str, int]) -> None:
    """Refuse in one line, before anything is written, when the data dir's disk cannot hold `need`."""
    free = shutil.disk_usage(layout.data_dir).free
    total = sum(need.values())
    if free < total:
        parts = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in need.items())
        raise ApplianceError(f"prepare needs about {total / 1e6:.1f} MB in {layout.data_dir} ({parts}), only "
                             f"{free / 1e6:.1f} MB free there: free some space or choose another --data-dir")


@contextlib.contextmanager
def disk_faults_as_errors(layout: Layout) -> Iterator[None]:
    """A full or failing disk during `prepare` ends it in one line (what it was writing is removed by
    the atomic writers), not an internal error."""
    try:
        yield
    except OSError as exc:
        fault = disk_fault(exc)
        if fault is None:
            raise
        raise ApplianceError(f"prepare stopped: {fault}; nothing half-written was kept in {layout.data_dir}; "
                             f"free some space (or check the disk) and run again") from None


def sweep_leftovers(layout: Layout, echo: Echo) -> None:
    """Remove the temporaries a killed `prepare` left in the folders prepare writes to."""
    pre = layout.data_dir / "preprocessed"
    subdirs = sorted(p for p in pre.iterdir() if p.is_dir()) if pre.is_dir() else []
    leftovers.sweep([layout.data_dir, layout.data_dir / "models", pre, *subdirs], echo)


def load_onnx(path: Path, bench: Benchmark) -> Any:  # onnx.ModelProto
    """Load and check an ONNX file: parseable, and with the benchmark's input and outputs."""
    import onnx

    try:
        model = inbound.load_onnx(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises DecodeError, ValidationError, ...
        raise DataError(f"{path} is not a valid ONNX model ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:160] if str(exc) else 'truncated?'}); "
                        f"pass a complete file or drop --model to build the seeded one") from None
    inputs = [i.name for i in model.graph.input if i.name not in {x.name for x in model.graph.initializer}]
    outputs = [o.name for o in model.graph.output]
    if bench.input_name not in inputs or not set(bench.outputs) <= set(outputs):
        raise DataError(f"{path} has inputs {inputs} and outputs {outputs}; {bench.name} needs input "
                        f"{bench.input_name!r} and outputs {list(bench.outputs)}")
    def dims(value_info: Any) -> list[int | None]:
        return [d.dim_value if d.HasField("dim_value") else None for d in value_info.type.tensor_type.shape.dim]

    got_in, (c, h, w) = dims(next(i for i in model.graph.input if i.name == bench.input_name)), bench.input_shape
    if len(got_in) == 4 and got_in[1] == c and None not in got_in[2:] and got_in[2:] != [h, w]:
        raise DataError(f"{path}: input {bench.input_name!r} is {got_in[2]}x{got_in[3]}; {bench.name} runs at "
                        f"{h}x{w}: export the model at {h}x{w}")
    shapes = {o.name: dims(o)[1:] for o in model.graph.output}
    for name, (shape, _) in zip(bench.outputs, bench.output_specs, strict=True):
        got = shapes[name]
        if got and all(d is not None for d in got) and tuple(got) != shape:
            spec = bench.detection
            alt = next(iter(spec.variants), None) if spec is not None and tuple(reversed(got)) == shape else None
            hint = (f": that is the {alt} layout, select it with --output-layout {alt}" if alt else
                    " (the layout its host post-processing reads)")
            raise DataError(f"{path}: output {name!r} has shape {got} per sample, {bench.name} needs {list(shape)}"
                            f"{hint}")
    return model


def prepare_model(layout: Layout, model_file: Path | None, fetch: bool, echo: Echo) -> model_record.ModelRecord:
    """Make (or adopt) the model, record its digests, print its size next to the published one. The model
    file and its record are written together: a full disk or a stop between them leaves neither."""
    with all_or_nothing():
        return _prepare_model(layout, model_file, fetch, echo)


def _prepare_model(layout: Layout, model_file: Path | None, fetch: bool, echo: Echo) -> model_record.ModelRecord:
    bench = layout.bench
    models_dir = layout.model_record.parent
    make_dirs(models_dir)
    artefact = None
    if fetch:
        candidates = bench.official_models
        if not candidates:
            raise DataError(f"no official artefact is registered for {bench.name}")
        model_file = registry.fetch(candidates[0], models_dir, progress=progress.enabled())
    if model_file is not None:
        check = registry.check_model_file(model_file, bench)
        if check.warning:
            print(check.warning, file=sys.stderr)
        artefact = check.artefact
        model = load_onnx(model_file, bench)
        path, synthetic = model_file.resolve(), False
        builder = None
        if bench.adopt_model is not None:  # the graph the cards run, e.g. YOLO's uint8 input with /255 inside
            model = bench.adopt_model(model)
            path = models_dir / f"{bench.name}-{check.sha256[:12]}-adopted.onnx"
            atomic_write_bytes(path, model.SerializeToString())
    else:
        builtin = benchmarks.get(bench.name).detection
        if bench.detection is not None and builtin is not None and bench.detection.kind != builtin.kind:
            raise DataError(f"the seeded {bench.name} model gives its output in the {builtin.kind} layout; "
                            f"--output-layout {bench.detection.kind} is for --model FILE: pass one or drop it")
        path = models_dir / f"{bench.name}-seeded-s{MODEL_SEED}.onnx"
        record = existing_record(layout.model_record)
        builder = _builder_digest(bench)  # written to the record below, so a changed builder rebuilds
        if record and record.synthetic and Path(record.path).resolve() == path.resolve() \
                and path.is_file() \
                and record.builder_sha256 == builder and sha256_file(path) == record.sha256:
            echo(f"model: {path} (already built, {record.stats})")
            return record
        with progress.spinner(f"building seeded {bench.title} model"):
            model = cast(Any, bench.build_model(MODEL_SEED))  # an onnx.ModelProto
            atomic_write_bytes(path, model.SerializeToString())
        synthetic = True
    stats = model_stats(model)
    md5, sha = registry.file_digests(path)
    p_dev = 100 * (stats.params / bench.params_reference - 1)
    g_dev = 100 * (stats.gops / bench.gops_reference - 1)
    echo(f"model: {path}\n  {stats.describe()}\n"
         f"  published: {bench.params_reference / 1e6:.1f}M parameters ({p_dev:+.2f}%), "
         f"{bench.gops_reference} GOPS ({g_dev:+.1f}%; GOPS = 2 x MACs of Conv/Gemm)"
         + (f"\n  output layout: {bench.detection.kind}" if bench.detection and bench.detection.variants else ""))
    made = model_record.ModelRecord(
        benchmark=bench.name, path=stored_path(layout.data_dir, path), sha256=sha, md5=md5, synthetic=synthetic,
        seed=MODEL_SEED if synthetic else None, official_artefact=artefact.name if artefact else None,
        precision="fp32", params=stats.params, macs_per_sample=stats.macs_per_sample, stats=stats.describe(),
        builder_sha256=builder, output_layout=bench.detection.kind if bench.detection and bench.detection.variants
        else None,
        adopted_from={"path": str(model_file.resolve()), "sha256": check.sha256}
        if model_file is not None and bench.adopt_model is not None else None)
    model_record.write(layout.model_record, made)
    return replace(made, path=str(path.absolute()))


def _builder_digest(bench: Benchmark) -> str:
    """sha256 of the seeded model's builder and its dataset's code: a change to either rebuilds the model.

    The dataset module counts because a seeded classifier may be fitted to the synthetic world's scenes.
    """
    import hashlib
    import inspect

    files = (inspect.getsourcefile(bench.build_model), inspect.getsourcefile(bench.dataset.make_synthetic))
    return hashlib.sha256("".join(sha256_file(Path(f or "")) for f in files).encode()).hexdigest()


def read_source(bench: Benchmark, source: Path, samples: int | None) -> Listing:
    """The listing of a real dataset folder: `prepare` reads it before building the model, so a wrong or
    empty --source is one line at once, not after minutes of work."""
    if not source.is_dir():
        raise DataError(f"--source {source} is not a folder")
    return bench.dataset.read(source.resolve(), samples)


def prepare_data(layout: Layout, model: model_record.ModelRecord, samples: int | None, source: Path | None,
                 batch: int, echo: Echo) -> None:
    """The raw dataset (synthetic unless `source`), its shards and their golden reference, each step skipped
    when up to date. A set to make anew is made whole aside (the synthetic images, the shards, the golden)
    and swapped in at the end, so a stop or a fault midway leaves the prepared set as it was (a stop in the
    golden step left a smaller set without its golden: issue 41)."""
    bench = layout.bench
    with contextlib.ExitStack() as staged:
        if source is not None:
            raw = drawn = source.resolve()
            read_source(bench, source, samples)
        else:
            raw = drawn = layout.raw
            samples = samples or bench.performance_sample_count
            if _redraw_needed(raw / ".synthetic.json", samples, bench.dataset.prefix_stable):
                drawn = staged.enter_context(staged_dir(raw))  # swapped in after the shards, on success only
                _draw(bench, drawn, samples)
        listing = bench.dataset.read(drawn, samples)
        index_sha = sha256_file(drawn / bench.dataset.index_file)
        old = _prepared_or_none(layout, echo)
        if old and old.manifest.get("source_index_sha256") == index_sha and old.count == len(listing.names) \
                and old.source.resolve() == raw.resolve() \
                and old.manifest.get("sample_shape") == list(bench.input_shape):
            echo(f"dataset: {layout.preprocessed} (already preprocessed, {old.count} samples)")
            prepare_golden(layout.preprocessed, bench, layout.data_dir, model, batch, echo)
            return
        with staged_dir(layout.preprocessed) as tmp:
            _preprocess(bench, drawn, listing, index_sha, tmp, source is None, stored_path(layout.data_dir, raw))
            echo(f"dataset: {layout.preprocessed} ({len(listing.names)} samples, "
                 f"{'synthetic' if source is None else 'from ' + str(raw)})")
            prepare_golden(tmp, bench, layout.data_dir, model, batch, echo)


def _redraw_needed(marker: Path, count: int, prefix_stable: bool) -> bool:
    """Whether the synthetic images must be drawn again for `count` samples: benchmarks sharing a dataset
    folder (COCO) share the drawing when it is large enough; a generator whose images do not depend on the
    count says so with `prefix_stable` in its marker."""
    have = _json_or_empty(marker)
    return not (have.get("seed") == DATASET_SEED and (have.get("count") == count or (
        have.get("prefix_stable") and have.get("count", 0) >= count)))


def _draw(bench: Benchmark, folder: Path, count: int) -> None:
    with progress.bar(count, f"drawing synthetic {bench.dataset.name}") as bar:
        bench.dataset.make_synthetic(folder, count, DATASET_SEED, lambda: bar.update(1))
    atomic_write_json(folder / ".synthetic.json", {"count": count, "seed": DATASET_SEED,
                                                   "prefix_stable": bench.dataset.prefix_stable})


def _prepared_or_none(layout: Layout, echo: Echo) -> store.PreparedData | None:
    """The prepared set there, or None (none, or damaged: prepared again, which its message would say)."""
    if inbound.what_is(layout.preprocessed / store.MANIFEST) is None:
        return None
    try:
        return store.open_prepared(layout.preprocessed, "")
    except DataError as exc:
        echo(f"dataset: {exc}; preprocessing it again")
        return None


def _preprocess(bench: Benchmark, raw: Path, listing: Listing, index_sha: str, out: Path,
                synthetic: bool, source: str) -> store.PreparedManifest:
    import cv2

    names = listing.names
    listed = str(raw / bench.dataset.index_file)  # its names lead nowhere outside the source folder
    paths = [inbound.inside(raw, n, listed) for n in names]

    cv2.setNumThreads(1)  # parallelism comes from the thread pool below
    shards: list[store.ArrayEntry] = []
    with progress.bar(len(names), f"preprocessing {bench.dataset.name}") as bar, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for s, start in enumerate(range(0, len(names), store.SHARD_SIZE)):
            chunk = paths[start:start + store.SHARD_SIZE]
            block = store.create_array(out, store.shard_name(s), (len(chunk), *bench.input_shape))
            for j, img in enumerate(pool.map(bench.preprocess, chunk)):
                block[j] = img
                bar.update(1)
            entry = store.close_array(out, store.shard_name(s), block)
            shards.append({**entry, "start": start})
    annotations: store.FileEntry | None = None
    if listing.annotations is not None:
        atomic_write_json(out / "annotations.json", listing.annotations)
        annotations = {"file": "annotations.json", "sha256": sha256_file(out / "annotations.json")}
    return _write_manifest(out, {
        "format": store.FORMAT_VERSION, "benchmark": bench.name, "dataset": bench.dataset.name,
        "count": len(names), "synthetic": synthetic, "source": source,
        "source_index": bench.dataset.index_file, "source_index_sha256": index_sha,
        "layout": "NCHW", "dtype": "uint8", "sample_shape": list(bench.input_shape),
        "preprocessing": f"{bench.preprocessing}; mean {list(bench.input_mean)} subtracted at batch staging",
        "shards": shards, "labels": store.write_array(out, "labels.npy", listing.labels),
        "annotations": annotations, "golden": None,
    })


def _write_manifest(folder: Path, manifest: store.PreparedManifest) -> store.PreparedManifest:
    atomic_write_json(folder / store.MANIFEST, manifest)
    return manifest


def reference_pass(model_path: str | Path, bench: Benchmark, data: store.PreparedData, batch: int,
                   label: str) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A plain onnxruntime CPU pass over the prepared dataset, outside the harness: per batch, the QSL
    indices and the encoded (payload, offsets). A uint8-input model (int8) reads the stored bytes; an
    FP32 one the mean-subtracted floats, as the harness stages them."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    with inbound.held(model_path, inbound.ARRAY, what="model") as name:  # the file checked, not its name
        sess = ort.InferenceSession(name, opts, providers=["CPUExecutionProvider"])
    raw = next(i.type for i in sess.get_inputs() if i.name == bench.input_name) == "tensor(uint8)"
    outputs = list(bench.outputs)
    return dataset_pass(lambda x: list(sess.run(outputs, {bench.input_name: x})), raw, bench, data, batch, label)


def dataset_pass(infer: Callable[[np.ndarray], list[np.ndarray]], raw: bool, bench: Benchmark,
                 data: store.PreparedData, batch: int,
                 label: str) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`infer` over the prepared dataset in batches of at most `batch`: per batch, the QSL indices and the
    encoded (payload, offsets). `raw`: the model reads the stored uint8 bytes, else mean-subtracted floats."""
    from harness.data.concrete import for_prepared

    bench = for_prepared(bench, data)
    mean = np.asarray(bench.input_mean, dtype=np.float32).reshape(-1, 1, 1)
    u8 = np.empty((batch, *bench.input_shape), dtype=np.uint8)
    with progress.bar(data.count, label) as bar:
        for start in range(0, data.count, batch):
            part = np.arange(start, min(start + batch, data.count))
            x = u8[:len(part)]
            data.gather(part, x)
            outputs = infer(x if raw else x.astype(np.float32) - mean)
            yield (part, *bench.encode_response(outputs, part.tolist()))
            bar.update(len(part))


def prepare_golden(folder: Path, bench: Benchmark, data_dir: Path, model: model_record.ModelRecord, batch: int,
                   echo: Echo) -> None:
    """The golden reference of the prepared set in `folder` from a plain FP32 onnxruntime pass of the model,
    to prove the accuracy path.

    Synthetic weights have no real accuracy; matching this independent reference pass 100% (labels
    for ResNet50, the host-NMS detections as COCO annotations for detection) shows that the harness
    feeds, batches, post-processes and logs every sample correctly.
    """
    data = store.open_prepared(folder, bench.prepare_hint(data_dir))
    if data.golden_model == model.sha256:
        echo("golden reference: up to date")
        return
    payloads: list[np.ndarray] = []
    for part, payload, offsets in reference_pass(model.path, bench, data, batch,
                                                 "golden reference (FP32 pass)"):
        payloads.extend(payload[offsets[j]:offsets[j + 1]] for j in range(len(part)))
    name, content, summary = bench.accuracy.golden(payloads, data)
    atomic_write_bytes(folder / name, content)
    entry: store.FileEntry = {"file": name, "sha256": sha256_file(folder / name), "model_sha256": model.sha256}
    _write_manifest(folder, {**data.manifest, "golden": entry})
    echo(f"golden reference: {summary}")


# What the reduced-precision preparers (quantize, fp16, bf16) share: each checks its own preconditions and
# computes the key its output depends on; `reduced_model` does the rest.
@dataclass(frozen=True)
class Made:
    """A reduced-precision model a preparer made, and what its record and message add to the common ones."""

    path: Path                  # the model file the record names
    metric: str                 # a key of model_record.AGREEMENT
    agree: float                # its value, percent
    quantization: dict[str, object]  # how it was made, as the model record keeps it (the agreement is appended)
    after_path: str = ""        # the message: "<precision> model: <path><after_path>"
    after_agreement: str = ""   # then "  <agreement>: x% over n samples<after_agreement>"
    inference_precision: str | None = None


def u8_file(models_dir: Path, bench: Benchmark, fp32: model_record.ModelRecord) -> Path:
    """The FP32 model reading the stored uint8 samples (`uint8_input`), as a file: the FP32 file itself where it
    already does (YOLO), else `<benchmark>-u8in-<sha>.onnx` (made once; bf16 and tf32 share it)."""
    source = inbound.load_onnx(fp32.path)
    u8 = uint8_input(source, bench)
    if u8 == source:
        return Path(fp32.path)
    path = models_dir / f"{bench.name}-u8in-{fp32.sha256[:12]}.onnx"
    with scratch_dir(tmp_prefix("u8in"), models_dir) as tmp:
        save_onnx(u8, tmp / "u8in.onnx")
        move_into_place(tmp / "u8in.onnx", path)
    return path


def reduced_model(precision: str, models_dir: Path, record_path: Path, fp32: model_record.ModelRecord,
                  data: store.PreparedData, key: dict[str, str], make: Callable[[], Made],
                  echo: Echo) -> model_record.ModelRecord:
    """The model record of `fp32`'s model at `precision`: the one at `record_path` when it was made under `key`
    and its file is intact, else the one `make` makes (its record written)."""
    old = existing_record(record_path)
    if old and (old.quantization or {}).get("key") == key and Path(old.path).is_file() \
            and sha256_file(Path(old.path)) == old.sha256:
        q = old.quantization or {}
        metric = next(k for k in model_record.AGREEMENT if k in q)
        echo(f"{precision} model: {old.path} (up to date; {model_record.AGREEMENT[metric]} {q[metric]:.2f}%)")
        return old
    made = make()
    path = made.path
    md5, sha = registry.file_digests(path)
    record = model_record.ModelRecord(
        benchmark=fp32.benchmark, synthetic=fp32.synthetic, seed=fp32.seed, official_artefact=fp32.official_artefact,
        params=fp32.params, macs_per_sample=fp32.macs_per_sample, stats=fp32.stats,
        path=stored_path(models_dir.parent, path), sha256=sha, md5=md5, precision=precision, input_dtype="uint8",
        output_layout=fp32.output_layout, inference_precision=made.inference_precision,
        quantization={**made.quantization, made.metric: round(made.agree, 3), "agreement_samples": data.count})
    model_record.write(record_path, record)
    echo(f"{precision} model: {path}{made.after_path}\n  {model_record.AGREEMENT[made.metric]}: {made.agree:.2f}% over "
         f"{data.count} samples{made.after_agreement}")
    return replace(record, path=str(path.absolute()))
