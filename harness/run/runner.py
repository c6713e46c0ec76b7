"""`appliance run`: one LoadGen test from prepared data to a results folder that is never overwritten.

`run` resolves the options into a plan (harness.run.plan) and `execute`s it. The run claims its folder
(harness.run.rundirs), writes into a hidden staging folder and renames it when LoadGen is done: `run_N`
for a finished run, `run_N.incomplete` (with INCOMPLETE.txt) after Ctrl-C, a card failure or a fault
of the machine (full disk, I/O error); a run stopped before LoadGen logged anything leaves nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from harness.core import environment, inbound, leftovers, progress
from harness.core.build_info import appliance_info
from harness.core.errors import ApplianceError, Interrupted, interrupts_raised, stopped_by
from harness.core.fsutil import disk_fault, sha256_file, tmp_prefix
from harness.core.native_lines import Route, quiet_at_source
from harness.core.outbound import atomic_write_text
from harness.core.scenarios import Mode, Scenario
from harness.core.sysfs import format_cpulist
from harness.hw import gpu, node_facts, system
from harness.hw.energy import EnergyMeter
from harness.hw.gpu import GpuRef
from harness.hw.gpu_energy import GpuEnergyMeter
from harness.records import detail_log, store
from harness.records import manifest as run_manifest
from harness.records.benchmark_record import Benchmark
from harness.records.detail_log import PerfResult, perf_result
from harness.records.model_record import ModelRecord
from harness.run import buffers, calibration, keep_warm, launch_checks, rundirs
from harness.run.cards import make_card
from harness.run.cards.backends import Planned
from harness.run.cards.base import AsyncCard, Card
from harness.run.cards.kept_sessions import KeptSessions
from harness.run.cards.spec import BackendSpec
from harness.run.completion_meter import CompletionMeter
from harness.run.loadgen_settings import (
    SUBMISSION_MIN_DURATION_MS,
    Calibration,
    calibrated_setting,
    check_conf_text,
    check_load,
    effective_user_conf,
    embedded_mlperf_conf,
    loadgen_version,
    test_settings,
)
from harness.run.neighbours import Neighbours
from harness.run.options import RunOptions
from harness.run.plan import CardPlan, RunPlan, resolve
from harness.run.qsl import SampleLibrary, plan_replicas
from harness.run.sut import SystemUnderTest, loadgen_window

Echo = Callable[[str], None]
__all__ = ["RunOptions", "RunOutcome", "execute", "latest_run", "make_sut", "run"]


@dataclass(frozen=True)
class RunOutcome:
    benchmark: str
    scenario: Scenario
    mode: Mode
    path: Path
    perf: PerfResult | None
    accuracy: str | None
    submission_length: bool
    synthetic: bool
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()  # what makes the result doubtful: other runs on its cores
    energy: dict[str, Any] | None = None  # the manifest's: RAPL, and NVML under "gpu" (performance runs)
    host_nms: dict[str, Any] | None = None  # the manifest's `host_postprocess` (detection benchmarks)
    not_submittable: str = ""  # why its precision fails the benchmark's accuracy rule ("": it passes)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


@dataclass(frozen=True)
class Measured:
    """What the runner measures beside LoadGen over the timed run."""

    energy: dict[str, Any]
    host_nms: dict[str, Any] | None  # CompletionMeter.result(): None without done threads


def latest_run(perf_dir: Path) -> Path | None:
    """The highest-numbered finished `run_N` (one with a detail log) in a performance folder."""
    runs = [p for p in perf_dir.glob("run_*") if inbound.is_digits(p.name.split("_")[1])
            and (p / "mlperf_log_detail.txt").is_file()]
    return max(runs, key=lambda p: int(p.name.split("_")[1]), default=None)


def make_sut(bench: Benchmark, data: store.PreparedData, cards: CardPlan, model: ModelRecord, batch: int,
             scenario: Scenario, replicate: str = "node", sessions: KeptSessions | None = None) -> SystemUnderTest:
    """The SUT of a run (sample buffers, cards, batching) of the prepared `model` (its record), not yet
    started: `run` and `tune` share it (tune with `sessions`: its cards' sessions kept across batch sizes)."""
    replicas = plan_replicas(replicate, [(s.index, s.node, s.cpus) for s in cards.slots], cards.node_cpus,
                             cards.allowed)
    qsl = SampleLibrary(bench, data, replicas, replicate)
    planned = Planned(len(cards.slots), batch, scenario, bench.name, cards.requests, cards.gpus,
                      cards.provider_options, cards.profile)
    spec = BackendSpec(cards.backend, Path(model.path), bench.input_name, bench.outputs, bench.output_specs,
                       cards.backend.settings_for(planned), bench.output_casts, model.precision,
                       model.inference_precision, sessions)

    def factory(index: int, cpus: tuple[int, ...]) -> Card | AsyncCard:
        return make_card(spec, index, cpus)

    return SystemUnderTest(bench, qsl, list(cards.slots), factory, batch, scenario=scenario)


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


def _run_loadgen(sut: SystemUnderTest, qsl: SampleLibrary, settings: lg.TestSettings, outdir: Path,
                 expected: int | None, gpus: tuple[GpuRef, ...] = ()) -> Measured:
    """StartTest on a helper thread, so Ctrl-C reaches the main thread while LoadGen works.

    Returns what was measured beside LoadGen over the test: the host energy (RAPL, informational;
    `available: False` where unreadable) with the GPUs' (NVML) under "gpu", and the host NMS share.
    """
    log_out = lg.LogOutputSettings()
    log_out.outdir = str(outdir)
    log_out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_out
    log_settings.enable_trace = False
    lg_qsl = lg.ConstructQSL(qsl.total_sample_count, qsl.performance_sample_count, qsl.load, qsl.unload)
    finished = threading.Event()
    failure: list[BaseException] = []

    def body() -> None:
        try:
            with loadgen_window():
                lg.StartTestWithLogSettings(sut.handle, lg_qsl, settings, log_settings)
        except BaseException as exc:
            failure.append(exc)
        finally:
            finished.set()

    meter = EnergyMeter()
    gpu_meter = GpuEnergyMeter(gpus, lambda: [w.completed for w in sut.workers])  # NVML beside RAPL
    done = [w for w in sut.workers if w.completer is not None]  # detection benchmarks: NMS on done threads
    nms = CompletionMeter(lambda: [(w.completed, w.complete_cpu_ns) for w in done], [w.slot.cpus for w in done],
                          gpus if len(gpus) == len(done) else ()) if done else None
    meter.start()
    gpu_meter.start()
    if nms is not None:
        nms.start()
    threading.Thread(target=body, name="loadgen", daemon=True).start()
    start = time.monotonic()
    min_s = settings.min_duration_ms / 1000
    with progress.bar(expected, "LoadGen", unit="sample") as bar:
        while not finished.wait(0.25):
            bar.update(sut.completed - bar.n)
            elapsed = time.monotonic() - start
            bar.set_postfix_str(f"{sut.completed / max(1e-9, elapsed):.1f}/s, {elapsed:.0f}/{min_s:.0f} s min",
                                refresh=False)
    meter.stop()
    gpu_meter.stop()
    if nms is not None:
        nms.stop()
    lg.DestroyQSL(lg_qsl)
    if failure:
        raise failure[0]
    energy = meter.result(sut.completed)
    if gpus:
        energy["gpu"] = gpu_meter.result()
    return Measured(energy, nms.result() if nms is not None else None)


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def run(opts: RunOptions, echo: Echo = print) -> RunOutcome:
    """Run one benchmark / scenario / mode and return what the summary table shows."""
    return execute(resolve(opts), echo)


def execute(p: RunPlan, echo: Echo = print) -> RunOutcome:
    """Claim a run folder, run LoadGen on the plan's cards, keep the logs: finished, or marked incomplete."""
    launch_checks.check(lambda m: print(m, file=sys.stderr), p.topology)  # in a container: docker run flags?
    _announce(p, echo)
    leftovers.sweep([Path(tempfile.gettempdir())], echo, only=leftovers.PROBES)  # of killed runs' calibrations
    if p.folder.is_dir():
        rundirs.recover(p.folder, echo)  # accuracy / compliance folders left by killed processes
    rundirs.check_free_space(p.folder, _log_bytes(p), f"this {p.scenario} {p.mode} run")
    quiet_at_source()
    sut = make_sut(p.bench, p.data, p.cards, p.model, p.batch, p.scenario, p.opts.replicate)
    # onnxruntime's and CUDA's own log lines: into the run's native.log, off the terminal (harness.core.native_lines)
    native = Route(Path(tempfile.gettempdir()) / f"{tmp_prefix('native-log')}log",
                   enabled=p.cards.backend.infers).start()
    try:  # the cards before the folder: a card that cannot load (a GPU out of memory) leaves nothing behind
        with interrupts_raised(), progress.spinner(f"loading {len(p.cards.slots)} card(s)"):
            sut.load_cards()
        folder = _claim(p, echo)
    except BaseException:
        sut.stop()
        native.keep(None)
        raise
    cores = {c for slot in p.cards.slots for c in slot.cpus} or set(p.cards.allowed)
    try:
        with Neighbours(cores, f"{p.bench.name} {p.scenario} {p.mode}") as neighbours:
            with interrupts_raised():
                try:
                    measured = _loadgen_test(p, sut, folder.staging, echo)
                finally:
                    sut.stop()
                    native_kept = native.keep(folder.held)
            if native_kept:
                echo(native.summary(f"the run's {Route.FILE}"))
            if sut.failure:
                raise CardFailure(sut.failure)
            for why in sut.card_failures:
                echo(f"warning: {why}; its samples ran on the other cards")
            return _finish(p, sut, folder, measured, neighbours, native_kept)
    except BaseException as exc:
        if isinstance(exc, rundirs.FolderMoved):  # said, and the run kept where its folder went
            raise
        native.keep(folder.held)
        replacement = _end_unfinished(folder, exc)
        if replacement is exc:
            raise
        raise replacement from None


class CardFailure(ApplianceError):
    """Every card failed, so the run cannot finish."""


class LoadGenErrors(ApplianceError):
    """LoadGen logged error records (a setting it replaced, a config it could not read): the run did not
    test what was asked, and the submission checker rejects such a log."""


def _announce(p: RunPlan, echo: Echo) -> None:
    if why := p.not_submittable:
        print(f"warning: {why}", file=sys.stderr)
    echo(f"{len(p.cards.slots)} card(s), {p.cards.how}")
    per_card = f", {p.cards.requests} infer request(s) per card" if p.cards.backend.requests else ""
    echo(f"backend {p.cards.backend.name}, batch {p.batch}{per_card}: {p.choice.why}")
    if p.choice.server_bound:  # the tuned record knows no batch meets the bound: said before, not after
        print(f"appliance: warning: {p.choice.server_bound}", file=sys.stderr)
    if p.cards.profile is not None:
        prof = p.cards.profile
        echo(f"SIMULATED cards: profile {prof.name} ({prof.model}), {prof.samples_per_second:g} samples/s at "
             f"batch {prof.batch} per card; no inference is done")


def _log_bytes(p: RunPlan) -> int:
    """Room LoadGen's logs need: the detail log and summary, plus an accuracy-log line per logged sample."""
    need = 16 << 20
    if p.mode == Mode.ACCURACY or p.opts.audit_config is not None:
        per_sample = 2 * sum(4 * math.prod(shape) for shape, _ in p.bench.output_specs) + 100  # hex payload
        need += p.data.count * per_sample
    return need


def _claim(p: RunPlan, echo: Echo) -> rundirs.RunFolder:
    if p.opts.output_dir is not None:
        return rundirs.fixed(p.opts.output_dir)
    if p.mode == Mode.ACCURACY:
        return rundirs.claim(p.folder, "accuracy", bare_first=True, echo=echo)
    return rundirs.claim(p.folder / "performance", "run", echo=echo)


def _loadgen_test(p: RunPlan, sut: SystemUnderTest, staging: Path, echo: Echo) -> Measured:
    """Time the (loaded) cards, write the run's LoadGen settings and run the test; returns what was measured."""
    for info in sut.cards:
        echo(f"{info.label()}: cpus {format_cpulist(info.cpus) or 'all'}")
    req = p.opts.requested
    cal = calibration.calibrate(sut, p.scenario, req.duration_ms, timed=p.mode == Mode.PERFORMANCE)
    max_wait_s = None if p.opts.max_wait_us is None else p.opts.max_wait_us / 1e6
    if p.scenario == Scenario.SERVER and max_wait_s is None:
        guess = calibrated_setting(Scenario.SERVER, cal, req.duration_ms)[1] if cal else p.bench.default_batch * 100
        qps = req.target_qps or guess
        max_wait_s = default_max_wait_s(p.bench, p.batch, qps)
    sut.start(max_wait_s)  # the batching policy is frozen here, before LoadGen issues anything
    if p.scenario == Scenario.SERVER and max_wait_s is not None:
        echo(f"Server batching: batch {p.batch}, deadline {max_wait_s * 1e6:.0f} us, "
             f"queues of {sut.queue_depth} batches per card")
    settings = _write_settings(p, cal, staging)
    if p.mode == Mode.PERFORMANCE:
        rate = cal.samples_per_second if cal else None
        echo(calibration.describe_estimate(calibration.estimate_seconds(settings, p.scenario, rate),
                                           settings.min_duration_ms, rate))
    expected = p.data.count if p.mode == Mode.ACCURACY else None
    warm = keep_warm.spinning(c for s in p.cards.slots for c in s.cpus) if p.opts.keep_warm \
        else contextlib.nullcontext(())
    with _working_dir(staging), warm as cpus:  # LoadGen looks for audit.config in the working directory only
        if cpus:
            echo(f"--keep-warm: a SCHED_IDLE spinner on each of CPUs {format_cpulist(cpus)}")
        return _run_loadgen(sut, sut.qsl, settings, staging, expected, p.cards.gpus)


def _write_settings(p: RunPlan, cal: Calibration | None, staging: Path) -> lg.TestSettings:
    """user.conf, mlperf.conf (and a compliance test's audit.config) in the run folder, read back by LoadGen."""
    req = p.opts.requested
    user_conf = effective_user_conf(p.bench, req, cal, p.data.count, len(p.cards.slots))
    if p.cards.profile is not None:
        user_conf = (f"# SIMULATED cards ({len(p.cards.slots)} x {p.cards.profile.name}): modelled latency, no "
                     f"inference\n") + user_conf
    check_conf_text(user_conf, "the run's user.conf")  # the calibrated values too, before LoadGen reads them
    atomic_write_text(staging / "user.conf", user_conf)
    atomic_write_text(staging / "mlperf.conf", embedded_mlperf_conf())
    if p.opts.audit_config is not None:
        atomic_write_text(staging / "audit.config", p.opts.audit_config)
    settings = test_settings(staging / "user.conf", p.bench, req.scenario, req.mode)
    settings.test05 = p.opts.test05  # LoadGen takes test05 only from mlperf.conf or settings, not audit.config
    check_load(settings, req.scenario, req.mode, p.data.count)
    return settings


def _end_unfinished(folder: rundirs.RunFolder, exc: BaseException) -> BaseException:
    """Keep what LoadGen logged as NAME.incomplete (a run that logged nothing leaves nothing behind);
    returns the exception to raise in `exc`'s place: one line saying why and what was kept."""
    logged = (folder.held / "mlperf_log_detail.txt").is_file()
    if isinstance(exc, KeyboardInterrupt):
        kept = folder.abandon(f"{stopped_by(exc)} by the user before LoadGen finished", keep=logged)
        return Interrupted(f"run {stopped_by(exc)}; " + (f"logs so far kept in {kept}" if kept else
                                                  "LoadGen had not started, so nothing was kept"), exc)
    fault = disk_fault(exc)
    if fault is not None:
        kept = folder.abandon(f"stopped by a fault of the machine: {fault}", keep=True)
        return ApplianceError(f"run stopped: {fault}; what it wrote is kept in {kept}; free some space "
                              f"(or check the disk) and run again")
    if isinstance(exc, LoadGenErrors):
        kept = folder.abandon(str(exc), keep=True)
        return LoadGenErrors(f"{exc}; run not valid, logs kept in {kept}")
    if isinstance(exc, CardFailure):
        kept = folder.abandon(str(exc), keep=logged)
        return CardFailure(f"{exc}; run marked INVALID, " + (f"logs kept in {kept}" if kept else "nothing was kept"))
    folder.abandon(f"failed: {exc}", keep=logged)
    return exc


def _finish(p: RunPlan, sut: SystemUnderTest, folder: rundirs.RunFolder, measured: Measured,
            neighbours: Neighbours, native: dict[str, object] | None) -> RunOutcome:
    """Score the run, write its manifest and rename the staging folder to its final name."""
    staging, req, cards = folder.held, p.opts.requested, p.cards  # the folder, not a path that may lead elsewhere
    if cards.profile is not None:
        atomic_write_text(staging / "SIMULATED.txt",
                          f"This run used SIMULATED cards: {len(cards.slots)} x {cards.profile.name} "
                          f"({cards.profile.model}), profile {cards.profile.path}.\nNo inference was done; "
                          f"each batch was held for the profile's latency. The figures show how the harness "
                          f"scales, not how fast a real card is.\n")
    detail = detail_log.values(staging / "mlperf_log_detail.txt")
    if detail["_errors"]:
        raise LoadGenErrors(f"LoadGen logged {len(detail['_errors'])} error(s): " + "; ".join(detail["_errors"][:3]))
    min_ms = int(detail.get("effective_min_duration_ms", 0))
    submission_length = min_ms >= SUBMISSION_MIN_DURATION_MS
    notes = _notes(p, sut, min_ms, submission_length)
    synthetic = bool(p.model.synthetic or p.data.synthetic)
    perf = accuracy_text = None
    result: dict[str, Any] = {}
    verdict = p.eligibility
    if req.mode == Mode.PERFORMANCE:
        perf = perf_result(detail, req.scenario)
        result = {"metric": perf.metric, "unit": perf.unit, "valid": perf.valid, "reasons": list(perf.reasons)}
    else:
        accuracy_text, result, golden = _score(p, staging)
        verdict = p.judged(golden)  # the run's own score decides a reduced precision (tf32 on the GPU)
    shared = neighbours.warning()
    manifest = _manifest(p, sut, detail, staging, result, notes, measured)
    manifest["shared_cores"] = [neighbours.seen[pid] for pid in sorted(neighbours.seen)]
    manifest["native_log"] = native
    manifest["precision_eligibility"] = dict(zip(("eligible", "why"), verdict, strict=True))
    run_manifest.write(staging, manifest)
    final = folder.commit()
    return RunOutcome(p.bench.name, req.scenario, req.mode, final, perf, accuracy_text, submission_length,
                      synthetic, tuple(notes), (shared,) if shared else (),
                      energy=measured.energy if perf is not None else None,
                      host_nms=measured.host_nms if perf is not None else None, not_submittable=p.refusal(verdict))


def _notes(p: RunPlan, sut: SystemUnderTest, min_ms: int, submission_length: bool) -> list[str]:
    """What the summary table says about how far this run is from a submission run."""
    model, data, cards = p.model, p.data, p.cards
    notes = []
    if not submission_length:
        notes.append(f"shortened run (min_duration {min_ms} ms < {SUBMISSION_MIN_DURATION_MS} ms): "
                     f"not submission-length")
    if model.synthetic:
        notes.append("synthetic model weights (seeded): accuracy is not the real model's")
    if model.precision != "fp32":
        notes.append(f"{model.precision} model: {p.eligibility[1]} (at prepare)")
    if not model.synthetic and not model.official_artefact:
        notes.append("model is not a verified official artefact (unknown digest)")
    if data.synthetic:
        notes.append("synthetic dataset")
    if cards.backend.device == "none":
        notes.append(f"{cards.backend.name} backend: no inference was done; measures the harness only")
    if cards.profile is not None:
        notes.append(f"SIMULATED cards ({len(cards.slots)} x {cards.profile.name}): modelled latency, no inference")
    elif any(c.emulated for c in sut.cards):
        notes.append("CPU-emulated card(s)")
    notes.extend(f"{why}; its samples were re-dispatched to the other cards" for why in sut.card_failures)
    return notes


def _score(p: RunPlan, staging: Path) -> tuple[str, dict[str, Any], float | None]:
    """An accuracy run's score against the dataset (and the golden reference where there is one), and the golden
    percentage (None: no golden reference)."""
    bench, data = p.bench, p.data
    log = staging / "mlperf_log_accuracy.json"
    score = bench.accuracy.score(log, data, "dataset")
    assert score is not None
    digest = sha256_file(log)
    atomic_write_text(staging / "accuracy.txt", f"{score.line}\nhash={digest}\n")
    text = f"{bench.quality_metric} {score.percent:.3f}% (target {bench.quality_target:.3f}%)"
    result = {score.key: score.percent, **score.details, "hash": digest}
    gold = bench.accuracy.score(log, data, "golden")
    if gold is not None:
        text += f"; golden {gold.percent:.2f}%"
        result[f"golden_{gold.key}"] = gold.percent
        atomic_write_text(staging / "accuracy_golden.txt",
                          f"{gold.line}\n# against the golden reference of an FP32 onnxruntime pass of the "
                          f"FP32 model (sha256 {data.golden_model})\n")
    return text, result, None if gold is None else gold.percent


def _manifest(p: RunPlan, sut: SystemUnderTest, detail: dict[str, Any], staging: Path, result: dict[str, Any],
              notes: list[str], measured: Measured) -> dict[str, Any]:
    """Everything the result depends on, so an auditor can re-run it and explain a difference."""
    opts, bench, model, data, cards = p.opts, p.bench, p.model, p.data, p.cards
    req = opts.requested
    stats = sut.stats()
    return {
        "appliance": appliance_info(),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": sys.argv,
        "benchmark": bench.name, "scenario": req.scenario, "mode": req.mode,
        "requested": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(req).items()},
        "batch_size": sut.batch_size, "backend": opts.record.name, "requests_per_card": cards.requests,
        "card_outputs": bench.card_outputs,
        "backend_choice": p.choice.to_json(),
        "model": {"path": model.path, "sha256": model.sha256, "md5": model.md5, "synthetic": model.synthetic,
                  "seed": model.seed, "official_artefact": model.official_artefact, "params": model.params,
                  "macs_per_sample": model.macs_per_sample},
        "precision": model.precision, "quantization": model.quantization,
        "inference_precision": model.inference_precision or "fp32",
        "dataset": {"path": str(data.root), "count": data.count, "synthetic": data.synthetic,
                    "manifest_sha256": sha256_file(data.root / store.MANIFEST),
                    "shards": {e["file"]: e["sha256"] for e in data.manifest["shards"]}},
        "configs": {name: sha256_file(staging / name) for name in ("user.conf", "mlperf.conf")},
        "cards": [{"index": c.index, "backend": c.backend, "device": c.device, "cpus": list(c.cpus),
                   "numa_node": slot.node, "emulated": c.emulated, "simulated": c.simulated,
                   "samples_completed": w.samples_completed, "batches_in_flight": w.depth, **c.details}
                  for c, slot, w in zip(sut.cards, cards.slots, stats.cards, strict=True)],
        "card_map": {"spec": opts.cards, "how": cards.how, "backend": cards.backend.name},
        "sample_buffers": {"replicate": opts.replicate, "replicas": [r.describe() for r in sut.qsl.replicas],
                           "staging": buffers.STAGING_RULE},
        "dispatch": {"queue_depth_batches": sut.queue_depth, "scenario": req.scenario,
                     "server_max_wait_us": round(stats.batching.max_wait_s * 1e6, 1)
                     if stats.batching is not None and stats.batching.server else None,
                     "keep_warm": opts.keep_warm, "backlogged_batches": stats.backlogged,
                     "redispatched_samples": stats.redispatched,
                     "card_failures": list(stats.card_failures)},
        "host": {"cpu_model": system.cpu_model(), "available_cpus": list(system.available_cpus()),
                 "image_digest": environment.raw("APPLIANCE_IMAGE_DIGEST"), "image": system.image_identity(),
                 "nvidia": gpu.host_facts(), "node": node_facts.facts(system.available_cpus())},
        "packages": system.package_versions(),
        "loadgen": {"version": loadgen_version(),
                    "seeds": {k: detail.get(f"effective_{k}") for k in
                              ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")}},
        "synthetic": {"weights": bool(model.synthetic), "data": data.synthetic, "cards": _card_kind(sut, cards),
                      "any": bool(model.synthetic or data.synthetic)},
        "result": result, "notes": notes, "energy": measured.energy,
        **({"host_postprocess": measured.host_nms} if measured.host_nms is not None else {}),
    }


def _card_kind(sut: SystemUnderTest, cards: CardPlan) -> str:
    if cards.profile is not None:
        return f"SIMULATED ({cards.profile.name})"
    if cards.backend.device == "none":
        return f"{cards.backend.name} (no inference)"
    return "cpu-emulated" if any(c.emulated for c in sut.cards) else "accelerator"


def write_json_summary(outcomes: list[RunOutcome]) -> str:
    return json.dumps([o.to_json() for o in outcomes], indent=2, sort_keys=True)
