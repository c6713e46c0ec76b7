"""What `appliance report` compares with what, and what it leaves out.

A results folder mixes benchmarks, scenarios and card setups; drawn on one axis, a 90 s Offline latency
flattens every other run, and a "scaling" curve through a null card and CPU cards means nothing. So runs
are grouped by benchmark and scenario (one latency plot each), scaling compares only runs whose cards
differ in number alone, compliance runs become verdicts on the run they were measured against, and
everything not drawn or not read is listed with the reason.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.records import detail_log
from harness.records import manifest as run_manifest
from harness.records.manifest import RunManifest

COMPLIANCE_DIR = re.compile(r"TEST0[0-9](_[0-9]+)?")


@dataclass(frozen=True, order=True)
class Setup:
    """A run's cards apart from how many: what must match for runs to be compared as scaling."""

    device: str
    backend: str
    precision: str
    card_outputs: str
    batch: int

    def text(self) -> str:
        outputs = "" if self.card_outputs == "fp32" else f", {self.card_outputs} outputs"
        device = self.device if self.backend in self.device else f"{self.device} ({self.backend})"
        return f"{device}, batch {self.batch}, {self.precision}{outputs}"


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: RunManifest
    detail: dict[str, Any]

    @property
    def benchmark(self) -> str:
        return self.manifest.benchmark

    @property
    def scenario(self) -> str:
        return self.manifest.scenario

    @property
    def mode(self) -> str:
        return self.manifest.mode

    @property
    def cards(self) -> int:
        return len(self.manifest.cards)

    @property
    def setup(self) -> Setup:
        m = self.manifest
        first = m.cards[0] if m.cards else None
        return Setup(first.device if first else "?", first.backend if first else m.backend, m.precision,
                     m.card_outputs, m.batch_size)

    @property
    def test(self) -> str | None:
        """The compliance test whose run this is (TEST01, TEST04_2, ...), or None for a reference run."""
        return next((p for p in self.path.parts if COMPLIANCE_DIR.fullmatch(p)), None)

    @property
    def created(self) -> str:
        return self.manifest.created_utc

    @property
    def label(self) -> str:
        """`2x cloud-ai-100 (simulated) (simulated), batch 8, fp32 · run_3`."""
        return f"{self.cards}x {self.setup.text()} · {self.path.name}"


@dataclass(frozen=True)
class Verdict:
    """One verify_*.txt of a compliance test: its last line, and the reference run it names."""

    test: str          # the compliance folder: TEST01, TEST04, TEST05 (or TEST01_2 ...)
    kind: str          # accuracy | performance
    passed: bool | None  # None: the file is not a finished verdict
    reference: str | None
    path: Path

    def text(self) -> str:
        state = "PASS" if self.passed else "FAIL" if self.passed is False else "unreadable"
        return f"{self.test} {self.kind} {state}"


@dataclass
class Collected:
    runs: list[Run]                       # reference performance runs and accuracy runs, oldest first;
                                          # compliance runs are summarised by their verdicts
    verdicts: dict[Path, list[Verdict]]   # run folder -> the verdicts measured against it
    left_out: list[str]                   # what the report does not show, and why


def _hidden(path: Path, root: Path) -> bool:
    return any(p.startswith(".") for p in path.relative_to(root).parts)


def _read_verdict(path: Path, test: str) -> Verdict:
    try:
        lines = inbound.read_text(path, inbound.TEXT, errors="replace").splitlines()
    except (OSError, inbound.Refused):
        lines = []
    last = lines[-1].strip() if lines else ""
    passed = True if last == "TEST PASS" else False if last == "TEST FAIL" else None
    reference = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("reference:")), None)
    return Verdict(test, path.stem.removeprefix("verify_"), passed, reference, path)


def _attach(verdicts: list[Verdict], scenario_dir: Path, runs: list[Run]) -> Run | None:
    """The reference run a compliance folder's verdicts were measured against: the one a verdict names
    (matched by its place in the scenario folder, so a moved results folder still matches), else the
    latest performance run there."""
    local = [r for r in runs if r.mode == "performance" and r.path.parent.parent == scenario_dir]
    for verdict in verdicts:
        named = Path(verdict.reference).parent.name if verdict.reference else None
        match = [r for r in local if r.path.name == named]
        if match:
            return match[-1]
    return local[-1] if local else None


def collect(results: Path) -> Collected:
    """Every finished run (a manifest and a detail log) under `results`, and the compliance verdicts."""
    if not results.is_dir():
        raise ApplianceError(f"{results} is not a folder; pass the --results folder of appliance run")
    runs: list[Run] = []
    left_out: list[str] = []
    for manifest_path in sorted(results.rglob("manifest.json")):
        folder = manifest_path.parent
        rel = folder.relative_to(results)
        if _hidden(folder, results) or folder.name.endswith(".incomplete"):
            left_out.append(f"{rel}: an unfinished run (staging or incomplete folder)")
            continue
        manifest = run_manifest.read_lenient(folder, left_out.append, str(rel / run_manifest.NAME))
        if manifest is None:  # there, but empty, `null` or not JSON: said as such, not as missing
            continue
        try:
            detail = detail_log.values(folder / "mlperf_log_detail.txt")
        except OSError as exc:
            left_out.append(f"{rel}: unreadable detail log ({exc.strerror or exc})")
            continue
        runs.append(Run(folder, manifest, detail))
    if not runs:
        raise ApplianceError(f"no finished runs under {results}: " + ("; ".join(left_out[:3]) + (
            f"; and {len(left_out) - 3} more" if len(left_out) > 3 else "") if left_out else
            "no folder holds a manifest.json and an mlperf_log_detail.txt"))
    runs.sort(key=lambda r: r.created)
    reference = [r for r in runs if r.test is None]
    compliance = [r for r in runs if r.test is not None]
    verdicts: dict[Path, list[Verdict]] = defaultdict(list)
    folders = sorted({p.parent for p in results.rglob("verify_*.txt")
                      if not _hidden(p, results) and COMPLIANCE_DIR.fullmatch(p.parent.name)})
    for folder in folders:
        found = [_read_verdict(p, folder.name) for p in sorted(folder.glob("verify_*.txt"))]
        owner = _attach(found, folder.parent, reference)
        if owner is None:
            left_out.append(f"{folder.relative_to(results)}: verdicts with no reference run in this folder")
        else:
            verdicts[owner.path] += found
    if compliance:
        left_out.append(f"{len(compliance)} compliance run(s) (TEST0x folders): shown as verdicts on the run they "
                        f"were compared with, not as rows or plot lines")
    return Collected(reference, dict(verdicts), left_out)


def by_scenario(runs: list[Run]) -> dict[tuple[str, str], list[Run]]:
    """Runs per (benchmark, scenario), in the order given."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for r in runs:
        groups[(r.benchmark, r.scenario)].append(r)
    return dict(sorted(groups.items()))


def latest_per_setup(runs: list[Run]) -> tuple[list[Run], list[Run]]:
    """(the latest run of each card setup and count, the earlier repeats), both oldest first."""
    latest: dict[tuple[Setup, int], Run] = {}
    for r in runs:
        latest[(r.setup, r.cards)] = r
    kept = set(map(id, latest.values()))
    return [r for r in runs if id(r) in kept], [r for r in runs if id(r) not in kept]


@dataclass(frozen=True)
class Series:
    """Offline runs of one benchmark on one card setup at two or more card counts."""

    benchmark: str
    setup: Setup
    points: dict[int, Run]  # card count -> its latest run


def scaling_series(runs: list[Run]) -> tuple[list[Series], list[str]]:
    """Scaling curves (runs differing in card count alone) and a line for each setup with one count only."""
    offline = [r for r in runs if r.mode == "performance" and r.scenario == "Offline"]
    groups: dict[tuple[str, Setup], dict[int, Run]] = defaultdict(dict)
    for r in offline:
        groups[(r.benchmark, r.setup)][r.cards] = r  # oldest first: the latest run per count wins
    series, left_out = [], []
    for (bench, setup), points in sorted(groups.items()):
        if len(points) >= 2:
            series.append(Series(bench, setup, dict(sorted(points.items()))))
        else:
            (n,) = points
            left_out.append(f"no scaling curve for {bench} on {setup.text()}: Offline runs with {n} card(s) only")
    return series, left_out
