"""Read a Topology from an hwloc XML file (`lstopo --of xml`, hwloc 1.x or 2.x).

hwloc gives every normal object an OS index and a cpuset; an I/O device has none of its own, so its
locality is the cpuset and nodeset of its nearest ancestor that has one.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from harness.core import environment, inbound
from harness.core.errors import ApplianceError
from harness.core.sysfs import FIXED_MAX_CPU, format_cpulist
from harness.hw.topology.model import Core, PciDevice, Topology

__all__ = ["MAX_XML_BYTES", "differences", "lstopo_xml", "parse_bitmap", "read_hwloc_xml"]

MAX_XML_BYTES = 64 << 20  # lstopo's XML of a large machine with its PCI tree is a few MB

# OS devices hwloc attaches below a PCI function whose names are /dev entries.
_OSDEV_PATHS = {"renderD": "/dev/dri/{}", "accel": "/dev/accel/{}"}


def parse_bitmap(text: str) -> set[int]:
    """hwloc's bitmap string: comma-separated 0x-prefixed 32-bit words, most significant first.

    An empty word is a zero word ("0xff,,0x0"); an infinite set starts with "0xf...f", which is
    dropped because callers intersect with the real PUs.
    """
    value = 0
    for word in text.strip().split(","):
        word = word.strip()
        if word != "0xf...f":
            value = (value << 32) | int(word or "0", 16)
    if value.bit_length() - 1 > FIXED_MAX_CPU:
        raise ValueError(f"CPU {value.bit_length() - 1} is beyond the fixed bound {FIXED_MAX_CPU} (NR_CPUS 8192)")
    return {bit for bit in range(value.bit_length()) if value >> bit & 1}


def read_hwloc_xml(path: str | os.PathLike[str]) -> Topology:
    try:
        if os.path.getsize(path) > MAX_XML_BYTES:
            raise ApplianceError(f"hwloc XML {path} is larger than {MAX_XML_BYTES >> 20} MB: not a topology; make "
                                 f"one with `lstopo --of xml FILE`")
        text = inbound.read_bytes(path, MAX_XML_BYTES, what="hwloc XML")
        if b"<!ENTITY" in text:  # lstopo writes none; entities are how an XML file expands without bound
            raise ET.ParseError("entity declarations are not accepted")
        root = ET.fromstring(text)
    except (ET.ParseError, OSError, inbound.Refused) as exc:
        raise ApplianceError(f"cannot read hwloc XML {path}: {exc}; make one with `lstopo --of xml FILE`") from exc
    try:
        return _topology(root, path)
    except ValueError as exc:  # a bitmap, an index or a pci_type that is not what lstopo writes
        raise ApplianceError(f"hwloc XML {path}: {exc}; make one with `lstopo --of xml FILE`") from None


def _topology(root: ET.Element, path: str | os.PathLike[str]) -> Topology:
    machine = root.find("object")
    if root.tag != "topology" or machine is None or "cpuset" not in machine.attrib:
        raise ApplianceError(f"{path} is not an hwloc topology; make one with `lstopo --of xml FILE`")
    online = {_os_index(pu) for pu in root.iter("object") if pu.get("type") == "PU"}
    if not online:
        raise ApplianceError(f"{path} lists no PUs; make it with `lstopo --of xml FILE` on the target machine")
    allowed = parse_bitmap(machine.get("allowed_cpuset", machine.get("cpuset", "0x0"))) & online

    packages, nodes, l3, cores, pci = [], {}, [], [], []
    stack: list[tuple[ET.Element, ET.Element | None]] = [(machine, None)]  # (object, locality ancestor)
    while stack:
        obj, local = stack.pop()
        kind = obj.get("type")
        cpus = frozenset(parse_bitmap(obj.get("cpuset", "0x0")) & online)
        if kind == "Package":
            packages.append(cpus)
        elif kind == "NUMANode":
            nodes[_os_index(obj)] = cpus
        elif kind == "L3Cache" or (kind == "Cache" and obj.get("depth") == "3"):
            l3.append(cpus)
        elif kind == "Core":
            threads = sorted(_os_index(pu) for pu in obj.iter("object") if pu.get("type") == "PU")
            cores.append(threads)
        elif kind == "PCIDev" and local is not None:
            pci.append(_pci_device(obj, local, online))
        ancestor = obj if "cpuset" in obj.attrib else local
        stack.extend((child, ancestor) for child in reversed(obj.findall("object")))

    if not cores:  # hwloc without Core objects: every PU is its own core
        cores = [[cpu] for cpu in sorted(online)]
    package_of = {cpu: i for i, pkg in enumerate(sorted(packages, key=min)) for cpu in pkg}
    core_objs = sorted((Core(package_of.get(c[0], 0), tuple(c)) for c in cores if c), key=lambda c: c.first)
    if not nodes:
        nodes = {0: frozenset(online)}
    return Topology(
        online=frozenset(online),
        allowed=frozenset(allowed or online),
        packages=tuple(sorted(packages, key=min)) or (frozenset(online),),
        cores=tuple(core_objs),
        numa_nodes=dict(sorted(nodes.items())),
        l3_domains=tuple(sorted((d for d in l3 if d), key=min)),
        pci_devices=tuple(sorted(_with_nodes(pci, nodes), key=lambda d: d.address)),
        source=f"hwloc-xml:{Path(path)}",
    )


def _os_index(obj: ET.Element) -> int:
    """A PU's or NUMA node's os_index: a CPU or node id of at most FIXED_MAX_CPU, or ValueError naming it (a PU
    of index -1 was dropped without a word)."""
    text = obj.get("os_index")
    if text is None or not inbound.is_digits(text) or int(text) > FIXED_MAX_CPU:
        raise ValueError(f"{obj.get('type')} os_index {text!r} is not an id of 0..{FIXED_MAX_CPU} (NR_CPUS 8192)")
    return int(text)


def _pci_device(obj: ET.Element, local: ET.Element, online: set[int]) -> PciDevice:
    """pci_type is "CCSS [vvvv:dddd] [ssss:ssss] rr"; locality from the ancestor's cpuset/nodeset."""
    fields = obj.get("pci_type", "0000 [0000:0000]").split()
    if len(fields) < 2 or fields[1].count(":") != 1:
        raise ValueError(f"PCIDev pci_type {obj.get('pci_type')!r} is not \"CCSS [vvvv:dddd] ...\"")
    vendor, device = fields[1].strip("[]").split(":")
    nodeset = parse_bitmap(local.get("nodeset", "0x0"))
    osdevs = []
    for child in obj.iter("object"):
        name = child.get("name", "")
        osdevs += [tpl.format(name) for prefix, tpl in _OSDEV_PATHS.items() if name.startswith(prefix)]
    return PciDevice(
        address=obj.get("pci_busid", "0000:00:00.0"),
        class_code=int(fields[0], 16),
        vendor=int(vendor, 16),
        device=int(device, 16),
        numa_node=next(iter(nodeset)) if len(nodeset) == 1 else None,
        local_cpus=frozenset(parse_bitmap(local.get("cpuset", "0x0")) & online),
        device_nodes=tuple(osdevs),
    )


def _with_nodes(devices: list[PciDevice], nodes: dict[int, frozenset[int]]) -> list[PciDevice]:
    """A device whose ancestor names no single node gets the one node its CPUs meet, if only one."""
    result = []
    for dev in devices:
        if dev.numa_node is None:
            owners = [n for n, cpus in nodes.items() if cpus & dev.local_cpus]
            if len(owners) == 1:
                dev = replace(dev, numa_node=owners[0])
        result.append(dev)
    return result


def lstopo_xml(out: Path, lstopo: str, fsroot: Path | None = None) -> Path:
    """hwloc's view of the machine (or of the sysfs copy below `fsroot`) as XML in `out`; --disallowed keeps
    CPUs outside the cpuset, as our description does, --whole-io every PCI function."""
    import subprocess

    env = environment.child() if fsroot is None else \
        environment.child(HWLOC_FSROOT=str(fsroot), HWLOC_COMPONENTS="linux,stop")
    subprocess.run([lstopo, "--of", "xml", "--disallowed", "--whole-io", "-f", str(out)], env=env, check=True,
                   capture_output=True)
    return out


_BRIDGES = (0x0604, 0x0609)  # PCI-to-PCI bridges: hwloc makes them Bridge objects, not PCI devices


def differences(ours: Topology, theirs: Topology) -> list[str]:
    """Where two descriptions of one machine disagree (empty: none): online CPUs, packages, NUMA nodes,
    L3 domains, and each PCI function's class, ids, NUMA node and local CPUs."""
    out = [f"{what}: ours {a}, hwloc {b}" for what, a, b in (
        ("online CPUs", format_cpulist(ours.online), format_cpulist(theirs.online)),
        ("packages", _cpu_sets(ours.packages), _cpu_sets(theirs.packages)),
        ("NUMA nodes", _nodes(ours), _nodes(theirs)),
        ("L3 domains", _cpu_sets(ours.l3_domains), _cpu_sets(theirs.l3_domains))) if a != b]
    mine = {d.address: d for d in ours.pci_devices if d.class_code not in _BRIDGES}
    hwloc = {d.address: d for d in theirs.pci_devices}
    fields = ("class_code", "vendor", "device", "numa_node", "local_cpus")
    for address in sorted(mine.keys() | hwloc.keys()):
        a, b = mine.get(address), hwloc.get(address)
        if a is None or b is None:
            out.append(f"PCI {address}: only in {'hwloc' if a is None else 'ours'}")
            continue
        wrong = [f"{f} ours {getattr(a, f)!r}, hwloc {getattr(b, f)!r}" for f in fields
                 if getattr(a, f) != getattr(b, f)]
        if wrong:
            out.append(f"PCI {address}: " + "; ".join(wrong))
    return out


def _cpu_sets(sets: tuple[frozenset[int], ...]) -> str:
    return "[" + ", ".join(sorted(format_cpulist(s) for s in sets)) + "]"


def _nodes(t: Topology) -> str:
    return "{" + ", ".join(f"{n}: {format_cpulist(cpus)}" for n, cpus in sorted(t.numa_nodes.items())) + "}"
