"""`--backend auto` and `--tuned`: the run's options with the tuned record's choice applied (harness.records.tuned
is the record; this is what a run makes of it), and the manifest's `backend_choice` saying why."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.data import benchmarks
from harness.records import model_record
from harness.records.benchmark_record import Benchmark
from harness.records.layout import Layout
from harness.records.tuned import Choice, TunedRecord, read
from harness.run import gpu_defaults
from harness.run.cards import backends
from harness.run.cards.backends import Backend
from harness.run.loadgen_settings import read_user_conf
from harness.run.options import Auto, RunOptions


@dataclass(frozen=True)
class TunedSource:
    """The tuned record a run's choice came from."""

    file: str
    sha256: str
    user_conf: str | None  # the record's user.conf the run takes (None: its own, or the choice is not the record's)


@dataclass(frozen=True)
class BackendChoice:
    """The backend, precision and card layout a run takes, and why: the manifest's `backend_choice`."""

    backend: str
    precision: str
    requests: int
    cards: str
    why: str
    tuned: TunedSource | None  # None: no tuned record applied
    provider_options: str
    max_wait_us: int | None
    server_bound: str | None = None  # the record knows no batch meets the Server bound: said before the run

    def to_json(self) -> dict[str, object]:
        """The manifest's `backend_choice` object (`server_bound` only where there is one)."""
        body = dataclasses.asdict(self)
        return body if self.server_bound is not None else {k: v for k, v in body.items() if k != "server_bound"}


def _check_model(opts: RunOptions, bench: Benchmark, record: TunedRecord, precision: str, path: Path) -> None:
    """The model `precision` was tuned with is still the one prepared, or DataError (one line)."""
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



def _server_bound(scenario: str, pick: Choice, path: Path, bound_ms: float | None) -> str | None:
    """Server with a choice no batch of which meets the bound in an ideal queue: said before the run starts."""
    if scenario != "Server" or pick.server_qps is None or pick.server_qps > 0:
        return None
    return (f"Server cannot meet its latency bound with any candidate tune measured in {path} "
            f"(not even an ideal queue keeps p99 within {bound_ms} ms at batch {pick.batch_size}): "
            f"the run will be INVALID; tune smaller --batch-sizes or more cards")


def _options_and_wait(opts: RunOptions, pick: Choice | None, why: str) -> tuple[str, int | None, str]:
    """The provider options and Server batching deadline: given, else the record's choice (`pick`), else the
    defaults; and the why with what was given."""
    options = pick.provider_options if pick is not None else ""
    if opts.provider_options is not None:
        options, why = opts.provider_options, why + "; --provider-options given"
    wait = pick.max_wait_us if pick is not None and opts.requested.scenario == "Server" else None
    return options, wait if opts.max_wait_us is None else opts.max_wait_us, why


def _chosen(name: str, path: Path) -> Backend:
    """The record of the backend a tuned record chose: a name in a document, so one that is no backend here is
    one line (a record tuned with a backend this installation does not have)."""
    record = backends.RECORDS.get(name)
    if record is None:
        raise DataError(f"{path} chose backend {name!r}, which this appliance does not have "
                        f"({', '.join(backends.RECORDS)}); rerun `appliance tune`, or name a --backend")
    return record


def _record_conf(user_conf: Path | None) -> Path | None:
    """The record's user.conf the run takes, its problems named as the record's file (not as a --user-conf the
    user gave)."""
    if user_conf is not None:
        read_user_conf(user_conf, "the tuned record's user.conf", "; rerun `appliance tune`")
    return user_conf


def resolve(opts: RunOptions) -> tuple[RunOptions, BackendChoice]:
    """RunOptions with backend "auto" or a --tuned record applied (precision always concrete), and the
    manifest's `backend_choice`.

    auto: the record's precision, backend, card layout, batch and requests for this scenario (--tuned,
    else the default place), else onnxruntime on --cards auto. A --precision given takes the best
    candidate the record measured at that precision for this scenario. An explicit backend with --tuned
    takes the layout, batch and requests of the best candidate measured for that backend (at the
    precision), and not the record's user.conf (its speeds are the chosen candidate's). An explicit
    --cards / --batch-size / --requests wins over the record (`opts.cards` None: not given).
    """
    req, bench = opts.requested, benchmarks.get(opts.benchmark)
    asked = None if isinstance(opts.backend, Auto) else opts.backend  # None: --backend auto
    path = opts.tuned or (Layout(opts.data_dir, bench).tuned if asked is None else None)
    given = opts.requests or 1
    if path is None or (opts.tuned is None and not (path.exists() or path.is_symlink())):  # there but broken: read
        backend = asked or backends.default()
        why = ("--backend (or its default)" if path is None else
               f"--backend auto: no tuned record at {path}, so {backend.name}")
        precision = opts.precision or "fp32"
        if opts.precision is None and backend.gpu:  # the GPU rule (harness.run.gpu_defaults)
            precision, rule = gpu_defaults.precision(Layout(opts.data_dir, bench))
            why += f"; {rule}"
        cards = opts.cards or "auto"
        options = opts.provider_options or ""
        return dataclasses.replace(opts, backend=backend, precision=precision, cards=cards,
                                   provider_options=options), BackendChoice(
            backend.name, precision, given, cards, why, None, options, opts.max_wait_us)
    record = read(path)
    if record.benchmark != bench.name:
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
    _check_model(opts, bench, record, pick.precision, path)
    batch: int | None
    if asked is None:
        backend, batch, requests, cards = _chosen(pick.backend, path), pick.batch_size, pick.requests, pick.cards
        # the record's user.conf: a name in a document, so a file inside the record's folder or refused
        user_conf: Path | None = inbound.inside(path.parent, record.user_conf, f"tuned record {path}: user_conf") \
            if pick == chosen else None
    else:
        backend, user_conf = asked, None
        rows = [m for m in record.measured if m.backend == backend.name and m.precision == pick.precision]
        best = max(rows, key=lambda m: m.samples_per_second) if rows else None
        batch, requests = (best.batch_size, best.requests) if best is not None else (None, 1)
        cards = best.layout if best is not None else "auto"
        source = "--precision given" if opts.precision is not None else f"the record's {req.scenario} choice"
        why = (f"--backend {backend.name}; {pick.precision} ({source}), card layout, batch and requests from {path}"
               if rows else f"--backend {backend.name} at {pick.precision} ({source}): not measured in {path}, "
               f"default batch, --cards auto")
    options, wait, why = _options_and_wait(opts, pick if asked is None else None, why)
    if opts.batch_size is not None:
        batch, why = opts.batch_size, why + "; --batch-size given"
    if opts.requests is not None:
        requests, why = opts.requests, why + "; --requests given"
    if opts.cards is not None:
        cards, why = opts.cards, why + f"; --cards {opts.cards} given (the record's: {cards})"
    else:
        why += f"; --cards {cards} from the record"
    user_conf = _record_conf(user_conf) if req.user_conf is None else None
    info = TunedSource(str(path.resolve()), sha256_file(path), None if user_conf is None else str(user_conf))
    new_req = req if user_conf is None else dataclasses.replace(req, user_conf=user_conf)
    bound = _server_bound(req.scenario, pick, path, bench.server_latency_ms)
    return (dataclasses.replace(opts, backend=backend, precision=pick.precision, batch_size=batch, requests=requests,
                                cards=cards, requested=new_req, provider_options=options, max_wait_us=wait),
            BackendChoice(backend.name, pick.precision, requests, cards, why, info, options, wait, bound))
