"""`appliance run`: one LoadGen test from prepared data to a results folder that is never overwritten.

The run writes into a hidden staging folder and renames it when LoadGen is done: `run_N` for a
finished run, `run_N.incomplete` (with INCOMPLETE.txt) after Ctrl-C or a card failure.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from harness import benchmarks, progress, system
from harness.benchmarks import Benchmark
from harness.cards import BACKENDS, BackendSpec, make_card
from harness.datasets import store
from harness.energy import EnergyMeter
from harness.errors import ApplianceError, Interrupted
from harness.fsutil import atomic_write_json, atomic_write_text, ensure_writable_dir, sha256_file
from harness.loadgen_settings import (
    SUBMISSION_MIN_DURATION_MS,
    Calibration,
    Requested,
    effective_user_conf,
    embedded_mlperf_conf,
    loadgen_version,
    test_settings,
)
from harness.prepare import Layout, read_model_record
from harness.qsl import REPLICATE, SampleLibrary, plan_replicas
from harness.results import PerfResult, perf_result, read_detail
from harness.sut import CardSlot, SystemUnderTest, loadgen_window


@dataclass(frozen=True)
class RunOptions:
    benchmark: str
    requested: Requested
    data_dir: Path
    results_dir: Path
    backend: str = "onnxruntime"
    batch_size: int | None = None
    system_name: str | None = None
    output_dir: Path | None = None    # write the logs exactly here (compliance runs); default run_N
    audit_config: str | None = None   # compliance test: LoadGen reads it as ./audit.config
    test05: bool = False              # TEST05: LoadGen's alternate seeds
    cards: str = "auto"               # auto | emulate:N | simulate:PROFILE:N | <map.yaml>
    replicate: str = "node"           # sample buffer replicas: node | card | none
    max_wait_us: int | None = None    # Server batch deadline; None: default_max_wait_s (batch, target QPS)
    card_outputs: str = "fp32"        # fp32 | quantised: the precision the cards return their outputs in
    precision: str = "fp32"           # which prepared model: fp32 | int8 (harness.quantize)
    tuned: Path | None = None         # `appliance tune` record to take backend / batch / user.conf from


@dataclass(frozen=True)
class RunOutcome:
    benchmark: str
    scenario: str
    mode: str
    path: Path
    perf: PerfResult | None
    accuracy: str | None
    submission_length: bool
    synthetic: bool
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


@dataclass(frozen=True)
class CardPlan:
    """The cards of a run: where each runs, which backend makes them, and how the map was made."""

    slots: tuple[CardSlot, ...]
    backend: str
    profile: Any | None        # simulated_card.Profile for simulated cards
    how: str                   # one line for the log and the manifest
    node_cpus: dict[int, frozenset[int]]
    allowed: frozenset[int]

    @property
    def simulated(self) -> bool:
        return self.profile is not None

    def system_name(self) -> str:
        n = len(self.slots)
        if self.profile is not None:
            cpu = system.default_system_name("simulated", n, emulated=True).rsplit("_", 1)[0]
            return f"{cpu}_{n}xSIMULATED-{system.slug(self.profile.name)}"
        return system.default_system_name(self.backend, n, emulated=self.backend in ("onnxruntime", "openvino", "null"))


def plan_cards(opts: RunOptions) -> CardPlan:
    """Resolve --cards (auto | emulate:N | simulate:PROFILE:N | map.yaml) against this machine."""
    from harness.topology import detect, load_card_map, plan

    spec, backend = opts.cards.strip(), opts.backend
    topo = detect()
    profile = None
    if spec.lower().startswith("simulate:"):
        from harness.cards.simulated_card import load_profile

        name, _, count = spec[len("simulate:"):].rpartition(":")
        if not name or not count.isdigit() or int(count) < 1:
            raise ApplianceError(f"--cards {spec!r} is not understood; use simulate:PROFILE:N, e.g. "
                                 f"simulate:cloud-ai-100:16")
        if backend not in ("onnxruntime", "simulated"):  # onnxruntime: the option's default
            raise ApplianceError(f"--cards simulate:… makes simulated cards; it cannot be combined with "
                                 f"--backend {backend}")
        profile = load_profile(name, benchmarks.get(opts.benchmark).name)
        backend = "simulated"
        slots, how = _shared_slots(topo, int(count))
    else:
        if backend == "simulated":
            raise ApplianceError("--backend simulated needs --cards simulate:PROFILE:N (e.g. simulate:cloud-ai-100:4)")
        if spec.endswith((".yaml", ".yml")):
            cmap = load_card_map(spec, topo)
            how = f"card map {spec}"
        else:
            cmap = plan(topo, spec)
            how = f"--cards {spec}: L3-aligned policy (topologies/README.md)"
        slots = tuple(CardSlot(c.index, c.cpus, c.numa_node) for c in cmap.cards)
        if backend == "openvino" and len(slots) > 1:
            raise ApplianceError(f"--backend openvino runs one card per process ({spec} gives {len(slots)}): "
                                 f"OpenVINO's CPU worker threads are shared by every card in a process and keep "
                                 f"the process's CPUs, so per-card pinning cannot hold; use --cards emulate:1, "
                                 f"or --backend onnxruntime for several cards")
    return CardPlan(slots, backend, profile, how, dict(topo.numa_nodes), topo.allowed)


def _shared_slots(topo: Any, n: int) -> tuple[tuple[CardSlot, ...], str]:
    """Simulated cards: the L3-aligned map when there are enough cores; when cards outnumber cores,
    card i shares core block i * cores // n with its neighbours (simulated cards mostly sleep)."""
    from harness.topology import plan

    cores = len({c.first for c in topo.cores if set(c.cpus) & topo.allowed})
    if n <= cores:
        cmap = plan(topo, f"emulate:{n}")
        return tuple(CardSlot(c.index, c.cpus, c.numa_node) for c in cmap.cards), \
            f"simulate: {n} cards on {cores} cores, L3-aligned policy"
    base = plan(topo, f"emulate:{cores}").cards
    slots = tuple(CardSlot(i, base[i * cores // n].cpus, base[i * cores // n].numa_node) for i in range(n))
    return slots, (f"simulate: {n} cards on {cores} cores: cards outnumber cores, so card i shares the CPUs "
                   f"of core slot i*{cores}//{n} (up to {-(-n // cores)} cards per core)")


def _card_slots(opts: RunOptions) -> list[CardSlot]:
    """The cards of this run and the CPUs each may use."""
    return list(plan_cards(opts).slots)


def scenario_dir(opts: RunOptions) -> Path:
    """<results>/<system>/<benchmark>/<scenario>: where this run's folders go (created if needed)."""
    name = opts.system_name or plan_cards(opts).system_name()
    root = ensure_writable_dir(opts.results_dir, "results folder").resolve()
    return root / name / benchmarks.get(opts.benchmark).name / opts.requested.scenario


def latest_run(perf_dir: Path) -> Path | None:
    """The highest-numbered finished `run_N` (one with a detail log) in a performance folder."""
    runs = [p for p in perf_dir.glob("run_*") if p.name.split("_")[1].isdigit()
            and (p / "mlperf_log_detail.txt").is_file()]
    return max(runs, key=lambda p: int(p.name.split("_")[1]), default=None)


def _next_run_dir(scenario_dir: Path, mode: str) -> tuple[Path, Path]:
    """(final, staging) folders for this run; earlier runs are never touched."""
    if mode == "accuracy":
        n = 1
        while any((scenario_dir / f"{name}{s}").exists() for name in (_acc(n),) for s in ("", ".incomplete")):
            n += 1
        final = scenario_dir / _acc(n)
    else:
        parent = scenario_dir / "performance"
        taken = [int(p.name.split("_")[1].split(".")[0]) for p in parent.glob("run_*")
                 if p.name.split("_")[1].split(".")[0].isdigit()] if parent.is_dir() else []
        final = parent / f"run_{max(taken, default=0) + 1}"
    staging = final.with_name(f".{final.name}.staging-{os.getpid()}")
    staging.mkdir(parents=True)
    return final, staging


def _acc(n: int) -> str:
    return "accuracy" if n == 1 else f"accuracy_{n}"


def _make_factory(bench: Benchmark, cards: CardPlan, model_path: Path):
    spec = BackendSpec(cards.backend, model_path, bench.input_name, bench.outputs, bench.output_specs,
                       cards.profile, bench.output_casts)
    return lambda index, cpus: make_card(spec, index, cpus)


def make_sut(bench: Benchmark, data: store.PreparedData, cards: CardPlan, model_path: Path, batch: int,
             scenario: str, replicate: str = "node", max_wait_s: float | None = None) -> SystemUnderTest:
    """The SUT of a run (sample buffers, cards, batching), not yet started: `run` and `tune` share it."""
    replicas = plan_replicas(replicate, [(s.index, s.node, s.cpus) for s in cards.slots], cards.node_cpus,
                             cards.allowed)
    qsl = SampleLibrary(bench, data, replicas, replicate)
    return SystemUnderTest(bench, qsl, list(cards.slots), _make_factory(bench, cards, model_path), batch,
                           scenario=scenario, max_wait_s=max_wait_s)


BATCH_FILL_PROBABILITY = 0.99


def default_max_wait_s(bench: Benchmark, batch: int, target_qps: float) -> float:
    """Server batch deadline, from the batch size and the target QPS: the time within which a batch's
    other `batch - 1` samples arrive with 99% probability (Poisson arrivals, as LoadGen issues them),
    capped at a tenth of the latency bound so a partial batch waits little at low load.

    KRAI's `batch / target QPS` lets 13% (batch 2) to 31% (batch 8) of the batches miss it. A partial
    batch only goes to an idle card, but it holds that card for a full batch's time: 16 simulated cards
    at batch 2 and 5,320 QPS ran 4.9% of their batches half empty with KRAI's deadline, 0.6% with this
    one (BENCHMARKS.md §2).
    """
    cap = (bench.server_latency_ms or 100) / 1000 / 10
    return min(_poisson_wait(batch - 1, BATCH_FILL_PROBABILITY) / max(target_qps, 1e-9), cap)


def _poisson_wait(k: int, p: float) -> float:
    """The time (in mean inter-arrival times) by which k more Poisson arrivals have come with
    probability p: the p-quantile of Gamma(k, 1), by bisection on the Poisson CDF."""
    if k <= 0:
        return 0.0

    def fewer_than_k(x: float) -> float:  # P(Poisson(x) < k): not all k have come by time x
        term = total = math.exp(-x)
        for i in range(1, k):
            term *= x / i
            total += term
        return total

    lo, hi = 0.0, k + 10 * math.sqrt(k) + 10
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fewer_than_k(mid) > 1 - p else (lo, mid)
    return hi


def calibrate(sut: SystemUnderTest, timed: bool) -> Calibration | None:
    """Warm every card up and, for performance runs, time one batch and one sample on each."""
    timings = sut.warm_up(timed)
    if not timed:
        return None
    per_batch = [t_b for _, t_b in timings]
    return Calibration(
        samples_per_second=sum(sut.batch_size / t for t in per_batch),
        single_latency_ms=1000 * min(t_1 for t_1, _ in timings),
        multistream_latency_ms=1000 * min(per_batch) * math.ceil(8 / sut.batch_size))


def _run_loadgen(sut: SystemUnderTest, qsl: SampleLibrary, settings: lg.TestSettings, outdir: Path,
                 expected: int | None) -> dict[str, Any]:
    """StartTest on a helper thread, so Ctrl-C reaches the main thread while LoadGen works.

    Returns the host energy over the test (RAPL, informational; `available: False` where unreadable).
    """
    log_out = lg.LogOutputSettings()
    log_out.outdir = str(outdir)
    log_out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_out
    log_settings.enable_trace = False
    lg_qsl = lg.ConstructQSL(qsl.total_sample_count, qsl.performance_sample_count, qsl.load, qsl.unload)
    done = threading.Event()
    failure: list[BaseException] = []

    def body() -> None:
        try:
            with loadgen_window():
                lg.StartTestWithLogSettings(sut.handle, lg_qsl, settings, log_settings)
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    meter = EnergyMeter()
    meter.start()
    threading.Thread(target=body, name="loadgen", daemon=True).start()
    start = time.monotonic()
    min_s = settings.min_duration_ms / 1000
    with progress.bar(expected, "LoadGen", unit="sample") as bar:
        while not done.wait(0.25):
            bar.update(sut.completed - bar.n)
            elapsed = time.monotonic() - start
            bar.set_postfix_str(f"{sut.completed / max(1e-9, elapsed):.1f}/s, {elapsed:.0f}/{min_s:.0f} s min",
                                refresh=False)
    meter.stop()
    lg.DestroyQSL(lg_qsl)
    if failure:
        raise failure[0]
    return meter.result(sut.completed)


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(opts: RunOptions, echo=print) -> RunOutcome:
    """Run one benchmark / scenario / mode and return what the summary table shows."""
    from harness.tuned import resolve

    opts, choice = resolve(opts)
    bench = benchmarks.get(opts.benchmark).with_card_outputs(opts.card_outputs)
    req = opts.requested
    if req.scenario not in benchmarks.SCENARIOS:
        raise ApplianceError(f"unknown scenario {req.scenario!r}; choose one of: {', '.join(benchmarks.SCENARIOS)}")
    if opts.backend not in BACKENDS:
        raise ApplianceError(f"unknown backend {opts.backend!r}; choose one of: {', '.join(BACKENDS)}")
    if opts.replicate not in REPLICATE:
        raise ApplianceError(f"unknown --replicate {opts.replicate!r}; choose one of: {', '.join(REPLICATE)}")
    layout = Layout(opts.data_dir, bench)
    model = read_model_record(layout, opts.precision)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(opts.data_dir))
    cards = plan_cards(opts)
    slots = list(cards.slots)
    default_batch = cards.profile.batch if cards.profile is not None else bench.default_batch
    batch = opts.batch_size or (1 if req.scenario == "SingleStream" else default_batch)
    folder = scenario_dir(opts)
    echo(f"{len(slots)} card(s), {cards.how}")
    echo(f"backend {cards.backend}, batch {batch}: {choice['why']}")
    if cards.simulated:
        echo(f"SIMULATED cards: profile {cards.profile.name} ({cards.profile.model}), "
             f"{cards.profile.samples_per_second:g} samples/s at batch {cards.profile.batch} per card; "
             f"no inference is done")
    if opts.output_dir is not None:
        final = opts.output_dir.resolve()
        staging = final.with_name(f".{final.name}.staging-{os.getpid()}")
        staging.mkdir(parents=True)
    else:
        final, staging = _next_run_dir(folder, req.mode)

    sut = make_sut(bench, data, cards, Path(model["path"]), batch, req.scenario, opts.replicate)
    # Ctrl-C and SIGTERM (docker stop) both end the run cleanly. SIGINT is set explicitly: a shell
    # starts background jobs with it ignored, and Python then never raises KeyboardInterrupt.
    previous = {sig: signal.signal(sig, handler) for sig, handler in
                ((signal.SIGTERM, _sigterm_as_interrupt), (signal.SIGINT, signal.default_int_handler))} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        with progress.spinner(f"loading {len(slots)} card(s)"):
            sut.load_cards()
        for info in sut.cards:
            echo(f"{info.label()}: cpus {system_cpulist(info.cpus)}")
        cal = calibrate(sut, timed=req.mode == "performance")
        user_conf = effective_user_conf(bench, req, cal, data.count, len(slots))
        if cards.simulated:
            user_conf = (f"# SIMULATED cards ({len(slots)} x {cards.profile.name}): modelled latency, no "
                         f"inference\n") + user_conf
        max_wait_s = None if opts.max_wait_us is None else opts.max_wait_us / 1e6
        if req.scenario == "Server" and max_wait_s is None:
            qps = req.target_qps or (cal.samples_per_second * 0.5 if cal else bench.default_batch * 100)
            max_wait_s = default_max_wait_s(bench, batch, qps)
        sut.start(max_wait_s)  # the batching policy is frozen here, before LoadGen issues anything
        if req.scenario == "Server":
            echo(f"Server batching: batch {batch}, deadline {max_wait_s * 1e6:.0f} us, "
                 f"queues of {sut.queue_depth} batches per card")
        atomic_write_text(staging / "user.conf", user_conf)
        atomic_write_text(staging / "mlperf.conf", embedded_mlperf_conf())
        settings = test_settings(staging / "user.conf", bench, req.scenario, req.mode)
        settings.test05 = opts.test05  # LoadGen takes test05 only from mlperf.conf or settings, not audit.config
        expected = data.count if req.mode == "accuracy" else None
        if opts.audit_config is not None:
            atomic_write_text(staging / "audit.config", opts.audit_config)
        with _working_dir(staging):  # LoadGen looks for audit.config in the working directory only
            energy = _run_loadgen(sut, sut.qsl, settings, staging, expected)
    except KeyboardInterrupt:
        sut.stop()
        _abandon(staging, final, "interrupted by the user (Ctrl-C / SIGTERM) before LoadGen finished")
        raise Interrupted(f"run interrupted; logs so far kept in {final}.incomplete") from None
    except BaseException:
        sut.stop()
        _abandon(staging, final, f"failed: {sys.exc_info()[1]}")
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    sut.stop()
    if sut.failure:
        _abandon(staging, final, sut.failure)
        raise ApplianceError(f"{sut.failure}; run marked INVALID, logs kept in {final}.incomplete")
    for why in sut.card_failures:
        echo(f"warning: {why}; its samples ran on the other cards")
    if cards.simulated:
        atomic_write_text(staging / "SIMULATED.txt",
                          f"This run used SIMULATED cards: {len(slots)} x {cards.profile.name} "
                          f"({cards.profile.model}), profile {cards.profile.path}.\nNo inference was done; "
                          f"each batch was held for the profile's latency. The figures show how the harness "
                          f"scales, not how fast a real card is.\n")
    return _finish(opts, bench, model, data, sut, staging, final, cards, energy, choice)


def _abandon(staging: Path, final: Path, why: str) -> None:
    """Keep what LoadGen logged, marked incomplete; a run that logged nothing leaves nothing behind."""
    if not (staging / "mlperf_log_detail.txt").is_file():
        shutil.rmtree(staging, ignore_errors=True)
    elif staging.is_dir():
        atomic_write_text(staging / "INCOMPLETE.txt", why + "\n")
        os.replace(staging, final.with_name(final.name + ".incomplete"))


def system_cpulist(cpus: tuple[int, ...]) -> str:
    from harness.topology.sysfs import format_cpulist

    return format_cpulist(cpus) or "all"


def _finish(opts: RunOptions, bench: Benchmark, model: dict[str, Any], data: store.PreparedData,
            sut: SystemUnderTest, staging: Path, final: Path, cards: CardPlan,
            energy: dict[str, Any], choice: dict[str, Any]) -> RunOutcome:
    req = opts.requested
    detail = read_detail(staging / "mlperf_log_detail.txt")
    min_ms = int(detail.get("effective_min_duration_ms", 0))
    submission_length = min_ms >= SUBMISSION_MIN_DURATION_MS
    notes = []
    if not submission_length:
        notes.append(f"shortened run (min_duration {min_ms} ms < {SUBMISSION_MIN_DURATION_MS} ms): "
                     f"not submission-length")
    synthetic = bool(model["synthetic"] or data.synthetic)
    if model["synthetic"]:
        notes.append("synthetic model weights (seeded): accuracy is not the real model's")
    if "quantization" in model:
        notes.append(f"int8 model: top-1 agreement with FP32 {model['quantization']['agreement_top1_pct']:.2f}% "
                     f"at prepare")
    if not model["synthetic"] and not model["official_artefact"]:
        notes.append("model is not a verified official artefact (unknown digest)")
    if data.synthetic:
        notes.append("synthetic dataset")
    if opts.backend == "null":
        notes.append("null backend: no inference was done; measures the harness only")
    if cards.simulated:
        notes.append(f"SIMULATED cards ({len(cards.slots)} x {cards.profile.name}): modelled latency, no inference")
    elif any(c.emulated for c in sut.cards):
        notes.append("CPU-emulated card(s)")
    notes.extend(f"{why}; its samples were re-dispatched to the other cards" for why in sut.card_failures)
    perf = accuracy_text = None
    result: dict[str, Any] = {}
    if req.mode == "performance":
        perf = perf_result(detail, req.scenario)
        result = {"metric": perf.metric, "unit": perf.unit, "valid": perf.valid, "reasons": list(perf.reasons)}
    else:
        log = staging / "mlperf_log_accuracy.json"
        score = bench.accuracy.score(log, data, "dataset")
        assert score is not None
        digest = sha256_file(log)
        atomic_write_text(staging / "accuracy.txt", f"{score.line}\nhash={digest}\n")
        accuracy_text = f"{bench.quality_metric} {score.percent:.3f}% (target {bench.quality_target:.3f}%)"
        result = {score.key: score.percent, **score.details, "hash": digest}
        gold = bench.accuracy.score(log, data, "golden")
        if gold is not None:
            accuracy_text += f"; golden {gold.percent:.2f}%"
            result[f"golden_{gold.key}"] = gold.percent
            atomic_write_text(staging / "accuracy_golden.txt",
                              f"{gold.line}\n# against the golden reference of an FP32 onnxruntime pass of the "
                              f"FP32 model (sha256 {data.manifest['golden']['model_sha256']})\n")
    atomic_write_json(staging / "manifest.json", _manifest(opts, bench, model, data, sut, detail, staging,
                                                           result, notes, synthetic, cards, energy, choice))
    os.replace(staging, final)
    return RunOutcome(bench.name, req.scenario, req.mode, final, perf, accuracy_text, submission_length,
                      synthetic, tuple(notes))


def _manifest(opts: RunOptions, bench: Benchmark, model: dict[str, Any], data: store.PreparedData,
              sut: SystemUnderTest, detail: dict[str, Any], staging: Path, result: dict[str, Any],
              notes: list[str], synthetic: bool, cards: CardPlan, energy: dict[str, Any],
              choice: dict[str, Any]) -> dict[str, Any]:
    """Everything the result depends on, so an auditor can re-run it and explain a difference."""
    req = opts.requested
    stats = sut.stats()
    return {
        "format": 1,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": sys.argv,
        "benchmark": bench.name, "scenario": req.scenario, "mode": req.mode,
        "requested": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(req).items()},
        "batch_size": sut.batch_size, "backend": opts.backend, "card_outputs": bench.card_outputs,
        "backend_choice": choice,
        "model": {k: model[k] for k in ("path", "sha256", "md5", "synthetic", "seed", "official_artefact",
                                        "params", "macs_per_sample")},
        "precision": model.get("precision", "fp32"), "quantization": model.get("quantization"),
        "dataset": {"path": str(data.root), "count": data.count, "synthetic": data.synthetic,
                    "manifest_sha256": sha256_file(data.root / store.MANIFEST),
                    "shards": {e["file"]: e["sha256"] for e in data.manifest["shards"]}},
        "configs": {name: sha256_file(staging / name) for name in ("user.conf", "mlperf.conf")},
        "cards": [{"index": c.index, "backend": c.backend, "device": c.device, "cpus": list(c.cpus),
                   "numa_node": slot.node, "emulated": c.emulated, "simulated": c.simulated,
                   "samples_completed": w.samples_completed, "batches_in_flight": w.depth, **c.details}
                  for c, slot, w in zip(sut.cards, cards.slots, stats.cards, strict=True)],
        "card_map": {"spec": opts.cards, "how": cards.how, "backend": cards.backend},
        "sample_buffers": {"replicate": opts.replicate, "replicas": [r.describe() for r in sut.qsl.replicas],
                           "staging": "per card: batches in flight + 2 preallocated batch-contiguous buffers, "
                                      "256-byte aligned"},
        "dispatch": {"queue_depth_batches": sut.queue_depth, "scenario": req.scenario,
                     "server_max_wait_us": round(stats.batching.max_wait_s * 1e6, 1)
                     if stats.batching is not None and stats.batching.server else None,
                     "backlogged_batches": stats.backlogged, "redispatched_samples": stats.redispatched,
                     "card_failures": list(stats.card_failures)},
        "host": {"cpu_model": system.cpu_model(), "available_cpus": list(system.available_cpus()),
                 "image_digest": os.environ.get("APPLIANCE_IMAGE_DIGEST"), "image": system.image_identity()},
        "packages": system.package_versions(),
        "loadgen": {"version": loadgen_version(),
                    "seeds": {k: detail.get(f"effective_{k}") for k in
                              ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")}},
        "synthetic": {"weights": bool(model["synthetic"]), "data": data.synthetic, "cards": _card_kind(sut, cards),
                      "any": synthetic},
        "result": result, "notes": notes, "energy": energy,
    }


def _card_kind(sut: SystemUnderTest, cards: CardPlan) -> str:
    if cards.simulated:
        return f"SIMULATED ({cards.profile.name})"
    if cards.backend == "null":
        return "null (no inference)"
    return "cpu-emulated" if any(c.emulated for c in sut.cards) else "accelerator"


def write_json_summary(outcomes: list[RunOutcome]) -> str:
    return json.dumps([o.to_json() for o in outcomes], indent=2, sort_keys=True)
