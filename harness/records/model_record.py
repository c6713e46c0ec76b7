"""The model record, <data>/models/<benchmark>[-int8|-fp16|-bf16].json: which model file runs and its digests.

One writer (`write`: prepare and the int8 quantiser) and one reader (`read`), versioned by `format`.
Records from before the field existed are format 1 too (same keys). `path` names the file relative to
the data dir when it lies inside it (harness.records.layout.stored_path), so the data dir can move.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import DataError
from harness.core.outbound import atomic_write_json
from harness.records.base import load_json, versioned

if TYPE_CHECKING:
    from harness.records.benchmark_record import Benchmark

FORMAT = 1


@dataclass(frozen=True)
class ModelRecord:
    benchmark: str
    path: str                      # relative to the data dir when inside it, else absolute
    sha256: str
    md5: str
    synthetic: bool                # seeded weights
    seed: int | None
    official_artefact: str | None  # registry name when the digest is an official artefact's
    precision: str                 # fp32 | int8 | fp16 | bf16
    params: int
    macs_per_sample: int
    stats: str                     # one line for a person
    builder_sha256: str | None = None         # seeded fp32: digest of the builder's code
    input_dtype: str | None = None            # int8 / fp16: "uint8" (reads the stored sample bytes)
    quantization: dict[str, Any] | None = None  # int8 / fp16: how it was made, its agreement with fp32
    adopted_from: dict[str, str] | None = None  # --model FILE rewritten for the appliance (YOLO's uint8 input)
    output_layout: str | None = None          # detection: the layout its output comes in (`--output-layout`)
    inference_precision: str | None = None    # bf16: what the runtime computes in (OpenVINO's precision hint)

    def to_json(self) -> dict[str, object]:
        """The file's content (format first); optional fields that do not apply are left out."""
        body = {k: v for k, v in dataclasses.asdict(self).items()
                if v is not None or k not in ("builder_sha256", "input_dtype", "quantization", "adopted_from",
                                                  "output_layout", "inference_precision")}
        return {"format": FORMAT, **body}


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "benchmark": str, "path": str, "sha256": str, "md5": str, "synthetic": bool, "seed": (int, type(None)),
    "official_artefact": (str, type(None)), "params": int, "macs_per_sample": int, "stats": str,
}

_OPTIONAL: dict[str, type] = {  # absent (or null) allowed; `precision` absent: fp32 (records from before int8)
    "precision": str, "builder_sha256": str, "input_dtype": str, "quantization": dict, "adopted_from": dict,
    "output_layout": str, "inference_precision": str,
}


def parse(data: object, where: Path) -> ModelRecord:
    """A record from its JSON, or DataError (one line) naming what is wrong."""
    data = versioned(data, where, "model record", FORMAT, unversioned=FORMAT)  # records from before `format`
    for key, kind in _REQUIRED.items():
        if not isinstance(data.get(key), kind) or (kind is int and isinstance(data.get(key), bool)):
            raise DataError(f"{where} is not a valid model record: {key!r} is {data.get(key)!r}")
    for key, kind in _OPTIONAL.items():
        if not isinstance(data.get(key) or kind(), kind):
            raise DataError(f"{where} is not a valid model record: {key!r} is {data[key]!r}")
    fields = {f.name for f in dataclasses.fields(ModelRecord)}
    return ModelRecord(**{**{k: v for k, v in data.items() if k in fields},
                          "precision": data.get("precision") or "fp32"})


def read(path: Path) -> ModelRecord:
    """Raises FileNotFoundError when there is none, DataError when it is unreadable or malformed."""
    return parse(load_json(path, "is damaged"), path)


def write(path: Path, record: ModelRecord) -> None:
    atomic_write_json(path, record.to_json())


AGREEMENT = {  # what prepare records of an int8 / fp16 model's agreement with FP32 (read by tune)
    "agreement_top1_pct": "top-1 agreement with FP32", "golden_map_pct": "mAP against the FP32 golden detections"}


def eligibility(bench: Benchmark, model: ModelRecord) -> tuple[bool, str]:
    """Whether a prepared model may be submitted (and chosen by tune), and why: FP32 is the reference; a reduced
    precision only if the agreement with FP32 its prepare measured (top-1 agreement, or mAP against the FP32
    detections) reaches the benchmark's accuracy fraction (99% for resnet50 and yolo-99): the proxy prepare
    records for the closed division's target of that fraction of the FP32 accuracy."""
    if model.precision == "fp32":
        return True, "the FP32 reference model"
    q = model.quantization or {}
    metric = next((k for k in AGREEMENT if isinstance(q.get(k), int | float)), None)
    if metric is None:
        return False, (f"its model record holds no agreement with FP32: rerun `appliance prepare --precision "
                       f"{model.precision}`")
    target = 100 * bench.quality_fraction
    verdict = ">=" if q[metric] >= target else "<"
    return q[metric] >= target, (f"{AGREEMENT[metric]} {q[metric]:.2f}% {verdict} the {target:g}% "
                                 f"{bench.name} must reach")
