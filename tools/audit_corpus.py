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
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from harness.submission.check import check_tree

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
    ("system JSON", r"systems/.*(missing keys|empty values|status|system_type|division|submitter)",
     r"field .* is missing|meaningful response|invalid status|invalid system type|has division|has submitter"),
    ("measurements", r"missing or empty|measurement description", r"missing meaningful value|is missing .*\*\.json"),
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
CONSEQUENCES = re.compile(r"has issues|accuracy not valid|is OK but accuracy|Results=|NoResults")
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


def theirs(tree: Path, version: str, checker: Path, python: str) -> tuple[set[tuple[str, str]], str | None,
                                                                          list[str]]:
    cmd = [python, str(checker), "--input", ".", "--version", version, "--csv", "/dev/null"]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=600)
    text = done.stdout + done.stderr
    crash = None
    if "Traceback (most recent call last)" in text:
        crash = text.strip().splitlines()[-1][:160]
    lines = [ln for ln in text.splitlines() if " ERROR] " in ln and not CONSEQUENCES.search(ln)]
    lines += [ln for ln in text.splitlines() if " WARNING] closed/" in ln and "accuracy not met" in ln]
    found = {(place(ln), topic(ln, 1)) for ln in lines}
    return found, crash, lines


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
    ap.add_argument("-v", "--verbose", action="store_true", help="also print every finding of both checkers")
    args = ap.parse_args(argv)
    checkers = {}
    for item in args.checker:
        version, _, path = item.partition("=")
        if not path or not Path(path).is_file():
            print(f"--checker {item!r}: give ROUND=PATH to a fetched submission_checker.py", file=sys.stderr)
            return 2
        checkers[version] = Path(path)
    if not args.corpus.is_dir():
        print(f"{args.corpus} is not a folder", file=sys.stderr)
        return 2
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
    print(table(rows))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
