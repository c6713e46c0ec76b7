"""Render a CardMap (json, yaml, numa-config, docker, table) and read a YAML map back, validated."""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from collections.abc import Callable
from pathlib import Path

import yaml

import harness
from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.sysfs import FIXED_BOUND, CpuBound, cpu_bound, format_cpulist, parse_cpulist
from harness.hw import gpu
from harness.hw.topology.cards import default_device_nodes
from harness.hw.topology.model import Card, CardMap, Topology

MAP_VERSION = 1
MAX_MAP_BYTES = 1 << 20  # a card map is a few KB; a larger file (or /dev/zero) is not one
MAX_MAP_CARDS = 1024     # cards of one run (harness.records.manifest.MAX_CARDS)
SHM_SIZE = "16g"  # LoadGen sample buffers are replicated per NUMA node in shared memory


def render_json(card_map: CardMap) -> str:
    return json.dumps(card_map.to_json_dict(), indent=2) + "\n"


def render_yaml(card_map: CardMap) -> str:
    """The JSON map plus a version, as the file `load_card_map` reads back (topologies/*.yaml)."""
    header = (
        "# Card-to-core map written by `appliance topology detect --format yaml`.\n"
        "# cpulists use the kernel's list format; cores = first hardware thread of each physical core.\n"
    )
    body = {"version": MAP_VERSION, **card_map.to_json_dict()}
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)


def numa_groups(card_map: CardMap) -> list[tuple[list[int], set[int]]]:
    """Consecutive cards sharing a NUMA node, with the CPUs they use on that node."""
    groups: list[tuple[int | None, list[int], set[int]]] = []
    for card in card_map.cards:
        if groups and groups[-1][0] == card.numa_node:
            groups[-1][1].append(card.index)
            groups[-1][2].update(card.cpus)
        else:
            groups.append((card.numa_node, [card.index], set(card.cpus)))
    result = []
    for node, indices, cpus in groups:
        on_node = cpus & card_map.numa_nodes.get(node, frozenset()) if node is not None else set()
        result.append((indices, on_node or cpus))
    return result


def render_numa_config(card_map: CardMap) -> str:
    """NVIDIA's `numa_config` string: "<cards>:<cpus>&<cards>:<cpus>", one group per run of a node."""
    return "&".join(f"{format_cpulist(i)}:{format_cpulist(c)}" for i, c in numa_groups(card_map)) + "\n"


def docker_flags(card_map: CardMap) -> list[str]:
    """`docker run` flags that give a container the cards' CPUs, their nodes' memory and the cards."""
    cpus = sorted({cpu for card in card_map.cards for cpu in card.cpus})
    mems = sorted({node for node, node_cpus in card_map.numa_nodes.items() if node_cpus & set(cpus)})
    flags = [f"--cpuset-cpus={format_cpulist(cpus)}"]
    if mems:
        flags.append(f"--cpuset-mems={format_cpulist(mems)}")
    gpus = [str(card.index if card.ordinal is None else card.ordinal) for card in card_map.cards
            if card.runtime == "gpus"]
    if gpus:
        flags.append(f'--gpus="device={",".join(gpus)}"')
    devices: list[str] = []
    for card in card_map.cards:
        if card.runtime == "device":
            for node in card.device_nodes or default_device_nodes(card.vendor, card.index):
                if node not in devices:
                    devices.append(node)
    flags += [f"--device={node}" for node in devices]
    flags += [f"--shm-size={SHM_SIZE}", "--ulimit=memlock=-1", "--cap-add=SYS_NICE"]
    return flags


def render_docker(card_map: CardMap) -> str:
    """One line of shell-quoted flags, to paste after `docker run`."""
    return " ".join(shlex.quote(flag) for flag in docker_flags(card_map)) + "\n"


def render_table(card_map: CardMap) -> str:
    """The map for a person: the machine, then card by card with its node and L3 domain."""
    fmt = format_cpulist
    lines = [
        "packages:   " + "   ".join(f"{i}: {fmt(p)}" for i, p in enumerate(card_map.packages)),
        "NUMA nodes: " + "   ".join(f"{n}: {fmt(c) or '(no CPUs)'}" for n, c in sorted(card_map.numa_nodes.items())),
        *(
            line.replace("\xa0", " ")  # no break inside "i: cpulist"
            for line in textwrap.wrap(
                "   ".join(f"{i}:\xa0{fmt(d)}" for i, d in enumerate(card_map.l3_domains)),
                width=100,
                initial_indent=f"L3 domains: {len(card_map.l3_domains)}   ",
                subsequent_indent=" " * 12,
                break_on_hyphens=False,
            )
        ),
        "",
    ]
    gpus = any(card.ordinal is not None for card in card_map.cards)
    rows = [("card", "pci", "model", *(("gpu",) if gpus else ()), "node", "L3", "cores", "cpus")]
    for card in card_map.cards:
        rows.append(
            (
                str(card.index),
                card.pci or "emulated",
                f"{card.vendor} {card.model}",
                *((_gpu_cell(card),) if gpus else ()),
                "?" if card.numa_node is None else str(card.numa_node),
                "floats" if card.floating else ",".join(map(str, card.l3)) or "-",
                fmt(card.cores),
                fmt(card.cpus),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if any(card.floating for card in card_map.cards):
        lines += ["", "floats: the card could not get cores of its own on its node and runs on every allowed core"]
    return "\n".join(lines) + "\n"


def _gpu_cell(card: Card) -> str:
    """Which GPU a card is: its CUDA ordinal, and NVML's name and UUID where NVML sees it."""
    if card.ordinal is None:
        return "-"
    facts = gpu.nvml()
    found = None if isinstance(facts, str) or card.pci is None else facts.by_pci(card.pci)
    return f"cuda:{card.ordinal}" + (f" {found.name} {found.uuid}" if found else "")


RENDERERS: dict[str, Callable[[CardMap], str]] = {
    "table": render_table,
    "yaml": render_yaml,
    "json": render_json,
    "numa-config": render_numa_config,
    "docker": render_docker,
}


def regenerate_hint(path: Path) -> str:
    """How to make a map for this machine, never by overwriting a file shipped with the appliance
    (the repository's or the package's reference maps): those get a new file outside them."""
    shipped = Path(harness.__file__).resolve().parents[1]  # the checkout, or site-packages for a wheel
    if not path.resolve().is_relative_to(shipped):
        return f"regenerate it with `appliance topology detect --format yaml -o {path}`"
    folder = Path.home() if Path.cwd().resolve().is_relative_to(shipped) else Path(".")
    mine = folder / f"my-{path.name}"
    return (f"{path} ships with the appliance (another machine's map): make one for this machine with "
            f"`appliance topology detect --format yaml -o {mine}` and pass --cards {mine}")


def load_card_map(path: str | os.PathLike[str], topology: Topology) -> CardMap:
    """Read a YAML map back and check that every CPU it names exists and may be used on this machine."""
    regenerate = regenerate_hint(Path(path))
    try:
        data = inbound.read_yaml(path, MAX_MAP_BYTES, what="card map")
    except inbound.Refused as exc:
        raise ApplianceError(f"{exc}; {regenerate}") from None
    except OSError as exc:
        raise ApplianceError(f"cannot read card map {path}: {exc}".splitlines()[0]) from exc
    root = topology.source.removeprefix("sysfs:") if topology.source.startswith("sysfs:") else "/"
    bound = cpu_bound(root)  # the kernel's kernel_max where the machine was read, else the fixed bound
    if not isinstance(data, dict) or data.get("version") != MAP_VERSION or not isinstance(data.get("cards"), list):
        raise ApplianceError(f"{path} is not a version-{MAP_VERSION} card map; {regenerate}")
    if len(data["cards"]) > MAX_MAP_CARDS:
        raise ApplianceError(f"{path} lists {len(data['cards'])} cards, more than the {MAX_MAP_CARDS} a run takes; "
                             f"{regenerate}")
    cards = []
    for entry in data["cards"]:
        try:
            card = card_from_yaml(entry, bound)
        except (KeyError, TypeError, ValueError) as exc:
            why = f"its key {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else exc  # was the bare 'key'
            raise ApplianceError(f"{path}: bad card entry {str(entry)[:200]} ({why}); {regenerate}") from None
        missing = set(card.cpus) - topology.online
        if missing:
            raise ApplianceError(
                f"{path}: card {card.index} names CPUs {format_cpulist(missing)} that this machine lacks "
                f"(online: {format_cpulist(topology.online)}); {regenerate}"
            )
        denied = set(card.cpus) - topology.allowed
        if denied:
            raise ApplianceError(
                f"{path}: card {card.index} names CPUs {format_cpulist(denied)} this process may not use "
                f"(allowed: {format_cpulist(topology.allowed)}); widen the cpuset or {regenerate}"
            )
        cards.append(card)
    return CardMap(topology.packages, dict(topology.numa_nodes), topology.l3_domains, tuple(cards))


def card_from_yaml(entry: dict[str, object], bound: CpuBound = FIXED_BOUND) -> Card:
    """A card of a map; ValueError for a CPU list that is not one (or names CPUs beyond `bound`)."""
    def cpulist(key: str) -> set[int]:
        value = entry[key]
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ValueError(f"{key} must be a CPU list such as 0-3,8")
        return parse_cpulist(str(value), bound)

    cores, cpus = cpulist("cores"), cpulist("cpus")
    if not cores <= cpus:
        raise ValueError("cores must be a subset of cpus")
    node, pci = entry.get("numa_node"), entry.get("pci")
    return Card(
        index=_whole(entry["index"], "index", MAX_MAP_CARDS - 1),
        pci=None if pci is None else _text(pci, "pci"),
        vendor=_text(entry["vendor"], "vendor"),
        model=_text(entry["model"], "model"),
        numa_node=None if node is None else _whole(node, "numa_node", bound.max_id),
        cores=tuple(sorted(cores)),
        cpus=tuple(sorted(cpus)),
        runtime="gpus" if entry["vendor"] == "NVIDIA" else "none" if pci is None else "device",
        ordinal=None if entry.get("cuda") is None else _whole(entry["cuda"], "cuda", MAX_MAP_CARDS - 1),
    )


def _whole(value: object, key: str, most: int) -> int:
    """A whole number 0..most written as YAML writes one (or in ASCII digits), else ValueError naming the key."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not inbound.is_digits(text) or len(text) > 9 or int(text) > most:
        raise ValueError(f"{key} must be a whole number 0..{most}")
    return int(text)


def _text(value: object, key: str) -> str:
    if not isinstance(value, str) or len(value) > 256:
        raise ValueError(f"{key} must be a string of at most 256 characters")
    return value
