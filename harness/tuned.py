"""The record `appliance tune` writes and `appliance run` reads: backend, batch size and infer requests per
card per scenario.

Kept apart from harness.tune (the sweep) so the runner can read a record without importing the sweep.
A record is machine-specific, so its default place is the data dir: <data>/tuned/<benchmark>[-int8].json,
with the user.conf it wrote beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import benchmarks
from harness.errors import DataError
from harness.fsutil import atomic_write_json, sha256_file
from harness.records import load_json, required_fields, versioned

FORMAT = 2  # 2: `requests` per candidate and per choice (format 1 had none: rerun `appliance tune`)
FALLBACK = "onnxruntime"  # --backend auto without a record


@dataclass(frozen=True)
class Choice:
    """What `appliance tune` chose for one scenario."""

    backend: str
    batch_size: int
    requests: int  # infer requests per card (openvino; 1 for the others)
    why: str


@dataclass(frozen=True)
class TunedRecord:
    """<data>/tuned/<benchmark>[-int8].json: one writer (`write`, from harness.tune), one reader (`read`)."""

    benchmark: str
    precision: str
    cards: str
    created_utc: str
    host: dict[str, Any]
    method: str
    user_conf: str                  # file name, beside the record
    measured: list[dict[str, Any]]  # harness.tune.Measured, per backend x batch x requests
    chosen: dict[str, Choice]       # per scenario

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


def default_path(data_dir: Path, benchmark: str, precision: str) -> Path:
    name = benchmarks.get(benchmark).name + ("" if precision == "fp32" else f"-{precision}")
    return data_dir / "tuned" / f"{name}.json"


def write(path: Path, record: TunedRecord) -> None:
    atomic_write_json(path, record.to_json())


def read(path: Path) -> TunedRecord:
    """The record at `path`, or DataError (one line) saying what is wrong and to rerun `appliance tune`."""
    fix = "; rerun `appliance tune`"
    try:
        data = load_json(path, fix=fix, name=f"tuned record {path}")
    except FileNotFoundError:
        raise DataError(f"tuned record {path} does not exist; run `appliance tune` first") from None
    if not isinstance(data, dict) or "chosen" not in data:
        raise DataError(f"{path} is not an `appliance tune` record{fix}")
    fields = required_fields(TunedRecord)
    data = versioned(data, path, "tune record", FORMAT, fix, required=fields)
    try:
        chosen = {str(s): Choice(str(c["backend"]), int(c["batch_size"]), int(c["requests"]), str(c["why"]))
                  for s, c in data["chosen"].items()}
        if not isinstance(data["measured"], list) or not all(isinstance(m, dict) for m in data["measured"]):
            raise TypeError("measured is not a list of objects")
        return TunedRecord(**{**{k: data[k] for k in fields}, "chosen": chosen})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path} is a malformed tune record ({type(exc).__name__}: {exc}){fix}") from None


def resolve(opts: Any) -> tuple[Any, dict[str, Any]]:
    """RunOptions with backend "auto" or a --tuned record applied, and the manifest's `backend_choice`.

    auto: the record's backend, batch and requests for this scenario (--tuned, else the default place),
    else onnxruntime. An explicit backend with --tuned takes the batch and requests of the best candidate
    measured for that backend, and not the record's user.conf (its speeds are the chosen backend's).
    An explicit --batch-size / --requests wins over the record.
    """
    req = opts.requested
    path = opts.tuned or (default_path(opts.data_dir, opts.benchmark, opts.precision)
                          if opts.backend == "auto" else None)
    given = opts.requests or 1
    if path is None:
        return opts, {"backend": opts.backend, "requests": given, "why": "--backend (or its default)", "tuned": None}
    if opts.tuned is None and not path.is_file():
        return dataclasses.replace(opts, backend=FALLBACK), {
            "backend": FALLBACK, "requests": given, "why": f"--backend auto: no tuned record at {path}, so {FALLBACK}",
            "tuned": None}
    record = read(path)
    if record.benchmark != benchmarks.get(opts.benchmark).name or record.precision != opts.precision:
        raise DataError(f"{path} was tuned for {record.benchmark} {record.precision}, not "
                        f"{opts.benchmark} {opts.precision}; rerun `appliance tune` for it")
    chosen = record.chosen.get(req.scenario)
    if chosen is None:
        raise DataError(f"{path} has no {req.scenario} choice; rerun `appliance tune --scenario {req.scenario}`")
    info: dict[str, str | None] = {"file": str(path.resolve()), "sha256": sha256_file(path)}
    batch: int | None
    if opts.backend == "auto":
        backend, batch, requests = chosen.backend, chosen.batch_size, chosen.requests
        user_conf: Path | None = path.parent / record.user_conf
        why = f"tuned record {path}: {chosen.why}"
    else:
        backend, user_conf = opts.backend, None
        rows = [m for m in record.measured if m.get("backend") == backend]
        best = max(rows, key=lambda m: m["samples_per_second"]) if rows else {}
        batch, requests = best.get("batch_size"), int(best.get("requests", 1))
        why = (f"--backend {backend}; batch and requests from {path}" if rows else
               f"--backend {backend} (not measured in {path}: default batch)")
    if opts.batch_size is not None:
        batch, why = opts.batch_size, why + "; --batch-size given"
    if opts.requests is not None:
        requests, why = opts.requests, why + "; --requests given"
    if req.user_conf is not None:
        user_conf = None
    info["user_conf"] = None if user_conf is None else str(user_conf)
    new_req = req if user_conf is None else dataclasses.replace(req, user_conf=user_conf)
    return (dataclasses.replace(opts, backend=backend, batch_size=batch, requests=requests, requested=new_req),
            {"backend": backend, "requests": requests, "why": why, "tuned": info})
