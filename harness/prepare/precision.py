"""The table `prepare --precision P` looks P's preparer up in (quantize.prepare_int8, fp16.prepare_fp16,
bf16.prepare_bf16, tf32.prepare_tf32; what they share is steps.reduced_model). Each is imported when called: each
pulls in its converter's library."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.prepare.steps import Echo
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.model_record import ModelRecord


@dataclass(frozen=True)
class Job:
    """What `appliance prepare --precision P` hands the preparer of P."""

    models_dir: Path
    record_path: Path
    bench: Benchmark
    fp32: ModelRecord           # the FP32 model record
    data: store.PreparedData
    calibration_list: Path | None  # int8 only
    echo: Echo


def _int8(job: Job) -> ModelRecord:
    from harness.prepare.quantize import prepare_int8

    return prepare_int8(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.calibration_list,
                        job.echo)


def _fp16(job: Job) -> ModelRecord:
    from harness.prepare.fp16 import prepare_fp16

    return prepare_fp16(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.echo)


def _bf16(job: Job) -> ModelRecord:
    from harness.prepare.bf16 import prepare_bf16

    return prepare_bf16(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.echo)


def _tf32(job: Job) -> ModelRecord:
    from harness.prepare.tf32 import prepare_tf32

    return prepare_tf32(job.models_dir, job.record_path, job.bench, job.fp32, job.data, job.echo)


PREPARERS: dict[str, Callable[[Job], ModelRecord]] = {"int8": _int8, "fp16": _fp16, "bf16": _bf16, "tf32": _tf32}
