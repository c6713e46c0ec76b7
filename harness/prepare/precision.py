"""What the reduced-precision preparers share, and the table `prepare --precision` looks them up in.

Each preparer (quantize.prepare_int8, fp16.prepare_fp16, bf16.prepare_bf16) checks its own preconditions and
computes the key its output depends on; `reduced_model` does the rest they have in common: skip when the
record under that key is up to date, else make the model (the preparer's `make`), digest it, write its model
record (the FP32 record's provenance, the preparer's `quantization` plus its agreement with FP32) and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.fsutil import sha256_file
from harness.data.models import registry
from harness.records import model_record, store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import existing_record, stored_path
from harness.records.model_record import AGREEMENT, ModelRecord

Echo = Callable[[str], None]


@dataclass(frozen=True)
class Made:
    """A reduced-precision model a preparer made, and what its record and message add to the common ones."""

    path: Path                  # the model file the record names
    metric: str                 # a key of model_record.AGREEMENT
    agree: float                # its value, percent
    quantization: dict[str, Any]  # how it was made (the agreement is appended)
    after_path: str = ""        # the message: "<precision> model: <path><after_path>"
    after_agreement: str = ""   # then "  <agreement>: x% over n samples<after_agreement>"
    inference_precision: str | None = None


def reduced_model(precision: str, models_dir: Path, record_path: Path, fp32: dict[str, Any],
                  data: store.PreparedData, key: dict[str, Any], make: Callable[[], Made],
                  echo: Echo) -> dict[str, Any]:
    """The model record of `fp32`'s model at `precision`: the one at `record_path` when it was made under `key`
    and its file is intact, else the one `make` makes (its record written)."""
    old = existing_record(record_path)
    if old and (old.get("quantization") or {}).get("key") == key and Path(old["path"]).is_file() \
            and sha256_file(Path(old["path"])) == old["sha256"]:
        q = old["quantization"]
        metric = next(k for k in AGREEMENT if k in q)
        echo(f"{precision} model: {old['path']} (up to date; {AGREEMENT[metric]} {q[metric]:.2f}%)")
        return old
    made = make()
    path = made.path
    md5, sha = registry.file_digests(path)
    record = ModelRecord(
        **{k: fp32[k] for k in ("benchmark", "synthetic", "seed", "official_artefact", "params",
                                "macs_per_sample", "stats")},
        path=stored_path(models_dir.parent, path), sha256=sha, md5=md5, precision=precision, input_dtype="uint8",
        output_layout=fp32.get("output_layout"), inference_precision=made.inference_precision,
        quantization={**made.quantization, made.metric: round(made.agree, 3), "agreement_samples": data.count})
    model_record.write(record_path, record)
    echo(f"{precision} model: {path}{made.after_path}\n  {AGREEMENT[made.metric]}: {made.agree:.2f}% over "
         f"{data.count} samples{made.after_agreement}")
    return {**record.to_json(), "path": str(path.absolute())}


@dataclass(frozen=True)
class Job:
    """What `appliance prepare --precision P` hands the preparer of P."""

    models_dir: Path
    record_path: Path
    bench: Benchmark
    fp32: dict[str, Any]        # the FP32 model record
    data: store.PreparedData
    calibration_list: Path | None  # int8 only
    echo: Echo


def _int8(job: Job) -> dict[str, Any]:
    from harness.prepare.quantize import prepare_int8

    return prepare_int8(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.calibration_list,
                        job.echo)


def _fp16(job: Job) -> dict[str, Any]:
    from harness.prepare.fp16 import prepare_fp16

    return prepare_fp16(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.echo)


def _bf16(job: Job) -> dict[str, Any]:
    from harness.prepare.bf16 import prepare_bf16

    return prepare_bf16(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.echo)


# precision -> its preparer (imported when called: each pulls in its converter's library)
PREPARERS: dict[str, Callable[[Job], dict[str, Any]]] = {"int8": _int8, "fp16": _fp16, "bf16": _bf16}
