"""`appliance report`: one self-contained HTML page (plots inlined) of a results folder.

First screen: what was synthetic, simulated or shortened. Then, per benchmark and scenario, a summary
table (card setup, result, compliance verdicts) and one latency plot; scaling curves only across runs
that differ in card count alone (harness/report/groups.py decides what is compared with what); throughput
per card, the card-to-core map, energy where measured, a list of what was left out and why, and the
manifest in brief. Each plot is also written as a PNG beside the HTML.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.outbound import all_or_nothing, atomic_write_bytes, atomic_write_text, check_target, head, need_space
from harness.records import manifest as run_manifest
from harness.records.detail_log import perf_result
from harness.report.groups import Collected, Run, Series, by_scenario, collect, latest_per_setup, scaling_series
from harness.report.measured import ENERGY_NOTE, energy_text, nms_text, power_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")
GENERATOR = "appliance report"  # in every file a report writes (HTML meta, PNG Software text)


def _png(fig: Figure) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight",  # tight: keeps the legend outside the axes
                metadata={"Software": GENERATOR})  # how a later report knows the file as its own
    plt.close(fig)
    return buf.getvalue()


def _legend_outside(ax: Axes) -> None:
    """The legend right of the axes, so it never covers a line."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)


def _latencies_ms(run: Run) -> list[float] | None:
    key = "result_{}_percentile_per_query_latency_ns" if run.scenario == "MultiStream" \
        else "result_{}_percentile_latency_ns"
    values = [run.detail.get(key.format(p)) for p in PERCENTILES]
    return [float(v) / 1e6 for v in values if v is not None] if None not in values else None


def latency_plot(benchmark: str, scenario: str, runs: list[Run]) -> bytes | None:
    """LoadGen's latency percentiles of one benchmark and scenario, a line per card setup and count."""
    import matplotlib.pyplot as plt

    lines = [(r, v) for r in runs if (v := _latencies_ms(r)) is not None]
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for run, values in lines:
        ax.plot([float(p) / 100 for p in PERCENTILES], values, marker="o", label=run.label)
    ax.set_xscale("logit")
    ax.set_xticks([0.5, 0.9, 0.99, 0.999], labels=["p50", "p90", "p99", "p99.9"])
    ax.minorticks_off()
    ax.set_xlim(0.4, 0.9995)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{benchmark} {scenario}: latency per query", fontsize=10)
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    return _png(fig)


def scaling_plot(series: Series) -> bytes:
    """Offline samples/s against the number of cards of one setup, with the linear ideal from the fewest."""
    import matplotlib.pyplot as plt

    cards = list(series.points)
    rates = [perf_result(series.points[c].detail, "Offline").metric or 0.0 for c in cards]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.plot(cards, rates, marker="o", label="measured")
    ideal = [rates[0] * c / cards[0] for c in cards]
    ax.plot(cards, ideal, "--", color="grey", label=f"linear from {cards[0]} card(s)")
    ax.set_xticks(cards)
    ax.set_xlabel("cards")
    ax.set_ylabel("Offline samples/s")
    ax.set_title(f"{series.benchmark} scaling: {series.setup.text()}", fontsize=9)
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    return _png(fig)


def per_card_plot(runs: list[Run]) -> bytes | None:
    """Samples/s of each card in the latest multi-card Offline run (its share of LoadGen's result)."""
    import matplotlib.pyplot as plt

    offline = [r for r in runs if r.mode == "performance" and r.scenario == "Offline" and r.cards > 1]
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
    ax.set_title(f"Throughput per card: {run.benchmark} Offline, {run.label}", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def card_map_plot(run: Run) -> bytes | None:
    """The card-to-core map: one row per card, a cell per CPU it may use, grouped by NUMA node."""
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

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
            ax.add_patch(Rectangle((col[c], row), 0.9, 0.8, color=colormaps["tab20"](row % 20)))
    ax.set_xlim(0, len(cpus))
    ax.set_ylim(len(cards), 0)
    ax.set_yticks([i + 0.4 for i in range(len(cards))],
                  labels=[f"card {c['index']} (node {c.get('numa_node', '?')})" for c in cards], fontsize=7)
    step = max(1, len(cpus) // 16)
    shown = range(0, len(cpus), step)
    ax.set_xticks([i + 0.45 for i in shown], labels=[str(cpus[i]) for i in shown], fontsize=7)
    ax.set_xlabel("host CPU")
    ax.set_title(f"Card-to-core map (the run with the most cards): {run.benchmark} {run.scenario}, {run.label}",
                 fontsize=9)
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
        if (why := run_manifest.not_submittable(r.manifest)) is not None:
            flags.add(f"{r.benchmark} at {r.manifest.get('precision', '?')} is NOT SUBMITTABLE: {why}")
    return sorted(flags)


def _compliance(run: Run, collected: Collected) -> str:
    verdicts = collected.verdicts.get(run.path, [])
    return ", ".join(v.text() for v in sorted(verdicts, key=lambda v: (v.test, v.kind))) or "-"


SUMMARY_HEAD = ("card setup", "cards", "mode", "result", "status", "constraint", "compliance",
                "energy, host NMS (informational)", "logs")


def _summary_row(run: Run, collected: Collected, results: Path) -> list[str]:
    m = run.manifest
    res = m.get("result", {})
    if run.mode == "performance":
        p = perf_result(run.detail, run.scenario)
        status = "VALID" if p.valid else "INVALID" + (f" ({'; '.join(p.reasons)})" if p.reasons else "")
        metric = p.metric_text()
        bound = run.detail.get("effective_target_latency_ns")
        constraint = f"p{run.detail.get('effective_target_latency_percentile', '')} ≤ {bound / 1e6:g} ms" \
            if run.scenario == "Server" and bound else "-"
    else:
        metric = next((f"{label} {res[key]:.3f}%" for key, label in (("top1", "top-1"), ("mAP", "mAP"))
                       if key in res), json.dumps(res)[:60])
        status, constraint = "scored", "-"
    if run_manifest.not_submittable(m) is not None:
        status += ", NOT SUBMITTABLE"
    official = power_text(run.path, run.scenario) if run.mode == "performance" else None
    beside = [t for t in (official, energy_text(m.get("energy"), each_card=True), nms_text(m.get("host_postprocess")))
              if t]
    return [run.setup.text(), str(run.cards), run.mode, metric, status, constraint, _compliance(run, collected),
            "; ".join(beside) or "-", str(run.path.relative_to(results))]


def _table(rows: list[list[str]]) -> str:
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in SUMMARY_HEAD) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows) + "</table>"


def _figure(name: str, png: bytes, out: Path, pngs: dict[Path, bytes]) -> str:
    """The PNG's place beside the report (into `pngs`, written once every target is checked) and its
    inlined <figure>."""
    pngs[out.parent / f"{out.stem}-{name}.png"] = png
    return (f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            f"<figcaption>{html.escape(name)}</figcaption></figure>")


def _slug(*parts: str) -> str:
    return "-".join(p.lower().replace(" ", "").replace("/", "") for p in parts)


def _ours(path: Path) -> bool:
    """Whether `path` is a file an earlier report wrote (its generator mark in the first 4 KB)."""
    return GENERATOR.encode() in head(path)


def check_targets(paths: list[Path]) -> None:
    """Refuse, in one line and before anything is written, to write into a run folder (of any results
    tree) or over a file an earlier report did not write (beside the runs, as results/report.html, is
    fine: a report reads run folders only)."""
    for path in paths:
        check_target(path, "report", "-o", _ours, example="report.html", what="the report", given=paths[0])


def render(results: Path, out: Path) -> Path:
    """Write `out` (HTML) and the PNGs beside it; returns `out`."""
    import matplotlib

    matplotlib.use("Agg")
    check_targets([out])  # before the work: the PNGs' names are known once the plots are made
    collected = collect(results)
    runs = collected.runs
    left_out = list(collected.left_out)
    pngs: dict[Path, bytes] = {}
    sections = []
    for (bench, scenario), group in by_scenario(runs).items():
        ordered = sorted(group, key=lambda r: (r.setup, r.cards, r.mode, r.created))
        rows = [_summary_row(r, collected, results) for r in ordered]
        perf = [r for r in group if r.mode == "performance"]
        shown, repeats = latest_per_setup(perf)
        png = latency_plot(bench, scenario, shown)
        figure = _figure(_slug("latency", bench, scenario), png, out, pngs) if png else ""
        left_out += [f"{r.path.relative_to(results)}: no latency percentiles in its detail log" for r in shown
                     if _latencies_ms(r) is None]
        if repeats:
            left_out.append(f"{bench} {scenario} latency plot: {len(repeats)} earlier run(s) of a card setup and "
                            f"count already drawn (the latest is drawn): "
                            + ", ".join(str(r.path.relative_to(results)) for r in repeats))
        sections.append(f"<h3>{html.escape(bench)} {html.escape(scenario)}</h3>{_table(rows)}{figure}")
    series, no_curve = scaling_series(runs)
    left_out += no_curve
    scaling = [_figure(_slug("scaling", s.benchmark, str(i)), scaling_plot(s), out, pngs)
               for i, s in enumerate(series)]
    widest = max(runs, key=lambda r: (r.cards, r.created))
    extra = [("per-card", per_card_plot(runs)), ("card-map", card_map_plot(widest))]
    scaling += [_figure(name, png, out, pngs) for name, png in extra if png is not None]
    flags = _flags(runs)
    energy_note = f"<p class=note>{html.escape(ENERGY_NOTE[0].upper() + ENERGY_NOTE[1:])}.</p>" \
        if any(energy_text(r.manifest.get("energy")) for r in runs) else \
        "<p class=note>Energy: not measured (no readable RAPL counters or NVML on the machine that ran these).</p>"
    last = runs[-1].manifest
    brief = {k: last.get(k) for k in ("benchmark", "scenario", "backend", "batch_size", "created_utc")}
    brief.update(model_sha256=last.get("model", {}).get("sha256"), loadgen=last.get("loadgen", {}).get("version"),
                 host=last.get("host", {}).get("cpu_model"), packages=last.get("packages"))
    omitted = "".join(f"<li>{html.escape(line)}</li>" for line in left_out) or "<li>nothing</li>"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><meta name="generator" content="{GENERATOR}">
<title>MLPerf appliance report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #bbb;padding:3px 6px}} th{{background:#eee}} .flags{{background:#fff3cd;border:1px solid
#e0c060;padding:.6em 1em}} figure{{display:inline-block;margin:1em}} img{{max-width:100%}} .note{{color:#555}}
pre{{background:#f6f6f6;padding:1em;font-size:12px}}</style></head><body>
<h1>MLPerf Inference appliance report</h1>
<div class="flags"><b>Read this first:</b><ul>{"".join(f"<li>{html.escape(f)}</li>" for f in flags) or
"<li>real model, real data, real cards</li>"}</ul></div>
<h2>Summary by benchmark and scenario</h2>{"".join(sections)}{energy_note}
<h2>Scaling and cards</h2>{"".join(scaling) or "<p class=note>No scaling curve (see below).</p>"}
<h2 id="left-out">Left out</h2><ul class="note">{omitted}</ul>
<h2>Manifest in brief (latest run)</h2><pre>{html.escape(json.dumps(brief, indent=2))}</pre>
<p class=note>{len(runs)} run(s) from {html.escape(str(results))}</p></body></html>
"""
    check_targets([out, *pngs])
    need_space(out.parent, len(page.encode()) + sum(map(len, pngs.values())), f"the report {out} and its plots",
               "free some space or choose another -o")
    with all_or_nothing():  # a disk that fills up midway leaves none of them
        for path, png in pngs.items():
            atomic_write_bytes(path, png)
        atomic_write_text(out, page)
    return out
