"""The record `appliance tune` writes and `appliance run` reads: precision, backend, card layout, batch size
and infer requests per card per scenario.

Kept apart from harness.tune.search (the sweep) so the runner can read a record without importing the sweep.
A record is machine-specific, so its default place is the data dir: <data>/tuned/<benchmark>.json (one
record per benchmark, over every precision tuned), with the user.conf it wrote beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.core.fsutil import plain_name
from harness.core.outbound import atomic_write_json
from harness.records.base import load_json, required_fields, versioned

__all__ = ["FALLBACK", "FORMAT", "Choice", "Measured", "Precision", "TunedRecord", "read", "write"]

# 4: card layouts tuned (`layouts`; `layout` per candidate, `cards` per choice); 3 timed one layout,
# 2 had one record per precision, 1 no `requests`: rerun `appliance tune`
FORMAT = 4
FALLBACK = "onnxruntime"  # --backend auto without a record


@dataclass(frozen=True)
class Choice:
    """What `appliance tune` chose for one scenario."""

    precision: str
    backend: str
    batch_size: int
    requests: int  # infer requests per card (openvino; 1 for the others)
    why: str
    cards: str     # the card layout, a --cards spec (auto | emulate:N | simulate:P:N | map.yaml)
    provider_options: str = ""      # the provider options that won (provider_options.parse), "" the defaults
    max_wait_us: int | None = None  # Server: the batching deadline the ideal queue chose; None the default rule
    server_qps: float | None = None  # Server: what the ideal queue sustains within the bound (0: nothing does)
    confirmed_qps: float | None = None  # Server: the highest VALID target_qps of `tune --server-search`'s runs


@dataclass(frozen=True)
class Measured:
    """One candidate `appliance tune` timed (harness.tune.search): a row of the record's `measured`."""

    precision: str                # which prepared model
    backend: str
    batch_size: int
    requests: int                 # infer requests (batches in flight) per card
    samples_per_second: float     # all cards together, each kept full
    single_latency_ms: float      # one sample on one card
    batch_latency_ms: float       # a full batch with the card's other requests in flight, on the slowest card
    multistream_latency_ms: float
    cards: int = 1                # how many cards the layout made
    server_qps: float | None = None  # what an ideal queue sustains within the Server bound (harness.core.queueing)
    layout: str = "auto"          # the --cards spec timed (auto | emulate:N | simulate:P:N | map.yaml)
    provider_options: str = ""    # onnxruntime GPU: the provider options timed (harness.run.cards.provider_options)
    max_wait_us: int | None = None  # Server: the batching deadline of `server_qps` (None: the harness's default rule)


@dataclass(frozen=True)
class Precision:
    """A precision tuned: the model measured, and whether it may be chosen (meets the accuracy target)."""

    model_sha256: str
    eligible: bool
    why: str


@dataclass(frozen=True)
class TunedRecord:
    """<data>/tuned/<benchmark>.json: one writer (`write`, from harness.tune.search), one reader (`read`)."""

    benchmark: str
    layouts: list[str]                   # the --cards specs timed
    created_utc: str
    host: dict[str, object]              # cpu_model, available_cpus: for a person
    method: str
    user_conf: str                       # file name, beside the record: the speeds of `chosen`
    precisions: dict[str, Precision]     # per precision tuned
    measured: list[Measured]             # per layout x precision x backend x batch x requests
    chosen: dict[str, Choice]            # per scenario, among the eligible precisions
    by_precision: dict[str, dict[str, Choice]]  # per precision, per scenario: its best (`run --precision`)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


def write(path: Path, record: TunedRecord) -> None:
    atomic_write_json(path, record.to_json())


def _choice(c: dict[str, Any]) -> Choice:
    batch, requests = _count(c["batch_size"], "batch_size"), _count(c["requests"], "requests")
    wait, ideal, confirmed = c.get("max_wait_us"), c.get("server_qps"), c.get("confirmed_qps")
    return Choice(str(c["precision"]), str(c["backend"]), batch, requests, str(c["why"]), str(c["cards"]),
                  str(c.get("provider_options", "")), None if wait is None else int(wait),
                  None if ideal is None else float(ideal), None if confirmed is None else float(confirmed))


def _measured(m: dict[str, Any]) -> Measured:
    """A row of `measured` (tune writes every field; the defaults are the dataclass's)."""
    wait, ideal = m.get("max_wait_us"), m.get("server_qps")
    return Measured(str(m["precision"]), str(m["backend"]), _count(m.get("batch_size"), "measured batch_size"),
                    _count(m.get("requests", 1), "measured requests"), float(m["samples_per_second"]),
                    float(m["single_latency_ms"]), float(m["batch_latency_ms"]), float(m["multistream_latency_ms"]),
                    _count(m.get("cards", 1), "measured cards"), None if ideal is None else float(ideal),
                    str(m.get("layout", "auto")), str(m.get("provider_options", "")),
                    None if wait is None else int(wait))


def _count(value: object, key: str) -> int:
    """A whole number >= 1 (a batch size, requests per card), or ValueError naming the key; how large one
    may be is the plan's memory check (harness.run.plan.check_buffer_memory)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} {value!r} is not a whole number >= 1")
    return value


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
        chosen = {str(s): _choice(c) for s, c in data["chosen"].items()}
        by_precision = {str(p): {str(s): _choice(c) for s, c in per.items()}
                        for p, per in data["by_precision"].items()}
        precisions = {str(p): Precision(str(e["model_sha256"]), bool(e["eligible"]), str(e["why"]))
                      for p, e in data["precisions"].items()}
        if not isinstance(data["measured"], list) or not all(isinstance(m, dict) for m in data["measured"]):
            raise TypeError("measured is not a list of objects")
        measured = [_measured(m) for m in data["measured"]]  # `run --tuned --backend B` takes a row's batch
        plain_name(str(data["user_conf"]), f"{path}: user_conf")  # a file beside the record, nowhere else
        if not isinstance(data["layouts"], list) or not all(isinstance(c, str) for c in data["layouts"]):
            raise TypeError("layouts is not a list of --cards specs")
        return TunedRecord(**{**{k: data[k] for k in fields}, "chosen": chosen, "by_precision": by_precision,
                              "precisions": precisions, "measured": measured})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path} is a malformed tune record ({type(exc).__name__}: {exc}){fix}") from None


