"""`appliance submission check`: our own validation of a submission tree against the round's rules (SPEC §5).

Findings come in two lists:

- problems: anything that makes the tree unacceptable (missing files, system JSON keys, a run too short,
  the wrong seeds, a failed compliance test, …). Any problem means a non-zero exit.
- synthetic: what fails *only* because the model weights or the dataset are synthetic, as the run
  manifests say (`synthetic.weights` / `synthetic.data`): accuracy below the target with seeded
  weights; a dataset smaller than the official one, hence fewer accuracy samples and a smaller
  performance_sample_count. These are reported separately and do not change the exit code. Without a
  manifest that says so, the same finding is a problem.

The check only reads the tree.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import benchmarks
from harness.errors import ApplianceError
from harness.fsutil import sha256_file
from harness.results import read_detail
from harness.submission.system_json import REQUIRED_KEYS, STATUSES, SYSTEM_TYPES
from harness.submission.truncate import MAX_ACCURACY_LOG_BYTES, hash_of

MEASUREMENT_KEYS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                    "weight_transformations")
SCENARIO_FILES = ("README.md", "user.conf", "mlperf.conf", "measurements.json")
ACCURACY_FILES = ("accuracy.txt", "mlperf_log_accuracy.json", "mlperf_log_detail.txt", "mlperf_log_summary.txt")
PERF_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
COMPLIANCE_RUN_FILES = {"mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"}
EARLY_STOPPING = ("SingleStream", "MultiStream", "Server")
ACCURACY_LINE = re.compile(r"^(accuracy|mAP)=([\d.]+)%")


@dataclass(frozen=True)
class Round:
    """The rules of one MLPerf Inference round that a tree is checked against."""

    version: str
    seeds: dict[str, int]
    min_duration_ms: int
    offline_min_samples_per_query: int
    dataset_size: dict[str, int]                     # official accuracy-run sample count, per benchmark
    required_scenarios: dict[str, dict[str, tuple[str, ...]]]  # system_type -> benchmark -> scenarios
    compliance_tests: dict[str, tuple[str, ...]]     # benchmark -> tests


V61_BENCHMARKS = ("resnet50",)  # the round's rules for each come from its record (harness/benchmarks.py)
ROUNDS = {
    "v6.1": Round(
        version="v6.1",
        seeds={"qsl_rng_seed": 2085463073848966840, "sample_index_rng_seed": 2747215439041700203,
               "schedule_rng_seed": 16159082839903944936},
        min_duration_ms=600_000, offline_min_samples_per_query=24576,
        dataset_size={n: benchmarks.get(n).accuracy_sample_count for n in V61_BENCHMARKS},
        required_scenarios=benchmarks.required_scenarios(V61_BENCHMARKS),
        compliance_tests={n: benchmarks.get(n).compliance_tests for n in V61_BENCHMARKS},
    ),
}


@dataclass
class Report:
    root: str
    version: str
    problems: list[str] = field(default_factory=list)
    synthetic: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        out = [f"problem: {p}" for p in self.problems]
        out += [f"synthetic: {s}" for s in self.synthetic]
        verdict = "PASS" if self.ok else f"FAIL ({len(self.problems)} problem(s))"
        extra = f", {len(self.synthetic)} synthetic-data finding(s) not counted" if self.synthetic else ""
        out.append(f"{verdict} {self.version}{extra}")
        return out


def check_tree(root: Path, version: str = "v6.1") -> Report:
    if version not in ROUNDS:
        raise ApplianceError(f"round {version!r} is not known; choose one of: {', '.join(ROUNDS)}")
    if not root.is_dir():
        raise ApplianceError(f"{root} is not a folder; give the folder holding closed/ (or open/)")
    rnd = ROUNDS[version]
    rep = Report(str(root), version)
    divisions = [d for d in sorted(root.iterdir()) if d.is_dir() and d.name in ("closed", "open", "network")]
    if not divisions:
        hint = " (give its parent)" if root.name in ("closed", "open") else ""
        rep.problems.append(f"{root}: no closed/ or open/ folder{hint}")
    for div in divisions:
        for sub in sorted(p for p in div.iterdir() if p.is_dir()):
            _check_submitter(sub, div.name, rnd, rep)
    return rep


def _rel(rep: Report, path: Path) -> str:
    try:
        return str(path.relative_to(rep.root))
    except ValueError:
        return str(path)


def _check_submitter(sub: Path, division: str, rnd: Round, rep: Report) -> None:
    P = rep.problems.append
    for name in ("systems", "results", "src"):
        if not (sub / name).is_dir():
            P(f"{_rel(rep, sub / name)}: missing folder")
    results = sub / "results"
    for system in sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []:
        sys_json = _check_system_json(sub / "systems" / f"{system.name}.json", division, sub.name, rep)
        sys_type = str(sys_json.get("system_type", "")) if sys_json else ""
        for bench in sorted(p for p in system.iterdir() if p.is_dir()):
            if bench.name not in benchmarks.NAMES:
                P(f"{_rel(rep, bench)}: unknown benchmark {bench.name!r} (known: {', '.join(benchmarks.NAMES)})")
                continue
            if not (sub / "src" / bench.name / "README.md").is_file():
                P(f"{_rel(rep, sub / 'src' / bench.name / 'README.md')}: missing")
            scenarios = sorted(p.name for p in bench.iterdir() if p.is_dir())
            required = rnd.required_scenarios.get(sys_type, {}).get(bench.name, ())
            if division == "closed" and sys_type in SYSTEM_TYPES:
                missing = [s for s in required if s not in scenarios]
                if missing:
                    P(f"{_rel(rep, bench)}: system_type {sys_type} needs scenarios {', '.join(missing)} too")
            for scenario in scenarios:
                if scenario not in benchmarks.SCENARIOS:
                    P(f"{_rel(rep, bench / scenario)}: unknown scenario (known: {', '.join(benchmarks.SCENARIOS)})")
                    continue
                _check_scenario(bench / scenario, benchmarks.get(bench.name), division, rnd, rep)


def _check_system_json(path: Path, division: str, submitter: str, rep: Report) -> dict[str, Any] | None:
    P = rep.problems.append
    where = _rel(rep, path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        P(f"{where}: missing system description")
        return None
    except (OSError, json.JSONDecodeError) as exc:
        P(f"{where}: not readable JSON ({exc})")
        return None
    if not isinstance(data, dict):
        P(f"{where}: not a JSON object")
        return None
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        P(f"{where}: missing keys: {', '.join(missing)}")
    empty = [k for k in REQUIRED_KEYS if k in data and (data[k] is None or data[k] == "" or data[k] == 0
                                                        or data[k] == [] or data[k] == {})]
    if empty:
        P(f"{where}: empty values (a numeric 0 counts as empty; write \"0\"): {', '.join(empty)}")
    if "status" in data and str(data["status"]).lower() not in STATUSES:
        P(f"{where}: status {data['status']!r} is not one of {', '.join(STATUSES)}")
    if "system_type" in data and data["system_type"] not in SYSTEM_TYPES:
        P(f"{where}: system_type {data['system_type']!r} is not one of {', '.join(SYSTEM_TYPES)}")
    if str(data.get("division", "")).lower() != division:
        P(f"{where}: division {data.get('division')!r} but the tree has {division}/")
    if str(data.get("submitter", "")).lower() != submitter.lower():
        P(f"{where}: submitter {data.get('submitter')!r} but the tree has {submitter}/")
    return data


def _manifest(run: Path) -> dict[str, Any]:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _check_scenario(d: Path, bench: benchmarks.Benchmark, division: str, rnd: Round, rep: Report) -> None:
    P = rep.problems.append
    for name in SCENARIO_FILES:
        f = d / name
        if not f.is_file():
            P(f"{_rel(rep, f)}: missing")
        elif f.stat().st_size == 0:
            P(f"{_rel(rep, f)}: empty")
    _check_measurements(d / "measurements.json", rep)
    run1 = d / "performance" / "run_1"
    perf_m = _manifest(run1)
    if _files_present(run1, PERF_FILES, rep):
        _check_detail(run1 / "mlperf_log_detail.txt", d.name, bench, rnd, rep, perf_m, "performance")
    acc = d / "accuracy"
    acc_m = _manifest(acc)
    if _files_present(acc, ACCURACY_FILES, rep):
        _check_accuracy(acc, d.name, bench, rnd, rep, acc_m)
    if division != "open":
        for test in rnd.compliance_tests.get(bench.name, ()):
            _check_compliance(d / test, test, d.name, bench, rnd, rep, perf_m)


def _files_present(folder: Path, names: tuple[str, ...], rep: Report) -> bool:
    missing = [n for n in names if not (folder / n).is_file()]
    if not folder.is_dir():
        rep.problems.append(f"{_rel(rep, folder)}: missing folder")
        return False
    if missing:
        rep.problems.append(f"{_rel(rep, folder)}: missing {', '.join(missing)}")
    return not missing


def _check_measurements(path: Path, rep: Report) -> None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return  # reported with the scenario files
    except (OSError, json.JSONDecodeError) as exc:
        rep.problems.append(f"{_rel(rep, path)}: not readable JSON ({exc})")
        return
    missing = [k for k in MEASUREMENT_KEYS if not isinstance(data, dict) or not data.get(k)]
    if missing:
        rep.problems.append(f"{_rel(rep, path)}: missing or empty: {', '.join(missing)}")


def _synthetic_or_problem(rep: Report, manifest: dict[str, Any], what: str, text: str) -> None:
    """Report `text` as synthetic when the manifest says the `what` ("weights" / "data") was synthetic."""
    if manifest.get("synthetic", {}).get(what):
        rep.synthetic.append(f"{text} (synthetic {what}, per the run manifest)")
    else:
        rep.problems.append(text)


def _check_detail(path: Path, scenario: str, bench: benchmarks.Benchmark, rnd: Round, rep: Report,
                  manifest: dict[str, Any], kind: str) -> None:
    P = rep.problems.append
    where = _rel(rep, path)
    try:
        d = read_detail(path)
    except OSError as exc:
        P(f"{where}: not readable ({exc.strerror})")
        return
    if "effective_scenario" not in d:
        P(f"{where}: no LoadGen settings in it (not a LoadGen detail log, or cut short)")
        return
    if d["effective_scenario"] != scenario:
        P(f"{where}: scenario {d['effective_scenario']} logged, in a {scenario} folder")
    seeds = {k: d.get(f"effective_{k}") for k in rnd.seeds}
    wrong = {k: v for k, v in seeds.items() if v != rnd.seeds[k]}
    if len(wrong) == len(rnd.seeds):
        P(f"{where}: results from another round: RNG seeds {', '.join(f'{k}={v}' for k, v in wrong.items())} "
          f"are not {rnd.version}'s")
    else:
        for k, v in wrong.items():
            P(f"{where}: {k} is {v}, {rnd.version} needs {rnd.seeds[k]}")
    for err in d["_errors"]:
        P(f"{where}: LoadGen error: {err}")
    if kind == "accuracy":
        return
    min_ms = d.get("effective_min_duration_ms", 0)
    if min_ms < rnd.min_duration_ms:
        P(f"{where}: effective_min_duration_ms {min_ms} < {rnd.min_duration_ms} (not a submission-length run)")
    psc = d.get("effective_performance_sample_count", 0)
    if psc < bench.performance_sample_count:
        text = f"{where}: performance_sample_count {psc} < {bench.performance_sample_count}"
        count = manifest.get("dataset", {}).get("count")
        if count is not None and count < bench.performance_sample_count and psc >= count:
            _synthetic_or_problem(rep, manifest, "data", text + f" (the dataset has only {count} samples)")
        else:
            P(text)
    if scenario == "Offline" and d.get("effective_samples_per_query", 0) < rnd.offline_min_samples_per_query:
        P(f"{where}: Offline samples_per_query {d.get('effective_samples_per_query')} < "
          f"{rnd.offline_min_samples_per_query}")
    if scenario in EARLY_STOPPING and not d.get("early_stopping_met"):
        P(f"{where}: early stopping not met ({d.get('early_stopping_result', 'no early_stopping_result')})")
    if scenario == "Server" and bench.server_latency_ms is not None:
        bound = bench.server_latency_ms * 1_000_000
        target = d.get("effective_target_latency_ns", 0)
        if target > bound:
            P(f"{where}: Server target latency {target} ns > the bound {bound} ns")
    if d.get("result_validity") != "VALID":
        P(f"{where}: LoadGen result is {d.get('result_validity', 'missing')}"
          + (f" ({d['result_invalid_reason']})" if d.get("result_invalid_reason") else ""))


def _check_accuracy(acc: Path, scenario: str, bench: benchmarks.Benchmark, rnd: Round, rep: Report,
                    manifest: dict[str, Any]) -> None:
    P = rep.problems.append
    txt = acc / "accuracy.txt"
    where = _rel(rep, txt)
    text = txt.read_text(errors="replace")
    lines = text.splitlines()
    m = ACCURACY_LINE.match(lines[0]) if lines else None
    if m is None:
        P(f"{where}: first line is not `accuracy=<percent>%, good=…, total=…` (or `mAP=…%`)")
    digest = hash_of(text)
    if digest is None:
        P(f"{where}: no `hash=<sha256 of mlperf_log_accuracy.json>` line")
    log = acc / "mlperf_log_accuracy.json"
    size = log.stat().st_size
    if size > MAX_ACCURACY_LOG_BYTES:
        P(f"{_rel(rep, log)}: {size} bytes, not truncated (limit {MAX_ACCURACY_LOG_BYTES}; "
          f"`appliance submission build` truncates it)")
    if digest is not None:
        recorded = manifest.get("result", {}).get("hash")
        if recorded and recorded != digest:
            P(f"{where}: hash {digest[:12]}… differs from the run manifest's {recorded[:12]}…")
        elif size <= 8192 and b"\n\n...\n\n" not in log.read_bytes() and sha256_file(log) != digest:
            P(f"{where}: hash does not match {log.name} (an untruncated log must hash to it)")
    if m is not None:
        value = float(m.group(2))
        if value < bench.quality_target:
            _synthetic_or_problem(rep, manifest, "weights",
                                  f"{where}: {m.group(1)} {value:.3f}% below the target {bench.quality_target:.3f}% "
                                  f"({bench.quality_fraction:.0%} of {bench.quality_reference}%)")
    detail = acc / "mlperf_log_detail.txt"
    _check_detail(detail, scenario, bench, rnd, rep, manifest, "accuracy")
    official = rnd.dataset_size.get(bench.name)
    total = read_detail(detail).get("qsl_reported_total_count")
    if official is not None and total is not None and total != official:
        _synthetic_or_problem(rep, manifest, "data", f"{_rel(rep, detail)}: accuracy run covers {total} samples, "
                                                     f"the official dataset has {official}")


def _check_compliance(t: Path, test: str, scenario: str, bench: benchmarks.Benchmark, rnd: Round, rep: Report,
                      perf_manifest: dict[str, Any]) -> None:
    P = rep.problems.append
    if not t.is_dir():
        P(f"{_rel(rep, t)}: missing compliance test {test} (run `appliance run -s {scenario} --mode {test}`)")
        return
    def verify(name: str) -> None:
        f = t / name
        if not f.is_file():
            P(f"{_rel(rep, f)}: missing")
        elif not f.read_text(errors="replace").rstrip().endswith("TEST PASS"):
            P(f"{_rel(rep, f)}: does not end in TEST PASS")

    if test == "TEST01":
        verify("verify_accuracy.txt")
    verify("verify_performance.txt")
    run1 = t / "performance" / "run_1"
    if _files_present(run1, PERF_FILES, rep):
        extra = sorted({p.name for p in run1.iterdir()} - COMPLIANCE_RUN_FILES)
        if extra:
            P(f"{_rel(rep, run1)}: only LoadGen's logs may be here; extra: {', '.join(extra)}")
        manifest = _manifest(t / "appliance") or perf_manifest
        _check_detail(run1 / "mlperf_log_detail.txt", scenario, bench, rnd, rep, manifest, "performance")
