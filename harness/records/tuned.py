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
from harness.core.fsutil import atomic_write_json, plain_name, sha256_file
from harness.data import benchmarks
from harness.records import model_record
from harness.records.base import load_json, required_fields, versioned

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
    host: dict[str, Any]
    method: str
    user_conf: str                       # file name, beside the record: the speeds of `chosen`
    precisions: dict[str, Precision]     # per precision tuned
    measured: list[dict[str, Any]]       # harness.tune.search.Measured, per layout x precision x backend x batch x requests
    chosen: dict[str, Choice]            # per scenario, among the eligible precisions
    by_precision: dict[str, dict[str, Choice]]  # per precision, per scenario: its best (`run --precision`)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


def default_path(data_dir: Path, benchmark: str) -> Path:
    return data_dir / "tuned" / f"{benchmarks.get(benchmark).name}.json"


def write(path: Path, record: TunedRecord) -> None:
    atomic_write_json(path, record.to_json())


def _choice(c: dict[str, Any]) -> Choice:
    batch, requests = _count(c["batch_size"], "batch_size"), _count(c["requests"], "requests")
    return Choice(str(c["precision"]), str(c["backend"]), batch, requests, str(c["why"]), str(c["cards"]))


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
        for m in data["measured"]:  # `run --tuned --backend B` takes a row's batch size and requests
            _count(m.get("batch_size"), "measured batch_size")
            _count(m.get("requests", 1), "measured requests")
        plain_name(str(data["user_conf"]), f"{path}: user_conf")  # a file beside the record, nowhere else
        if not isinstance(data["layouts"], list) or not all(isinstance(c, str) for c in data["layouts"]):
            raise TypeError("layouts is not a list of --cards specs")
        return TunedRecord(**{**{k: data[k] for k in fields}, "chosen": chosen, "by_precision": by_precision,
                              "precisions": precisions})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path} is a malformed tune record ({type(exc).__name__}: {exc}){fix}") from None


def _check_model(opts: Any, record: TunedRecord, precision: str, path: Path) -> None:
    """The model `precision` was tuned with is still the one prepared, or DataError (one line)."""
    from harness.prepare.steps import Layout

    bench = benchmarks.get(opts.benchmark)
    prepare = f"`{bench.prepare_hint(opts.data_dir)}" + ("`" if precision == "fp32" else f" --precision {precision}`")
    tuned_with = record.precisions.get(precision)
    try:
        now = model_record.read(Layout(opts.data_dir, bench).record_for(precision))
    except FileNotFoundError:
        raise DataError(f"{path} runs the {precision} model, but no {precision} model is prepared for {bench.name} "
                        f"in {opts.data_dir}: run {prepare}, or `appliance tune` again") from None
    if tuned_with is not None and tuned_with.model_sha256 != now.sha256:
        raise DataError(f"the {precision} model in {opts.data_dir} was prepared again after {path} was tuned "
                        f"(sha256 {now.sha256[:12]}, tuned {tuned_with.model_sha256[:12]}); run `appliance tune` again")


def resolve(opts: Any) -> tuple[Any, dict[str, Any]]:
    """RunOptions with backend "auto" or a --tuned record applied (precision always concrete), and the
    manifest's `backend_choice`.

    auto: the record's precision, backend, card layout, batch and requests for this scenario (--tuned,
    else the default place), else onnxruntime on --cards auto. A --precision given takes the best
    candidate the record measured at that precision for this scenario. An explicit backend with --tuned
    takes the layout, batch and requests of the best candidate measured for that backend (at the
    precision), and not the record's user.conf (its speeds are the chosen candidate's). An explicit
    --cards / --batch-size / --requests wins over the record (`opts.cards` None: not given).
    """
    req = opts.requested
    path = opts.tuned or (default_path(opts.data_dir, opts.benchmark) if opts.backend == "auto" else None)
    given = opts.requests or 1
    if path is None or (opts.tuned is None and not path.is_file()):
        precision = opts.precision or "fp32"
        why = ("--backend (or its default)" if path is None else
               f"--backend auto: no tuned record at {path}, so {FALLBACK}")
        backend = opts.backend if path is None else FALLBACK
        cards = opts.cards or "auto"
        return dataclasses.replace(opts, backend=backend, precision=precision, cards=cards), {
            "backend": backend, "precision": precision, "requests": given, "cards": cards, "why": why, "tuned": None}
    record = read(path)
    if record.benchmark != benchmarks.get(opts.benchmark).name:
        raise DataError(f"{path} was tuned for {record.benchmark}, not {opts.benchmark}; rerun `appliance tune` "
                        f"for it")
    chosen = record.chosen.get(req.scenario)
    if chosen is None:
        raise DataError(f"{path} has no {req.scenario} choice; rerun `appliance tune --scenario {req.scenario}`")
    pick, why = chosen, f"tuned record {path}: {chosen.why}"
    if opts.precision is not None and opts.precision != chosen.precision:
        at = record.by_precision.get(opts.precision, {}).get(req.scenario)
        if at is None:
            wanted = ",".join(sorted({*record.precisions, opts.precision}))
            raise DataError(f"{path} has no {opts.precision} {req.scenario} candidates (tuned: "
                            f"{', '.join(record.precisions)}); rerun `appliance tune --precisions {wanted}`")
        pick, why = at, (f"--precision {opts.precision} given (the record chose {chosen.precision}): its best "
                         f"{opts.precision} {req.scenario} candidate in {path}: {at.why}")
    _check_model(opts, record, pick.precision, path)
    info: dict[str, str | None] = {"file": str(path.resolve()), "sha256": sha256_file(path)}
    batch: int | None
    if opts.backend == "auto":
        backend, batch, requests, cards = pick.backend, pick.batch_size, pick.requests, pick.cards
        user_conf: Path | None = path.parent / record.user_conf if pick == chosen else None
    else:
        backend, user_conf = opts.backend, None
        rows = [m for m in record.measured if m.get("backend") == backend and m.get("precision") == pick.precision]
        best = max(rows, key=lambda m: m["samples_per_second"]) if rows else {}
        batch, requests = best.get("batch_size"), int(best.get("requests", 1))
        cards = str(best.get("layout", "auto"))
        source = "--precision given" if opts.precision is not None else f"the record's {req.scenario} choice"
        why = (f"--backend {backend}; {pick.precision} ({source}), card layout, batch and requests from {path}"
               if rows else f"--backend {backend} at {pick.precision} ({source}): not measured in {path}, "
               f"default batch, --cards auto")
    if opts.batch_size is not None:
        batch, why = opts.batch_size, why + "; --batch-size given"
    if opts.requests is not None:
        requests, why = opts.requests, why + "; --requests given"
    if opts.cards is not None:
        cards, why = opts.cards, why + f"; --cards {opts.cards} given (the record's: {cards})"
    else:
        why += f"; --cards {cards} from the record"
    if req.user_conf is not None:
        user_conf = None
    info["user_conf"] = None if user_conf is None else str(user_conf)
    new_req = req if user_conf is None else dataclasses.replace(req, user_conf=user_conf)
    return (dataclasses.replace(opts, backend=backend, precision=pick.precision, batch_size=batch, requests=requests,
                                cards=cards, requested=new_req),
            {"backend": backend, "precision": pick.precision, "requests": requests, "cards": cards, "why": why,
             "tuned": info})
