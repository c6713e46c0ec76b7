"""Several systems in one submission: a fleet's results, `RESULTS/<system>/<node>/` (compose/slurm and
compose/kubernetes write them: one `appliance run` results folder per node), read node by node.

A system is one hardware configuration: nodes filed under one system name whose detected hardware differs
(CPU model, CPUs, NUMA nodes, cards, GPUs in their manifests) are refused, naming both. A node with no complete
run (a task cancelled or failed mid-run: its run is `.incomplete` or still hidden) is named and never taken. Each
system's results in the tree are one node's: the node whose performance is the median of the system's complete
nodes (on the system's first benchmark x scenario), so the tree is neither the best unit nor the worst.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.audit.submission import tree
from harness.core.errors import ApplianceError, DataError
from harness.core.fsutil import disk_fault, plain_name
from harness.core.outbound import check_new_folder, make_dirs, move_into_place, new_staging_dir
from harness.records import manifest as run_manifest

__all__ = ["Node", "build_fleet", "choose", "hardware", "hardware_problems", "metric", "read_fleet", "representative"]


@dataclass(frozen=True)
class Node:
    """One node's results folder and what `tree.collect` found in it."""

    system: str
    name: str
    folder: Path
    found: dict[tuple[str, str], tree.ScenarioRuns]
    problems: tuple[str, ...]  # why it has no complete run; empty when complete

    @property
    def complete(self) -> bool:
        return bool(self.found) and not self.problems

    @property
    def label(self) -> str:
        return f"{self.system}/{self.name}"

    def latest_performance(self, key: tuple[str, str]) -> Path | None:
        sr = self.found.get(key)
        return tree.latest_run(sr.performance) if sr is not None and sr.performance else None



def read_fleet(root: Path) -> dict[str, list[Node]]:
    """Systems -> their nodes, in name order; a folder that is not a fleet's RESULTS is one line."""
    if not root.is_dir():
        raise DataError(f"{root}: not a folder; give the fleet's RESULTS folder (RESULTS/<system>/<node>/, as "
                        f"compose/slurm/fleet-task.sh writes it)")
    fleet: dict[str, list[Node]] = {}
    for sdir in _folders(root):
        nodes = []
        for ndir in _folders(sdir):
            found, problems, skipped = tree.collect([ndir])
            why = problems or ([] if found else [line.split(": ", 1)[-1] for line in skipped])
            nodes.append(Node(sdir.name, ndir.name, ndir, found, tuple(why)))
        fleet[sdir.name] = nodes
    return fleet


def _folders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def hardware(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The facts that make a hardware configuration, from one run's manifest."""
    host = manifest.get("host") or {}
    numa = (host.get("node") or {}).get("numa", "")
    cards = Counter(str(c.get("model") or c.get("device", "unknown")) for c in manifest.get("cards") or [])
    gpus = Counter(str(g.get("name")) for g in (host.get("nvidia") or {}).get("gpus", []) or [])
    return {"CPU model": str(host.get("cpu_model", "unknown")),
            "CPUs": str(len(host.get("available_cpus") or [])),
            "NUMA nodes": str(numa.count("node")) if numa.startswith("node") else "unknown",
            "cards": ", ".join(f"{n} x {k}" for k, n in sorted(cards.items())) or "none",
            "GPUs": ", ".join(f"{n} x {k}" for k, n in sorted(gpus.items())) or "none"}


def _manifests(node: Node) -> list[dict[str, Any]]:
    """The manifests of the runs a tree would take from `node` (latest performance and accuracy)."""
    return [run_manifest.read(tree.latest_run(runs)).to_json() for sr in node.found.values()
            for runs in (sr.performance, sr.accuracy) if runs]


def node_hardware(node: Node) -> dict[str, str]:
    """A node's hardware: every run of it must say the same (else the facts differing are joined by " | ")."""
    seen: dict[str, set[str]] = {}
    for m in _manifests(node):
        for k, v in hardware(m).items():
            seen.setdefault(k, set()).add(v)
    return {k: " | ".join(sorted(v)) for k, v in seen.items()}


def hardware_problems(nodes: list[Node]) -> list[str]:
    """One line per system whose complete nodes differ in hardware, naming the facts and the nodes."""
    done = [n for n in nodes if n.complete]
    if len(done) < 2:
        return []
    facts = {n.name: node_hardware(n) for n in done}
    first = done[0]
    lines = []
    for key in facts[first.name]:
        values: dict[str, list[str]] = {}
        for name, f in facts.items():
            if f.get(key, "unknown") != "unknown":  # not recorded (an older manifest) proves no difference
                values.setdefault(f[key], []).append(name)
        if len(values) > 1:
            lines.append(f"{key}: " + "; ".join(f"{v!r} on {', '.join(ns)}" for v, ns in sorted(values.items())))
    if not lines:
        return []
    return [f"system {first.system}: its nodes differ in detected hardware ({' / '.join(lines)}); a system is one "
            f"hardware configuration: give those nodes a system name of their own in the node map"]


def metric(run: Path) -> tuple[float, str] | None:
    """A performance run's figure and unit from its manifest ("samples/s", or "ms": lower is better)."""
    result = run_manifest.read(run).result  # typed: a finite metric or none
    return (result.metric, result.unit or "") if result.metric is not None else None


def representative(nodes: list[Node]) -> Node | None:
    """The system's median node on its first benchmark x scenario (the lower median; ties by name)."""
    done = [n for n in nodes if n.complete]
    if not done:
        return None
    key = min(k for n in done for k in n.found)
    scored = []
    for n in done:
        run = n.latest_performance(key)
        got = metric(run) if run is not None else None
        if got is not None:
            scored.append(((-got[0] if got[1] == "ms" else got[0]), n.name, n))
    if not scored:
        return done[0]
    scored.sort(key=lambda s: (s[0], s[1]))
    return scored[(len(scored) - 1) // 2][2]


def choose(fleet: dict[str, list[Node]], echo: Callable[[str], None]) -> dict[str, Node]:
    """Each system's node for the tree; the nodes and systems left out named; refused when a system's nodes
    differ in hardware or no node has a complete run."""
    problems = [line for nodes in fleet.values() for line in hardware_problems(nodes)]
    if problems:
        raise DataError("; ".join(problems))
    chosen: dict[str, Node] = {}
    for system, nodes in fleet.items():
        plain_name(system, "system name (a folder of the fleet's RESULTS)")
        for n in nodes:
            if not n.complete:
                echo(f"node {n.label}: no complete run, not taken ({'; '.join(n.problems)})")
        rep = representative(nodes)
        if rep is None:
            echo(f"system {system}: no node with a complete run ({len(nodes)} node(s)); left out of the tree")
        else:
            chosen[system] = rep
    if not chosen:
        raise DataError("no node of any system has a complete run (performance and accuracy); nothing to "
                        "build: see the tasks' logs")
    return chosen


def build_fleet(root: Path, out: Path, submitter: str, division: str = "closed",
                overrides_file: Path | None = None, echo: Callable[[str], None] = print) -> Path:
    """One tree with every system of the fleet (systems/<system>.json, results/<system>/ each); return it."""
    plain_name(submitter, "submitter")
    check_new_folder(out, "submission build", "-o", example="submission", what="the tree", reads=[root])
    fleet = read_fleet(root)
    if not fleet:
        raise DataError(f"{root}: no system folders in it (RESULTS/<system>/<node>/); did the fleet's tasks run? "
                        f"see their logs")
    chosen = choose(fleet, echo)
    try:
        staging = new_staging_dir(out)
    except OSError as exc:
        why = disk_fault(exc, name_file=False) or exc.strerror
        raise ApplianceError(f"cannot write the tree in {out.parent}: {why}; choose another -o folder") from None
    with tree.publishing(staging, out):
        sub = staging / division / submitter
        for system, node in chosen.items():
            done = sum(n.complete for n in fleet[system])
            echo(f"system {system}: node {node.name} (the median of {done} complete node(s))")
            part = tree.build([node.folder], staging / ".parts" / system, submitter, system, division,
                              overrides_file, _prefixed(echo, f"  {system}: "))
            _merge(part / division / submitter, sub)
        shutil.rmtree(staging / ".parts")
    return out


def _prefixed(echo: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda line: echo(prefix + line)


def _merge(part: Path, sub: Path) -> None:
    """One system's tree into the fleet's: its systems/ JSON and results/ folder; src/ once per benchmark."""
    for folder in ("systems", "results", "src"):
        make_dirs(sub / folder)
        for item in sorted((part / folder).iterdir()):
            if not (sub / folder / item.name).exists():
                move_into_place(item, sub / folder / item.name)
