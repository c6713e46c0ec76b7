"""`appliance reproduce`: an auditor re-runs a results tree and compares, row by row.

Reads our results tree or any tree in the official submission layout (either round layout, either scenario
spelling), re-hashes the local artefacts (model file, dataset shards) against the local record and the
tree's manifest, re-runs every benchmark/scenario with the recorded user.conf, and writes
reproduce_report.md / .json, always, in one rename.

Each row is PASS, FAIL, or NOT REPRODUCIBLE with its reasons; a PASS of a tree whose run had simulated (or
null) cards is PASS (SIMULATED), one with synthetic weights or data PASS (SYNTHETIC), with the caveat named:
- FAIL: a local artefact's bytes differ from its record or from the tree's manifest (the file is named);
  or the re-run's metric is outside the tolerance when nothing made the comparison unfair.
- NOT REPRODUCIBLE: the tree's run manifest is damaged; a simulated run whose profile is not here (a
  simulated run is re-run only with its simulated cards, never on this host's CPUs); the comparison cannot
  be fair here: synthetic local model/data vs the tree's real ones,
  different hardware (the tree's systems/*.json against this host), a shortened or INVALID re-run, a
  metric of another kind, a benchmark not prepared here (with the command to prepare it), one the
  appliance does not run. A failing row never stops the others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from harness.audit.submission.rounds import SCENARIO_SPELLINGS
from harness.core import inbound
from harness.core.errors import ApplianceError, Interrupted, stopped_by
from harness.core.fsutil import sha256_file
from harness.core.outbound import (
    atomic_write_json,
    atomic_write_text,
    check_new_folder,
    ensure_writable_dir,
    staged_new_dir,
)
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks, integrity
from harness.hw import system
from harness.records import detail_log, store
from harness.records import manifest as run_manifest
from harness.records.benchmark_record import Benchmark
from harness.records.detail_log import METRICS, PERCENTILE_FALLBACK, Detail
from harness.records.layout import PRECISIONS, Layout, read_model_record
from harness.records.manifest import RunManifest
from harness.records.model_record import ModelRecord
from harness.records.readers import read_json_object, read_text
from harness.records.store import PreparedManifest
from harness.run.cards import backends
from harness.run.cards.backends import Backend
from harness.run.loadgen_settings import Requested, loadgen_version
from harness.run.runner import RunOptions, RunOutcome, latest_run, run

PASS, FAIL, UNREPRODUCIBLE = "PASS", "FAIL", "NOT REPRODUCIBLE"
# a pass that reproduced no real hardware: the tree's run had simulated (or null) cards, or synthetic
# weights / data; `caveat` says which. Each counts as a pass for the exit code: the verdict word says what it is
PASS_SIMULATED, PASS_SYNTHETIC = "PASS (SIMULATED)", "PASS (SYNTHETIC)"
PASSES = (PASS, PASS_SIMULATED, PASS_SYNTHETIC)
Echo = Callable[[str], None]


@dataclass
class Row:
    benchmark: str
    scenario: Scenario
    kind: Mode
    recorded: str = "-"
    reproduced: str = "-"
    verdict: str = UNREPRODUCIBLE
    notes: list[str] = field(default_factory=list)     # what was done and seen
    reasons: list[str] = field(default_factory=list)   # why NOT REPRODUCIBLE / FAIL
    user_conf: str = "-"
    caveat: str = ""  # for PASS (SIMULATED) / PASS (SYNTHETIC): what was not reproduced


@dataclass(frozen=True)
class Target:
    """One benchmark/scenario folder of the tree to reproduce."""

    folder: Path
    benchmark: str
    scenario: Scenario


def parse_tolerance(text: str) -> float:
    """5% or 0.05, in ASCII (float() also takes '٥' and ' 5_0')."""
    try:
        number = text[:-1] if text.endswith("%") else text
        if not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", number):
            raise ValueError(text)
        value = float(number) / 100 if text.endswith("%") else float(number)
    except ValueError:
        raise ApplianceError(f"--tolerance {text!r} is not a number or a percentage such as 5%") from None
    if not 0 <= value < 1:
        raise ApplianceError(f"--tolerance {text!r} must be between 0% and 100%")
    return value


def find_targets(tree: Path) -> list[Target]:
    """Scenario folders (`Offline/` or `offline/`) under <benchmark>/ holding performance/ or accuracy/;
    compliance (TEST0x) and measurements/ copies are not targets. Links are not followed."""
    if not tree.is_dir():
        raise ApplianceError(f"{tree} is not a folder; pass a results tree or a submission folder")
    found: list[Target] = []
    for top, dirs, _ in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "TEST0")) and d not in ("measurements", "compliance")
                         and not os.path.islink(os.path.join(top, d)))
        folder = Path(top)
        scenario = SCENARIO_SPELLINGS.get(folder.name)
        if scenario and ("performance" in dirs or "accuracy" in dirs):
            found.append(Target(folder, folder.parent.name, scenario))
    if not found:
        raise ApplianceError(f"no <benchmark>/<scenario>/performance or accuracy folders under {tree} "
                             f"(scenario folders are named Offline, Server, SingleStream, MultiStream, "
                             f"in either case)")
    return found


def _submitter_of(target: Target) -> tuple[Path, str] | None:
    """(submitter folder, system name) for a target at <sub>/results/<system>/<benchmark>/<scenario>."""
    parents = target.folder.parents
    if len(parents) >= 4 and parents[2].name == "results":
        return parents[3], parents[1].name
    return None


def find_user_conf(target: Target, run_dir: Path | None) -> tuple[Path | None, str]:
    """The recorded user.conf and where it was found: the run, the scenario folder (v6.0+ layout and our own
    trees), or measurements/<system>/<benchmark>/<scenario>/ (pre-v6.0 layout)."""
    if run_dir is not None and (run_dir / "user.conf").is_file():
        return run_dir / "user.conf", "beside the performance run"
    if (target.folder / "user.conf").is_file():
        return target.folder / "user.conf", "in the scenario folder (v6.0+ layout)"
    where = _submitter_of(target)
    if where is not None:
        sub, system_name = where
        conf = sub / "measurements" / system_name / target.benchmark / target.folder.name / "user.conf"
        if conf.is_file():
            return conf, "in measurements/ (pre-v6.0 layout)"
    return None, "none in the tree: the re-run used the appliance's defaults"


def hardware_differences(target: Target, manifest: RunManifest | None) -> list[str]:
    """How the tree's hardware differs from this host: its systems/<system>.json, else its run manifest."""
    here_cpu = system.cpu_model()
    out: list[str] = []
    where = _submitter_of(target)
    sys_json = None
    if where is not None:
        sub, system_name = where
        path = sub / "systems" / f"{system_name}.json"
        if path.is_file():
            sys_json = read_json_object(path, str(path), lambda _: None)
    if sys_json is not None:
        from harness.audit.submission.system_json import detect_host

        host = detect_host()
        cpu = sys_json.get("host_processor_model_name")
        if isinstance(cpu, str) and cpu and not _same_cpu(cpu, here_cpu):
            out.append(f"CPU: the tree's {cpu!r}, here {here_cpu!r}")
        for key, here in (("host_processors_per_node", host["packages"]),
                          ("host_processor_core_count", host["cores_per_package"])):
            value = _as_int(sys_json.get(key))
            if value is not None and value != here:
                out.append(f"{key}: the tree's {value}, here {here}")
        accel, count = sys_json.get("accelerator_model_name"), _as_int(sys_json.get("accelerators_per_node"))
        if count and isinstance(accel, str) and accel.strip().upper() not in ("", "N/A", "NONE") \
                and "emulated" not in accel.lower():
            out.append(f"accelerators: the tree's {count} x {accel}; here the cards are this host's "
                       f"(or CPU-emulated)")
    elif manifest is not None:
        cpu, cpus = manifest.host.cpu_model, manifest.host.available_cpus
        if cpu is not None and not _same_cpu(cpu, here_cpu):
            out.append(f"CPU: the tree's {cpu!r}, here {here_cpu!r}")
        if cpus and len(cpus) != len(system.available_cpus()):
            out.append(f"CPU count: the tree's {len(cpus)}, here {len(system.available_cpus())}")
    else:
        out.append("the tree has neither systems/<system>.json nor a run manifest: its hardware is unknown")
    return out


def _same_cpu(a: str, b: str) -> bool:
    norm = [re.sub(r"\s+", " ", s).strip().lower() for s in (a, b)]
    return norm[0] == norm[1] or norm[0] in norm[1] or norm[1] in norm[0]


def _as_int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and inbound.is_digits(v.strip()):
        return int(v.strip())
    return None


class Artefacts:
    """Re-hashes a benchmark's local model file and dataset shards once per reproduce call."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._cache: dict[str, tuple[ModelRecord, PreparedManifest, list[str]]] = {}

    def check(self, bench: Benchmark,
              precision: str = "fp32") -> tuple[ModelRecord, PreparedManifest, list[str]]:
        """(model record of `precision`, dataset manifest, files whose bytes differ from their local record).
        Raises ApplianceError (with the command to prepare it) when the benchmark is not prepared here."""
        key = f"{bench.name}/{precision}"
        if key not in self._cache:
            layout = Layout(self.data_dir, bench)
            record = read_model_record(layout, precision)
            data = store.open_prepared(layout.preprocessed, bench.prepare_hint(self.data_dir))
            bad = [m.line() for m in integrity.verify_loaded(record, data)]
            self._cache[key] = (record, data.manifest, bad)
        return self._cache[key]


def _tree_mismatches(manifest: RunManifest, record: ModelRecord, data_manifest: PreparedManifest,
                     run_dir: Path) -> list[str]:
    """Where the tree's manifest names other artefacts than the local ones (FAIL), file by file."""
    bad = []
    digest = manifest.model.sha256
    if digest != record.sha256:
        bad.append(f"{record.path}: sha256 {record.sha256[:16]}… here, the tree's run used "
                   f"{digest[:16]}…")
    shards = manifest.dataset.shards
    local = {e["file"]: e["sha256"] for e in data_manifest["shards"]}
    if shards is not None:
        for name in sorted(set(shards) | set(local)):
            if shards.get(name) != local.get(name):
                bad.append(f"dataset shard {name}: " + ("not in the tree's run" if name not in shards else
                                                        "absent here" if name not in local else
                                                        "its sha256 differs from the tree's run"))
    for name, digest in manifest.configs.items():
        if name not in ("user.conf", "mlperf.conf"):
            continue  # a digest of another name is not a file of the run to check
        path = run_dir / name
        if path.is_file() and sha256_file(path) != digest:
            bad.append(f"{path}: does not match the digest in its manifest")
    return bad


def _synthetic_reasons(manifest: RunManifest | None, record: ModelRecord,
                       data_manifest: PreparedManifest) -> list[str]:
    tree_weights = manifest.synthetic.weights if manifest is not None else False  # no manifest: real
    tree_data = manifest.synthetic.data if manifest is not None else False
    out = []
    if record.synthetic and not tree_weights:
        out.append("the local model has synthetic (seeded) weights, the tree's run used real ones")
    if data_manifest.get("synthetic") and not tree_data:
        out.append("the local dataset is synthetic, the tree's run used the real one")
    return out


def _host_notes(manifest: RunManifest) -> list[str]:
    local_pkgs = system.package_versions()
    notes = [f"{k} {v} recorded, {local_pkgs.get(k)} here" for k, v in manifest.packages.items()
             if local_pkgs.get(k) != v]
    version = manifest.loadgen.version
    if version not in (None, loadgen_version()):
        notes.append(f"LoadGen {version} recorded, {loadgen_version()} here")
    return notes


class Placement(TypedDict, total=False):
    """The recorded run options a re-run passes on to `RunOptions` (a key absent: RunOptions' default)."""
    precision: str
    cards: str
    replicate: str
    card_outputs: str
    requests: int
    keep_warm: bool


def _recorded_placement(manifest: RunManifest, notes: list[str]) -> Placement:
    """The recorded --cards, --replicate, --card-outputs, --requests and --keep-warm, adapted to this host where
    the recorded map file is absent."""
    spec = manifest.card_map.spec
    out: Placement = {}
    if spec:
        parts = spec.split(":")
        simulate = parts[0] == "simulate" and len(parts) == 3
        path = parts[1] if simulate else spec
        if path.endswith((".yaml", ".yml")) and not Path(path).is_file():
            if simulate:  # no cards instead: `_recorded` refuses a simulated run without its simulated cards
                return out
            notes.append(f"recorded card map {path} is not on this host: cards detected here instead (auto)")
            spec = "auto"
        out["cards"] = spec
    replicate = manifest.sample_buffers.get("replicate")
    if isinstance(replicate, str) and replicate in ("node", "card", "none"):  # `run --replicate`'s choices
        out["replicate"] = replicate
    out["card_outputs"] = manifest.card_outputs
    if manifest.requests_per_card is not None and manifest.requests_per_card > 1:
        out["requests"] = manifest.requests_per_card
    if manifest.dispatch.keep_warm:
        out["keep_warm"] = True
    return out


def _card_map_differences(manifest: RunManifest, new_run: Path) -> list[str]:
    new = run_manifest.read(new_run)  # the appliance's own run, just written
    old_map = [list(c.cpus) for c in manifest.cards]
    new_map = [list(c.cpus) for c in new.cards]
    return [] if old_map == new_map else [f"card-to-core map differs: recorded {old_map}, here {new_map}"]


def recorded_metric(d: Detail, scenario: Scenario) -> tuple[float | None, str]:
    """The recorded metric and its kind ("early stopping", "90th percentile", …), via the typed reader."""
    key, unit = METRICS[scenario]
    kind = "early-stopping estimate" if unit == "ms" else "throughput"
    raw = d.raw(key)
    if not raw and scenario in PERCENTILE_FALLBACK:
        key, kind = PERCENTILE_FALLBACK[scenario], PERCENTILE_FALLBACK[scenario].split("_")[1] + " percentile"
    if not d.has(key):
        return None, kind
    value = d.number(key)
    if value is not None and unit == "ms":
        value /= 1e6
    return value, kind


def reproduce(tree: Path, data_dir: Path, out: Path, tolerance: float, echo: Echo = print,
              duration_ms: int | None = None) -> list[Row]:
    """Re-run every target of `tree`; write the report into `out` (staged, never overwriting)."""
    check_new_folder(out, "reproduce", "-o", example="audit", what="the audit (its report and re-runs)",
                     reads=[tree])
    targets = find_targets(tree)
    ensure_writable_dir(out.parent, "the report's folder")  # before any re-run, not after them
    rows: list[Row] = []
    artefacts = Artefacts(data_dir)
    jobs = [(t, kind, job) for t in targets
            for kind, job in ((Mode.PERFORMANCE, _reproduce_perf), (Mode.ACCURACY, _reproduce_accuracy))
            if (t.folder / kind).is_dir()]
    with staged_new_dir(out, f"reproduce -o {out}") as work:
        for k, (t, kind, job) in enumerate(jobs, 1):
            row = Row(t.benchmark, t.scenario, kind)
            echo(f"re-running {t.benchmark} {t.scenario} {kind} ...")  # its verdict is printed once, at the end
            try:
                job(row, t, artefacts, work, tolerance, duration_ms)
            except (Interrupted, KeyboardInterrupt) as exc:  # the whole reproduce stops, not just this row
                raise Interrupted(f"reproduce {stopped_by(exc)} during {t.benchmark} {t.scenario} {kind} (row {k} of "
                                  f"{len(jobs)}); no report was written and its re-runs were removed",
                                  exc) from None
            except ApplianceError as exc:
                row.verdict = UNREPRODUCIBLE
                row.reasons.append(f"re-run not possible: {exc}")
            except Exception as exc:  # one row's failure never loses the others' results
                row.verdict = UNREPRODUCIBLE
                row.reasons.append(f"re-run failed ({type(exc).__name__}: {exc})")
            rows.append(row)
        for r in rows:  # name the new logs where they will be once the report folder is renamed
            r.notes = [n.replace(str(work), str(out)) for n in r.notes]
        verdict = overall(rows)
        report = {"tree": str(tree), "tolerance": tolerance, "host": system.cpu_model(),
                  "rows": [asdict(r) for r in rows], "verdict": verdict}
        atomic_write_json(work / "reproduce_report.json", report)
        atomic_write_text(work / "reproduce_report.md", _markdown(tree, tolerance, rows, verdict))
    return rows


def overall(rows: list[Row]) -> str:
    """The report's verdict: the weakest kind of pass when every row passed, else FAIL or NOT REPRODUCIBLE."""
    if rows and all(r.verdict in PASSES for r in rows):
        return next((v for v in (PASS_SIMULATED, PASS_SYNTHETIC) if any(r.verdict == v for r in rows)), PASS)
    return FAIL if any(r.verdict == FAIL for r in rows) else UNREPRODUCIBLE


def _bench_or_reason(row: Row, t: Target) -> Benchmark | None:
    name = benchmarks.of_folder(t.benchmark)
    if name not in benchmarks.NAMES:
        row.reasons.append(f"the appliance does not run {t.benchmark!r} (it runs {', '.join(benchmarks.NAMES)})")
        return None
    return benchmarks.get(name)


def _prepared_or_reason(row: Row, bench: Benchmark, artefacts: Artefacts,
                        precision: str) -> tuple[ModelRecord, PreparedManifest] | None:
    """Local model record (of the precision the tree's run used) and data manifest; None with the reason
    (and the command) when not prepared."""
    try:
        record, data_manifest, bad = artefacts.check(bench, precision)
    except ApplianceError as exc:
        row.reasons.append(f"benchmark not prepared here: {exc}")
        return None
    if bad:
        row.verdict = FAIL
        row.reasons += bad
        return None
    return record, data_manifest


@dataclass(frozen=True)
class Recorded:
    """What a target's run says a re-run needs, once its benchmark is prepared here and the tree's manifest
    names the same artefacts as the local ones."""

    bench: Benchmark
    manifest: RunManifest | None
    backend: Backend            # the record of the backend the tree's run used
    batch: int | None
    placement: Placement        # the recorded --precision / --cards / --replicate / --card-outputs / --requests /
                                # --keep-warm
    unfair: list[str]           # why the comparison cannot be fair: synthetic here, real in the tree
    caveat: str                 # what a pass does not show: simulated cards, synthetic weights / data ("" if none)

    def passed(self, row: Row) -> None:
        """The row passed: PASS, or the kind of pass its caveat makes it."""
        row.verdict = PASS if not self.caveat else PASS_SIMULATED if "cards" in self.caveat else PASS_SYNTHETIC
        row.caveat = self.caveat

    def rerun(self, row: Row, requested: Requested, artefacts: Artefacts, work: Path, *, batch: bool) -> RunOutcome:
        """Run the target again here with the recorded options (and batch size when `batch`)."""
        outcome = run(RunOptions(self.bench.name, requested, artefacts.data_dir, work / "runs", backend=self.backend,
                                 batch_size=self.batch if batch else None, **self.placement), echo=lambda m: None)
        row.notes.append(f"new logs: {outcome.path}")
        row.notes += [f"warning: {w}" for w in outcome.warnings]  # e.g. other runs on its cores meanwhile
        return outcome


def _recorded(row: Row, t: Target, artefacts: Artefacts, run_dir: Path) -> Recorded | None:
    """The preamble both kinds of row share: the benchmark, the local artefacts, the tree's manifest in
    `run_dir` against them. None when the row cannot go on; its reasons (and a FAIL verdict for artefacts
    that differ) are then set."""
    bench = _bench_or_reason(row, t)
    if bench is None:
        return None
    sink: list[str] = []
    manifest = run_manifest.read_lenient(run_dir, sink.append)
    if manifest is None and (run_dir / "manifest.json").exists():
        row.reasons.append(f"the tree's run manifest is damaged ({'; '.join(sink) or 'unreadable'}): what the run "
                           f"used (cards, backend, batch) is unknown, so it is not re-run")
        return None
    simulated = _simulated_cards(manifest, run_dir)
    precision = manifest.precision if manifest is not None else "fp32"
    if precision not in PRECISIONS:
        row.reasons.append(f"the tree's run used precision {precision!r}, which this appliance does not prepare")
        return None
    prepared = _prepared_or_reason(row, bench, artefacts, precision)
    if prepared is None:
        return None
    record, data_manifest = prepared
    backend = backends.default()
    batch: int | None = None
    placement: Placement = {"precision": precision}
    if manifest is None:
        row.notes.append("no manifest.json in the tree: its artefacts cannot be compared with the local ones")
    else:
        mismatch = _tree_mismatches(manifest, record, data_manifest, run_dir)
        if mismatch:
            row.verdict = FAIL
            row.reasons += mismatch
            return None
        if manifest.backend:  # a name in a document: one this appliance has no record of is a reason, not a KeyError
            named = backends.RECORDS.get(manifest.backend)
            if named is None:
                row.reasons.append(f"the tree's run used backend {manifest.backend!r}, which this appliance does not "
                                   f"have ({', '.join(backends.RECORDS)})")
                return None
            backend = named
        batch = manifest.batch_size or None
        placement = {**placement, **_recorded_placement(manifest, row.notes)}
        row.notes += _host_notes(manifest)
    if simulated is not None and not str(placement.get("cards", "")).startswith("simulate:") \
            and not backend.harness_only:
        row.reasons.append(f"the tree's run used {simulated} cards and {_profile_missing(manifest)}: a simulated run "
                           f"is re-run only with the same simulated cards, never on this host's CPUs")
        return None
    return Recorded(bench, manifest, backend, batch, placement, _synthetic_reasons(manifest, record, data_manifest),
                    _caveat(simulated, manifest))


def _simulated_cards(manifest: RunManifest | None, run_dir: Path) -> str | None:
    """How the tree's run names its cards when they did no inference ("SIMULATED (cloud-ai-100)", "null (no
    inference)"), from its manifest, else its SIMULATED.txt or user.conf header; None for real cards."""
    if manifest is not None:
        cards = manifest.synthetic.cards
        if cards is not None and cards.startswith(("SIMULATED", "null")):
            return cards
        record = backends.RECORDS.get(manifest.backend or "")  # a name in a document: unknown ones are no stand-in
        if record is not None and not record.infers:
            return f"{record.name} (no inference)"
    conf = run_dir / "user.conf"
    header = (read_text(conf, str(conf), lambda _: None, limit=200) or "") if conf.is_file() else ""
    return "SIMULATED" if (run_dir / "SIMULATED.txt").is_file() or header.startswith("# SIMULATED") else None


def _profile_missing(manifest: RunManifest | None) -> str:
    if manifest is None:
        return "the tree has no manifest naming their profile"
    return f"its recorded cards ({manifest.card_map.spec!r}) are not a simulated profile found here"


def _caveat(simulated: str | None, manifest: RunManifest | None) -> str:
    """What a pass of this row does not show, for its verdict: "" when the tree's run was real."""
    syn = manifest.synthetic if manifest is not None else None
    parts = [f"{simulated} cards"] if simulated else []
    synthetic = [k for k, on in (("weights", syn and syn.weights), ("data", syn and syn.data)) if on]
    if synthetic:
        parts.append(f"synthetic {' and '.join(synthetic)}")
    if not parts:
        return ""
    return ", ".join(parts) + (": nothing was reproduced on real hardware" if simulated else
                               ": the real model's results were not reproduced")


def _reproduce_perf(row: Row, t: Target, artefacts: Artefacts, work: Path, tolerance: float,
                    duration_ms: int | None) -> None:
    run_dir = latest_run(t.folder / "performance")
    if run_dir is None:
        row.reasons.append(f"no finished run_N (with mlperf_log_detail.txt) in {t.folder / 'performance'}")
        return
    sink: list[str] = []
    recorded = detail_log.read(run_dir / "mlperf_log_detail.txt", str(run_dir / "mlperf_log_detail.txt"), sink.append)
    if recorded is None or recorded.garbled:  # a cut or edited record: what the run measured is not known
        row.reasons += sink
        return
    rec_metric, rec_kind = recorded_metric(recorded, t.scenario)
    unit = METRICS[t.scenario][1]
    row.recorded = f"{rec_metric:.3f} {unit}" if rec_metric is not None else "-"
    user_conf, conf_where = find_user_conf(t, run_dir)
    row.user_conf = f"{user_conf} ({conf_where})" if user_conf else conf_where
    rec = _recorded(row, t, artefacts, run_dir)
    if rec is None:
        return
    unfair = rec.unfair + hardware_differences(t, rec.manifest)
    rec_min = recorded.raw("effective_min_duration_ms")
    if duration_ms is not None and isinstance(rec_min, int) and duration_ms < rec_min:
        unfair.append(f"re-run shortened: --duration-ms {duration_ms}, the tree's run had {rec_min} ms")
    requested = Requested(t.scenario, Mode.PERFORMANCE, duration_ms=duration_ms, user_conf=user_conf)
    outcome = rec.rerun(row, requested, artefacts, work, batch=True)
    if rec.manifest is not None:
        row.notes += _card_map_differences(rec.manifest, outcome.path)
    perf = outcome.perf
    new = perf.metric if perf else None
    row.reproduced = f"{new:.3f} {unit}" if new is not None else "-"
    if perf is not None and not perf.valid:
        why = "; ".join(perf.reasons) or "LoadGen gave no reason"
        if recorded.raw("result_validity") == "VALID":
            unfair.append(f"the re-run is INVALID ({why}), the tree's run was VALID")
        else:
            row.notes.append(f"the re-run is INVALID ({why}), as the tree's run was: like compared with like")
    new_kind = (perf.estimate or "throughput") if perf is not None else None
    if new_kind and rec_kind and new_kind.split()[0] != rec_kind.split()[0]:
        unfair.append(f"metrics of different kinds: recorded {rec_kind}, re-run {new_kind}")
    if rec_metric is None or new is None:
        unfair.append("no metric to compare" + (" (the tree's log has none)" if rec_metric is None else ""))
    row.reasons += unfair
    if unfair:
        row.verdict = UNREPRODUCIBLE
        return
    assert rec_metric is not None and new is not None
    deviation = new / rec_metric - 1 if rec_metric else float("inf")
    row.notes.append(f"deviation {deviation:+.1%} (tolerance ±{tolerance:.0%})")
    if abs(deviation) <= tolerance:
        rec.passed(row)
    else:
        row.verdict = FAIL
        row.reasons.append(f"deviation {deviation:+.1%} is outside ±{tolerance:.0%}")


def _accuracy_line(text: str) -> str | None:
    return next((ln for ln in text.splitlines() if re.match(r"^(accuracy|mAP)=", ln)), None)


def _reproduce_accuracy(row: Row, t: Target, artefacts: Artefacts, work: Path, tolerance: float,
                        duration_ms: int | None) -> None:
    sink: list[str] = []
    text = read_text(t.folder / "accuracy" / "accuracy.txt", str(t.folder / "accuracy" / "accuracy.txt"), sink.append)
    if text is None:
        row.reasons += sink
        return
    line = _accuracy_line(text)
    row.recorded = line or "-"
    rec = _recorded(row, t, artefacts, t.folder / "accuracy")
    if rec is None:
        return
    unfair = list(rec.unfair)
    outcome = rec.rerun(row, Requested(t.scenario, Mode.ACCURACY), artefacts, work, batch=False)
    row.reproduced = _accuracy_line(inbound.read_text(outcome.path / "accuracy.txt", errors="replace")) or "-"
    if line is None:
        unfair.append("the tree's accuracy.txt has no accuracy=/mAP= line")
    row.reasons += unfair
    if unfair:
        row.verdict = UNREPRODUCIBLE
        return
    if re.sub(r"\s", "", row.reproduced) == re.sub(r"\s", "", row.recorded):
        rec.passed(row)
    else:
        row.verdict = FAIL
        row.reasons.append("the accuracy line differs")


def _markdown(tree: Path, tolerance: float, rows: list[Row], verdict: str) -> str:
    lines = [f"# Reproduction report: {verdict}", "", f"Tree: `{tree}`  ", f"Host: {system.cpu_model()}  ",
             f"Tolerance on the performance metric: ±{tolerance:.0%}; accuracy must match exactly.", "",
             "| benchmark | scenario | kind | recorded | reproduced | verdict |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.benchmark} | {r.scenario} | {r.kind} | {r.recorded} | {r.reproduced} | **{r.verdict}** |"
              for r in rows]
    for r in rows:
        lines += ["", f"## {r.benchmark} {r.scenario} {r.kind}: {r.verdict}"]
        if r.caveat:
            lines.append(f"- **caveat**: {r.caveat}")
        if r.kind == Mode.PERFORMANCE:
            lines.append(f"- user.conf: {r.user_conf}")
        lines += [f"- **reason**: {n}" for n in r.reasons] + [f"- {n}" for n in r.notes]
    return "\n".join(lines) + "\n"
