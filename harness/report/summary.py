"""Text a person reads at the end of a run: the summary table and its notes."""

from __future__ import annotations

from harness.report.measured import ENERGY_NOTE, energy_text, nms_text
from harness.run.runner import RunOutcome


def summary_table(outcomes: list[RunOutcome]) -> str:
    """One row per run; an energy column where a run measured it; a line per run with host NMS."""
    energies = [energy_text(o.energy) for o in outcomes]
    head = ("benchmark", "scenario", "mode", "result", "status", *(("energy",) if any(energies) else ()), "logs")
    rows = [head]
    for o, energy in zip(outcomes, energies, strict=True):
        if o.perf is not None:
            result, status = o.perf.metric_text(), "VALID" if o.perf.valid else "INVALID"
            if o.perf.reasons:
                status += f" ({'; '.join(o.perf.reasons)})"
        else:
            result, status = o.accuracy or "-", "scored"
        if o.not_submittable:
            status += ", NOT SUBMITTABLE"
        rows.append((o.benchmark, o.scenario, o.mode, result, status, *((energy or "-",) if any(energies) else ()),
                     str(o.path)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = sorted({n for o in outcomes for n in o.notes})
    warnings = sorted({w for o in outcomes for w in (*o.warnings, o.not_submittable)} - {""})
    nms = [f"{o.benchmark} {o.scenario}: {t}" for o in outcomes if (t := nms_text(o.host_nms))]
    if any(energies):
        notes.insert(0, ENERGY_NOTE)
    return "\n".join(lines + nms + [f"warning: {w}" for w in warnings] + [f"note: {n}" for n in notes])
