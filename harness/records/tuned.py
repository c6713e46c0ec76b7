"""The record `appliance tune` writes and `appliance run` reads: precision, backend, card layout, batch size
and infer requests per card per scenario.

Kept apart from harness.tune.search (the sweep) so the runner can read a record without importing the sweep.
A record is machine-specific, so its default place is the data dir: <data>/tuned/<benchmark>.json (one
record per benchmark, over every precision tuned), with the user.conf it wrote beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import DataError
from harness.core.fsutil import plain_name
from harness.core.outbound import atomic_write_json
from harness.core.scenarios import SCENARIOS
from harness.records import fields
from harness.records.base import load_json, versioned
from harness.records.fields import bound
from harness.records.layout import PRECISIONS

__all__ = ["FORMAT", "Choice", "Measured", "Precision", "TunedRecord", "read", "write"]

# 4: card layouts tuned (`layouts`; `layout` per candidate, `cards` per choice); 3 timed one layout,
# 2 had one record per precision, 1 no `requests`: rerun `appliance tune`
FORMAT = 4
MAX_BATCH = 2**20      # a batch size no card takes more than (how much fits is the plan's memory check)
MAX_REQUESTS = 1024    # infer requests per card
MAX_WAIT_US = 10**9    # a batching deadline (1,000 s)


@dataclass(frozen=True)
class Choice:
    """What `appliance tune` chose for one scenario."""

    precision: str = field(metadata=bound(one_of=PRECISIONS))
    backend: str = field(metadata=bound(text=64))
    batch_size: int = field(metadata=bound(lo=1, hi=MAX_BATCH))
    requests: int = field(metadata=bound(lo=1, hi=MAX_REQUESTS))  # infer requests per card (openvino; 1 for the others)
    why: str = field()
    cards: str = field()     # the card layout, a --cards spec (auto | emulate:N | simulate:P:N | map.yaml)
    provider_options: str = ""      # the provider options that won (provider_options.parse), "" the defaults
    # Server: the batching deadline the ideal queue chose; None the default rule
    max_wait_us: int | None = field(default=None, metadata=bound(lo=0, hi=MAX_WAIT_US))
    # Server: what the ideal queue sustains within the bound (0: nothing does)
    server_qps: float | None = field(default=None, metadata=bound(lo=0))
    # Server: the highest VALID target_qps of `tune --server-search`'s runs
    confirmed_qps: float | None = field(default=None, metadata=bound(lo=0))


@dataclass(frozen=True)
class Measured:
    """One candidate `appliance tune` timed (harness.tune.search): a row of the record's `measured`."""

    precision: str = field(metadata=bound(one_of=PRECISIONS))  # which prepared model
    backend: str = field(metadata=bound(text=64))
    batch_size: int = field(metadata=bound(lo=1, hi=MAX_BATCH))
    requests: int = field(metadata=bound(lo=1, hi=MAX_REQUESTS))  # infer requests (batches in flight) per card
    samples_per_second: float = field(metadata=bound(lo=0))     # all cards together, each kept full
    single_latency_ms: float = field(metadata=bound(lo=0))      # one sample on one card
    # a full batch with the card's other requests in flight, on the slowest card
    batch_latency_ms: float = field(metadata=bound(lo=0))
    multistream_latency_ms: float = field(metadata=bound(lo=0))
    cards: int = field(default=1, metadata=bound(lo=1, hi=1024))  # how many cards the layout made
    # what an ideal queue sustains within the Server bound (harness.core.queueing)
    server_qps: float | None = field(default=None, metadata=bound(lo=0))
    layout: str = "auto"          # the --cards spec timed (auto | emulate:N | simulate:P:N | map.yaml)
    provider_options: str = ""    # onnxruntime GPU: the provider options timed (harness.run.cards.provider_options)
    # Server: the batching deadline of `server_qps` (None: the harness's default rule)
    max_wait_us: int | None = field(default=None, metadata=bound(lo=0, hi=MAX_WAIT_US))


@dataclass(frozen=True)
class Precision:
    """A precision tuned: the model measured, and whether it may be chosen (meets the accuracy target)."""

    model_sha256: str
    eligible: bool
    why: str


@dataclass(frozen=True)
class TunedRecord:
    """<data>/tuned/<benchmark>.json: one writer (`write`, from harness.tune.search), one reader (`read`)."""

    benchmark: str = field(metadata=bound(text=64))
    layouts: list[str] = field(metadata=bound(items=256))  # the --cards specs timed
    created_utc: str
    host: dict[str, object]              # cpu_model, available_cpus: for a person
    method: str
    user_conf: str                       # file name, beside the record: the speeds of `chosen`
    precisions: dict[str, Precision]     # per precision tuned
    # per layout x precision x backend x batch x requests
    measured: list[Measured] = field(metadata=bound(items=100_000))
    chosen: dict[str, Choice]            # per scenario, among the eligible precisions
    by_precision: dict[str, dict[str, Choice]]  # per precision, per scenario: its best (`run --precision`)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


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
    data = versioned(data, path, "tune record", FORMAT, fix)
    try:
        record = fields.parse(TunedRecord, data, f"{path} is a malformed tune record")
    except DataError as exc:
        raise DataError(f"{exc}{fix}") from None
    plain_name(record.user_conf, f"{path}: user_conf")  # a file beside the record, nowhere else
    odd = [k for k in (*record.precisions, *record.by_precision) if k not in PRECISIONS] + [
        k for k in (*record.chosen, *(s for per in record.by_precision.values() for s in per)) if k not in SCENARIOS]
    if odd:
        raise DataError(f"{path} is a malformed tune record: {odd[0][:40]!r} is not a precision or scenario it "
                        f"may name{fix}")
    return record
