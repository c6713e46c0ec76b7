"""`appliance tune`: a short sweep of card layouts x precisions x backends x batch sizes x infer requests per
card x provider options (harness.run.cards.provider_options, onnxruntime's CUDA provider), timed through the SUT.

Each candidate is the real card set of a run (same card plan, sample buffers, backend and requests per
card) started and warmed up as every performance run is (best of two single samples), then timed with
every card kept full at once, as in a run: a burst of 4 x requests batches with `requests` batches in flight on
every card (`SystemUnderTest.time_under_load`), giving the card set's rate (cards that share a device, several
sessions on one GPU, share its throughput: issue 36) and the median batch latency under that load; requests 1
is timed the same way (batches back to back). Server is chosen by the ideal queue within the bound, its batching
deadline searched too, and `--server-search` confirms the choice with short LoadGen runs (server_search).
Each card layout (`--cards auto,emulate:2,emulate:4`) is a candidate too: on a many-core CPU Server needs
several cards of several cores each (more batches in flight for the ideal queue), Offline often one card on
all cores. A precision
may be chosen only if its model meets the benchmark's accuracy target as its prepare recorded it
(`eligibility`); the others are measured and shown with the reason. The choice per scenario goes to a
record (harness.records.tuned) that `appliance run --tuned` / `--backend auto` reads, and the speeds to a LoadGen
user.conf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from harness.core import progress, queueing
from harness.core.errors import ApplianceError, BatchDoesNotFit
from harness.core.outbound import atomic_write_text, check_target, ensure_writable_dir, head
from harness.core.scenarios import Scenario
from harness.data import benchmarks, concrete, integrity
from harness.hw import bf16_support, gpu, gpu_plan, system
from harness.hw.topology.cards import parse_card_spec
from harness.hw.topology.model import Topology
from harness.records import store, tuned
from harness.records.benchmark_record import Benchmark
from harness.records.layout import PRECISIONS, Layout, read_model_record
from harness.records.model_record import ModelRecord, eligibility
from harness.records.tuned import Measured
from harness.run import gpu_defaults
from harness.run.cards import backends, provider_options
from harness.run.cards.backends import Backend
from harness.run.cards.kept_sessions import KeptSessions
from harness.run.loadgen_settings import Calibration, Requested, calibrated_setting
from harness.run.options import RunOptions
from harness.run.plan import check_buffer_memory, plan_cards
from harness.run.runner import default_max_wait_s, make_sut
from harness.tune import server_search

__all__ = [
    "CONF_HEAD",
    "CPU_BATCHES",
    "DEADLINE_FRACTIONS",
    "DEFAULT_REQUESTS",
    "DEFAULT_SCENARIOS",
    "GPU_BATCHES",
    "GPU_COARSE",
    "GPU_SECONDS",
    "METHOD",
    "Candidate",
    "Measured",
    "Sweep",
    "asked_backends",
    "available_backends",
    "by_session",
    "choose",
    "expected",
    "prepared_precisions",
    "server_choice",
    "server_qps",
    "summary",
    "tune",
    "user_conf_text",
]

CPU_BATCHES = (1, 2, 4, 8, 16)
GPU_BATCHES = (1, 8, 32, 64, 128, 256, 512, 1024)  # a GPU card's batches, up to what its memory holds
# without --batch-sizes a GPU backend is timed coarse first (these batches, the preferred option set only), then
# refined around the best Offline and Server candidates (the batches either side in GPU_BATCHES, the other option
# sets at the best batch): about 4 + 3 per layout instead of 8 x 2 (issue 43: 64 candidates, each a session with
# an exhaustive cuDNN search, did not fit a 15-minute GPU loan)
GPU_COARSE = (8, 64, 512)
GPU_SECONDS = 6  # per GPU candidate, about: the H100 (2026-11-27) timed 6 ResNet50 fp16 candidates in 32 s
DEFAULT_SCENARIOS = (Scenario.OFFLINE, Scenario.SERVER)
DEFAULT_REQUESTS = (1, 2)  # infer requests per openvino card to time; the other backends run 1
DEADLINE_FRACTIONS = (0.02, 0.05, 0.1, 0.2)  # Server: fixed batching deadlines tried, as fractions of the bound
# card layout, precision, backend (its record), batch, requests, provider options
Candidate = tuple[str, str, Backend, int, int, str]
METHOD = ("warm-up as in a run (best of 2 single samples), then every card of the layout at once, a burst of 4 x "
          "requests batches each with `requests` in flight (the better of 2): all the cards' samples over the time "
          "from the first start to the last finish, median batch latency under that load")


def available_backends(default: bool = False) -> tuple[Backend, ...]:
    """The backends `tune` can time here (their records say it may, and this installation makes their cards: the
    record's `installed`), the CPU ones first; `default`: those it times unasked (a GPU backend only where NVML sees
    a GPU)."""
    records = sorted((b for b in backends.RECORDS.values() if b.tuned_unasked or (b.tunable and not default)),
                     key=lambda b: b.gpu)
    have = [b for b in records if b.installed()]
    if default and any(b.gpu for b in have):
        facts = gpu.nvml()
        if isinstance(facts, str) or not facts.gpus:
            have = [b for b in have if not b.gpu]
    return tuple(have)


@dataclass(frozen=True)
class Sweep:
    """What to time: every card layout x precision x backend x batch size x requests per card (openvino; the
    others at 1)."""

    precisions: tuple[str, ...]
    backends: tuple[Backend, ...]  # their records (the CLI resolves --backends)
    batches: tuple[int, ...] | None  # None: CPU_BATCHES on CPU backends, GPU_BATCHES on GPU backends
    requests: tuple[int, ...] = DEFAULT_REQUESTS
    layouts: tuple[str, ...] = ("auto",)  # --cards specs
    options: tuple[str, ...] | None = None  # provider option sets; None: each backend record's `tune_options`
    card_outputs: str = "fp32"  # what the cards return (`run --card-outputs`): YOLO's fp16 outputs, say

    def candidates(self) -> list[Candidate]:
        """Every combination, less the precisions meant for other backends (the backends' records); a GPU backend
        without --batch-sizes: the coarse round (GPU_COARSE, the preferred option set), `refinements` next."""
        return [(c, p, b, n, r, o) for layout in self.layouts for p in self.precisions for b in self.backends
                if b.computes(p)
                for c in gpu_plan.tune_layouts(layout, b.gpu)
                for n in (self.batches or (GPU_COARSE if b.gpu else CPU_BATCHES))
                for r in (self.requests if b.requests else (1,))
                for o in self._first_options(b)]

    def _first_options(self, backend: Backend) -> tuple[str, ...]:
        sets = self.option_sets(backend)
        if self.batches is not None or not backend.gpu or self.options is not None:
            return sets
        return tuple(o for o in sets if o == gpu_defaults.NHWC) or sets

    def refinements(self, rows: list[Measured], bench: Benchmark) -> list[Candidate]:
        """The refining round of a coarse one: per layout, precision and GPU backend, around its best Offline
        candidate and its best Server one, the batches either side (GPU_BATCHES) and the other option sets at the
        best batch; none already timed."""
        named = {b.name: b for b in self.backends}
        done = {(m.layout, m.precision, named[m.backend], m.batch_size, m.requests, m.provider_options) for m in rows}
        more: list[Candidate] = []
        groups = {(m.layout, m.precision, m.backend) for m in rows if self.batches is None and named[m.backend].gpu}
        for layout, precision, name in sorted(groups):
            backend = named[name]
            mine = [m for m in rows if (m.layout, m.precision, m.backend) == (layout, precision, name)]
            bests = [max(mine, key=lambda m: m.samples_per_second)]
            if bench.server_latency_ms is not None:
                bests.append(max(mine, key=lambda m: (m.server_qps or 0.0, -m.batch_latency_ms)))
            for best in bests:
                at = GPU_BATCHES.index(best.batch_size) if best.batch_size in GPU_BATCHES else None
                sides = [] if at is None else [GPU_BATCHES[i] for i in (at - 1, at + 1) if 0 <= i < len(GPU_BATCHES)]
                more += [(layout, precision, backend, n, best.requests, best.provider_options) for n in sides]
                more += [(layout, precision, backend, best.batch_size, best.requests, o)
                         for o in self.option_sets(backend) if o != best.provider_options]
        return [c for c in dict.fromkeys(more) if c not in done]

    def option_sets(self, backend: Backend) -> tuple[str, ...]:
        """The provider option sets timed on `backend`: those given where its provider takes options, else its
        record's (the grid on the CUDA provider, the defaults elsewhere)."""
        if self.options is not None and backend.provider in provider_options.TUNABLE:
            return self.options
        return backend.tune_options

    def check(self) -> None:
        """One line for a layout that is no --cards spec, or a precision no backend of the sweep computes
        (bf16 without openvino, fp16 without a GPU), or provider options no backend of the sweep takes; before
        anything is measured."""
        for layout in self.layouts:
            parse_card_spec(layout)
        names = [b.name for b in self.backends]
        if self.options and not any(b.provider in provider_options.TUNABLE for b in self.backends):
            taking = [b.name for b in backends.RECORDS.values() if b.provider in provider_options.TUNABLE]
            raise ApplianceError(f"--provider-options are for {', '.join(provider_options.TUNABLE)} "
                                 f"(--backends {','.join(taking)}), not --backends {','.join(names)}")
        for p in self.precisions:
            if not any(b.computes(p) for b in self.backends):
                on = backends.computing(p)
                raise ApplianceError(f"--precisions {p} runs on --backends {','.join(on)} only; add one "
                                     f"(e.g. --backends {','.join(dict.fromkeys((*names, on[0])))})")


def prepared_precisions(data_dir: Path, benchmark: str) -> tuple[str, ...]:
    """What `tune` sweeps by default: fp32, and every other precision with a model record in `data_dir`
    that this machine computes (bf16 only where a backend that computes it is installed, on a CPU with it)."""
    layout = Layout(data_dir, benchmarks.get(benchmark))
    bf16_here = any(b.installed() for b in backends.RECORDS.values() if b.computes(bf16_support.PRECISION)) and \
        bf16_support.missing(system.cpu_flags(), bf16_support.openvino_capabilities()) is None
    return ("fp32", *(p for p in PRECISIONS if p != "fp32" and layout.record_for(p).is_file()
                      and (p != bf16_support.PRECISION or bf16_here)))


def _measure(bench: Benchmark, data: store.PreparedData, model: ModelRecord, candidate: Candidate,
             sessions: KeptSessions) -> Measured:
    from harness.hw.topology import detect

    layout, _, backend, batch, requests, options = candidate
    cards = replace(plan_cards(layout, backend, bench.name, detect(), requests), provider_options=options)
    sut = make_sut(bench, data, cards, model, batch, Scenario.OFFLINE, sessions=sessions)
    sut.load_cards()
    try:
        warm = sut.warm_up(timed=True)
        loaded = sut.time_under_load()
    finally:
        sut.stop()
    rate = loaded.samples_per_second  # every card at once: cards sharing a device share its throughput
    latency_s = max(latency for _, latency in loaded.cards)
    qps, wait_us = server_choice(bench, batch, latency_s, len(loaded.cards) * requests, rate)
    return Measured(model.precision, backend.name, batch, requests,
                    samples_per_second=round(rate, 3),
                    single_latency_ms=round(1000 * min(t_1 for t_1, _ in warm), 3),
                    batch_latency_ms=round(1000 * latency_s, 3),
                    multistream_latency_ms=round(1000 * min(t_b for _, t_b in warm) * math.ceil(8 / batch), 3),
                    cards=len(loaded.cards), server_qps=qps, layout=layout, provider_options=options,
                    max_wait_us=wait_us)


def _check_memory(bench: Benchmark, models: dict[str, ModelRecord],
                  candidates: list[Candidate], topology: Topology, card_outputs: str) -> None:
    """Every candidate's buffers against the memory free, before the first is timed (one line)."""
    for cards, precision, backend, batch, requests, _ in candidates:
        card_plan = plan_cards(cards, backend, bench.name, topology, requests)
        check_buffer_memory(concrete.for_run(bench.name, card_outputs, model=models[precision]), card_plan,
                            models[precision], batch, "--batch-sizes")


def server_qps(bench: Benchmark, batch: int, latency_s: float, servers: int, rate: float,
               max_wait_s: float | None = None) -> float | None:
    """The Server QPS an ideal queue sustains within the bound with this candidate's batch latency under
    load and its batches in flight (cards x requests), at the batching deadline `max_wait_s` (None: the
    harness's default rule); None: edge."""
    if bench.server_latency_ms is None:
        return None
    load = queueing.server_load(batch, latency_s, servers, bench.server_latency_ms,
                                lambda qps: default_max_wait_s(bench, batch, qps) if max_wait_s is None else max_wait_s)
    return round(load * rate, 3)


def server_choice(bench: Benchmark, batch: int, latency_s: float, servers: int,
                  rate: float) -> tuple[float | None, int | None]:
    """The best batching deadline for Server in the ideal queue, the harness's default rule or a fixed fraction of
    the bound (DEADLINE_FRACTIONS), and the QPS it sustains: (QPS, max_wait_us; None: the default rule)."""
    best: tuple[float | None, int | None] = (server_qps(bench, batch, latency_s, servers, rate), None)
    if bench.server_latency_ms is None or batch == 1:  # a batch of 1 never waits
        return best
    for fraction in DEADLINE_FRACTIONS:
        wait_s = fraction * bench.server_latency_ms / 1000
        qps = server_qps(bench, batch, latency_s, servers, rate, wait_s)
        if (qps or 0.0) > (best[0] or 0.0):
            best = (qps, round(wait_s * 1e6))
    return best


def choose(bench: Benchmark, scenario: Scenario, rows: list[Measured]) -> tuple[Measured, str]:
    """The candidate for `scenario`, and why in one line."""
    if scenario == Scenario.OFFLINE:
        best = max(rows, key=lambda m: m.samples_per_second)
        return best, f"highest throughput ({best.samples_per_second:g} samples/s, --cards {best.layout})"
    if scenario == Scenario.SERVER:
        bound = bench.server_latency_ms
        if bound is None:  # tune() refuses Server for edge benchmarks before measuring
            raise ApplianceError(f"{bench.name} is an edge benchmark: no Server scenario")
        best = max(rows, key=lambda m: (m.server_qps or 0.0, m.samples_per_second))
        if best.server_qps:
            return best, (f"most Server QPS an ideal queue sustains within the {bound} ms bound "
                          f"({best.server_qps:g} of {best.samples_per_second:g} samples/s; a batch takes "
                          f"{best.batch_latency_ms:g} ms under load, {best.cards} card(s) x {best.requests} in "
                          f"flight, --cards {best.layout})")
        best = min(rows, key=lambda m: m.batch_latency_ms)
        return best, (f"no candidate keeps p99 within the {bound} ms bound even in an ideal queue: the shortest batch "
                      f"({best.batch_latency_ms:g} ms, --cards {best.layout}); Server cannot meet its bound here")
    if scenario == Scenario.SINGLE_STREAM:  # one query at a time: one card (the fewest), batch 1
        fewest = min(m.cards for m in rows)
        best = min((m for m in rows if m.cards == fewest),
                   key=lambda m: (m.single_latency_ms, m.batch_size, m.requests))
        best = Measured(**{**asdict(best), "batch_size": 1})  # one sample per query: the batch is 1
        return best, (f"lowest single-sample latency of the layouts with the fewest cards ({best.single_latency_ms:g} "
                      f"ms, --cards {best.layout}): one query at a time")
    best = min(rows, key=lambda m: m.multistream_latency_ms)
    return best, f"lowest latency for 8 samples ({best.multistream_latency_ms:g} ms, --cards {best.layout})"


CONF_HEAD = b"# appliance tune:"  # the first bytes of every user.conf tune writes: the only ones it replaces


def _tuned_record(path: Path) -> bool:
    """Whether `path` holds a tuned record (an earlier tune's, which a new tune may replace)."""
    try:
        data = json.loads(head(path, 1 << 22))
    except ValueError:
        return False
    return isinstance(data, dict) and {"format", "method", "measured", "chosen"} <= data.keys()


def user_conf_text(bench: Benchmark, chosen: dict[Scenario, tuple[Measured, str]],
                   confirmed_qps: float | None = None) -> str:
    """The LoadGen user.conf of the choices: each scenario's calibrated setting; Server's the target its
    `--server-search` runs confirmed where there is one."""
    when = datetime.now(UTC).isoformat(timespec="seconds")
    lines = [f"{CONF_HEAD.decode()} {bench.name} on {system.cpu_model()}, {when}"]
    for scenario, (m, why) in chosen.items():
        key, value, rule = calibrated_setting(scenario, Calibration(m.samples_per_second, m.single_latency_ms,
                                                                    m.multistream_latency_ms,
                                                                    server_qps=m.server_qps), None)
        if scenario == Scenario.SERVER and confirmed_qps:
            value, rule = confirmed_qps, "the highest target VALID in --server-search's short LoadGen runs"
        lines += [f"# {scenario}: {m.backend}, batch {m.batch_size}, {m.requests} infer request(s) per card, --cards "
                  f"{m.layout} ({m.cards} card(s)): {why}; "
                  f"{rule}",  # `why` starts with the precision
                  f"{bench.name}.{scenario}.{key} = {value}"]
    return "\n".join(lines) + "\n"


def _choice(m: Measured, why: str, scenario: Scenario) -> tuned.Choice:
    server = scenario == Scenario.SERVER
    return tuned.Choice(m.precision, m.backend, m.batch_size, m.requests, why, m.layout, m.provider_options,
                        m.max_wait_us if server else None, m.server_qps if server else None)


def by_session(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates in the order tune times them: those differing only in batch size one after the other (in the
    order given), so their cards' sessions are made once for them all (`_time_all`)."""
    first = {_session_group(c): i for i, c in reversed(list(enumerate(candidates)))}
    return sorted(candidates, key=lambda c: first[_session_group(c)])


def _session_group(c: Candidate) -> tuple[str, str, Backend, int, str]:
    cards, precision, backend, _, requests, options = c
    return cards, precision, backend, requests, options


def _time_all(bench: Benchmark, data: store.PreparedData, models: dict[str, ModelRecord],
              candidates: list[Candidate], card_outputs: str, sessions: KeptSessions) -> list[Measured]:
    """Every candidate timed, those differing only in batch size in a row with their cards' sessions kept between
    them (`sessions`, ended when the next differs in more; harness.run.cards.kept_sessions); a batch its card says
    does not fit (BatchDoesNotFit: a GPU's memory) ends that layout's larger batches."""
    rows: list[Measured] = []
    too_big: dict[tuple[str, str, Backend], int] = {}  # GPU: (cards, precision, backend) -> the batch that did not fit
    group: tuple[str, str, Backend, int, str] | None = None
    with progress.bar(len(candidates), "tune", unit="config") as bar:
        try:
            for candidate in by_session(candidates):
                cards, precision, backend, batch, r, options = candidate
                if _session_group(candidate) != group:
                    sessions.close()
                    group = _session_group(candidate)
                bar.set_postfix_str(f"--cards {cards} {precision} {backend.name} batch {batch} requests {r} {options}",
                                    refresh=True)
                if batch >= too_big.get((cards, precision, backend), batch + 1):
                    bar.update()
                    continue  # a smaller batch already did not fit in the GPU's memory
                try:
                    run_bench = concrete.for_run(bench.name, card_outputs, model=models[precision])
                    rows.append(_measure(run_bench, data, models[precision], candidate, sessions))
                except BatchDoesNotFit:  # the card's own word (its device's memory): larger batches skipped
                    too_big[(cards, precision, backend)] = batch
                bar.update()  # the rows are printed once, in the summary table
        finally:
            sessions.close()
    if not rows:
        raise ApplianceError("no candidate fits in the GPU's memory; give smaller --batch-sizes")
    return rows


def _confirm_server(bench: Benchmark, data_dir: Path, m: Measured, why: str,
                    card_outputs: str) -> tuple[float | None, str]:
    """`--server-search`: the Server choice's highest VALID target QPS in short LoadGen runs, and the why with it;
    none where not even the ideal queue meets the bound (said, not run)."""
    if not m.server_qps:
        return None, why + "; --server-search: not run, no candidate meets the bound"

    def options_at(requested: Requested, results: Path) -> RunOptions:
        return RunOptions(bench.name, requested, data_dir, results, backend=backends.RECORDS[m.backend],
                          batch_size=m.batch_size,
                          cards=m.layout, precision=m.precision, requests=m.requests, max_wait_us=m.max_wait_us,
                          provider_options=m.provider_options, card_outputs=card_outputs)

    confirmed, tried = server_search.confirm(options_at, m.server_qps, m.samples_per_second)
    runs = ", ".join(f"{q:g} {'VALID' if ok else 'INVALID'}" for q, ok in tried)
    return confirmed, (f"{why}; --server-search: {confirmed:g} QPS VALID in short LoadGen runs ({runs}), "
                       f"the ideal queue {m.server_qps:g}")


def expected(candidates: list[Candidate], sweep: Sweep) -> str:
    """The line tune prints before it starts: how many candidates, and about how long on a GPU."""
    gpu = sum(b.gpu for _, _, b, *_ in candidates)
    line = f"tune: {len(candidates)} candidate(s)"
    if gpu:
        line += (f"; on a GPU about {gpu * GPU_SECONDS} s for the {gpu} GPU one(s) (~{GPU_SECONDS} s each on the "
                 f"H100, 2026-11-27)")
        if sweep.batches is None:
            line += ", then up to 7 per layout and precision refining around the best"
    return line


def asked_backends(names: tuple[str, ...]) -> tuple[Backend, ...]:
    """`--backends`' names as their records, resolved once at tune's edge; a name no record has: one line naming
    those that can be timed here."""
    unknown = [n for n in names if n not in backends.RECORDS]
    if unknown:
        raise _unavailable(unknown)
    return tuple(backends.RECORDS[n] for n in names)


def _unavailable(names: list[str]) -> ApplianceError:
    have = ", ".join(b.name for b in available_backends()) or "none installed (pip install onnxruntime)"
    return ApplianceError(f"backend(s) {', '.join(names) or '(none)'} not available here; choose from: {have}")


def _check_backends(asked: tuple[Backend, ...]) -> None:
    """One line when a backend asked for cannot be timed here: its own reason (the library that does not load)
    where it has one, else which ones can."""
    have = available_backends()
    missing = [b for b in asked if b not in have]
    for record in missing:
        record.check_libraries()
    if missing or not asked:
        raise _unavailable([b.name for b in missing])


def tune(benchmark: str, data_dir: Path, scenarios: tuple[Scenario, ...], sweep: Sweep,
         output: Path | None, server_search_runs: bool = False,
         announce: Callable[[str], None] = lambda _: None) -> tuple[Path, tuned.TunedRecord]:
    """Sweep, choose, write user.conf then the record (each atomically); return the record's path and it."""
    bench = benchmarks.get(benchmark)
    path = output or Layout(data_dir, bench).tuned
    conf = path.with_suffix(".user.conf")
    check_target(path, "tune", "-o", _tuned_record, example="tuned.json", what="the tuned record")
    check_target(conf, "tune", "-o", lambda p: head(p).startswith(CONF_HEAD), example="tuned.json",
                 what="the tuned record", given=path)
    if bench.server_latency_ms is None and Scenario.SERVER in scenarios:
        raise ApplianceError(f"{bench.name} is an edge benchmark: no Server scenario to tune")
    _check_backends(sweep.backends)
    sweep.check()
    concrete.for_run(bench.name, sweep.card_outputs)  # outputs the benchmark has not: one line, nothing timed
    from harness.hw.topology import detect

    topology = detect()
    for cards in sweep.layouts:  # a layout this machine cannot place: one line before anything is timed
        for backend in sweep.backends:
            requests = max(sweep.requests) if backend.requests else 1
            plan_cards(cards, backend, bench.name, topology, requests)
    layout = Layout(data_dir, bench)
    models = {p: read_model_record(layout, p) for p in sweep.precisions}
    if any(m.precision == bf16_support.PRECISION for m in models.values()):
        bf16_support.require("--precisions bf16")
    eligible = {p: eligibility(bench, m) for p, m in models.items()}
    if not any(ok for ok, _ in eligible.values()):
        raise ApplianceError("no precision to tune meets the accuracy target (" + "; ".join(
            f"{p}: {why}" for p, (_, why) in eligible.items()) + "): add fp32, e.g. --precisions fp32,"
            + ",".join(sweep.precisions))
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(data_dir))
    for model in models.values():
        integrity.refuse_mismatches(integrity.verify_loaded(model, data), bench.prepare_hint(data_dir))
    candidates = sweep.candidates()
    _check_memory(bench, models, candidates, topology, sweep.card_outputs)  # before anything is made
    ensure_writable_dir(path.parent, "tuned record folder")
    announce(expected(candidates, sweep))
    sessions = KeptSessions()
    rows = _time_all(bench, data, models, candidates, sweep.card_outputs, sessions)
    refine = sweep.refinements(rows, bench)
    if refine:
        announce(f"tune: refining around the best: {len(refine)} more candidate(s)")
        _check_memory(bench, models, refine, topology, sweep.card_outputs)
        rows += _time_all(bench, data, models, refine, sweep.card_outputs, sessions)
        candidates += refine
    if sessions.made or sessions.reused:
        announce(f"tune: {sessions.made} session(s) made, {sessions.reused} kept from one batch size to the next")
    by_precision = {p: {s: choose(bench, s, [m for m in rows if m.precision == p]) for s in scenarios}
                    for p in sweep.precisions}
    chosen = {s: choose(bench, s, [m for m in rows if eligible[m.precision][0]]) for s in scenarios}
    left_out = "".join(f"; {p} not considered: {why}" for p, (ok, why) in eligible.items() if not ok)
    if sweep.card_outputs != "fp32":  # the run must return the same outputs: said in every choice
        left_out += f"; timed with --card-outputs {sweep.card_outputs} (run with the same)"
    chosen = {s: (m, f"{m.precision} ({eligible[m.precision][1]}): {why}{left_out}") for s, (m, why) in chosen.items()}
    confirmed: float | None = None
    if server_search_runs and Scenario.SERVER in chosen:
        m, why = chosen[Scenario.SERVER]
        confirmed, why = _confirm_server(bench, data_dir, m, why, sweep.card_outputs)
        chosen[Scenario.SERVER] = (m, why)
    atomic_write_text(conf, user_conf_text(bench, chosen, confirmed))
    record = tuned.TunedRecord(
        benchmark=bench.name, layouts=list(dict.fromkeys(c for c, *_ in candidates)),  # as timed
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        host={"cpu_model": system.cpu_model(), "available_cpus": list(system.available_cpus())},
        method=METHOD, user_conf=conf.name,
        precisions={p: tuned.Precision(models[p].sha256, ok, why) for p, (ok, why) in eligible.items()},
        measured=rows,
        chosen={s: replace(_choice(m, why, s), confirmed_qps=confirmed if s == Scenario.SERVER else None)
                for s, (m, why) in chosen.items()},
        by_precision={p: {s: _choice(m, why, s) for s, (m, why) in per.items()} for p, per in by_precision.items()})
    tuned.write(path, record)
    return path, record


def _extras(choice: tuned.Choice) -> str:
    """A choice's provider options and Server deadline, where it has them."""
    return "".join([f", --provider-options '{choice.provider_options}'" if choice.provider_options else "",
                    f", --max-wait-us {choice.max_wait_us}" if choice.max_wait_us is not None else ""])


def summary(record: tuned.TunedRecord) -> str:
    lines = [f"{'backend':12s} {'batch':>5s} {'requests':>8s} {'precision':>9s} {'samples/s':>10s} {'batch ms':>9s} "
             f"{'single ms':>9s} {'ideal QPS':>9s} {'wait us':>7s} cards, provider options"]
    lines += [f"{m.backend:12s} {m.batch_size:5d} {m.requests:8d} {m.precision:>9s} "
              f"{m.samples_per_second:10.2f} {m.batch_latency_ms:9.2f} {m.single_latency_ms:9.2f} "
              f"{m.server_qps if m.server_qps is not None else '-':>9} "
              f"{m.max_wait_us if m.max_wait_us is not None else '-':>7} {m.layout} ({m.cards})"
              f"{', ' + m.provider_options if m.provider_options else ''}"
              for m in record.measured]
    lines.append("")
    lines += [f"{p:12s} {'eligible' if e.eligible else 'NOT ELIGIBLE'}: {e.why}"
              for p, e in record.precisions.items()]
    lines += [f"{s:12s} -> {c.precision}, {c.backend}, --cards {c.cards}, batch {c.batch_size}, "
              f"requests {c.requests}{_extras(c)}: {c.why}" for s, c in record.chosen.items()]
    return "\n".join(lines)
