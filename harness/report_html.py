"""`appliance report`: one self-contained HTML page (plots inlined) of a results folder.

First screen: what was synthetic, simulated or shortened. Then a summary table per benchmark and
scenario, the latency distribution of each performance run, throughput per card and the scaling
curve when runs with several card counts exist, the card-to-core map, energy where measured, and the
manifest in brief. Each plot is also written as a PNG beside the HTML.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ApplianceError
from harness.fsutil import atomic_write_text
from harness.results import perf_result, read_detail

PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: dict[str, Any]
    detail: dict[str, Any]

    @property
    def label(self) -> str:
        """benchmark, then the path below it: `resnet50 Offline/TEST01/performance/run_1 (2 cards)`."""
        m = self.manifest
        parts = self.path.parts
        below = "/".join(parts[parts.index(m["benchmark"]) + 1:]) if m["benchmark"] in parts else self.path.name
        return f"{m['benchmark']} {below} ({len(m.get('cards', []))} card(s))"


def collect(results: Path) -> list[Run]:
    """Every finished run (one with a manifest) under `results`, oldest first."""
    if not results.is_dir():
        raise ApplianceError(f"{results} is not a folder; pass the --results folder of appliance run")
    runs = []
    for manifest_path in sorted(results.rglob("manifest.json")):
        folder = manifest_path.parent
        if folder.name.endswith(".incomplete") or any(p.name.startswith(".") for p in folder.parents):
            continue
        try:
            manifest = json.loads(manifest_path.read_text())
            detail = read_detail(folder / "mlperf_log_detail.txt")
        except (OSError, json.JSONDecodeError):
            continue
        runs.append(Run(folder, manifest, detail))
    if not runs:
        raise ApplianceError(f"no finished runs (manifest.json + mlperf_log_detail.txt) under {results}")
    return sorted(runs, key=lambda r: r.manifest.get("created_utc", ""))


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def latency_plot(runs: list[Run]) -> bytes | None:
    """Per-query latency percentiles of each performance run (LoadGen's own percentiles)."""
    import matplotlib.pyplot as plt

    perf = [r for r in runs if r.manifest["mode"] == "performance"]
    if not perf:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for r in perf:
        key = "result_{}_percentile_per_query_latency_ns" if r.manifest["scenario"] == "MultiStream" \
            else "result_{}_percentile_latency_ns"
        values = [r.detail.get(key.format(p)) for p in PERCENTILES]
        if all(v is not None for v in values):
            ax.plot([float(p) / 100 for p in PERCENTILES], [v / 1e6 for v in values], marker="o", label=r.label)
    ax.set_xscale("logit")
    ax.set_xticks([0.5, 0.9, 0.99, 0.999], labels=["p50", "p90", "p99", "p99.9"])
    ax.minorticks_off()
    ax.set_xlim(0.4, 0.9995)
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency distribution per performance run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")
    return _png(fig)


def scaling_plot(runs: list[Run]) -> bytes | None:
    """Offline samples/s against the number of cards, with the linear ideal from one card."""
    import matplotlib.pyplot as plt

    points: dict[int, float] = {}
    for r in runs:
        if r.manifest["mode"] == "performance" and r.manifest["scenario"] == "Offline":
            metric = perf_result(r.detail, "Offline").metric
            if metric:
                points[len(r.manifest.get("cards", []))] = max(metric, points.get(len(r.manifest["cards"]), 0))
    if len(points) < 2:
        return None
    cards = sorted(points)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(cards, [points[c] for c in cards], marker="o", label="measured")
    if 1 in points:
        ax.plot(cards, [points[1] * c for c in cards], "--", color="grey", label="linear from 1 card")
    ax.set_xlabel("cards")
    ax.set_ylabel("Offline samples/s")
    ax.set_title("Scaling")
    ax.grid(alpha=0.3)
    ax.legend()
    return _png(fig)


def per_card_plot(runs: list[Run]) -> bytes | None:
    """Samples/s of each card in the latest multi-card Offline run (its share of LoadGen's result)."""
    import matplotlib.pyplot as plt

    offline = [r for r in runs if r.manifest["mode"] == "performance" and r.manifest["scenario"] == "Offline"
               and len(r.manifest.get("cards", [])) > 1]
    if not offline:
        return None
    run = offline[-1]
    counts = [c.get("samples_completed") or 0 for c in run.manifest["cards"]]
    metric = perf_result(run.detail, "Offline").metric
    if not metric or not sum(counts):
        return None
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(counts) + 2), 3.2))
    ax.bar([str(c["index"]) for c in run.manifest["cards"]], [metric * n / sum(counts) for n in counts])
    ax.set_xlabel("card")
    ax.set_ylabel("samples/s")
    ax.set_title(f"Throughput per card ({run.label})", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def card_map_plot(run: Run) -> bytes | None:
    """The card-to-core map: one row per card, a cell per CPU it may use, grouped by NUMA node."""
    import matplotlib.pyplot as plt

    cards = run.manifest.get("cards", [])
    if not cards:
        return None
    cpus = sorted({c for card in cards for c in card.get("cpus", [])})
    if not cpus:
        return None
    col = {c: i for i, c in enumerate(cpus)}
    fig, ax = plt.subplots(figsize=(min(12, 2 + 0.12 * len(cpus)), 0.5 + 0.35 * len(cards)))
    for row, card in enumerate(cards):
        for c in card.get("cpus", []):
            ax.add_patch(plt.Rectangle((col[c], row), 0.9, 0.8, color=plt.cm.tab20(row % 20)))
    ax.set_xlim(0, len(cpus))
    ax.set_ylim(len(cards), 0)
    ax.set_yticks([i + 0.4 for i in range(len(cards))],
                  labels=[f"card {c['index']} (node {c.get('numa_node', '?')})" for c in cards], fontsize=7)
    step = max(1, len(cpus) // 16)
    shown = range(0, len(cpus), step)
    ax.set_xticks([i + 0.45 for i in shown], labels=[str(cpus[i]) for i in shown], fontsize=7)
    ax.set_xlabel("host CPU")
    ax.set_title(f"Card-to-core map ({run.label})", fontsize=9)
    return _png(fig)


def _flags(runs: list[Run]) -> list[str]:
    flags = set()
    for r in runs:
        syn = r.manifest.get("synthetic", {})
        if syn.get("weights"):
            flags.add("model weights are synthetic (seeded): accuracy is not the real model's")
        if syn.get("data"):
            flags.add("datasets are synthetic")
        if syn.get("cards") == "simulated" or any(c.get("simulated") for c in r.manifest.get("cards", [])):
            flags.add("some cards are SIMULATED (modelled latency, no hardware)")
        elif syn.get("cards") == "cpu-emulated":
            flags.add("cards are CPU-emulated")
        flags.update(n for n in r.manifest.get("notes", []) if "not submission-length" in n)
    return sorted(flags)


def _summary_rows(runs: list[Run]) -> list[list[str]]:
    rows = []
    for r in runs:
        m = r.manifest
        res = m.get("result", {})
        if m["mode"] == "performance":
            p = perf_result(r.detail, m["scenario"])
            status = "VALID" if p.valid else "INVALID" + (f" ({'; '.join(p.reasons)})" if p.reasons else "")
            metric = p.metric_text()
            bound = r.detail.get("effective_target_latency_ns")
            constraint = f"p{r.detail.get('effective_target_latency_percentile', '')} ≤ {bound / 1e6:g} ms" \
                if m["scenario"] == "Server" and bound else "-"
        else:
            metric = next((f"{label} {res[key]:.3f}%" for key, label in (("top1", "top-1"), ("mAP", "mAP"))
                           if key in res), json.dumps(res)[:60])
            status, constraint = "scored", "-"
        energy = m.get("energy", {})
        joules = f"{energy['average_watts']:.1f} W, {energy['samples_per_joule']:.3g} samples/J" \
            if energy.get("available") and energy.get("samples_per_joule") else "-"
        rows.append([m["benchmark"], m["scenario"], m["mode"], str(len(m.get("cards", []))), metric, status,
                     constraint, joules, str(r.path)])
    return rows


def render(results: Path, out: Path) -> Path:
    """Write `out` (HTML) and the PNGs beside it; returns `out`."""
    import matplotlib

    matplotlib.use("Agg")
    runs = collect(results)
    plots = {"latency": latency_plot(runs), "scaling": scaling_plot(runs), "per-card": per_card_plot(runs),
             "card-map": card_map_plot(runs[-1])}
    out.parent.mkdir(parents=True, exist_ok=True)
    images = []
    for name, png in plots.items():
        if png is None:
            continue
        (out.parent / f"{out.stem}-{name}.png").write_bytes(png)
        images.append(f'<figure><img alt="{name}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
                      f"<figcaption>{name}</figcaption></figure>")
    flags = _flags(runs)
    head = ["benchmark", "scenario", "mode", "cards", "result", "status", "constraint", "energy (informational)",
            "logs"]
    table = "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in _summary_rows(runs)) \
        + "</table>"
    energy_note = "" if any(r.manifest.get("energy", {}).get("available") for r in runs) else \
        "<p class=note>Energy: not measured (no readable RAPL counters or NVML on the machine that ran these).</p>"
    last = runs[-1].manifest
    brief = {k: last.get(k) for k in ("benchmark", "scenario", "backend", "batch_size", "created_utc")}
    brief.update(model_sha256=last.get("model", {}).get("sha256"), loadgen=last.get("loadgen", {}).get("version"),
                  host=last.get("host", {}).get("cpu_model"), packages=last.get("packages"))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>MLPerf appliance report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #bbb;padding:3px 6px}} th{{background:#eee}} .flags{{background:#fff3cd;border:1px solid
#e0c060;padding:.6em 1em}} figure{{display:inline-block;margin:1em}} img{{max-width:100%}} .note{{color:#555}}
pre{{background:#f6f6f6;padding:1em;font-size:12px}}</style></head><body>
<h1>MLPerf Inference appliance report</h1>
<div class="flags"><b>Read this first:</b><ul>{"".join(f"<li>{html.escape(f)}</li>" for f in flags) or
"<li>real model, real data, real cards</li>"}</ul></div>
<h2>Summary</h2>{table}{energy_note}
<h2>Plots</h2>{"".join(images)}
<h2>Manifest in brief (latest run)</h2><pre>{html.escape(json.dumps(brief, indent=2))}</pre>
<p class=note>{len(runs)} run(s) from {html.escape(str(results))}</p></body></html>
"""
    atomic_write_text(out, page)
    return out
