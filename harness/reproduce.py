"""`appliance reproduce`: an auditor re-runs a results tree and compares, row by row.

Reads our results tree or any tree in the official submission layout, checks local artefacts
against the run manifests where there are any, re-runs every benchmark/scenario with the recorded
user.conf (adapting to this host and listing every difference), compares the performance metric
within a tolerance and the accuracy line exactly, and writes reproduce_report.md / .json. What
cannot be reproduced here is a row with that verdict, never a silent skip.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import benchmarks, system
from harness.datasets import store
from harness.errors import ApplianceError
from harness.fsutil import atomic_write_json, atomic_write_text, sha256_file, staged_dir
from harness.loadgen_settings import Requested, loadgen_version
from harness.prepare import Layout, read_model_record
from harness.results import METRICS, perf_result, read_detail
from harness.runner import RunOptions, latest_run, run

PASS, FAIL, UNREPRODUCIBLE = "PASS", "FAIL", "NOT REPRODUCIBLE"


@dataclass
class Row:
    benchmark: str
    scenario: str
    kind: str                      # performance | accuracy
    recorded: str = "-"
    reproduced: str = "-"
    verdict: str = UNREPRODUCIBLE
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """One benchmark/scenario folder of the tree to reproduce."""

    folder: Path
    benchmark: str
    scenario: str


def parse_tolerance(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ApplianceError(f"--tolerance {text!r} is not a number or a percentage such as 5%") from None
    if not 0 <= value < 1:
        raise ApplianceError(f"--tolerance {text!r} must be between 0% and 100%")
    return value


def find_targets(tree: Path) -> list[Target]:
    """Scenario folders: <...>/<benchmark>/<Scenario>/ holding performance/ or accuracy/."""
    if not tree.is_dir():
        raise ApplianceError(f"{tree} is not a folder; pass a results tree or a submission folder")
    found = []
    for perf in sorted(tree.rglob("*")):
        if perf.name in ("performance", "accuracy") and perf.is_dir() and perf.parent.name in benchmarks.SCENARIOS \
                and not any(p.name.startswith("TEST0") for p in perf.parents):
            folder = perf.parent
            target = Target(folder, folder.parent.name, folder.name)
            if target not in found:
                found.append(target)
    if not found:
        raise ApplianceError(f"no <benchmark>/<scenario>/performance or accuracy folders under {tree}")
    return found


def _manifest(run: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def artefact_differences(manifest: dict[str, Any], run: Path, data_dir: Path) -> tuple[list[str], list[str]]:
    """(mismatches that make a row FAIL, host differences that are only listed)."""
    bench = benchmarks.get(manifest["benchmark"])
    layout = Layout(data_dir, bench)
    bad, notes = [], []
    model = read_model_record(layout)
    if model["sha256"] != manifest["model"]["sha256"]:
        bad.append(f"model digest differs: tree {manifest['model']['sha256'][:16]}…, "
                   f"local {model['sha256'][:16]}… ({model['path']})")
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(data_dir))
    local_shards = {e["file"]: e["sha256"] for e in data.manifest["shards"]}
    if local_shards != manifest["dataset"]["shards"]:
        bad.append(f"dataset shards differ from the tree's ({len(local_shards)} local vs "
                   f"{len(manifest['dataset']['shards'])} recorded, or their digests)")
    for name, digest in manifest.get("configs", {}).items():
        path = run / name
        if path.is_file() and sha256_file(path) != digest:
            bad.append(f"{name} in the tree does not match the digest in its manifest")
    host, here = manifest.get("host", {}), system.cpu_model()
    if host.get("cpu_model") not in (None, here):
        notes.append(f"CPU differs: recorded {host['cpu_model']!r}, here {here!r}")
    if len(host.get("available_cpus", [])) != len(system.available_cpus()):
        notes.append(f"CPU count differs: recorded {len(host.get('available_cpus', []))}, "
                     f"here {len(system.available_cpus())}")
    recorded_pkgs, local_pkgs = manifest.get("packages", {}), system.package_versions()
    notes += [f"{k} {v} recorded, {local_pkgs.get(k)} here" for k, v in recorded_pkgs.items()
              if local_pkgs.get(k) != v]
    if manifest.get("loadgen", {}).get("version") not in (None, loadgen_version()):
        notes.append(f"LoadGen {manifest['loadgen']['version']} recorded, {loadgen_version()} here")
    return bad, notes


def _artefacts_match(row: Row, manifest: dict[str, Any], run_dir: Path, data_dir: Path) -> bool:
    """Add the artefact mismatches and host differences to `row`; False (row FAILs) on a mismatch."""
    try:
        bad, notes = artefact_differences(manifest, run_dir, data_dir)
    except ApplianceError as exc:
        row.notes.append(str(exc))
        return False
    row.notes += notes + bad
    if bad:
        row.verdict = FAIL
    return not bad


def _recorded_placement(manifest: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """The recorded --cards, --replicate and --card-outputs, adapted to this host where the recorded map
    file is absent."""
    spec = manifest.get("card_map", {}).get("spec")
    out = {}
    if spec:
        parts = spec.split(":")
        path = parts[1] if parts[0] == "simulate" and len(parts) == 3 else spec
        if path.endswith((".yaml", ".yml")) and not Path(path).is_file():
            notes.append(f"recorded card map {path} is not on this host: cards detected here instead (auto)")
            spec = "auto"
        out["cards"] = spec
    replicate = manifest.get("sample_buffers", {}).get("replicate")
    if replicate:
        out["replicate"] = replicate
    if manifest.get("card_outputs"):  # detection: the precision the cards returned their outputs in
        out["card_outputs"] = manifest["card_outputs"]
    return out


def _card_map_differences(manifest: dict[str, Any], new_run: Path) -> list[str]:
    new = _manifest(new_run) or {}
    old_map = [c.get("cpus") for c in manifest.get("cards", [])]
    new_map = [c.get("cpus") for c in new.get("cards", [])]
    return [] if old_map == new_map else [f"card-to-core map differs: recorded {old_map}, here {new_map}"]


def _metric(detail: dict[str, Any], scenario: str) -> float | None:
    return perf_result(detail, scenario).metric


def reproduce(tree: Path, data_dir: Path, out: Path, tolerance: float, echo=print,
              duration_ms: int | None = None) -> list[Row]:
    """Re-run every target of `tree`; write the report into `out` (staged, never overwriting)."""
    if out.exists():
        raise ApplianceError(f"{out} exists; choose another --output folder (reports are never overwritten)")
    targets = find_targets(tree)
    rows: list[Row] = []
    with staged_dir(out) as work:
        for t in targets:
            try:
                benchmarks.get(t.benchmark)
            except ApplianceError as exc:
                rows.append(Row(t.benchmark, t.scenario, "-", notes=[str(exc)]))
                continue
            run_dir = latest_run(t.folder / "performance")
            if run_dir is not None:
                rows.append(_reproduce_perf(t, run_dir, data_dir, work, tolerance, duration_ms, echo))
            elif (t.folder / "performance").is_dir():
                rows.append(Row(t.benchmark, t.scenario, "performance",
                                notes=[f"no finished run_N in {t.folder / 'performance'}"]))
            if (t.folder / "accuracy" / "accuracy.txt").is_file():
                rows.append(_reproduce_accuracy(t, data_dir, work, echo))
        for r in rows:  # name the new logs where they will be once the report folder is renamed
            r.notes = [n.replace(str(work), str(out)) for n in r.notes]
        report = {"tree": str(tree), "tolerance": tolerance, "host": system.cpu_model(),
                  "rows": [asdict(r) for r in rows],
                  "verdict": PASS if rows and all(r.verdict == PASS for r in rows) else FAIL}
        atomic_write_json(work / "reproduce_report.json", report)
        atomic_write_text(work / "reproduce_report.md", _markdown(tree, tolerance, rows, report["verdict"]))
    return rows


def _reproduce_perf(t: Target, run_dir: Path, data_dir: Path, work: Path, tolerance: float,
                    duration_ms: int | None, echo) -> Row:
    row = Row(t.benchmark, t.scenario, "performance")
    detail_path = run_dir / "mlperf_log_detail.txt"
    if not detail_path.is_file():
        row.notes.append(f"{detail_path} missing")
        return row
    recorded = read_detail(detail_path)
    rec_metric = _metric(recorded, t.scenario)
    unit = METRICS[t.scenario][1]
    row.recorded = f"{rec_metric:.3f} {unit}" if rec_metric is not None else "-"
    manifest = _manifest(run_dir)
    backend, batch, placement = "onnxruntime", None, {}
    if manifest is None:
        row.notes.append("no manifest.json in the tree: artefacts cannot be checked, host differences unknown")
    else:
        backend, batch = manifest.get("backend", backend), manifest.get("batch_size")
        placement = _recorded_placement(manifest, row.notes)
        if not _artefacts_match(row, manifest, run_dir, data_dir):
            return row
    user_conf = run_dir / "user.conf"
    if not user_conf.is_file():
        user_conf = t.folder / "user.conf"
    outcome = run(RunOptions(t.benchmark, Requested(t.scenario, "performance", duration_ms=duration_ms,
                                                    user_conf=user_conf if user_conf.is_file() else None),
                             data_dir, work / "runs", backend=backend, batch_size=batch, **placement),
                  echo=lambda m: None)
    if manifest is not None:
        row.notes += _card_map_differences(manifest, outcome.path)
    new = outcome.perf.metric if outcome.perf else None
    row.reproduced = f"{new:.3f} {unit}" if new is not None else "-"
    if rec_metric is None or new is None:
        row.notes.append("no metric to compare")
        row.verdict = FAIL
        return row
    deviation = new / rec_metric - 1 if rec_metric else float("inf")
    row.notes.append(f"deviation {deviation:+.1%} (tolerance ±{tolerance:.0%}); new logs: {outcome.path}")
    row.verdict = PASS if abs(deviation) <= tolerance else FAIL
    echo(f"{t.benchmark} {t.scenario} performance: {row.recorded} -> {row.reproduced}: {row.verdict}")
    return row


def _reproduce_accuracy(t: Target, data_dir: Path, work: Path, echo) -> Row:
    row = Row(t.benchmark, t.scenario, "accuracy")
    recorded = (t.folder / "accuracy" / "accuracy.txt").read_text().splitlines()[0]
    row.recorded = recorded
    manifest = _manifest(t.folder / "accuracy")
    backend, placement = "onnxruntime", {}
    if manifest is not None:
        backend, placement = manifest.get("backend", backend), _recorded_placement(manifest, row.notes)
        if not _artefacts_match(row, manifest, t.folder / "accuracy", data_dir):
            return row
    outcome = run(RunOptions(t.benchmark, Requested(t.scenario, "accuracy"), data_dir, work / "runs",
                             backend=backend, **placement), echo=lambda m: None)
    row.reproduced = (outcome.path / "accuracy.txt").read_text().splitlines()[0]
    row.verdict = PASS if re.sub(r"\s", "", row.reproduced) == re.sub(r"\s", "", recorded) else FAIL
    echo(f"{t.benchmark} {t.scenario} accuracy: {row.verdict}")
    return row


def _markdown(tree: Path, tolerance: float, rows: list[Row], verdict: str) -> str:
    lines = [f"# Reproduction report: {verdict}", "", f"Tree: `{tree}`  ", f"Host: {system.cpu_model()}  ",
             f"Tolerance on the performance metric: ±{tolerance:.0%}; accuracy must match exactly.", "",
             "| benchmark | scenario | kind | recorded | reproduced | verdict |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.benchmark} | {r.scenario} | {r.kind} | {r.recorded} | {r.reproduced} | **{r.verdict}** |"
              for r in rows]
    for r in rows:
        if r.notes:
            lines += ["", f"## {r.benchmark} {r.scenario} {r.kind}", *[f"- {n}" for n in r.notes]]
    return "\n".join(lines) + "\n"
