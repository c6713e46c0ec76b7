"""Agreement of `appliance submission check` with the official MLPerf checker, tree by tree.

Give it a corpus folder holding one submission tree per sub-folder (each holding closed/ or open/) with a
`<tree>.round` file beside it naming its round (e.g. `v5.1`), and, per round, a fetched copy of the official
checker (never committed; run from its own Python, e.g. a venv under /tmp):

    python tools/audit_corpus.py /tmp/corpus --checker v5.1=/tmp/official/v5.1/submission_checker.py \\
        --checker v4.1=/tmp/official/v4.1/submission_checker.py --python /tmp/venv-checker/bin/python

Both checkers run on each tree; their findings are sorted into topics (seeds, duration, a missing file, …)
per scenario folder and printed side by side: found by both, only by ours, only by theirs, and crashes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.audit.submission.check import check_tree
from harness.core import environment

# (topic, pattern in our problem lines, pattern in the official checker's ERROR lines)
TOPICS = (
    ("seeds", r"rng_seed|RNG seeds", r"rng_seed is wrong"),
    ("duration", r"effective_min_duration_ms", r"Test duration less than"),
    ("sample count", r"performance_sample_count", r"performance_sample_count"),
    ("samples/query", r"samples_per_query", r"minimum samples per query"),
    ("early stopping", r"early stopping not met", r"Early stopping condition was not met"),
    ("latency bound", r"target latency", r"Latency constraint"),
    ("min queries", r"min_query_count", r"minimum Query Count"),
    ("LoadGen errors", r"LoadGen error", r"contains errors"),
    ("accuracy target", r"below the target", r"accuracy not met"),
    ("accuracy hash", r"hash", r"not hash value"),
    ("truncation", r"not truncated", r"is not truncated"),
    ("dataset size", r"official dataset has", r"does not cover all dataset"),
    ("measurements", r"missing or empty|measurement description",
     r"missing meaningful value|is missing .*\*\.json|measurements\.json, field"),
    ("system JSON", r"systems/.*(missing keys|empty values|status|system_type|division|submitter)",
     r"field .* is missing|meaningful response|invalid status|invalid system type|has division|has submitter"),
    ("required scenarios", r"needs scenarios", r"does not have all required scenarios"),
    ("benchmark / system type", r"not a benchmark|cannot enter|neither required nor optional",
     r"invalid model|neither required nor optional"),
    ("compliance", r"TEST PASS|compliance test|TEST0\d", r"Compliance test|compliance dir|Missing TEST"),
    ("tree hygiene", r"symbolic|over 50 MB|hidden names|spaces|__pycache__|empty folders",
     r"symbolic links|greater than 50 MB|git unfriendly|spaces in their names|__pycache__|empty directories"),
    ("calibration", r"calibration", r"calibration"),
    ("missing file or folder", r": missing|missing folder|files the round does not allow",
     r"is missing|has no |file list mismatch|no measurement_dir|no system_desc"),
    ("result INVALID", r"LoadGen result is", r"$^"),
)
CONSEQUENCES = re.compile(r"has issues|accuracy not valid|is OK but accuracy|Results=|NoResults|Some measurem|SUMMARY")
SCENARIO_PATH = re.compile(r"(?:closed|open|network)/[^/\s]+/(?:results|measurements|compliance)/([^/\s]+)/([^/\s]+)"
                           r"(?:/([^/\s,')\]]+))?")


def topic(line: str, column: int) -> str:
    for name, ours, theirs in TOPICS:
        if re.search((ours, theirs)[column], line, re.IGNORECASE):
            return name
    return "other"


def place(line: str) -> str:
    """The scenario folder (or system) a line is about, with the scenario spelling folded."""
    m = SCENARIO_PATH.search(line)
    if not m:
        return "(tree)"
    system, bench, scenario = m.group(1), m.group(2), m.group(3) or ""
    return "/".join(x for x in (system, bench, scenario.lower()) if x)


def ours(tree: Path, version: str) -> tuple[set[tuple[str, str]], str | None, list[str]]:
    try:
        report = check_tree(tree, version)
    except Exception as exc:  # an internal error is what this tool is here to catch
        return set(), f"{type(exc).__name__}: {exc}", []
    return {(place(p), topic(p, 0)) for p in report.problems}, None, report.problems


def official_text(tree: Path, version: str, checker: Path, python: str) -> str:
    """The official checker's whole output: a submission_checker.py (up to v5.1) or the submission_checker/
    package (v6.x, run as `python -m submission_checker.main`)."""
    if checker.is_dir():
        cmd = [python, "-m", "submission_checker.main", "--input", str(tree.resolve()), "--version", version,
               "--csv", "/dev/null"]
        env = environment.child(PYTHONPATH=str(checker.resolve().parent))
        done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=600, env=env)
    else:
        cmd = [python, str(checker), "--input", ".", "--version", version, "--csv", "/dev/null"]
        done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


def theirs(tree: Path, version: str, checker: Path, python: str) -> tuple[set[tuple[str, str]], str | None,
                                                                          list[str]]:
    """The official checker's findings, sorted into topics per scenario folder, and its crash if any."""
    text = official_text(tree, version, checker, python)
    crash = None
    if "Traceback (most recent call last)" in text:
        crash = text.strip().splitlines()[-1][:160]
    lines = [ln for ln in text.splitlines() if re.search(r"\bERROR\b", ln) and not CONSEQUENCES.search(ln)]
    lines += [ln for ln in text.splitlines() if "WARNING" in ln and "closed/" in ln and "accuracy not met" in ln]
    found = {(place(ln), topic(ln, 1)) for ln in lines}
    return found, crash, lines


def _first(tree: Path, pattern: str) -> Path | None:
    return next(iter(sorted(tree.glob(pattern))), None)


def _set_key(path: Path | None, key: str, value: object) -> bool:
    """Set a LoadGen detail-log key (every record of it); False when there is no log or no such key."""
    if path is None:
        return False
    out, hit = [], False
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG"):
            try:
                rec = json.loads(line[len(":::MLLOG"):])
            except json.JSONDecodeError:
                out.append(line)
                continue
            if rec.get("key") == key:
                rec["value"], hit = value, True
                line = ":::MLLOG " + json.dumps(rec)
        out.append(line)
    path.write_text("\n".join(out) + "\n")
    return hit


def _detail(tree: Path, scenario: str = "*") -> Path | None:
    return _first(tree, f"*/*/results/*/*/{scenario}/performance/run_1/mlperf_log_detail.txt")


def _system_edit(tree: Path, edit: Callable[[dict[str, object]], object]) -> bool:
    path = _first(tree, "*/*/systems/*.json")
    if path is None:
        return False
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return True


def _acc_txt(tree: Path, edit: Callable[[str], str]) -> bool:
    path = _first(tree, "*/*/results/*/*/*/accuracy/accuracy.txt")
    if path is None:
        return False
    path.write_text(edit(path.read_text()))
    return True


def _unlink(path: Path | None) -> bool:
    if path is None:
        return False
    path.unlink()
    return True


def _grow(path: Path | None) -> bool:
    if path is None:
        return False
    path.write_text("[" + " " * 20000 + "]")
    return True


def _lower_accuracy(text: str) -> str:
    return re.sub(r"^(accuracy|mAP)=[\d.]+", r"\1=1.000", text, flags=re.MULTILINE)


def _rename_benchmark(tree: Path, new: str) -> bool:
    """Every folder of the first benchmark (results, measurements, compliance, code) renamed `new`."""
    bench = _first(tree, "*/*/results/*/resnet50")
    if bench is None:
        return False
    sub = bench.parents[2]
    for kind in ("results", "measurements", "compliance"):
        for d in sorted(sub.glob(f"{kind}/*/resnet50")):
            d.rename(d.with_name(new))
    if (sub / "code" / "resnet50").is_dir():
        (sub / "code" / "resnet50").rename(sub / "code" / new)
    return True


def _spare_system(tree: Path) -> bool:
    path = _first(tree, "*/*/systems/*.json")
    if path is None:
        return False
    shutil.copy(path, path.with_name("spare_system.json"))
    return True


# Single faults put into a copy of a real tree: name -> edit (False: the tree has no place for it).
FAULTS: dict[str, Callable[[Path], bool]] = {
    "wrong qsl_rng_seed": lambda t: _set_key(_detail(t), "effective_qsl_rng_seed", 1),
    "short min duration": lambda t: _set_key(_detail(t), "effective_min_duration_ms", 1000),
    "small performance_sample_count": lambda t: _set_key(_detail(t), "effective_performance_sample_count", 1),
    "min duration null": lambda t: _set_key(_detail(t), "effective_min_duration_ms", None),
    "Offline samples_per_query 1": lambda t: _set_key(_detail(t, "[Oo]ffline"), "effective_samples_per_query", 1),
    "early stopping not met": lambda t: _set_key(_detail(t, "[Ss]ingle[Ss]tream") or _detail(t, "[Ss]erver"),
                                                 "early_stopping_met", False),
    "hash line removed": lambda t: _acc_txt(t, lambda x: re.sub(r"^hash=.*$", "", x, flags=re.MULTILINE)),
    "accuracy lowered (closed)": lambda t: (t / "closed").is_dir() and _acc_txt(t, _lower_accuracy),
    "accuracy log untruncated": lambda t: _grow(_first(t, "*/*/results/*/*/*/accuracy/mlperf_log_accuracy.json")),
    "system JSON key removed": lambda t: _system_edit(t, lambda d: d.pop("cooling", None)),
    "system JSON bad status": lambda t: _system_edit(t, lambda d: d.update(status="bogus")),
    "TEST01 verify_performance removed": lambda t: _unlink(_first(t, "*/*/*/*/*/*/TEST01/verify_performance.txt")),
    "user.conf removed": lambda t: _unlink(_first(t, "*/*/*/*/*/*/user.conf")),
    # issue 42's disagreements: what the official checker accepts (the first three; ours warns on two)
    "resnet50 folders named mobilenet": lambda t: _rename_benchmark(t, "mobilenet"),
    "system JSON with no results": _spare_system,
    "TEST01 performance run INVALID": lambda t: _set_key(
        _first(t, "*/*/*/*/*/*/TEST01/performance/run_1/mlperf_log_detail.txt"), "result_validity", "INVALID"),
    "TEST04 performance run INVALID": lambda t: _set_key(
        _first(t, "*/*/*/*/*/*/TEST04/performance/run_1/mlperf_log_detail.txt"), "result_validity", "INVALID"),
    "accelerators_per_node \"two\"": lambda t: _system_edit(t, lambda d: d.update(accelerators_per_node="two")),
}


def faults(trees: list[tuple[Path, str]], checkers: dict[str, Path], python: str) -> str:
    """Per fault: in how many trees both checkers, only ours, only theirs, or neither noticed it."""
    counts: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in FAULTS}
    for tree, version in trees:
        base_ours, _, _ = ours(tree, version)
        base_theirs, _, _ = theirs(tree, version, checkers[version], python)
        for name, fault in FAULTS.items():
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / tree.name
                shutil.copytree(tree, copy, symlinks=True)
                if not fault(copy):
                    continue
                mine, my_crash, _ = ours(copy, version)
                official, their_crash, _ = theirs(copy, version, checkers[version], python)
                a, b = bool(mine - base_ours) or bool(my_crash), bool(official - base_theirs) or bool(their_crash)
                counts[name][0 if a and b else 1 if a else 2 if b else 3] += 1
    out = ["| fault | both found | only ours | only theirs | neither |", "|---|---|---|---|---|"]
    out += [f"| {name} | " + " | ".join(map(str, c)) + " |" for name, c in counts.items()]
    return "\n".join(out)


def move_to(tree: Path, dest: Path, version: str) -> None:
    """A pre-v6.0 tree copied into the v6.0+ layout, its logs carrying `version`'s seeds: measurements and
    compliance folded under results/<system>/<benchmark>/<scenario>/, the measurement JSON renamed
    measurements.json, code/ renamed src/."""
    from harness.audit.submission.rounds import ROUNDS, SEED_KEYS

    shutil.copytree(tree, dest, symlinks=True)
    for sub in (p for div in dest.iterdir() if div.is_dir() for p in div.iterdir() if p.is_dir()):
        for kind in ("measurements", "compliance"):
            for scen in sorted((sub / kind).glob("*/*/*")):
                target = sub / "results" / scen.relative_to(sub / kind)
                if not target.is_dir():
                    continue
                system = scen.parent.parent.name
                for item in scen.iterdir():
                    described = kind == "measurements" and item.name.startswith(system) and item.suffix == ".json"
                    name = "measurements.json" if described else item.name
                    shutil.move(str(item), str(target / name))
            shutil.rmtree(sub / kind, ignore_errors=True)
        if (sub / "code").is_dir():
            (sub / "code").rename(sub / "src")
        for name in ("calibration.md", "documentation"):
            if (sub / name).exists() and name == "calibration.md":
                (sub / name).unlink()
    seeds = ROUNDS[version].seeds
    for log in dest.rglob("mlperf_log_detail.txt"):
        for k in SEED_KEYS:
            _set_key(log, f"effective_{k}", seeds[k])


OFFICIAL_POWER = re.compile(r"Results (\S+) [\d.]+ with power_metric = ([\d.]+) and power_efficiency "
                            r"\(samples/J\) = ([\d.]+)")


def power_rows(tree: Path, version: str, checker: Path, python: str) -> list[str]:
    """One table row per power result: the official checker's verdict and printed figures beside ours."""
    text = official_text(tree, version, checker, python)
    official = {m.group(1): (m.group(2), m.group(3)) for m in OFFICIAL_POWER.finditer(text)}
    report = check_tree(tree, version)
    verdicts = f"{'FAIL' if 'has errors' in text or 'Traceback' in text else 'PASS'} / " \
               f"{'PASS' if report.ok else 'FAIL'}"
    rows = []
    for p in report.power:
        theirs_ = official.pop(p.where, ("-", "-"))
        ours_ = (f"{p.metric:f}", f"{p.samples_per_joule:f}") if p.metric is not None \
            and p.samples_per_joule is not None else ("-", "-")
        same = "yes" if theirs_ == ours_ else "NO"
        rows.append(f"| {tree.name} | {version} | {verdicts} | {p.where.split('/results/')[1]} | {p.unit} | "
                    f"{theirs_[0]} / {ours_[0]} | {theirs_[1]} / {ours_[1]} | {same} |")
    rows += [f"| {tree.name} | {version} | {verdicts} | {w} (only theirs) | | {m} / - | {e} / - | NO |"
             for w, (m, e) in official.items()]
    return rows


def power_table(corpus: Path, checkers: dict[str, Path], python: str) -> int:
    """`--power`: the table of every power result in the corpus; 1 when a verdict or a figure differs."""
    print("| tree | round | verdict (official / ours) | power result | unit | metric (official / ours) | "
          "samples/J (official / ours) | same |\n|---|---|---|---|---|---|---|---|")
    lines = []
    for tree in sorted(p for p in corpus.iterdir() if p.is_dir()):
        round_file = tree.with_name(tree.name + ".round")
        version = round_file.read_text().strip() if round_file.is_file() else "auto"
        if version in checkers:
            lines += power_rows(tree, version, checkers[version], python)
    print("\n".join(lines))
    return 1 if any(line.endswith("| NO |") or "FAIL" in line.split("|")[3] for line in lines) else 0


def table(rows: Iterable[tuple[str, str, str, str, str, str]]) -> str:
    head = ("tree", "round", "both found", "only ours", "only theirs", "crashes")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _show(items: set[tuple[str, str]]) -> str:
    return "; ".join(f"{t} ({p})" for p, t in sorted(items)) or "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: python tools/audit_corpus.py /tmp/corpus "
                                        "--checker v5.1=/tmp/official/v5.1/submission_checker.py")
    ap.add_argument("corpus", type=Path, help="folder of trees, each with a <tree>.round file beside it")
    ap.add_argument("--checker", action="append", default=[], metavar="ROUND=PATH",
                    help="the official submission_checker.py of a round, e.g. v5.1=/tmp/official/v5.1/"
                         "submission_checker.py (repeat per round)")
    ap.add_argument("--python", default=sys.executable, help="Python to run the official checker with (a venv)")
    ap.add_argument("--moved-to", metavar="ROUND",
                    help="also check every pre-v6.0 tree moved into the v6.0+ layout with ROUND's seeds, "
                         "e.g. --moved-to v6.1 (needs --checker v6.1=<submission_checker package folder>)")
    ap.add_argument("--faults", type=int, default=0, metavar="N",
                    help="also put single faults into copies of the first N trees and count who notices, "
                         "e.g. --faults 4")
    ap.add_argument("--power", action="store_true",
                    help="only the power results: both checkers' verdicts and printed power figures, per result")
    ap.add_argument("-v", "--verbose", action="store_true", help="also print every finding of both checkers")
    args = ap.parse_args(argv)
    checkers = {}
    for item in args.checker:
        version, _, path = item.partition("=")
        if not path or not Path(path).exists():
            print(f"--checker {item!r}: give ROUND=PATH to a fetched submission_checker.py", file=sys.stderr)
            return 2
        checkers[version] = Path(path)
    if not args.corpus.is_dir():
        print(f"{args.corpus} is not a folder", file=sys.stderr)
        return 2
    if args.power:
        return power_table(args.corpus, checkers, args.python)
    rows = []
    disagreements = 0
    for tree in sorted(p for p in args.corpus.iterdir() if p.is_dir()):
        round_file = tree.with_name(tree.name + ".round")
        version = round_file.read_text().strip() if round_file.is_file() else "auto"
        mine, my_crash, my_lines = ours(tree, version)
        if version not in checkers:
            rows.append((tree.name, version, "-", _show(mine), "(no official checker given)", my_crash or "-"))
            continue
        official, their_crash, their_lines = theirs(tree, version, checkers[version], args.python)
        both, only_ours, only_theirs = mine & official, mine - official, official - mine
        disagreements += bool(only_ours or only_theirs or my_crash)
        crashes = "; ".join(f"{who}: {c}" for who, c in (("ours", my_crash), ("theirs", their_crash)) if c) or "-"
        rows.append((tree.name, version, _show(both), _show(only_ours), _show(only_theirs), crashes))
        if args.verbose:
            print(f"## {tree.name}\nours:\n  " + "\n  ".join(my_lines or ["-"]) + "\ntheirs:\n  "
                  + "\n  ".join(their_lines or ["-"]) + "\n")
    if args.moved_to and args.moved_to in checkers:
        with tempfile.TemporaryDirectory() as tmp:
            for tree in sorted(p for p in args.corpus.iterdir() if p.is_dir()):
                moved = Path(tmp) / f"{tree.name}-as-{args.moved_to}"
                move_to(tree, moved, args.moved_to)
                mine, my_crash, my_lines = ours(moved, args.moved_to)
                official, their_crash, their_lines = theirs(moved, args.moved_to, checkers[args.moved_to],
                                                            args.python)
                both, only_ours, only_theirs = mine & official, mine - official, official - mine
                disagreements += bool(only_ours or only_theirs or my_crash)
                crashes = "; ".join(f"{w}: {c}" for w, c in (("ours", my_crash), ("theirs", their_crash)) if c)
                rows.append((moved.name, args.moved_to, _show(both), _show(only_ours), _show(only_theirs),
                             crashes or "-"))
                if args.verbose:
                    print(f"## {moved.name}\nours:\n  " + "\n  ".join(my_lines or ["-"]) + "\ntheirs:\n  "
                          + "\n  ".join(their_lines or ["-"]) + "\n")
    print(table(rows))
    if args.faults:
        chosen = [(t, t.with_name(t.name + ".round").read_text().strip()) for t in sorted(
            p for p in args.corpus.iterdir() if p.is_dir() and p.with_name(p.name + ".round").is_file())]
        chosen = [(t, v) for t, v in chosen if v in checkers][:args.faults]
        print()
        print(faults(chosen, checkers, args.python))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
