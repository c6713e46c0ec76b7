"""`appliance submission build` and `appliance submission check`: click commands only."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.core.errors import ApplianceError


class CheckFailed(ApplianceError):
    """The tree has problems (already printed, one per line): the check's verdict, not a fault of the appliance,
    so --debug shows no traceback for it."""

    exit_code = 1
    traceback = False


@click.group()
def submission() -> None:
    """Build a v6.1 submission tree from runs, and check one (any round from v4.1, either layout).

    \b
    Examples:
      appliance submission build --submitter MyOrg --system my-server results -o /tmp/submission
      appliance submission check /tmp/submission
    """


@submission.command()
@click.option("--submitter", required=True, help="Submitting organisation (folder name under closed/).")
@click.option("--system", "system_name", default=None,
              help="System name: results/<NAME>/ and systems/<NAME>.json (one system; not with --fleet).")
@click.option("--division", type=click.Choice(["closed", "open"]), default="closed", show_default=True)
@click.option("--system-overrides", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="YAML of system JSON keys for what cannot be detected (status, cooling, system_type, …).")
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), required=True,
              help="New folder for the tree (must not exist; a tree is never overwritten).")
@click.option("--system-dir", default=None,
              help="Which system folder of the results to take, when runs with other card setups or backends "
                   "sit beside it, e.g. --system-dir onnxruntime-4cards.")
@click.option("--fleet", type=click.Path(path_type=Path), default=None,
              help="A fleet's RESULTS folder (RESULTS/<system>/<node>/, compose/slurm writes it): every system in "
                   "one tree, each system's median node; instead of --system and RUNS.")
@click.argument("runs", nargs=-1, type=click.Path(path_type=Path))
def build(submitter: str, system_name: str | None, division: str, system_overrides: Path | None, out: Path,
          system_dir: str | None, fleet: Path | None, runs: tuple[Path, ...]) -> None:
    """Write the submission tree from RUNS (results folders or system folders of `appliance run`).

    For every benchmark/scenario the latest complete performance run and accuracy run are taken
    (`.incomplete` runs never); TEST01/TEST04 folders are copied when present. A results folder holds
    one system folder per card setup / backend: pick one with --system-dir; folders with no complete
    run (empty or failed) are skipped and named. The accuracy log is
    truncated the official way, its sha256 kept in accuracy.txt. The inputs are only read.

    \b
    Examples:
      appliance submission build --submitter MyOrg --system edge1 results -o submission
      appliance submission build --submitter MyOrg --system edge1 --system-overrides sys.yaml \\
          results/edge1 more-results/edge1 -o submission
      appliance submission build --submitter MyOrg --system edge1 --system-dir box results -o submission
      appliance submission build --submitter MyOrg --fleet /shared/RESULTS -o submission   # docs/fleet.md

    With --fleet, RESULTS/<system>/<node>/ holds one `appliance run` results folder per node: every system
    goes into the tree (systems/<system>.json, results/<system>/) from its median node; nodes of one system
    whose detected hardware differs are refused; nodes with no complete run are named and left out.
    """
    if fleet is not None:
        if system_name or system_dir or runs:
            raise click.UsageError("--fleet takes the whole RESULTS folder: give no --system, --system-dir or RUNS")
        from harness.audit.submission.systems import build_fleet

        tree = build_fleet(fleet, out, submitter, division, system_overrides, click.echo)
        click.echo(f"wrote {tree}; check it with: appliance submission check {tree}")
        return
    if not system_name or not runs:
        raise click.UsageError("give --system NAME and the RUNS folders (or --fleet RESULTS for several systems)")
    from harness.audit.submission.tree import build as build_tree

    tree = build_tree(list(runs), out, submitter, system_name, division, system_overrides, click.echo,
                      system_dir=system_dir)
    click.echo(f"wrote {tree}; check it with: appliance submission check {tree}")


@submission.command()
@click.argument("tree", type=click.Path(path_type=Path))
@click.option("--version", "version", default="auto", show_default=True,
              help="MLPerf Inference round: auto (told by the RNG seeds in the tree's logs, and said) or one of "
                   "v4.1, v5.0, v5.1, v6.0, v6.1, e.g. --version v5.1.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(tree: Path, version: str, as_json: bool) -> None:
    """Check TREE (the folder holding closed/) against its round's rules (v4.1 to v6.1, either layout).

    One line per problem; exit code 1 when there is any. Findings that come only from synthetic
    weights or data (accuracy below target, a dataset smaller than the official one) are listed
    separately as `synthetic:` and do not change the exit code.

    \b
    Examples:
      appliance submission check submission
      appliance submission check submission --json
      appliance submission check inference_results_v5.1 --version v5.1
    """
    from harness.audit.submission.check import check_tree

    report = check_tree(tree, version)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise CheckFailed(f"{len(report.problems)} problem(s) in {tree}")
