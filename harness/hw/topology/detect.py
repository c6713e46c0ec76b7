"""Build a Topology from sysfs below a filesystem root, or from an hwloc XML file."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.sysfs import Sysfs
from harness.hw.topology.model import Core, PciDevice, Topology

_CPU_DIR = "sys/devices/system/cpu"
_NODE_DIR = "sys/devices/system/node"
_PCI_DIR = "sys/bus/pci/devices"
_CPU_RE = re.compile(r"cpu([0-9]+)$")
_NODE_RE = re.compile(r"node([0-9]+)$")
_INDEX_RE = re.compile(r"index([0-9]+)$")
# domain:bus:device.function, as the kernel names a PCI device
_PCI_RE = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
# Device nodes drivers create under the PCI device in sysfs -> the /dev path a container needs.
_DEVICE_NODE_DIRS = {"accel": "/dev/accel/{}", "drm": "/dev/dri/{}", "tenstorrent": "/dev/tenstorrent/{}"}


def detect(sysfs_root: str | os.PathLike[str] = "/", hwloc_xml: str | os.PathLike[str] | None = None,
           force: bool = False, warn: Callable[[str], None] = print) -> Topology:
    """The machine's layout from sysfs below `sysfs_root` (the directory containing `sys/`) or hwloc XML.

    A sysfs file holding neither a CPU list nor a number refuses the detection (each reader would
    otherwise fall back quietly, and a card could lose a CPU); `force` detects anyway, with a warning."""
    if hwloc_xml is not None:
        from harness.hw.topology.hwloc_xml import read_hwloc_xml

        return read_hwloc_xml(hwloc_xml)
    fs = Sysfs(sysfs_root)
    topo = read_sysfs(fs)
    if fs.garbage:
        shown = [f"{path} holds {value!r}" + (f" ({fs.why[path]})" if path in fs.why else "")
                 for path, value in list(fs.garbage.items())[:3]]
        more = f" and {len(fs.garbage) - 3} more" if len(fs.garbage) > 3 else ""
        found = f"sysfs values that are not a valid CPU list or number: {'; '.join(shown)}{more}"
        if not force:
            raise ApplianceError(f"{found}; fix that copy of /sys (a card could lose CPUs), or map it anyway "
                                 f"with `appliance topology detect --force`")
        warn(f"warning: {found}; mapped anyway (--force)")
    return topo


def read_sysfs(fs: Sysfs) -> Topology:
    if not fs.path(_CPU_DIR).is_dir():
        hint = " (it looks like /sys itself: pass its parent)" if fs.path("devices/system/cpu").is_dir() else ""
        raise ApplianceError(
            f"{fs.root} is not a filesystem root: {fs.path(_CPU_DIR)} is missing{hint}; "
            "pass the directory that contains sys/, e.g. --sysfs-root /"
        )
    online = _online_cpus(fs)
    if not online:
        raise ApplianceError(f"no online CPUs found below {fs.path(_CPU_DIR)}; is it a copy of /sys?")
    cores, packages = _cores_and_packages(fs, online)
    nodes = _numa_nodes(fs, online, packages)
    return Topology(
        online=frozenset(online),
        allowed=frozenset(_allowed_cpus(fs, online)),
        packages=packages,
        cores=cores,
        numa_nodes=nodes,
        l3_domains=_l3_domains(fs, online),
        pci_devices=_pci_devices(fs, online, nodes),
        source=f"sysfs:{fs.root}",
    )


def _online_cpus(fs: Sysfs) -> set[int]:
    """cpu/online; without it, every cpuN directory whose `online` file is not 0 (cpu0 often has none)."""
    online = fs.cpulist(f"{_CPU_DIR}/online")
    if online is not None:
        return online
    cpus = set()
    for name in fs.listdir(_CPU_DIR):
        match = _CPU_RE.match(name)
        if match and fs.integer(f"{_CPU_DIR}/{name}/online") != 0:
            cpus.add(int(match.group(1)))
    return cpus


def _cores_and_packages(fs: Sysfs, online: set[int]) -> tuple[tuple[Core, ...], tuple[frozenset[int], ...]]:
    """Group online CPUs into physical cores (SMT siblings) and packages."""
    cores: dict[frozenset[int], int] = {}
    packages: dict[int, set[int]] = {}
    for cpu in sorted(online):
        top = f"{_CPU_DIR}/cpu{cpu}/topology"
        package = fs.integer(f"{top}/physical_package_id")
        package = 0 if package is None or package < 0 else package
        siblings = (
            fs.cpulist(f"{top}/core_cpus_list")
            or fs.cpulist(f"{top}/thread_siblings_list")
            or fs.mask(f"{top}/core_cpus")
            or fs.mask(f"{top}/thread_siblings")
            or {cpu}
        )
        key = frozenset((siblings & online) | {cpu})
        cores.setdefault(key, package)
        packages.setdefault(package, set()).add(cpu)
    core_list = sorted((Core(pkg, tuple(sorted(cpus))) for cpus, pkg in cores.items()), key=lambda c: c.first)
    return tuple(core_list), tuple(frozenset(packages[p]) for p in sorted(packages))


def _numa_nodes(fs: Sysfs, online: set[int], packages: tuple[frozenset[int], ...]) -> dict[int, frozenset[int]]:
    """Online NUMA nodes with their online CPUs; ids may be sparse and CPU-less nodes are kept.

    An online CPU that no node lists joins the node holding the rest of its package when that node
    is the only one there (what hwloc does); otherwise it stays in no node.
    """
    present = sorted(int(m.group(1)) for name in fs.listdir(_NODE_DIR) if (m := _NODE_RE.match(name)))
    if not present:  # kernel without NUMA support: one node holds everything
        return {0: frozenset(online)}
    node_online = fs.cpulist(f"{_NODE_DIR}/online", fs.node_bound)
    ids = [n for n in present if node_online is None or n in node_online]
    nodes = {}
    for node in ids:
        cpus = fs.cpus(f"{_NODE_DIR}/node{node}/cpulist", f"{_NODE_DIR}/node{node}/cpumap") or set()
        nodes[node] = frozenset(cpus & online)
    orphans = online - set().union(*nodes.values())
    for package in packages:
        owners = [node for node, cpus in nodes.items() if cpus & package]
        if len(owners) == 1 and package & orphans:
            nodes[owners[0]] = nodes[owners[0]] | (package & orphans)
    return nodes


def _l3_domains(fs: Sysfs, online: set[int]) -> tuple[frozenset[int], ...]:
    """Sets of online CPUs sharing an L3, found by each cache's `level` file (index names vary)."""
    domains: list[frozenset[int]] = []
    covered: set[int] = set()
    for cpu in sorted(online):
        if cpu in covered:
            continue
        cache = f"{_CPU_DIR}/cpu{cpu}/cache"
        for index in fs.listdir(cache):
            if not _INDEX_RE.match(index):
                continue
            base = f"{cache}/{index}"
            if fs.integer(f"{base}/level") != 3 or fs.text(f"{base}/type") == "Instruction":
                continue
            shared = fs.cpus(f"{base}/shared_cpu_list", f"{base}/shared_cpu_map") or {cpu}
            domain = frozenset((shared & online) | {cpu})  # offline CPUs stay listed in cache files
            domains.append(domain)
            covered |= domain
            break
    return tuple(sorted(domains, key=min))


def _allowed_cpus(fs: Sysfs, online: set[int]) -> set[int]:
    """Online CPUs this process may use: the cgroup's effective cpuset, and on the live root the affinity."""
    allowed = set(online)
    cgroup = _cgroup_cpuset(fs)
    if cgroup:
        allowed &= cgroup
    if fs.root.resolve() == Path("/") and hasattr(os, "sched_getaffinity"):
        allowed &= os.sched_getaffinity(0)
    return allowed or set(online)


def _cgroup_cpuset(fs: Sysfs) -> set[int] | None:
    """cpuset.cpus.effective of this process's cgroup (v2), then the v1 cpuset hierarchy."""
    candidates = []
    for line in (fs.text("proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0":
            candidates.append(f"sys/fs/cgroup{parts[2].rstrip('/')}/cpuset.cpus.effective")
        elif len(parts) == 3 and "cpuset" in parts[1].split(","):
            candidates.append(f"sys/fs/cgroup/cpuset{parts[2].rstrip('/')}/cpuset.effective_cpus")
    candidates += ["sys/fs/cgroup/cpuset.cpus.effective", "sys/fs/cgroup/cpuset/cpuset.effective_cpus"]
    for rel in candidates:
        cpus = fs.cpulist(rel)
        if cpus:
            return cpus
    return None


def _pci_devices(fs: Sysfs, online: set[int], nodes: dict[int, frozenset[int]]) -> tuple[PciDevice, ...]:
    devices = []
    for address in fs.listdir(_PCI_DIR):
        if not _PCI_RE.fullmatch(address):  # not a name the kernel gives (a newline in a copy's folder name)
            fs.garbage.setdefault(fs.path(f"{_PCI_DIR}/{address}"), "(not a PCI address)")
            continue
        base = f"{_PCI_DIR}/{address}"
        class_code, vendor, device = (
            fs.integer(f"{base}/class"),
            fs.integer(f"{base}/vendor"),
            fs.integer(f"{base}/device"),
        )
        if class_code is None or vendor is None or device is None:
            continue
        local = fs.cpus(f"{base}/local_cpulist", f"{base}/local_cpus")
        local = (local or set()) & online
        devices.append(
            PciDevice(
                address=address,
                class_code=class_code >> 8,
                vendor=vendor,
                device=device,
                numa_node=_pci_node(fs, base, local, nodes),
                local_cpus=frozenset(local or online),
                device_nodes=_device_nodes(fs, base),
            )
        )
    return tuple(sorted(devices, key=lambda d: d.address))


def _pci_node(fs: Sysfs, base: str, local: set[int], nodes: dict[int, frozenset[int]]) -> int | None:
    """`numa_node`; -1 means unknown: try the parent bridges, then the one node holding `local_cpulist`."""
    device_dir = fs.realpath(base)
    sys_devices = fs.realpath("sys/devices")
    path = device_dir
    while path != sys_devices and sys_devices in path.parents:
        node = _read_int(path / "numa_node")
        if node is not None and node >= 0:
            return node
        path = path.parent
    if local:
        owners = [node for node, cpus in nodes.items() if cpus & local]
        if len(owners) == 1:
            return owners[0]
    return None


def _read_int(path: Path) -> int | None:
    try:
        return int(inbound.read_bytes(path, inbound.SYSFS).replace(b"\0", b"").strip(), 0)
    except (OSError, ValueError, inbound.Refused):
        return None


def _device_nodes(fs: Sysfs, base: str) -> tuple[str, ...]:
    found = []
    for subdir, template in _DEVICE_NODE_DIRS.items():
        for name in fs.listdir(f"{base}/{subdir}"):
            if subdir != "drm" or name.startswith("renderD"):
                found.append(template.format(name))
    return tuple(found)
