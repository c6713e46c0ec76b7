"""`appliance submission check`: a submission tree against its round's rules (harness/audit/submission/rounds.py).

The round is detected from the RNG seeds in the tree's performance logs (`--version auto`) or forced.
Both layouts are read: pre-v6.0 (`results/`, `measurements/`, `compliance/` side by side) and v6.0+
(everything under `results/<system>/<benchmark>/<scenario>/`), scenario folders in either spelling.

Findings come in three lists:
- problems: what makes the tree unacceptable to the round's checker (or, deliberately stricter, an
  INVALID result, a LoadGen error). Any problem means a non-zero exit.
- synthetic: what fails *only* because the run manifests say the weights or data were synthetic
  (accuracy below target, a smaller dataset). Listed apart; they do not change the exit code.
- notes: what was decided on the way (the round chosen, benchmarks checked by the generic rules only).

Every value is read through harness/records/readers.py: no content of the tree can crash the check.
The tree is only read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.audit.submission import power, rounds
from harness.audit.submission.rounds import ROUNDS, BenchmarkRules, Round
from harness.audit.submission.truncate import HASH_LINE, MAX_ACCURACY_LOG_BYTES
from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.fsutil import shown
from harness.core.scenarios import Scenario
from harness.data import benchmarks as appliance_benchmarks
from harness.records import detail_log
from harness.records import manifest as run_manifest
from harness.records.detail_log import Detail
from harness.records.manifest import RunManifest
from harness.records.readers import MAX_LOG_BYTES, read_json_object, read_text

__all__ = ["ACCURACY_FILES", "OPTIONAL_FILES", "PERF_FILES", "SHOW", "TEST01_ACC_FILES", "TEST01_ACC_FILES_FAILED",
           "Ctx", "Report", "check_tree"]

PERF_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
ACCURACY_FILES = ("accuracy.txt", "mlperf_log_accuracy.json", "mlperf_log_detail.txt", "mlperf_log_summary.txt")
OPTIONAL_FILES = ("mlperf_log_trace.json", "results.json", ".gitkeep")  # files_diff's always-allowed extras
TEST01_ACC_FILES = ("mlperf_log_accuracy.json", "accuracy.txt")
TEST01_ACC_FILES_FAILED = (*TEST01_ACC_FILES, "baseline_accuracy.txt", "compliance_accuracy.txt")
SHOW = 5  # paths named per hygiene line


@dataclass
class Report:
    root: str
    version: str
    problems: list[str] = field(default_factory=list)
    synthetic: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    power: list[power.PowerResult] = field(default_factory=list)

    def problem(self, text: str) -> None:
        """Record one thing that makes the tree unacceptable."""
        self.problems.append(text)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        out = [f"note: {shown(n)}" for n in self.notes]  # one line each, whatever names they hold
        out += [f"problem: {shown(p)}" for p in self.problems]
        out += [f"synthetic: {shown(s)}" for s in self.synthetic]
        out += [f"power: {shown(r.line())}" for r in self.power]
        verdict = "PASS" if self.ok else f"FAIL ({len(self.problems)} problem(s))"
        extra = f", {len(self.synthetic)} synthetic-data finding(s) not counted" if self.synthetic else ""
        checked = sum(r.status == "checked" for r in self.power)
        extra += f", {checked} power result(s) checked" if checked else ""
        out.append(f"{verdict} {self.version}{extra}")
        return out


@dataclass
class Ctx:
    """What one scenario check needs to know."""

    rep: Report
    rnd: Round
    division: str
    submitter: Path
    system: str
    folder: str          # benchmark folder name in the tree
    rules: BenchmarkRules


def check_tree(root: Path, version: str = "auto") -> Report:
    if version != "auto" and version not in ROUNDS:
        raise ApplianceError(f"round {version!r} has no record here; choose one of: auto, {', '.join(ROUNDS)}")
    if not root.is_dir():
        raise ApplianceError(f"{root} is not a folder; give the folder holding closed/ (or open/)")
    rep = Report(str(root), version)
    divisions = [d for d in _dirs(root) if d.name in rounds.DIVISIONS]
    if not divisions:
        hint = " (give its parent)" if root.name in rounds.DIVISIONS else ""
        rep.problem(f"{root}: no closed/ or open/ folder{hint}")
        return rep
    if version == "auto":
        detected = _detect_round(root, divisions, rep)
        if detected is None:
            return rep
        version = rep.version = detected
    rnd = ROUNDS[version]
    for div in divisions:
        for sub in _dirs(div):
            _check_submitter(sub, div.name, rnd, rep)
    return rep


def _dirs(path: Path) -> list[Path]:
    """Sub-folders, sorted; a folder that cannot be listed gives none (reported where it matters)."""
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def _files(path: Path) -> list[str]:
    try:
        return sorted(p.name for p in path.iterdir() if p.is_file())
    except OSError:
        return []


def _rel(rep: Report, path: Path) -> str:
    try:
        return str(path.relative_to(rep.root))
    except ValueError:
        return str(path)


def _perf_logs(divisions: list[Path]) -> list[Path]:
    """performance/run_1/mlperf_log_detail.txt of every scenario, in either layout (fixed depth: no loops)."""
    logs: list[Path] = []
    for div in divisions:
        logs += sorted(div.glob("*/results/*/*/*/performance/run_1/mlperf_log_detail.txt"))
    return logs


def _detect_round(root: Path, divisions: list[Path], rep: Report) -> str | None:
    """The one round whose seeds the tree's performance logs carry; a problem line when none or several."""
    found: Counter[str] = Counter()
    unknown = 0
    seedless: list[str] = []  # logs that name no seeds at all: empty, damaged, not LoadGen's
    for log in _perf_logs(divisions):
        sink: list[str] = []
        detail = detail_log.read(log, _rel(rep, log), sink.append)
        if detail is None or not any(detail.has(f"effective_{k}") for k in rounds.SEED_KEYS):
            seedless.append(sink[0] if sink else f"{_rel(rep, log)}: no RNG seeds in it (no LoadGen :::MLLOG "
                                                                 f"records of them: empty or damaged?)")
            continue
        version = rounds.round_of_seeds({k: detail.raw(f"effective_{k}") for k in rounds.SEED_KEYS})
        if version is None:
            unknown += 1
        else:
            found[version] += 1
    known = ", ".join(ROUNDS)
    if not found:
        why = (f"the RNG seeds of its {unknown} performance log(s) are those of no round recorded here ({known})"
               if unknown else f"{len(seedless)} performance log(s) and none names its seeds: {seedless[0]}"
               if seedless else "it has no results/<system>/<benchmark>/<scenario>/performance/run_1/"
               "mlperf_log_detail.txt to tell the round by")
        rep.problem(f"{root}: cannot tell the round: {why}; force one with --version")
        rep.version = "unknown"
        return None
    if len(found) > 1:
        mix = ", ".join(f"{v} ({n} log(s))" for v, n in sorted(found.items()))
        rep.problem(f"{root}: performance logs of several rounds in one tree: {mix}; check each round's "
                    f"results separately, or force one with --version")
        rep.version = "mixed"
        return None
    version = next(iter(found))
    rep.notes.append(f"round {version} detected from the RNG seeds of {found[version]} performance log(s)"
                     + (f" ({unknown} other log(s) carry seeds of no known round)" if unknown else "")
                     + "; force another with --version")
    return version


def _layout(sub: Path) -> str:
    return rounds.SEPARATE if (sub / "measurements").is_dir() or (sub / "compliance").is_dir() else rounds.FOLDED


def _check_submitter(sub: Path, division: str, rnd: Round, rep: Report) -> None:
    layout = _layout(sub)
    if layout != rnd.layout:
        have = "measurements/ or compliance/ beside results/ (the pre-v6.0 layout)" if layout == rounds.SEPARATE \
            else "no measurements/ beside results/ (the v6.0+ layout)"
        rep.problem(f"{_rel(rep, sub)}: {rnd.version} keeps "
                    + ("measurements and compliance under results/<system>/<benchmark>/<scenario>/"
                       if rnd.layout == rounds.FOLDED else "measurements/ and compliance/ beside results/")
                    + f", this tree has {have}; check it as the round it was made for (--version)")
        return
    _hygiene(sub, rep)
    for name in ("systems", "results"):
        if not (sub / name).is_dir():
            rep.problem(f"{_rel(rep, sub / name)}: missing folder")
    if layout == rounds.FOLDED and not (sub / "src").is_dir():
        rep.problem(f"{_rel(rep, sub / 'src')}: missing folder (the code, or a README pointing to it)")
    if rnd.calibration_doc and division == "closed" and not (sub / "calibration.md").is_file() \
            and not (sub / "documentation" / "calibration.md").is_file():
        rep.problem(f"{_rel(rep, sub)}: no calibration.md (at the top or in documentation/); "
                    f"{rnd.version} needs it in closed")
    results = sub / "results"
    systems = _dirs(results)
    with_results = {s.name for s in systems}
    for f in _files(sub / "systems"):
        if f.endswith(".json") and f[:-5] not in with_results:  # the official checker never looks at it
            rep.notes.append(f"warning: {_rel(rep, sub / 'systems' / f)}: a system with no results/{f[:-5]}/ "
                             f"(not checked; the official checker ignores it too)")
    if layout == rounds.SEPARATE:
        for m in _dirs(sub / "measurements"):
            if m.name not in with_results:
                rep.problem(f"{_rel(rep, m)}: measurements of a system with no results/{m.name}/")
    mapping = None
    if division == "open" and (sub / "model_mapping.json").is_file():
        mapping = read_json_object(sub / "model_mapping.json", _rel(rep, sub / "model_mapping.json"), rep.problem)
    for system in systems:
        sys_type = _check_system_json(sub / "systems" / f"{system.name}.json", division, sub.name, rep,
                                      counts=rnd.layout == rounds.FOLDED)
        for bench in _dirs(system):
            _check_benchmark(bench, sys_type, division, sub, rnd, rep, mapping)


def _hygiene(sub: Path, rep: Report) -> None:
    """What the official checker refuses in any file or folder name: bad links, huge files, hidden names,
    spaces, __pycache__, empty folders. Walked without following links (a link loop cannot trap it)."""
    found: dict[str, list[str]] = {k: [] for k in ("broken or looping symbolic links", "files over 50 MB",
                                                    "hidden names", "names with spaces", "__pycache__ folders",
                                                    "empty folders", "links leaving the tree")}
    tree = Path(os.path.realpath(rep.root))

    def err(exc: OSError) -> None:
        found.setdefault("unreadable folders", []).append(f"{exc.filename} ({exc.strerror})")

    real = Path(os.path.realpath(sub))
    if not real.is_relative_to(tree):  # the submitter's folder itself (or its division) a link out: not walked
        found["links leaving the tree"].append(f"{_rel(rep, sub)} -> {real}")
    for top, dirs, files in os.walk(sub, onerror=err) if real.is_relative_to(tree) else ():
        t = Path(top)
        if not dirs and not files and t != sub:
            found["empty folders"].append(_rel(rep, t))
        for name in dirs + files:
            p = t / name
            rel = _rel(rep, p)
            if name.startswith("."):
                found["hidden names"].append(rel)
            if " " in name:
                found["names with spaces"].append(rel)
            if name == "__pycache__":
                found["__pycache__ folders"].append(rel)
            if p.is_symlink() and not p.exists():
                found["broken or looping symbolic links"].append(rel)
            elif p.is_symlink() and not Path(os.path.realpath(p)).is_relative_to(tree):
                found["links leaving the tree"].append(f"{rel} -> {os.path.realpath(p)}")
            elif name in files:
                try:
                    if p.stat().st_size > MAX_LOG_BYTES:
                        found["files over 50 MB"].append(rel)
                except OSError:
                    pass
        dirs[:] = [d for d in dirs if not (t / d).is_symlink()]
    for what, paths in found.items():
        if paths:
            more = f" and {len(paths) - SHOW} more" if len(paths) > SHOW else ""
            rep.problem(f"{_rel(rep, sub)}: {what}: {', '.join(paths[:SHOW])}{more}")


def _check_system_json(path: Path, division: str, submitter: str, rep: Report, counts: bool = False) -> str | None:
    """The system_type when the system JSON is usable, else None (problems reported). With `counts` (v6.0+,
    whose checker multiplies them as integers), number_of_nodes and accelerators_per_node must be whole
    numbers."""
    where = _rel(rep, path)
    if not path.exists():
        rep.problem(f"{where}: missing system description")
        return None
    data = read_json_object(path, where, rep.problem)
    if data is None:
        return None
    missing = [k for k in rounds.SYSTEM_REQUIRED if k not in data]
    if missing:
        rep.problem(f"{where}: missing keys: {', '.join(missing)}")
    empty = [k for k in rounds.SYSTEM_MEANINGFUL if k in data and not data[k]]
    if empty:
        rep.problem(f"{where}: empty values (a numeric 0 counts as empty; write \"0\"): {', '.join(empty)}")
    for key in ("number_of_nodes", "accelerators_per_node") if counts else ():
        value = data.get(key)
        if key in data and not ((isinstance(value, int) and not isinstance(value, bool))
                                or (isinstance(value, str) and value.strip().isdigit())):
            rep.problem(f"{where}: {key} {value!r} is not a whole number (the checker multiplies it; write e.g. 2)")
    status, sys_type = data.get("status"), data.get("system_type")
    ok = True
    if not isinstance(status, str) or status.lower() not in rounds.STATUSES:
        rep.problem(f"{where}: status {status!r} is not one of {', '.join(rounds.STATUSES)}")
        ok = False
    if sys_type not in rounds.SYSTEM_TYPES:
        rep.problem(f"{where}: system_type {sys_type!r} is not one of {', '.join(rounds.SYSTEM_TYPES)}")
        ok = False
    if data.get("division") != division:
        rep.problem(f"{where}: division {data.get('division')!r} but the tree has {division}/")
    if not isinstance(data.get("submitter"), str) or data["submitter"].lower() != submitter.lower():
        rep.problem(f"{where}: submitter {data.get('submitter')!r} but the tree has {submitter}/")
    return str(sys_type) if ok else None


def _check_benchmark(bench: Path, sys_type: str | None, division: str, sub: Path, rnd: Round,
                     rep: Report, mapping: dict[str, Any] | None = None) -> None:
    model = rnd.model_of(bench.name, mapping)
    rules = rnd.benchmarks.get(model)
    if rules is None and (bench.name in rounds.OTHER_BENCHMARKS or model in rounds.OTHER_BENCHMARKS):
        rep.notes.append(f"{_rel(rep, bench)}: not checked (outside this appliance's benchmarks: {bench.name} is "
                         f"one of the official checker's, whose rules are not recorded here)")
        rep.power += [power.not_checked(_rel(rep, s)) for s in _dirs(bench) if power.has_power(s)]
        return
    if rules is None:
        rep.problem(f"{_rel(rep, bench)}: {bench.name!r} is not a benchmark {rnd.version} defines here "
                    f"(its vision benchmarks: {', '.join(rnd.benchmarks)}); not checked further")
        return
    if bench.name not in appliance_benchmarks.NAMES and model not in appliance_benchmarks.NAMES:
        note = (f"{bench.name}: the appliance does not run or score this benchmark; checked with the round's "
                f"rules only (seeds, duration, early stopping, sample counts, accuracy line against the target)")
        if note not in rep.notes:
            rep.notes.append(note)
    if rnd.layout == rounds.SEPARATE and not (sub / "code" / bench.name).is_dir():
        rep.problem(f"{_rel(rep, sub / 'code' / bench.name)}: missing folder (the benchmark's code)")
    required: tuple[Scenario, ...] = ()
    if sys_type is not None:
        req = rnd.required(sys_type, model)
        if req is None:
            rep.problem(f"{_rel(rep, bench)}: a {sys_type} system cannot enter {model} in {rnd.version}")
            return
        required = req
    closed = division in ("closed", "network")
    present: set[Scenario] = set()
    for folder in _dirs(bench):
        scenario = rounds.SCENARIO_SPELLINGS.get(folder.name)
        if scenario is None:
            rep.problem(f"{_rel(rep, folder)}: unknown scenario folder "
                        f"(known: {', '.join(rounds.SCENARIOS)}, or lowercase)")
            continue
        if closed and sys_type is not None and scenario not in required:
            rep.problem(f"{_rel(rep, folder)}: {scenario} is neither required nor optional for a {sys_type} system")
            continue
        present.add(scenario)
        ctx = Ctx(rep, rnd, division, sub, bench.parent.name, bench.name, rules)
        _check_scenario(ctx, folder, scenario)
    missing = [s for s in required if s not in present]
    if closed and missing:
        rep.problem(f"{_rel(rep, bench)}: system_type {sys_type} needs scenarios {', '.join(missing)} too")


def _manifest(rep: Report, run: Path) -> RunManifest | None:
    """The appliance's own run manifest, when there is one (absent in other tools' trees); a damaged one is a
    problem line naming the file and the field."""
    return run_manifest.read_lenient(run, rep.problem, _rel(rep, run / run_manifest.NAME))


def _synthetic(manifest: RunManifest | None, what: str) -> bool:
    if manifest is None:
        return False
    return manifest.synthetic.weights if what == "weights" else manifest.synthetic.data


def _synthetic_or_problem(rep: Report, manifest: RunManifest | None, what: str, text: str) -> None:
    """Report `text` as synthetic when the manifest says the `what` ("weights" / "data") was synthetic."""
    if _synthetic(manifest, what):
        rep.synthetic.append(f"{text} (synthetic {what}, per the run manifest)")
    else:
        rep.problem(text)


def _check_scenario(ctx: Ctx, results: Path, scenario: Scenario) -> None:
    rep, rnd = ctx.rep, ctx.rnd
    tail = Path(ctx.system) / ctx.folder / results.name
    separate = rnd.layout == rounds.SEPARATE
    measure = ctx.submitter / "measurements" / tail if separate else results
    compliance = ctx.submitter / "compliance" / tail if separate else results
    if separate and not measure.is_dir():
        rep.problem(f"{_rel(rep, measure)}: missing folder")
    else:
        for name in rnd.scenario_files:
            f = measure / name
            if not f.is_file():
                rep.problem(f"{_rel(rep, f)}: {inbound.absent(f, 'missing')}")
            elif f.stat().st_size == 0:
                rep.problem(f"{_rel(rep, f)}: empty")
        _check_measurements(measure, ctx, results.name)
    run1 = results / "performance" / "run_1"
    perf_m = _manifest(rep, run1)
    powered = power.has_power(results)
    # with power, power.check holds run_1 to its file list (LoadGen's logs and spl.txt)
    if _files_present(run1, PERF_FILES, rep, extras=separate and not powered,
                      optional=("mlperf_log_accuracy.json",)):
        _check_perf(run1 / "mlperf_log_detail.txt", scenario, ctx, perf_m)
    _check_eligibility(rep, run1, perf_m)
    if powered:
        if separate and rnd.power.measure_files and measure.is_dir():
            _power_measure_files(measure, rep)
        rep.power.append(power.check(results, scenario, rnd.power, lambda p: _rel(rep, p), rep.problem,
                                     rep.synthetic.append))
    acc = results / "accuracy"
    if not (acc / "accuracy.txt").is_file():
        rep.problem(f"{_rel(rep, acc / 'accuracy.txt')}: {inbound.absent(acc / 'accuracy.txt', 'missing')} "
                    f"(the accuracy run's score)")
    elif _files_present(acc, ACCURACY_FILES, rep, extras=separate):
        acc_m = _manifest(rep, acc)
        _check_accuracy(acc, scenario, ctx, acc_m)
        _check_eligibility(rep, acc, acc_m)
    if ctx.division != "open":
        for test in ctx.rules.compliance_tests:
            _check_compliance(compliance / test, test, scenario, ctx, perf_m)


def _power_measure_files(measure: Path, rep: Report) -> None:
    """Pre-v6.0, a power result's measurements folder (or one of the three above it) holds analyzer_table.* and
    power_settings.* (the checker's REQUIRED_POWER_MEASURE_FILES), not empty."""
    folders = [measure, measure.parent, measure.parent.parent, measure.parent.parent.parent]
    for stem in ("analyzer_table", "power_settings"):
        found = [f for d in folders for n in _files(d) if n.startswith(stem) and (f := d / n)]
        if not found:
            rep.problem(f"{_rel(rep, measure)}: no {stem}.* here or in the folders above it (a power result "
                        f"describes its analyzer and power settings)")
        elif found[-1].stat().st_size == 0:
            rep.problem(f"{_rel(rep, found[-1])}: empty")


def _check_eligibility(rep: Report, run: Path, manifest: RunManifest | None) -> None:
    """A run whose manifest says its precision fails the benchmark's accuracy rule is not submittable (the
    appliance's own runs; other tools' trees have no such manifest)."""
    why = manifest.not_submittable if manifest is not None else None
    if manifest is not None and why is not None:
        rep.problem(f"{_rel(rep, run)}: ran at {manifest.precision}, which is not submittable: "
                    f"{why} (the closed division's accuracy rule)")


def _files_present(folder: Path, names: tuple[str, ...], rep: Report, extras: bool = False,
                   optional: tuple[str, ...] = ()) -> bool:
    """All `names` there; with `extras`, nothing else either (the pre-v6.0 checker's file-list rule)."""
    if not folder.is_dir():
        rep.problem(f"{_rel(rep, folder)}: missing folder")
        return False
    have = _files(folder)
    missing = [n for n in names if n not in have]
    if missing:
        rep.problem(f"{_rel(rep, folder)}: missing {', '.join(missing)}")
    if extras:
        extra = [n for n in have if n not in names and n not in optional and n not in OPTIONAL_FILES]
        if extra:
            hint = " (spl.txt belongs to a power result, and there is no performance/power/)" \
                if "spl.txt" in extra else ""
            rep.problem(f"{_rel(rep, folder)}: files the round does not allow here: {', '.join(extra)}{hint}")
    return not missing


def _check_measurements(measure: Path, ctx: Ctx, scenario_folder: str) -> None:
    rep = ctx.rep
    if ctx.rnd.layout == rounds.FOLDED:
        path = measure / "measurements.json"
        if not path.is_file():
            return  # reported with the scenario files
    else:
        names = [n for n in _files(measure) if n.startswith(ctx.system) and n.endswith(".json")]
        preferred = [n for n in names if n.endswith(f"_{scenario_folder}.json")]
        if not names:
            rep.problem(f"{_rel(rep, measure)}: no {ctx.system}*.json (the measurement description)")
            return
        path = measure / (preferred or names)[0]
    data = read_json_object(path, _rel(rep, path), rep.problem)
    if data is None:
        return
    missing = [k for k in rounds.MEASUREMENT_KEYS if not data.get(k)]
    if missing:
        rep.problem(f"{_rel(rep, path)}: missing or empty: {', '.join(missing)}")


def _seeds_for(path: Path, rnd: Round) -> dict[str, int]:
    return dict(rnd.test05_seeds) if "TEST05" in path.parts and rnd.test05_seeds else dict(rnd.seeds)


def _check_perf(path: Path, scenario: Scenario, ctx: Ctx, manifest: RunManifest | None, compliance: bool = False
                ) -> None:
    """A performance detail log, by the round's check_performance_dir (plus INVALID/errors, deliberately; a
    compliance run's INVALID only as a warning: the checker reads its verdict from verify_performance.txt)."""
    rep, rnd, rules = ctx.rep, ctx.rnd, ctx.rules
    where = _rel(rep, path)
    d = detail_log.read(path, where, rep.problem)
    if d is None:
        return
    if not d.has("effective_scenario"):
        rep.problem(f"{where}: no LoadGen settings in it (not a LoadGen detail log, or cut short)")
        return
    logged = d.text("effective_scenario")
    scenario = _scenario_run(logged, scenario, where, rep)
    _check_seeds(d, _seeds_for(path, rnd), rnd, rep)
    for err in d.errors:
        rep.problem(f"{where}: LoadGen error: {err}")
    validity = d.raw("result_validity")
    if validity != "VALID":
        reason = d.raw("result_invalid_reason")
        text = (f"{where}: LoadGen result is {validity if isinstance(validity, str) else 'missing'}"
                + (f" ({reason})" if isinstance(reason, str) and reason else ""))
        if compliance:
            rep.notes.append(f"warning: {text} (a compliance run: its verdict is verify_performance.txt's, "
                             f"which the official checker reads)")
        else:
            rep.problem(text)
    min_ms = d.integer("effective_min_duration_ms")
    if min_ms is not None and min_ms < rnd.min_duration_ms:
        rep.problem(f"{where}: effective_min_duration_ms {min_ms} < {rnd.min_duration_ms} "
                    "(not a submission-length run)")
    psc = d.integer("effective_performance_sample_count")
    if psc is not None and psc < rules.performance_sample_count:
        text = f"{where}: performance_sample_count {psc} < {rules.performance_sample_count}"
        count = manifest.dataset.count if manifest is not None else None
        if count is not None and count < rules.performance_sample_count and psc >= count:
            _synthetic_or_problem(rep, manifest, "data", text + f" (the dataset has only {count} samples)")
        else:
            rep.problem(text)
    if scenario == Scenario.OFFLINE:
        spq = d.integer("effective_samples_per_query")
        if spq is not None and spq < rules.offline_min_samples_per_query:
            rep.problem(f"{where}: Offline samples_per_query {spq} < {rules.offline_min_samples_per_query}")
    if scenario in rounds.EARLY_STOPPING:
        met = d.flag("early_stopping_met")
        if met is False:
            result = d.raw("early_stopping_result")
            rep.problem(f"{where}: early stopping not met "
                        f"({result if isinstance(result, str) else 'no early_stopping_result'})")
        if scenario == Scenario.SERVER and rules.server_latency_ns is not None:
            target = d.integer("effective_target_latency_ns")
            if target is not None and target > rules.server_latency_ns:
                rep.problem(f"{where}: Server target latency {target} ns > the bound {rules.server_latency_ns} ns")
    else:
        required = rules.min_queries.get(scenario)
        count = d.integer("effective_min_query_count")
        if required and count is not None and count < required:
            rep.problem(f"{where}: min_query_count {count} < {required}")
    d.number(rounds.RESULT_FIELDS[scenario])


def _scenario_run(logged: str | None, scenario: Scenario, where: str, rep: Report) -> Scenario:
    """The scenario whose rules apply to a log: the folder's, or the logged one when the round lets the folder's
    result be inferred from it (Offline from SingleStream/MultiStream, MultiStream from SingleStream)."""
    if logged is None or logged == scenario:
        return scenario
    if (scenario, logged) in rounds.INFERABLE:
        note = f"{where}: the {scenario} result is inferred from a {logged} run, as the round allows"
        if note not in rep.notes:
            rep.notes.append(note)
        return Scenario(logged)  # a known scenario: INFERABLE names only those
    rep.problem(f"{where}: scenario {logged} logged, in a {scenario} folder")
    return scenario


def _check_seeds(d: Detail, seeds: dict[str, int], rnd: Round, rep: Report) -> None:
    found = {k: d.raw(f"effective_{k}") for k in seeds}
    wrong = {k: v for k, v in found.items() if v != seeds[k]}
    other = rounds.round_of_seeds(found)
    if wrong and other is not None:
        rep.problem(f"{d.where}: results from another round: its RNG seeds are {other}'s, not {rnd.version}'s")
    elif len(wrong) == len(seeds):
        rep.problem(f"{d.where}: results from another round: RNG seeds "
                    f"{', '.join(f'{k}={v}' for k, v in wrong.items())} are not {rnd.version}'s")
    else:
        for k, v in wrong.items():
            rep.problem(f"{d.where}: {k} is {v}, {rnd.version} needs {seeds[k]}")


def _check_accuracy(acc: Path, scenario: Scenario, ctx: Ctx, manifest: RunManifest | None) -> None:
    rep, rules = ctx.rep, ctx.rules
    txt = acc / "accuracy.txt"
    where = _rel(rep, txt)
    text = read_text(txt, where, rep.problem)
    if text is None:
        return
    pattern = re.compile(rounds.ACC_PATTERNS[rules.accuracy_metric])
    label = "accuracy" if rules.accuracy_metric == "acc" else rules.accuracy_metric
    values, digest = [], None
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            try:
                values.append(float(m.group(1)))
            except ValueError:
                rep.problem(f"{where}: {line[:60]!r} is not a number")
        h = HASH_LINE.match(line)
        if h and digest is None:
            digest = h.group(1)
    if not values:
        rep.problem(f"{where}: no `{label}=<percent>` line "
                    f"(the round's pattern {rounds.ACC_PATTERNS[rules.accuracy_metric]})")
    if digest is None:
        rep.problem(f"{where}: no `hash=<sha256 of mlperf_log_accuracy.json>` line")
    log = acc / "mlperf_log_accuracy.json"
    try:
        size = log.stat().st_size
    except OSError as exc:
        rep.problem(f"{_rel(rep, log)}: cannot read ({exc.strerror})")
        size = None
    if size is not None and size > MAX_ACCURACY_LOG_BYTES:
        rep.problem(f"{_rel(rep, log)}: {size} bytes, not truncated (limit {MAX_ACCURACY_LOG_BYTES}; "
                    f"`appliance submission build` truncates it)")
    if digest is not None and size is not None:
        recorded = manifest.result.hash if manifest is not None else None
        if recorded and recorded != digest:
            rep.problem(f"{where}: hash {digest[:12]}… differs from the run manifest's {recorded[:12]}…")
        elif size <= MAX_ACCURACY_LOG_BYTES:
            data = _read_small(log)
            if data is not None and b"\n\n...\n\n" not in data and size < 8192 \
                    and hashlib.sha256(data).hexdigest() != digest:
                rep.problem(f"{where}: hash does not match {log.name} (an untruncated log must hash to it)")
    below = [v for v in values if v < rules.accuracy_target]
    if below and ctx.division == "open":
        rep.notes.append(f"{where}: {label} {below[0]:.3f}% below the closed-division target "
                         f"{rules.accuracy_target:.3f}%; the open division accepts it")
    elif below:
        _synthetic_or_problem(rep, manifest, "weights",
                              f"{where}: {label} {below[0]:.3f}% below the target {rules.accuracy_target:.3f}% "
                              f"({ctx.rnd.version} {rules.model})")
    detail_path = acc / "mlperf_log_detail.txt"
    d = detail_log.read(detail_path, _rel(rep, detail_path), rep.problem)
    if d is None:
        return
    for err in d.errors:
        rep.problem(f"{d.where}: LoadGen error: {err}")
    logged = d.raw("effective_scenario")
    if d.has("effective_scenario") and logged != scenario and (scenario, logged) not in rounds.INFERABLE:
        rep.problem(f"{d.where}: scenario {logged} logged, in a {scenario} folder")
    if rules.dataset_size is not None:
        # as the official checker reads it: the effective count whenever the log has the key (v5.0 on)
        effective = "effective_accuracy_sample_count"
        key = effective if d.has(effective) else "qsl_reported_total_count"
        total = d.integer(key)
        if total is not None and total != rules.dataset_size:
            _synthetic_or_problem(rep, manifest, "data", f"{d.where}: accuracy run covers {total} samples "
                                                         f"({key}), the official dataset has {rules.dataset_size}")


def _read_small(path: Path) -> bytes | None:
    try:
        with inbound.open_bounded(path, inbound.ARRAY) as f:
            return f.read(MAX_ACCURACY_LOG_BYTES + 1)
    except (OSError, inbound.Refused):
        return None


def _passed(path: Path, rep: Report) -> bool | None:
    """A verify_*.txt holds a `TEST PASS` line; None when it is missing (reported)."""
    text = read_text(path, _rel(rep, path), rep.problem)
    if text is None:
        return None
    return "TEST PASS" in text


def _check_compliance(t: Path, test: str, scenario: Scenario, ctx: Ctx, perf_manifest: RunManifest | None) -> None:
    rep = ctx.rep
    if not t.is_dir():
        rep.problem(f"{_rel(rep, t)}: missing compliance test {test} "
                    f"(run `appliance run -b {ctx.folder} -s {scenario} --mode {test}`)")
        return
    if _passed(t / "verify_performance.txt", rep) is False:
        rep.problem(f"{_rel(rep, t / 'verify_performance.txt')}: no TEST PASS line")
    run1 = t / "performance" / "run_1"
    if _files_present(run1, PERF_FILES, rep, extras=True, optional=("mlperf_log_accuracy.json",)):
        manifest = _manifest(rep, t / "appliance") or perf_manifest
        _check_perf(run1 / "mlperf_log_detail.txt", scenario, ctx, manifest, compliance=True)
    if test != "TEST01":
        return
    passed = _passed(t / "verify_accuracy.txt", rep)
    if passed is None:
        return
    if ctx.rnd.layout == rounds.SEPARATE or not passed:
        _files_present(t / "accuracy", TEST01_ACC_FILES if passed else TEST01_ACC_FILES_FAILED, rep, extras=True)
