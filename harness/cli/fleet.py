"""`appliance fleet`: click command only (harness/report/fleet.py does the work)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from harness.cli.submission import CheckFailed


class _Ratio(click.FloatRange):
    """--threshold: a ratio in (0, 1]; click's range lets nan through (every comparison with it is false), and
    a nan threshold flags no node (round 6: exit 0)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


@click.command()
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--node-map", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The fleet's node map (lines NODE SYSTEM [CARDS]): a node in it with no results is named missing.")
@click.option("--threshold", type=_Ratio(0.0, 1.0, min_open=True), default=0.95, show_default=True,
              help="Flag a node below this ratio to its system's median.")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the HTML report (a table and a ratio plot per system x benchmark x scenario) here.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON instead of the table.")
def fleet(results: Path, node_map: Path | None, threshold: float, out: Path | None, as_json: bool) -> None:
    """Compare the nodes of a fleet (RESULTS/<system>/<node>/, docs/fleet.md) within each system.

    Per benchmark x scenario: each node's result, the median of its system's nodes, each node's ratio to it;
    a node below --threshold is flagged with what differs in its manifests (CPU frequency governor, NUMA
    layout, card rate, versions, settings). Nodes that failed (no complete run) and nodes of --node-map with no
    results are named. Exit code 1 when any node is flagged, failed or missing.

    \b
    Examples:
      appliance fleet /shared/RESULTS
      appliance fleet /shared/RESULTS --node-map nodes.txt -o fleet.html
      appliance fleet /shared/RESULTS --threshold 0.9 --json > fleet.json
    """
    from harness.report.fleet import analyse, read_node_map, render, summary_lines

    report = analyse(results, read_node_map(node_map) if node_map else None, threshold)
    if out is not None:
        render(report, out)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        for line in summary_lines(report):
            click.echo(line)
        if out is not None:
            click.echo(f"report: {out}")
    bad = len(report.flagged) + len(report.failed) + len(report.missing)
    if bad:
        raise CheckFailed(f"{len(report.flagged)} flagged, {len(report.failed)} failed, {len(report.missing)} "
                          f"missing node(s) in {results}")
