"""Planted MLPerf Power faults: `appliance submission check` against the official checker on copies of real
published power trees, one fault at a time.

    PYTHONPATH=. python tools/power_faults.py /tmp/42-corpus/v4.1-UntetherAI-h13_u3_slim \\
        --checker /tmp/42-official/v4.1/tools/submission/submission_checker.py --version v4.1

The tree is a small extract of a published tree (see docs/audit-corpus.md); the official checker is a fetched
copy at the round's tag, run with --python (never committed). Each fault edits the first power result's
folder of a fresh copy; "rehashed" faults also record the edited file's new sha1 in both session records (a
fault made before the power session recorded the files, which the results checksum alone would not catch).
One row per fault: both verdicts, agreement, and our first problem line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit_corpus import theirs  # tools/ is on sys.path when run as a script

from harness.audit.submission.check import check_tree


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=4))


def _rehash(perf: Path, name: str) -> None:
    digest = hashlib.sha1((perf / name).read_bytes()).hexdigest()
    for rec in ("client.json", "server.json"):
        _edit_json(perf / "power" / rec,
                   lambda d: d["results"].update({name: digest}) if name in d["results"] else None)


def _text(perf: Path, name: str, edit: Callable[[str], str], rehash: bool = True) -> None:
    path = perf / name
    path.write_text(edit(path.read_text()))
    if rehash:
        _rehash(perf, name)


def _shift_window(text: str) -> str:
    """LoadGen's power_begin/power_end two hours later (outside every phase of the session)."""
    def later(m: re.Match[str]) -> str:
        hour = (int(m.group(2)) + 2) % 24
        return f'{m.group(1)}{hour:02d}{m.group(3)}'
    return re.sub(r'("key": "power_(?:begin|end)", "value": "\d\d-\d\d-\d{4} )(\d\d)(:)', later, text)


def _scale_watts(text: str, factor: float) -> str:
    def scaled(m: re.Match[str]) -> str:
        return f"Watts,{float(m.group(1)) * factor:f}"
    return re.sub(r"Watts,([\d.]+)", scaled, text)


def _ptd_line(perf: Path, tag_line: str) -> None:
    """A PTD log line timestamped in the middle of the testing run's LoadGen window."""
    detail = (perf / "run_1" / "mlperf_log_detail.txt").read_text()
    begin = re.search(r'"key": "power_begin", "value": "([^"]+)"', detail)
    end = re.search(r'"key": "power_end", "value": "([^"]+)"', detail)
    from datetime import datetime
    fmt = "%m-%d-%Y %H:%M:%S.%f"
    mid = datetime.strptime(begin.group(1), fmt) + (datetime.strptime(end.group(1), fmt)  # type: ignore[union-attr]
                                                    - datetime.strptime(begin.group(1), fmt)) / 2  # type: ignore[union-attr]
    stamp = mid.strftime(fmt)[:-3]
    _text(perf, "power/ptd_logs.txt", lambda t: t + f"{stamp}: {tag_line}\n")


FAULTS: dict[str, Callable[[Path], object]] = {
    "power/ deleted": lambda p: shutil.rmtree(p / "power"),
    "ranging/ deleted": lambda p: shutil.rmtree(p / "ranging"),
    "run_1/spl.txt deleted": lambda p: (p / "run_1" / "spl.txt").unlink(),
    "power/server.json deleted": lambda p: (p / "power" / "server.json").unlink(),
    "extra file in power/": lambda p: (p / "power" / "notes.txt").write_text("notes\n"),
    "ranging effective_qsl_rng_seed changed": lambda p: _text(
        p, "ranging/mlperf_log_detail.txt",
        lambda t: re.sub(r'("key": "effective_qsl_rng_seed", "value": )\d+', r"\g<1>1", t), rehash=False),
    "PTD log: error line in the testing run (rehashed)": lambda p: _ptd_line(p, "ERROR: Bad watts reading nan from x"),
    "PTD log: uncertainty over 1% in the testing run (rehashed)": lambda p: _ptd_line(
        p, "WARNING: Uncertainty 1.52%, which is above 1.00% limit for the last sample!"),
    "LoadGen window outside the session (rehashed)": lambda p: _text(p, "run_1/mlperf_log_detail.txt", _shift_window),
    "ranging run at other settings: 20% more power (rehashed)": lambda p: _text(
        p, "ranging/spl.txt", lambda t: _scale_watts(t, 1.2)),
    "testing spl.txt from another measurement (rehashed)": lambda p: _text(
        p, "run_1/spl.txt", lambda _: (p / "ranging" / "spl.txt").read_text()),
    "client source checksum changed": lambda p: _edit_json(
        p / "power" / "client.json", lambda d: d["sources"].update({"client.py": "0" * 40})),
    "analyzer not accepted": lambda p: _edit_json(p / "power" / "server.json", lambda d: [
        m.update(reply="HiokiPW3335" + m["reply"][m["reply"].index(","):]) for m in d["ptd_messages"]
        if m["cmd"] == "Identify"]),
    "PTD version not accepted": lambda p: _edit_json(p / "power" / "server.json", lambda d: [
        m.update(reply=re.sub(r"version=[\d.]+-", "version=1.9.2-", m["reply"])) for m in d["ptd_messages"]
        if m["cmd"] == "Identify"]),
    "server UUID changed": lambda p: _edit_json(p / "power" / "server.json", lambda d: d["uuid"].update(
        server="00000000-0000-4000-8000-000000000000")),
    "server in debug mode": lambda p: _edit_json(p / "power" / "server.json", lambda d: d.update(debug=True)),
    "client and server clocks 2 s apart": lambda p: _edit_json(
        p / "power" / "server.json",
        lambda d: d["phases"]["testing"][1].__setitem__(0, d["phases"]["testing"][1][0] + 2)),
    "session name differs": lambda p: _edit_json(p / "power" / "client.json", lambda d: d.update(session_name="x")),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="an extracted published tree holding closed/ or open/")
    ap.add_argument("--checker", type=Path, required=True, help="the official submission_checker.py (or package)")
    ap.add_argument("--version", required=True, help="the tree's round, e.g. v4.1")
    ap.add_argument("--python", default=sys.executable, help="Python to run the official checker with")
    args = ap.parse_args(argv)
    print("| fault | official | appliance | agree | our line |\n|---|---|---|---|---|")
    disagree = 0
    for name, fault in FAULTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / args.tree.name
            shutil.copytree(args.tree, copy, symlinks=True)
            perf = sorted(copy.glob("*/*/results/*/*/*/performance/power"))[0].parent
            fault(perf)
            report = check_tree(copy, args.version)
            _, crash, lines = theirs(copy, args.version, args.checker, args.python)
            official = "FAIL" if (lines or crash) else "PASS"
            ours = "PASS" if report.ok else "FAIL"
            disagree += official != ours
            first = report.problems[0] if report.problems else "-"
            first = re.sub(r"^(closed|open)/[^/]+/results/[^/]+/", "", first)[:150].replace("|", "/")
            print(f"| {name} | {official} | {ours} | {'yes' if official == ours else 'NO'} | "
                  f"{first}{f' (+{len(report.problems) - 1})' if len(report.problems) > 1 else ''} |")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
