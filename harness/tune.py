"""`appliance tune`: a short sweep of backends x batch sizes, timed by the SUT's own calibration.

Each candidate is the real card set of a run (same card plan, sample buffers and backend) started
and timed by `runner.calibrate`, the warm-up timing every performance run already does (best of two
batches, best of two single samples). The choice per scenario goes to a record (harness.tuned) that
`appliance run --tuned` / `--backend auto` reads, and the speeds to a LoadGen user.conf.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import benchmarks, integrity, progress, system, tuned
from harness.datasets import store
from harness.errors import ApplianceError
from harness.fsutil import atomic_write_text, ensure_writable_dir
from harness.loadgen_settings import Calibration, calibrated_setting
from harness.plan import plan_cards
from harness.prepare import Layout, model_bench, read_model_record
from harness.runner import calibrate, make_sut
from harness.scenarios import Scenario

CPU_BACKENDS = ("onnxruntime", "openvino")  # what a CPU-only machine can run (tested here)
DEFAULT_SCENARIOS = (Scenario.OFFLINE, Scenario.SERVER)


@dataclass(frozen=True)
class Measured:
    backend: str
    batch_size: int
    samples_per_second: float     # all cards together
    single_latency_ms: float      # one sample on one card
    batch_latency_ms: float       # one full batch on the fastest card
    multistream_latency_ms: float


def available_backends() -> tuple[str, ...]:
    return tuple(b for b in CPU_BACKENDS if importlib.util.find_spec(b) is not None)


def _measure(bench: benchmarks.Benchmark, data: store.PreparedData, model_path: Path, backend: str, batch: int,
             cards: str) -> Measured:
    from harness.topology import detect

    sut = make_sut(bench, data, plan_cards(cards, backend, bench.name, detect()), model_path, batch, Scenario.OFFLINE)
    sut.load_cards()
    try:
        cal = calibrate(sut, timed=True)
    finally:
        sut.stop()
    assert cal is not None
    return Measured(backend, batch, round(cal.samples_per_second, 3), round(cal.single_latency_ms, 3),
                    round(cal.multistream_latency_ms / math.ceil(8 / batch), 3),
                    round(cal.multistream_latency_ms, 3))


def choose(bench: benchmarks.Benchmark, scenario: Scenario, rows: list[Measured]) -> tuple[Measured, str]:
    """The candidate for `scenario`, and why in one line."""
    if scenario == Scenario.OFFLINE:
        best = max(rows, key=lambda m: m.samples_per_second)
        return best, f"highest throughput ({best.samples_per_second:g} samples/s)"
    if scenario == Scenario.SERVER:
        bound = bench.server_latency_ms
        if bound is None:  # tune() refuses Server for edge benchmarks before measuring
            raise ApplianceError(f"{bench.name} is an edge benchmark: no Server scenario")
        fits = [m for m in rows if m.batch_latency_ms <= bound / 2]  # half the bound: room to queue
        if fits:
            best = max(fits, key=lambda m: m.samples_per_second)
            return best, (f"highest throughput ({best.samples_per_second:g} samples/s) with a batch within half "
                          f"the {bound} ms bound ({best.batch_latency_ms:g} ms)")
        best = min(rows, key=lambda m: m.batch_latency_ms)
        return best, (f"no batch within half the {bound} ms bound: the shortest batch ({best.batch_latency_ms:g} ms)"
                      + ("; Server cannot meet its bound here" if best.batch_latency_ms > bound else ""))
    if scenario == Scenario.SINGLE_STREAM:
        best = min(rows, key=lambda m: (m.single_latency_ms, m.batch_size))
        best = Measured(**{**asdict(best), "batch_size": 1})  # one sample per query: the batch is 1
        return best, f"lowest single-sample latency ({best.single_latency_ms:g} ms)"
    best = min(rows, key=lambda m: m.multistream_latency_ms)
    return best, f"lowest latency for 8 samples ({best.multistream_latency_ms:g} ms)"


def user_conf_text(bench: benchmarks.Benchmark, precision: str, chosen: dict[Scenario, tuple[Measured, str]]) -> str:
    lines = [f"# appliance tune: {bench.name} {precision} on {system.cpu_model()}, "
             f"{datetime.now(UTC).isoformat(timespec='seconds')}"]
    for scenario, (m, why) in chosen.items():
        key, value, rule = calibrated_setting(scenario, Calibration(m.samples_per_second, m.single_latency_ms,
                                                                    m.multistream_latency_ms), None)
        lines += [f"# {scenario}: {m.backend}, batch {m.batch_size}: {why}; {rule}",
                  f"{bench.name}.{scenario}.{key} = {value}"]
    return "\n".join(lines) + "\n"


def tune(benchmark: str, data_dir: Path, scenarios: tuple[Scenario, ...], batches: tuple[int, ...],
         backends: tuple[str, ...], precision: str, cards: str, output: Path | None) -> tuple[Path, dict[str, Any]]:
    """Sweep, choose, write user.conf then the record (each atomically); return the record's path and it."""
    bench = benchmarks.get(benchmark)
    if bench.server_latency_ms is None and Scenario.SERVER in scenarios:
        raise ApplianceError(f"{bench.name} is an edge benchmark: no Server scenario to tune")
    have = available_backends()
    missing = [b for b in backends if b not in have]
    if missing or not backends:
        raise ApplianceError(f"backend(s) {', '.join(missing) or '(none)'} not available here; choose from: "
                             f"{', '.join(have) or 'none installed (pip install onnxruntime)'}")
    layout = Layout(data_dir, bench)
    model = read_model_record(layout, precision)
    bench = model_bench(bench, model)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(data_dir))
    integrity.refuse_mismatches(integrity.verify_loaded(model, data), bench.prepare_hint(data_dir))
    path = output or tuned.default_path(data_dir, bench.name, precision)
    ensure_writable_dir(path.parent, "tuned record folder")
    rows: list[Measured] = []
    with progress.bar(len(backends) * len(batches), "tune", unit="config") as bar:
        for backend in backends:
            for batch in batches:
                bar.set_postfix_str(f"{backend} batch {batch}", refresh=True)
                rows.append(_measure(bench, data, Path(model["path"]), backend, batch, cards))
                bar.update()  # the rows are printed once, in the summary table
    chosen = {s: choose(bench, s, rows) for s in scenarios}
    conf = path.with_suffix(".user.conf")
    atomic_write_text(conf, user_conf_text(bench, precision, chosen))
    record = tuned.TunedRecord(
        benchmark=bench.name, precision=precision, cards=cards,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        host={"cpu_model": system.cpu_model(), "available_cpus": list(system.available_cpus())},
        method="runner.calibrate: warm-up timing of the run's own cards, best of 2 batches",
        user_conf=conf.name, measured=[asdict(m) for m in rows],
        chosen={s: tuned.Choice(m.backend, m.batch_size, why) for s, (m, why) in chosen.items()})
    tuned.write(path, record)
    return path, record.to_json()


def summary(record: dict[str, Any]) -> str:
    lines = [f"{'backend':12s} {'batch':>5s} {'samples/s':>10s} {'batch ms':>9s} {'single ms':>9s}"]
    lines += [f"{m['backend']:12s} {m['batch_size']:5d} {m['samples_per_second']:10.2f} {m['batch_latency_ms']:9.2f} "
              f"{m['single_latency_ms']:9.2f}" for m in record["measured"]]
    lines.append("")
    lines += [f"{s:12s} -> {c['backend']}, batch {c['batch_size']}: {c['why']}" for s, c in record["chosen"].items()]
    return "\n".join(lines)
