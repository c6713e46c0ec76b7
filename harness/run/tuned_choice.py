"""`--backend auto` and `--tuned`: the run's options with the tuned record's choice applied (harness.records.tuned
is the record; this is what a run makes of it), and the manifest's `backend_choice` saying why."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.data import benchmarks
from harness.records import model_record
from harness.records.layout import Layout
from harness.records.tuned import FALLBACK, Choice, TunedRecord, read
from harness.run import gpu_defaults
from harness.run.cards import backends


def _check_model(opts: Any, record: TunedRecord, precision: str, path: Path) -> None:
    """The model `precision` was tuned with is still the one prepared, or DataError (one line)."""
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



def _server_bound(scenario: str, pick: Choice, path: Path, bound_ms: float | None) -> dict[str, str]:
    """Server with a choice no batch of which meets the bound in an ideal queue: said before the run starts."""
    if scenario != "Server" or pick.server_qps is None or pick.server_qps > 0:
        return {}
    return {"server_bound": f"Server cannot meet its latency bound with any candidate tune measured in {path} "
                            f"(not even an ideal queue keeps p99 within {bound_ms} ms at batch {pick.batch_size}): "
                            f"the run will be INVALID; tune smaller --batch-sizes or more cards"}


def _options_and_wait(opts: Any, pick: Choice | None, why: str) -> tuple[str, int | None, str]:
    """The provider options and Server batching deadline: given, else the record's choice (`pick`), else the
    defaults; and the why with what was given."""
    options = pick.provider_options if pick is not None else ""
    if opts.provider_options is not None:
        options, why = opts.provider_options, why + "; --provider-options given"
    wait = pick.max_wait_us if pick is not None and opts.requested.scenario == "Server" else None
    return options, wait if opts.max_wait_us is None else opts.max_wait_us, why


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
    auto = Layout(opts.data_dir, benchmarks.get(opts.benchmark)).tuned if opts.backend == "auto" else None
    path = opts.tuned or auto
    given = opts.requests or 1
    if path is None or (opts.tuned is None and not path.is_file()):
        backend = opts.backend if path is None else FALLBACK
        why = ("--backend (or its default)" if path is None else
               f"--backend auto: no tuned record at {path}, so {FALLBACK}")
        precision = opts.precision or "fp32"
        if opts.precision is None and backends.on_gpu(backend):  # the GPU rule (harness.run.gpu_defaults)
            precision, rule = gpu_defaults.precision(Layout(opts.data_dir, benchmarks.get(opts.benchmark)))
            why += f"; {rule}"
        cards = opts.cards or "auto"
        options = opts.provider_options or ""
        return dataclasses.replace(opts, backend=backend, precision=precision, cards=cards,
                                   provider_options=options), {
            "backend": backend, "precision": precision, "requests": given, "cards": cards, "why": why, "tuned": None,
            "provider_options": options, "max_wait_us": opts.max_wait_us}
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
    options, wait, why = _options_and_wait(opts, pick if opts.backend == "auto" else None, why)
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
    bound = _server_bound(req.scenario, pick, path, benchmarks.get(opts.benchmark).server_latency_ms)
    return (dataclasses.replace(opts, backend=backend, precision=pick.precision, batch_size=batch, requests=requests,
                                cards=cards, requested=new_req, provider_options=options, max_wait_us=wait),
            {"backend": backend, "precision": pick.precision, "requests": requests, "cards": cards, "why": why,
             "tuned": info, "provider_options": options, "max_wait_us": wait, **bound})
