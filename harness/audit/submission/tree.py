"""`appliance submission build`: a v6.1 submission tree from finished `appliance run` results.

Layout written (beside the official files, the appliance keeps what `appliance reproduce` needs:
`manifest.json`, `user.conf` and `mlperf.conf` stay in `performance/run_1/` and `accuracy/`, which the
v6.1 checker allows; compliance runs keep theirs in `TEST0x/appliance/`, because the checker wants
`TEST0x/performance/run_1/` to hold only LoadGen's logs)::

    closed/<ORG>/systems/<NAME>.json
    closed/<ORG>/src/<benchmark>/README.md
    closed/<ORG>/results/<NAME>/<benchmark>/<Scenario>/
        README.md user.conf mlperf.conf measurements.json
        performance/run_1/   the latest complete performance run (never a `.incomplete` one)
        performance/ranging/ run_1/ power/   a power session's folders, when the scenario holds power_session/
        accuracy/            accuracy.txt (+ hash line), mlperf_log_accuracy.json truncated, logs
        TEST01/ TEST04/      copied when the runs have them

The tree is written into a hidden folder beside `-o` and renamed at the end; the input runs are only read.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness import __version__
from harness.audit.submission import standin, system_json
from harness.audit.submission.truncate import truncate_accuracy_log, with_hash
from harness.core import inbound, leftovers
from harness.core.errors import ApplianceError, DataError
from harness.core.fsutil import disk_fault, plain_name
from harness.core.outbound import (
    atomic_write_json,
    atomic_write_text,
    check_new_folder,
    copy_file,
    make_dirs,
    need_space,
    new_staging_dir,
    publish_dir,
)
from harness.core.scenarios import SCENARIOS, Scenario
from harness.data import benchmarks
from harness.records import manifest as run_manifest
from harness.records.manifest import RunManifest

PERF_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
RUN_EXTRAS = ("manifest.json", "user.conf", "mlperf.conf")  # kept for `appliance reproduce`
DIVISIONS = ("closed", "open")


def _compliance_tests(bench: str) -> tuple[str, ...]:
    """The compliance tests the benchmark's record asks for (none for a folder of no known benchmark)."""
    return benchmarks.get(bench).compliance_tests if bench in benchmarks.NAMES else ()


@dataclass
class ScenarioRuns:
    """What the inputs hold for one benchmark/scenario."""

    benchmark: str
    scenario: Scenario
    systems: set[str] = field(default_factory=set)
    performance: list[Path] = field(default_factory=list)  # complete runs only
    accuracy: list[Path] = field(default_factory=list)
    tests: dict[str, Path] = field(default_factory=dict)
    siblings: list[Path] = field(default_factory=list)  # any run with a manifest, for the hints

    @property
    def label(self) -> str:
        return f"{self.benchmark}/{self.scenario}"


def _manifest(run: Path) -> RunManifest:
    """A chosen run's manifest, or DataError (one line) naming the file and the field that is wrong."""
    return run_manifest.read(run)


def _lenient(run: Path) -> RunManifest | None:
    """A candidate run's manifest for choosing and hints; None when absent or damaged (a chosen one is read
    again by `_manifest`, which says what is wrong)."""
    return run_manifest.read_lenient(run)


def _complete(run: Path, required: Iterable[str]) -> bool:
    return (run.is_dir() and not run.name.startswith(".") and not run.name.endswith(".incomplete")
            and not (run / "INCOMPLETE.txt").exists() and all((run / f).is_file() for f in required))


def latest_run(runs: list[Path]) -> Path:
    """Newest by the manifest's creation time, then by run number (the run a tree takes; the fleet build and
    report take a node's the same way)."""
    def key(p: Path) -> tuple[str, int]:
        tail = p.name.rsplit("_", 1)[-1]
        m = _lenient(p)
        return m.created_utc if m else "", int(tail) if inbound.is_digits(tail) and len(tail) < 10 else 1
    return max(runs, key=key)


def scenario_dirs(path: Path) -> list[Path]:
    """<benchmark>/<Scenario> folders in a results root, a system folder, a benchmark folder or one scenario."""
    found = []
    for depth in ("", "*", "*/*", "*/*/*"):
        for d in sorted(path.glob(depth)) if depth else [path]:
            if d.is_dir() and d.name in SCENARIOS and d.parent.name in benchmarks.NAMES:
                found.append(d)
    return found


def _mode_hint(sr: ScenarioRuns, mode: str) -> str:
    """The command that makes the missing run: a sibling run's recorded command (every flag kept) with this
    scenario and mode, else a plain one; `-b` always there."""
    for run_dir in (*sr.performance, *sr.accuracy, *sr.siblings):
        m = _lenient(run_dir)
        if m is not None and len(m.command) > 1:
            return "appliance " + " ".join(_with_flags(list(m.command[1:]), sr, mode))
    extra = "" if mode == "performance" else f" --mode {mode}"
    return f"appliance run -b {sr.benchmark} -s {sr.scenario}{extra}"


def _with_flags(args: list[str], sr: ScenarioRuns, mode: str) -> list[str]:
    """`args` with -b/-s/--mode set for `sr` and `mode` (replacing what was recorded)."""
    drop = {"-b": 1, "--benchmark": 1, "-s": 1, "--scenario": 1, "--mode": 1, "-m": 1}
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
            continue
        key = a.split("=", 1)[0]
        if key in drop:
            skip = 0 if "=" in a else drop[key]
            continue
        out.append(a)
    head = out[:1] if out[:1] == ["run"] else ["run"]
    rest = out[1:] if out[:1] == ["run"] else out
    return [*head, "-b", sr.benchmark, "-s", sr.scenario, *([] if mode == "performance" else ["--mode", mode]), *rest]


def collect(inputs: Iterable[Path], system_dir: str | None = None
            ) -> tuple[dict[tuple[str, str], ScenarioRuns], list[str], list[str]]:
    """Runs per (benchmark, scenario) of one system folder across all inputs, one line per input problem, and
    one line per folder skipped (another system, or a system with no complete run: empty or failed)."""
    per_system: dict[str, dict[tuple[str, str], ScenarioRuns]] = {}
    problems: list[str] = []
    for path in inputs:
        if not path.is_dir():
            problems.append(f"{path}: not a folder (give results folders written by `appliance run`)")
            continue
        dirs = scenario_dirs(path)
        if not dirs:
            problems.append(f"{path}: no <benchmark>/<Scenario> folders from `appliance run` in it")
        for d in dirs:
            system = d.parent.parent.name
            found = per_system.setdefault(system, {})
            sr = found.setdefault((d.parent.name, d.name), ScenarioRuns(d.parent.name, Scenario(d.name)))
            sr.systems.add(system)
            runs = sorted((d / "performance").glob("run_*")) + sorted(d.glob("accuracy*"))
            sr.siblings += [r for r in runs if (r / "manifest.json").is_file()]
            sr.performance += [r for r in sorted((d / "performance").glob("run_*"))
                               if _complete(r, (*PERF_FILES, "manifest.json"))]
            sr.accuracy += [r for r in sorted(d.glob("accuracy*"))
                            if _complete(r, ("accuracy.txt", "mlperf_log_accuracy.json", *PERF_FILES))]
            for test in _compliance_tests(d.parent.name):
                if (d / test).is_dir():
                    sr.tests[test] = d / test  # a later input wins
    skipped = []
    for system, found in sorted(per_system.items()):
        if not any(sr.performance or sr.accuracy for sr in found.values()):
            skipped.append(f"{system}: no complete run in it (empty or failed runs only); not a system to submit")
        elif system_dir is not None and system != system_dir:
            skipped.append(f"{system}: another system than --system-dir {system_dir}")
    usable = {s: f for s, f in per_system.items() if not any(line.startswith(f"{s}: ") for line in skipped)}
    if system_dir is not None and system_dir not in per_system:
        problems.append(f"--system-dir {system_dir}: no such system folder in the inputs (they hold: "
                        f"{', '.join(sorted(per_system)) or 'none'})")
    if len(usable) > 1:
        listing = "; ".join(f"{s} ({', '.join(sorted(f'{b}/{sc}' for b, sc in f))})" for s, f in sorted(usable.items()))
        problems.append(f"runs come from {len(usable)} system folders (one per card setup / backend): {listing}; "
                        f"choose one with --system-dir NAME (one tree per system)")
        return {}, problems, skipped
    found = next(iter(usable.values()), {})
    for sr in found.values():
        if not sr.performance:
            problems.append(f"{sr.label}: no complete performance run (performance/run_N with mlperf_log_detail.txt "
                            f"and manifest.json); run `{_mode_hint(sr, 'performance')}`")
        if not sr.accuracy:
            problems.append(f"{sr.label}: no complete accuracy run; run `{_mode_hint(sr, 'accuracy')}`")
    return found, problems, skipped


@contextlib.contextmanager
def publishing(staging: Path, out: Path) -> Iterator[None]:
    """What the block writes in `staging` becomes `out` whole when it ends; on any fault the staging goes, and a
    full or failing disk is one line (nothing is left beside `out`)."""
    try:
        yield
        publish_dir(staging, out, f"submission build -o {out}")
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        fault = disk_fault(exc, name_file=False)
        if fault is not None:
            raise ApplianceError(f"cannot write the tree in {out.parent}: {fault}; nothing was left there: free "
                                 f"some space or choose another -o folder") from None
        raise


def build(inputs: list[Path], out: Path, submitter: str, system_name: str, division: str = "closed",
          overrides_file: Path | None = None, echo: Callable[[str], None] = print,
          system_dir: str | None = None) -> Path:
    """Write the tree to `out` (which must not exist) and return it."""
    if division not in DIVISIONS:
        raise ApplianceError(f"division {division!r}: choose one of {', '.join(DIVISIONS)}")
    for name, what in ((submitter, "submitter"), (system_name, "system name")):
        plain_name(name, what)
    check_new_folder(out, "submission build", "-o", example="submission", what="the tree", reads=inputs)
    overrides = system_json.load_overrides(overrides_file)
    found, problems, skipped = collect(inputs, system_dir)
    for line in skipped:
        echo(f"skipped {line}")
    if not found and not problems:
        problems.append("no system folder with complete runs in the inputs" + (" (see the skipped ones above)"
                                                                              if skipped else ""))
    if problems:
        raise DataError("; ".join(problems)) if len(problems) == 1 else DataError(
            f"{len(problems)} problems with the runs:\n  " + "\n  ".join(problems))
    chosen = {k: (latest_run(sr.performance), latest_run(sr.accuracy)) for k, sr in found.items()}
    links = _links_out([(f, _input_of(f, inputs)) for k, pair in chosen.items()
                        for f in (*pair, *found[k].tests.values())])
    if links:
        raise DataError(f"{len(links)} file(s) of the runs link outside the folder given: {'; '.join(links[:5])}; "
                        f"copy them into the run folders (a tree for publication holds no file from elsewhere)")
    manifests = [_manifest(p) for pair in chosen.values() for p in pair]
    copied = [f for pair in chosen.values() for run in pair for f in run.iterdir()  # accuracy logs: truncated
              if f.is_file() and f.name not in ("mlperf_log_accuracy.json", "mlperf_log_trace.json")]
    sys_json = system_json.build(division, submitter, system_name, manifests,
                                 sorted({s for _, s in found}), overrides)
    try:
        need_space(out.parent, sum(f.stat().st_size for f in copied), f"the tree {out}",
                   "free some space or choose another -o folder")
        make_dirs(out.parent)
        leftovers.sweep([out.parent], echo)  # the half-built trees of killed builds
        tmp = new_staging_dir(out)
    except OSError as exc:
        why = disk_fault(exc, name_file=False) or exc.strerror
        raise ApplianceError(f"cannot write the tree in {out.parent}: {why}; choose another -o folder") from None
    with publishing(tmp, out):
        sub = tmp / division / submitter
        atomic_write_json(sub / "systems" / f"{system_name}.json", sys_json)
        for bench in sorted({b for b, _ in found}):
            _write_src_readme(sub / "src" / bench / "README.md", bench, [m for m in manifests
                                                                          if m.benchmark == bench])
        for (bench, scenario), sr in sorted(found.items()):
            perf, acc = chosen[(bench, scenario)]
            dest = sub / "results" / system_name / bench / scenario
            _write_scenario(dest, sr, perf, acc, _input_of(perf, inputs))
            echo(f"{sr.label}: performance {perf}, accuracy {acc}"
                 + "".join(f", {t} {p}" for t, p in sorted(sr.tests.items())))
            missing = [t for t in _compliance_tests(bench) if t not in sr.tests]
            if missing:
                echo(f"{sr.label}: no {' / '.join(missing)} folder in the runs; add the compliance runs "
                     f"({', '.join(f'`{_mode_hint(sr, t)}`' for t in missing)}) before submitting")
    todo = system_json.undetected(sys_json)
    if todo:
        echo(f"system JSON: not detectable here, set in --system-overrides: {', '.join(todo)}")
    if "status" not in overrides or "system_type" not in overrides:
        echo(f"system JSON: status={sys_json['status']!r}, system_type={sys_json['system_type']!r} are defaults; "
             f"confirm them in --system-overrides")
    return out


def _input_of(run: Path, inputs: list[Path]) -> Path:
    """The input folder the user named that holds `run` (its links must stay inside it)."""
    return next((i for i in inputs if run.resolve().is_relative_to(i.resolve()) or run.is_relative_to(i)), run)


def _links_out(folders: list[tuple[Path, Path]]) -> list[str]:
    """Files of the runs to publish that link out of the input folder holding them: a tree for publication
    must not carry a file from elsewhere (a link to ~/.ssh/id_rsa named accuracy_golden.txt)."""
    out = []
    for folder, within in folders:
        for f in sorted(folder.rglob("*")):
            try:
                inbound.check_within(f, within)
            except inbound.Refused as exc:
                out.append(str(exc).split("; ")[0])
    return out


def _copy(src: Path, dst: Path, within: Path) -> None:
    copy_file(src, dst, limit=inbound.ACCURACY_LOG, within=within, sole=True)  # published: no hard link in


def _write_scenario(dest: Path, sr: ScenarioRuns, perf: Path, acc: Path, within: Path) -> None:
    run1 = dest / "performance" / "run_1"
    session = perf.parent.parent / standin.SESSION_FOLDER
    if session.is_dir():  # a power result: run_1 holds the session's files, the appliance's go beside
        _write_power_session(session, dest / "performance", within)
    for name in (*PERF_FILES, *RUN_EXTRAS):
        if (perf / name).is_file() and not session.is_dir():
            _copy(perf / name, run1 / name, within)
        elif name in RUN_EXTRAS and (perf / name).is_file():
            _copy(perf / name, dest / "performance" / "appliance" / name, within)
    _copy(perf / "user.conf", dest / "user.conf", within)
    _copy(perf / "mlperf.conf", dest / "mlperf.conf", within)
    adir = dest / "accuracy"
    make_dirs(adir)
    for name in (*PERF_FILES, *RUN_EXTRAS, "accuracy_golden.txt"):
        if (acc / name).is_file():
            _copy(acc / name, adir / name, within)
    digest = truncate_accuracy_log(acc / "mlperf_log_accuracy.json", adir / "mlperf_log_accuracy.json")
    atomic_write_text(adir / "accuracy.txt", with_hash(inbound.read_text(acc / "accuracy.txt", within=within), digest,
                                                       str(acc / "accuracy.txt")))
    for test, src in sorted(sr.tests.items()):
        _copy_test(src, dest / test, within)
    perf_m, acc_m = _manifest(perf), _manifest(acc)
    atomic_write_json(dest / "measurements.json", measurements(perf_m))
    atomic_write_text(dest / "README.md", _scenario_readme(sr, perf, acc, perf_m, acc_m))


def _write_power_session(session: Path, perf: Path, within: Path) -> None:
    """A power session's folders (ranging/, run_1/, power/, as the power client leaves them) into the scenario's
    performance/, byte for byte (the session records every file's sha1). Its run_1 is the measured testing run;
    the appliance's files of that run go to performance/appliance/, since a power result's run_1 may hold only
    LoadGen's logs and spl.txt."""
    for sub in ("ranging", "run_1", "power"):
        for f in sorted(p for p in (session / sub).iterdir() if p.is_file()):
            _copy(f, perf / sub / f.name, within)


def _copy_test(src: Path, dst: Path, within: Path) -> None:
    """A compliance folder: verify files, LoadGen's logs in performance/run_1, the rest in appliance/."""
    for name in ("verify_accuracy.txt", "verify_performance.txt"):
        if (src / name).is_file():
            _copy(src / name, dst / name, within)
    run = src / "performance" / "run_1"
    if run.is_dir():
        for f in sorted(p for p in run.iterdir() if p.is_file()):
            if f.name in (*PERF_FILES, "mlperf_log_accuracy.json"):
                _copy(f, dst / "performance" / "run_1" / f.name, within)
            elif f.name != "mlperf_log_trace.json":
                _copy(f, dst / "appliance" / f.name, within)
    acc = src / "accuracy"
    if acc.is_dir():
        make_dirs(dst / "accuracy")
        for f in sorted(p for p in acc.iterdir() if p.is_file()):
            if f.name not in ("mlperf_log_accuracy.json", "accuracy.txt"):
                _copy(f, dst / "accuracy" / f.name, within)
        log = acc / "mlperf_log_accuracy.json"
        if log.is_file():
            digest = truncate_accuracy_log(log, dst / "accuracy" / "mlperf_log_accuracy.json")
            text = inbound.read_text(acc / "accuracy.txt", within=within) if (acc / "accuracy.txt").is_file() else ""
            atomic_write_text(dst / "accuracy" / "accuracy.txt", with_hash(text, digest, str(acc / "accuracy.txt")))


def measurements(manifest: RunManifest) -> dict[str, str]:
    """measurements.json from a run manifest: what went into the model and where its weights came from."""
    model = manifest.model
    bench = benchmarks.get(manifest.benchmark) if manifest.benchmark in benchmarks.NAMES else None
    official = bench.official_model if bench else "the official model"
    if model.synthetic:
        weights = (f"SYNTHETIC seeded weights (seed {model.seed}, sha256 {model.sha256[:16]}…) "
                   f"in the architecture and I/O signature of {official}; not the official weights")
        transforms = "none (synthetic weights generated in fp32; no retraining, no quantization)"
    elif model.official_artefact:
        weights = f"{model.official_artefact} (sha256 {model.sha256[:16]}…)"
        transforms = "none (official fp32 ONNX run by onnxruntime as-is)"
    else:
        weights = (f"{Path(model.path).name} (sha256 {model.sha256[:16]}…; "
                   f"not a verified official artefact)")
        transforms = "none"
    data_note = " (synthetic dataset)" if manifest.dataset.synthetic else ""
    precision = manifest.precision
    staged = ("mean subtracted to fp32 when staged" if precision == "fp32"
              else "read as stored; cast in the graph")
    weight_types, how = {"int8": ("int8", "quantised to int8 per channel (onnxruntime static quantisation, QDQ)"),
                         "bf16": ("bf16", "fp32 weights converted to bf16 by OpenVINO's CPU plugin when it compiles "
                                          "(INFERENCE_PRECISION_HINT bf16)"),
                         "fp16": ("fp16", "fp32 weights converted to fp16 by onnxruntime's convert_float_to_float16 "
                                          "(graph inputs and outputs kept in their types; its default op list left "
                                          "in fp32)"),
                         "tf32": ("fp32", "none to the fp32 weights; the CUDA provider's cuBLAS / cuDNN round their "
                                          "operands to TF32 (use_tf32=1)")}.get(str(precision), ("fp32", ""))
    return {
        "input_data_types": f"uint8 (preprocessed NCHW shards; {staged}){data_note}",
        "retraining": "No",
        "starting_weights_filename": weights,
        "weight_data_types": weight_types,
        "weight_transformations": how or transforms,
    }


def _commands(*manifests: RunManifest) -> str:
    lines = ["appliance " + " ".join(m.command[1:]) for m in manifests if m.command]
    return "\n".join(lines) or "(no command recorded)"


def _scenario_readme(sr: ScenarioRuns, perf: Path, acc: Path, perf_m: RunManifest, acc_m: RunManifest) -> str:
    notes = sorted(set(perf_m.notes + acc_m.notes))
    return (f"# {sr.benchmark} {sr.scenario}\n\n"
            f"Produced by mlperf-appliance {__version__} with MLCommons LoadGen "
            f"{perf_m.loadgen.version or 'unknown'}.\n\n"
            f"## Commands\n\n```sh\n{_commands(perf_m, acc_m)}\n```\n\n"
            f"Performance run: `{perf.name}` (copied to `performance/run_1`); accuracy run: `{acc.name}`.\n"
            f"The run manifests (`manifest.json`: model, data and config digests, card-to-core map, package "
            f"versions) are kept beside the logs, for `appliance reproduce`.\n\n"
            + ("## Notes\n\n" + "".join(f"- {n}\n" for n in notes) if notes else ""))


def _write_src_readme(path: Path, bench: str, manifests: list[RunManifest]) -> None:
    synthetic = any(m.synthetic.any for m in manifests)
    atomic_write_text(path,
        f"# {bench}: mlperf-appliance {__version__}\n\n"
        "The harness is the `mlperf-appliance` Python package (`harness/`): LoadGen glue (`sut.py`, `qsl.py`), "
        "card backends (`cards/`), the card-to-core map (`topology/`), offline preprocessing (`datasets/`), "
        "scoring (`accuracy/`).\n\n"
        "## Reproduce\n\n```sh\n"
        f"appliance prepare --benchmark {bench}\n"
        f"appliance run --benchmark {bench} --scenario <Scenario> --mode performance\n"
        f"appliance run --benchmark {bench} --scenario <Scenario> --mode accuracy\n"
        "appliance reproduce <this submission tree>\n```\n"
        + ("\n**Synthetic**: these results were made with seeded (synthetic) weights and/or a synthetic "
           "dataset; they demonstrate the harness, not the model's accuracy.\n" if synthetic else ""))
