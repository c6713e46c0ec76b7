"""`appliance fleet`: the nodes of a fleet compared with the others of their system, to find the slow one.

Per benchmark x scenario and system: each node's result (its latest complete performance run), the median of
the system's nodes, each node's ratio to it (for a latency, the median over the node's: above 1 is faster);
a node below the threshold is flagged with what differs in its manifest from the most common value among its
system's other nodes (CPU frequency governor, NUMA layout, GPU clocks, card rate, versions, settings). Nodes with no
complete run (failed, cancelled) and nodes of the node map with no folder at all are named.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from harness.audit.submission import systems
from harness.core import inbound
from harness.core.errors import DataError
from harness.core.outbound import all_or_nothing, atomic_write_text, need_space
from harness.records import manifest as run_manifest
from harness.report.html import GENERATOR, check_targets

__all__ = ["Fleet", "analyse", "facts", "read_node_map", "render", "summary_lines"]

THRESHOLD = 0.95


@dataclass(frozen=True)
class NodeResult:
    node: str
    value: float
    valid: bool
    ratio: float
    flagged: bool
    differs: dict[str, str]  # fact -> "this node's value (the others: their most common value)"
    run: str


@dataclass(frozen=True)
class Row:
    system: str
    benchmark: str
    scenario: str
    unit: str
    median: float
    nodes: list[NodeResult]
    without: list[str] = field(default_factory=list)  # complete nodes with no run of this benchmark x scenario


@dataclass(frozen=True)
class Fleet:
    root: str
    threshold: float
    rows: list[Row]
    failed: dict[str, str]   # system/node -> why it has no complete run
    missing: list[str]       # system/node of the node map with no folder under RESULTS

    @property
    def flagged(self) -> list[tuple[Row, NodeResult]]:
        return [(r, n) for r in self.rows for n in r.nodes if n.flagged]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "flagged": [{"system": r.system, "node": n.node, "benchmark": r.benchmark,
                                             "scenario": r.scenario, "ratio": n.ratio, "differs": n.differs}
                                            for r, n in self.flagged]}


def read_node_map(path: Path) -> dict[str, str]:
    """NODE SYSTEM [CARDS] lines (compose/slurm/nodes.example) -> {node: system}; '#' starts a comment."""
    nodes: dict[str, str] = {}
    try:
        text = inbound.read_text(path, inbound.TEXT)
    except FileNotFoundError:  # a dangling link (click checked that something is there): was an internal error
        raise DataError(f"node map {path} {inbound.absent(path)}") from None
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) not in (2, 3) or words[0] in nodes:
            raise DataError(f"node map {path} line {number}: {line.strip()!r} is not NODE SYSTEM [CARDS] with a "
                            f"node named once")
        nodes[words[0]] = words[1]
    if not nodes:  # an empty file: every node would be "missing", or none expected
        raise DataError(f"node map {path} names no node: write NODE SYSTEM [CARDS] lines (compose/slurm/nodes.example)")
    return nodes


def facts(manifest: Mapping[str, Any]) -> dict[str, str]:
    """What may make one node of a system slower than the others, from one run's manifest."""
    host = manifest.get("host") or {}
    node = host.get("node") or {}
    nvidia = host.get("nvidia") or {}
    packages = manifest.get("packages") or {}
    app = manifest.get("appliance") or {}
    cards = manifest.get("cards") or []
    rates = Counter(str(c["samples_per_second"]) for c in cards if "samples_per_second" in c)
    version = f"{app.get('version')} {app.get('commit')}" if app else None
    out = {"CPU frequency governor": node.get("cpu_governor"), "NUMA layout": node.get("numa"),
           "GPU clocks (nvidia-smi)": node.get("gpu_clocks"),
           "card rate (samples/s; a simulated card's clock)": ", ".join(f"{n} x {r}" for r, n in sorted(rates.items())),
           "NVIDIA driver": nvidia.get("driver"), "appliance": version,
           "LoadGen": (manifest.get("loadgen") or {}).get("version"), "image": host.get("image_digest"),
           "backend": manifest.get("backend"), "batch": manifest.get("batch_size"),
           "precision": manifest.get("precision"), "--cards": (manifest.get("card_map") or {}).get("spec"),
           "other appliance runs on its cores": ", ".join(map(str, manifest.get("shared_cores") or [])) or "none",
           **{f"package {k}": v for k, v in packages.items()}}
    return {k: str(v) for k, v in out.items() if v not in (None, "")}


def _differs(mine: dict[str, str], others: list[dict[str, str]]) -> dict[str, str]:
    out = {}
    for key, value in mine.items():
        seen = Counter(o[key] for o in others if key in o)
        if seen and value not in seen:
            out[key] = f"{value} (the others: {seen.most_common(1)[0][0]})"
    return out


def analyse(root: Path, node_map: dict[str, str] | None = None, threshold: float = THRESHOLD) -> Fleet:
    fleet = systems.read_fleet(root)
    if not any(fleet.values()):
        raise DataError(f"{root}: no node folders in it (RESULTS/<system>/<node>/); did the fleet's tasks run? "
                        f"see their logs")
    present = {(s, n.name) for s, nodes in fleet.items() for n in nodes}
    missing = sorted(f"{s}/{n}" for n, s in (node_map or {}).items() if (s, n) not in present)
    failed = {n.label: "; ".join(n.problems) for nodes in fleet.values() for n in nodes if not n.complete}
    rows = [row for system, nodes in fleet.items() for row in _rows(system, nodes, threshold)]
    return Fleet(str(root), threshold, rows, failed, missing)


def _rows(system: str, nodes: list[systems.Node], threshold: float) -> list[Row]:
    done = [n for n in nodes if n.complete]
    rows = []
    for key in sorted({k for n in done for k in n.found}):
        got: list[tuple[systems.Node, Path, float, str, dict[str, Any]]] = []
        for n in done:
            run = n.latest_performance(key)
            figure = systems.metric(run) if run is not None else None
            if run is not None and figure is not None:
                got.append((n, run, figure[0], figure[1], run_manifest.read(run).to_json()))
        if not got:
            continue
        unit = got[0][3]
        mid = median(v for _, _, v, _, _ in got)
        results = []
        for n, run, value, _, manifest in got:
            ratio = (mid / value if unit == "ms" else value / mid) if value and mid else 0.0
            others = [facts(m) for o, _, _, _, m in got if o is not n]
            flagged = ratio < threshold
            results.append(NodeResult(n.name, value, bool((manifest.get("result") or {}).get("valid")),
                                      round(ratio, 4), flagged, _differs(facts(manifest), others) if flagged else {},
                                      str(run.relative_to(n.folder.parent.parent))))
        without = [n.name for n in done if n.name not in {r.node for r in results}]
        rows.append(Row(system, key[0], key[1], unit, mid, results, without))
    return rows


def summary_lines(fleet: Fleet) -> list[str]:
    """The table a person reads, then one line per flagged, failed and missing node."""
    lines = [f"{'system':16} {'benchmark':10} {'scenario':12} {'node':16} {'result':>18} {'ratio':>6}  verdict"]
    for r in fleet.rows:
        for n in r.nodes:
            verdict = f"SLOW (< {fleet.threshold})" if n.flagged else "ok"
            lines.append(f"{r.system:16} {r.benchmark:10} {r.scenario:12} {n.node:16} "
                         f"{f'{n.value:.2f} {r.unit}':>18} {n.ratio:6.3f}  {verdict}"
                         + ("" if n.valid else " (LoadGen INVALID)"))
    for r, n in fleet.flagged:
        why = "; ".join(f"{k}: {v}" for k, v in n.differs.items()) or "nothing in its manifests differs"
        lines.append(f"flagged: {r.system}/{n.node} {r.benchmark} {r.scenario} at {n.ratio:.3f} of the system's "
                     f"median; differs: {why}")
    lines += [f"failed: {node}: no complete run ({why})" for node, why in sorted(fleet.failed.items())]
    lines += [f"missing: {node}: in the node map, no results folder" for node in fleet.missing]
    return lines


def _plot(row: Row, threshold: float) -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(row.nodes) + 2), 3))
    ax.bar([n.node for n in row.nodes], [n.ratio for n in row.nodes],
           color=["#c0392b" if n.flagged else "#4a78a8" for n in row.nodes])
    ax.axhline(threshold, color="#c0392b", linestyle="--", linewidth=1, label=f"threshold {threshold}")
    ax.axhline(1.0, color="#555", linewidth=0.8)
    ax.set_ylabel("ratio to the system's median")
    ax.set_title(f"{row.system}: {row.benchmark} {row.scenario}", fontsize=9)
    ax.legend(fontsize=7)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": GENERATOR})
    plt.close(fig)
    return buf.getvalue()


def render(fleet: Fleet, out: Path) -> Path:
    """The HTML page (a table and a ratio plot per system x benchmark x scenario, plots inlined) at `out`."""
    import matplotlib

    matplotlib.use("Agg")
    check_targets([out])
    sections = []
    for r in fleet.rows:
        png = base64.b64encode(_plot(r, fleet.threshold)).decode()
        cells = "".join(
            f"<tr{' class=slow' if n.flagged else ''}><td>{html.escape(n.node)}</td><td>{n.value:.2f} "
            f"{html.escape(r.unit)}</td><td>{n.ratio:.3f}</td><td>{'SLOW' if n.flagged else 'ok'}</td>"
            f"<td>{html.escape('; '.join(f'{k}: {v}' for k, v in n.differs.items()))}</td></tr>" for n in r.nodes)
        sections.append(f"<h3>{html.escape(f'{r.system}: {r.benchmark} {r.scenario}')} (median {r.median:.2f} "
                        f"{html.escape(r.unit)})</h3><table><tr><th>node</th><th>result</th><th>ratio</th>"
                        f"<th>verdict</th><th>what differs</th></tr>{cells}</table>"
                        f'<figure><img alt="ratios" src="data:image/png;base64,{png}"></figure>')
    named = [f"failed: {k}: {v}" for k, v in sorted(fleet.failed.items())] + [f"missing: {m}" for m in fleet.missing]
    page = f"""<!doctype html><html><head><meta charset="utf-8"><meta name="generator" content="{GENERATOR}">
<title>MLPerf appliance fleet report</title><style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;font-size:13px}} td,th{{border:1px solid #bbb;padding:3px 6px}} th{{background:#eee}}
tr.slow{{background:#fde2e0}} figure{{margin:1em 0}}</style></head><body>
<h1>Fleet report: {html.escape(fleet.root)}</h1>
<p>Each node against the median of its system's nodes; flagged below {fleet.threshold}.
{len(fleet.flagged)} flagged, {len(fleet.failed)} failed, {len(fleet.missing)} missing.</p>
<h2>Nodes not compared</h2><ul>{"".join(f"<li>{html.escape(x)}</li>" for x in named) or "<li>none</li>"}</ul>
<h2>By system, benchmark and scenario</h2>{"".join(sections)}
<h2>JSON</h2><pre>{html.escape(json.dumps(fleet.to_json(), indent=1)[:20000])}</pre></body></html>
"""
    need_space(out.parent, len(page.encode()), f"the fleet report {out}", "free some space or choose another -o")
    with all_or_nothing():
        atomic_write_text(out, page)
    return out

