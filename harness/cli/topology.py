"""`appliance topology ...`: thin click commands over detect(), plan() and the renderers."""

from __future__ import annotations

import re
from pathlib import Path

import click

from harness.core.outbound import atomic_write_text, check_target, head
from harness.hw.topology.affinity import plan
from harness.hw.topology.detect import detect
from harness.hw.topology.formats import RENDERERS


@click.group()
def topology() -> None:
    """Inspect the machine and map accelerator cards to CPU cores.

    \b
    Examples:
      appliance topology detect
      appliance topology detect --format yaml -o myhost.yaml
    """


@topology.command("detect")
@click.option(
    "--sysfs-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory that contains sys/ (like HWLOC_FSROOT), e.g. a copied tree: "
    "--sysfs-root /srv/snapshots/host1. Default: / (this machine).",
)
@click.option(
    "--hwloc-xml",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the layout from an hwloc XML file instead of sysfs, e.g. made on the target with "
    "`lstopo --of xml host1.xml`: --hwloc-xml host1.xml",
)
@click.option(
    "--cards",
    default="auto",
    show_default=True,
    help="auto: the accelerator cards found on PCI, in PCI address order (one CPU-emulated card per L3 "
    "domain if none; NVIDIA GPUs: those CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES leave); emulate:N: N "
    "CPU-emulated cards, e.g. --cards emulate:4; cuda:all or cuda:0,1: NVIDIA GPUs by CUDA ordinal (PCI bus id order)",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(RENDERERS)),
    default="table",
    show_default=True,
    help="table: for a person; yaml: a map the harness reads back; json: the same map as JSON; "
    'numa-config: NVIDIA\'s "0-3:0-31&4-7:32-63" string; docker: `docker run` flags, '
    "e.g. docker run $(appliance topology detect --format docker) IMAGE",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to FILE (atomically: a temporary name, then rename) instead of stdout, e.g. -o map.yaml",
)
@click.option("--force", is_flag=True,
              help="Map a sysfs tree even where a file holds neither a CPU list nor a number (each is named "
              "in a warning), e.g. --sysfs-root /tmp/host-copy --force")
def detect_cmd(sysfs_root: Path | None, hwloc_xml: Path | None, cards: str, fmt: str, output: Path | None,
               force: bool) -> None:
    """Detect packages, NUMA nodes, L3 domains and cards, and print the card-to-core map.

    \b
    Examples:
      appliance topology detect
      appliance topology detect --cards emulate:8 --format json
      appliance topology detect --cards cuda:all
      appliance topology detect --sysfs-root /tmp/host-copy --format numa-config
      appliance topology detect --hwloc-xml host1.xml --format yaml -o host1.yaml
      appliance topology detect --sysfs-root /tmp/host-copy --force
    """
    if sysfs_root is not None and hwloc_xml is not None:
        raise click.UsageError("give either --sysfs-root or --hwloc-xml, not both")
    if output is not None:
        check_target(output, "topology detect", "-o", _rendered_map, example="map.yaml", what="the map")
    machine = detect(sysfs_root or "/", hwloc_xml=hwloc_xml, force=force, warn=lambda m: click.echo(m, err=True))
    text = RENDERERS[fmt](plan(machine, cards))
    if output is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(output, text)


# the first bytes of each format `detect` renders: the only files its -o may replace
_RENDERED = re.compile(rb"# Card-to-core map written by `appliance topology|\{\s*\"packages\"|packages: |--cpuset-cpus="
                       rb"|[0-9,-]+:[0-9,-]+\n")


def _rendered_map(path: Path) -> bool:
    """Whether `path` holds a map an earlier `topology detect` wrote (by its first bytes)."""
    return _RENDERED.match(head(path, 256)) is not None


@topology.command("show")
@click.argument("card_map", metavar="MAP")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(RENDERERS)),
    default="table",
    show_default=True,
    help="As for `detect`, e.g. --format numa-config",
)
def show_cmd(card_map: str, fmt: str) -> None:
    """Print a saved card map: one of the paper's servers (shipped with the appliance) or a map file.

    The map is shown as written, not checked against this machine.

    \b
    Examples:
      appliance topology show g292-z43-16cards
      appliance topology show r282-z93-5cards --format numa-config
      appliance topology show host1.yaml --format docker
    """
    from harness.hw.topology.maps import read_map

    click.echo(RENDERERS[fmt](read_map(card_map)), nl=False)
