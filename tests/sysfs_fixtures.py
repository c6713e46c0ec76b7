"""Generate fake sysfs trees (a filesystem root containing sys/ and proc/) for topology tests.

The trees follow the kernel's real layout and numbering closely enough that hwloc's lstopo accepts
them (HWLOC_FSROOT=<root>), so one fixture checks both our detection and hwloc's. Nothing binary is
committed: every tree is written by this code into a temporary directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.sysfs import format_cpulist

if TYPE_CHECKING:
    import pytest

QUALCOMM, AIC100 = 0x17CB, 0xA100
NVIDIA, A100_PCIE, H100_SXM, H100_PCIE = 0x10DE, 0x20F1, 0x2330, 0x2331
ACCEL_CLASS, DISPLAY_3D_CLASS = 0x120000, 0x030200


@dataclass(frozen=True)
class Pci:
    """A PCI function placed behind a root port of host bridge `domain_bus`, on `node` (-1: unknown)."""

    bus: int
    node: int
    vendor: int = QUALCOMM
    device: int = AIC100
    class_code: int = ACCEL_CLASS
    local_cpus_node: int | None = None  # whose CPUs `local_cpulist` names; default: `node`'s
    accel: str | None = None  # name of a DRM accel minor under the device, e.g. "accel0"


@dataclass
class Machine:
    """Sockets x cores x SMT with the kernel's numbering: thread t of core c in socket s is
    t * (sockets * cores) + s * cores + c (so socket 0's cores come first, their siblings later)."""

    sockets: int
    cores_per_socket: int
    threads: int = 2
    cores_per_l3: int = 8
    nps: int = 1  # NUMA nodes per socket
    pci: list[Pci] = field(default_factory=list)
    offline: set[int] = field(default_factory=set)
    nodeless: set[int] = field(default_factory=set)  # online CPUs listed in no node
    cpuless_nodes: tuple[int, ...] = ()  # memory-only node ids, e.g. CXL memory
    cgroup_cpus: str | None = None  # a container's cpuset.cpus.effective
    nul_terminated: bool = False
    masks_only: bool = False  # no *_list files, only hex masks
    l3_index: int = 3  # cache/indexN name of the L3; swapped with L2 when 2
    node_ids: tuple[int, ...] = ()  # the kernel's ids of the CPU nodes, in order, when sparse (default 0..n-1)
    kernel_max: int = 8191

    @property
    def ncpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads

    def cpu(self, socket: int, core: int, thread: int) -> int:
        return thread * self.sockets * self.cores_per_socket + socket * self.cores_per_socket + core

    def where(self, cpu: int) -> tuple[int, int, int]:
        """(socket, core in socket, thread) of a CPU id."""
        per_thread = self.sockets * self.cores_per_socket
        return cpu % per_thread // self.cores_per_socket, cpu % self.cores_per_socket, cpu // per_thread

    def node_of(self, cpu: int) -> int:
        socket, core, _ = self.where(cpu)
        index = socket * self.nps + core * self.nps // self.cores_per_socket
        return self.node_ids[index] if self.node_ids else index

    def siblings(self, cpu: int, same: Callable[[tuple[int, int, int], tuple[int, int, int]], bool]) -> set[int]:
        return {other for other in range(self.ncpus) if same(self.where(cpu), self.where(other))}


def mask(cpus: set[int], ncpus: int) -> str:
    """The kernel's hex mask: 32-bit words, most significant first."""
    value = sum(1 << c for c in cpus)
    words = max(1, (ncpus + 31) // 32)
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


class _Writer:
    def __init__(self, root: Path, machine: Machine) -> None:
        self.root, self.m = root, machine

    def put(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + ("\0" if self.m.nul_terminated else "\n"))

    def cpus(self, rel_mask: str, rel_list: str, cpus: set[int]) -> None:
        self.put(rel_mask, mask(cpus, self.m.ncpus))
        if not self.m.masks_only:
            self.put(rel_list, format_cpulist(cpus))


def write_machine(root: Path, m: Machine) -> Path:
    """Write the tree for `m` below `root` and return `root` (the fake filesystem root)."""
    w = _Writer(root, m)
    all_cpus = set(range(m.ncpus))
    online = all_cpus - m.offline
    base = "sys/devices/system/cpu"
    for rel, cpus in (("online", online), ("possible", all_cpus), ("present", all_cpus)):
        w.put(f"{base}/{rel}", format_cpulist(cpus))
    w.put(f"{base}/offline", format_cpulist(m.offline))
    w.put(f"{base}/kernel_max", str(m.kernel_max))
    for cpu in sorted(all_cpus):
        _write_cpu(w, cpu, cpu in online)
    _write_nodes(w, online)
    _write_pci(w, online)
    (root / "proc").mkdir(exist_ok=True)
    w.put("proc/cpuinfo", _cpuinfo(m, online))
    if m.cgroup_cpus is not None:
        w.put("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0")
        w.put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids")
        w.put("proc/self/cgroup", "0::/appliance")
        w.put("sys/fs/cgroup/appliance/cpuset.cpus.effective", m.cgroup_cpus)
        w.put("sys/fs/cgroup/appliance/cpuset.mems.effective", format_cpulist(set(range(m.sockets * m.nps))))
    return root


def _write_cpu(w: _Writer, cpu: int, online: bool) -> None:
    m = w.m
    d = f"sys/devices/system/cpu/cpu{cpu}"
    if cpu:
        w.put(f"{d}/online", "1" if online else "0")
    if not online:  # the kernel removes topology/ and cache/ of offline CPUs
        return
    socket, core, _ = m.where(cpu)
    thread_sibs = m.siblings(cpu, lambda a, b: a[:2] == b[:2])
    package = m.siblings(cpu, lambda a, b: a[0] == b[0])
    l3 = m.siblings(cpu, lambda a, b: a[0] == b[0] and a[1] // m.cores_per_l3 == b[1] // m.cores_per_l3)
    t = f"{d}/topology"
    w.put(f"{t}/physical_package_id", str(socket))
    w.put(f"{t}/die_id", "0")
    w.put(f"{t}/core_id", str(core))
    # The pre-5.x names, which hwloc and we still read (newer kernels add core_cpus/package_cpus).
    w.cpus(f"{t}/thread_siblings", f"{t}/thread_siblings_list", thread_sibs)
    w.cpus(f"{t}/core_siblings", f"{t}/core_siblings_list", package)
    caches = [
        (1, "Data", "32K", 8, thread_sibs),
        (1, "Instruction", "32K", 8, thread_sibs),
        (2, "Unified", "512K", 8, thread_sibs),
        (3, "Unified", "32768K", 16, l3),
    ]
    if m.l3_index == 2:
        caches[2], caches[3] = caches[3], caches[2]
    for index, (level, kind, size, ways, shared) in enumerate(caches):
        c = f"{d}/cache/index{index}"
        if level == 3:
            shared = shared | (m.offline & l3_of_offline(m, shared))  # offline CPUs stay listed
        w.put(f"{c}/level", str(level))
        w.put(f"{c}/type", kind)
        w.put(f"{c}/size", size)
        w.put(f"{c}/coherency_line_size", "64")
        w.put(f"{c}/ways_of_associativity", str(ways))
        w.cpus(f"{c}/shared_cpu_map", f"{c}/shared_cpu_list", shared)


def l3_of_offline(m: Machine, shared: set[int]) -> set[int]:
    """Offline CPUs in the same L3 slice as `shared` (used to keep them listed in cache files)."""
    key = {(s, c // m.cores_per_l3) for s, c, _ in map(m.where, shared)}
    return {cpu for cpu in m.offline if (m.where(cpu)[0], m.where(cpu)[1] // m.cores_per_l3) in key}


def _write_nodes(w: _Writer, online: set[int]) -> None:
    m = w.m
    cpu_nodes = list(m.node_ids or range(m.sockets * m.nps))
    node_ids = cpu_nodes + list(m.cpuless_nodes)
    base = "sys/devices/system/node"
    for rel in ("online", "possible", "has_memory", "has_normal_memory"):
        w.put(f"{base}/{rel}", format_cpulist(set(node_ids)))
    w.put(f"{base}/has_cpu", format_cpulist(set(cpu_nodes)))
    for node in node_ids:
        cpus = {c for c in online if node in cpu_nodes and m.node_of(c) == node} - m.nodeless
        d = f"{base}/node{node}"
        w.cpus(f"{d}/cpumap", f"{d}/cpulist", cpus)
        kb = 256 * 1024 * 1024
        w.put(f"{d}/meminfo", f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        {kb // 2} kB")
        w.put(f"{d}/distance", " ".join("10" if n == node else "32" for n in node_ids))


def _write_pci(w: _Writer, online: set[int]) -> None:
    """Each device sits behind its own root port below host bridge pci0000:<bus & 0xe0>."""
    m = w.m
    for dev in w.m.pci:
        host = dev.bus & 0xE0
        port = f"0000:{host:02x}:{1 + (dev.bus & 0x1F) // 8:02x}.{(dev.bus & 7) % 8}"
        address = f"0000:{dev.bus:02x}:00.0"
        port_dir = f"sys/devices/pci0000:{host:02x}/{port}"
        dev_dir = f"{port_dir}/{address}"
        node_cpus = {
            c for c in online if m.node_of(c) == (dev.node if dev.local_cpus_node is None else dev.local_cpus_node)
        }
        if not node_cpus:
            node_cpus = online
        for d, vendor, device, class_code, node, sec in (
            (port_dir, 0x1022, 0x1483, 0x060400, dev.node, dev.bus),
            (dev_dir, dev.vendor, dev.device, dev.class_code, dev.node, None),
        ):
            w.put(f"{d}/vendor", f"0x{vendor:04x}")
            w.put(f"{d}/device", f"0x{device:04x}")
            w.put(f"{d}/class", f"0x{class_code:06x}")
            w.put(f"{d}/subsystem_vendor", f"0x{vendor:04x}")
            w.put(f"{d}/subsystem_device", "0x0001")
            w.put(f"{d}/revision", "0x00")
            w.put(f"{d}/numa_node", str(node))
            w.cpus(f"{d}/local_cpus", f"{d}/local_cpulist", node_cpus)
            (w.root / d / "config").write_bytes(_config(vendor, device, class_code, sec))
            name = d.rsplit("/", 1)[1]
            link = w.root / "sys/bus/pci/devices" / name
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                os.symlink(os.path.relpath(w.root / d, link.parent), link)
        if dev.accel:
            (w.root / dev_dir / "accel" / dev.accel).mkdir(parents=True)


def _config(vendor: int, device: int, class_code: int, secondary_bus: int | None) -> bytes:
    """A 64-byte PCI config header: bridges say which bus they lead to, which hwloc reads."""
    cfg = bytearray(64)
    cfg[0:4] = vendor.to_bytes(2, "little") + device.to_bytes(2, "little")
    cfg[9:12] = class_code.to_bytes(3, "little")
    if secondary_bus is not None:
        cfg[0x0E] = 1
        cfg[0x18:0x1B] = bytes([secondary_bus & 0xE0, secondary_bus, secondary_bus])
    return bytes(cfg)


def _cpuinfo(m: Machine, online: set[int]) -> str:
    blocks = []
    for cpu in sorted(online):
        socket, core, _ = m.where(cpu)
        blocks.append(
            f"processor\t: {cpu}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC fixture\n"
            f"physical id\t: {socket}\nsiblings\t: {m.cores_per_socket * m.threads}\ncore id\t\t: {core}\n"
            f"cpu cores\t: {m.cores_per_socket}\n"
        )
    return "\n".join(blocks)


def _bus(card: int, per_host: int = 2) -> int:
    """Bus of the card-th device: `per_host` cards per host bridge 0x00, 0x20, ... (hwloc places a host
    bridge by its first root port, so devices of one host bridge must share a node)."""
    return 0x20 * (card // per_host) + 0x01 + 0x08 * (card % per_host)


def _cards(node_of_card: list[int]) -> list[Pci]:
    """Cloud AI 100 cards, two per host bridge, in card order."""
    return [Pci(bus=_bus(i), node=node, accel=f"accel{i}") for i, node in enumerate(node_of_card)]


def _io() -> list[Pci]:
    """Devices that are not accelerators, on node 0's last host bridge: NIC, NVMe drives, the BMC's VGA."""
    return [
        Pci(bus=0xF1, node=0, vendor=0x15B3, device=0x101B, class_code=0x020000),  # Mellanox NIC
        Pci(bus=0xF2, node=0, vendor=0x144D, device=0xA808, class_code=0x010802),  # NVMe
        Pci(bus=0xF3, node=0, vendor=0x144D, device=0xA808, class_code=0x010802),  # NVMe
        Pci(bus=0xF4, node=0, vendor=0x1A03, device=0x2000, class_code=0x030000),  # ASPEED VGA
    ]


def r282_z93(cards: int) -> Machine:
    """GIGABYTE R282-Z93, 2x EPYC 7282 (16 cores, SMT2, L3 per 8 cores), NPS1.

    5 cards: 0-1 on node 0, 2-4 on node 1; 8 cards: 4 per node (see topologies/README.md).
    """
    nodes = {5: [0, 0, 1, 1, 1], 8: [0, 0, 0, 0, 1, 1, 1, 1]}[cards]
    return Machine(sockets=2, cores_per_socket=16, pci=_cards(nodes) + _io())


def g292_z43() -> Machine:
    """GIGABYTE G292-Z43, 2x EPYC 7713 (64 cores, SMT2, L3 per 8 cores), NPS1, 16 cards.

    The first 8 cards by PCI address sit on socket 1 (node 1), as Table IV implies.
    """
    return Machine(sockets=2, cores_per_socket=64, pci=_cards([1] * 8 + [0] * 8) + _io())


def nvidia_box() -> Machine:
    """A small 2-socket host with 4 NVIDIA GPUs, 2 per socket (for the --gpus and numa-config paths)."""
    gpus = [
        Pci(bus=_bus(i), node=i // 2, vendor=NVIDIA, device=A100_PCIE, class_code=DISPLAY_3D_CLASS) for i in range(4)
    ]
    return Machine(sockets=2, cores_per_socket=8, pci=gpus + _io())


def hgx_h100() -> Machine:
    """An HGX-like 8-GPU server: 2 x 16 cores (SMT2, L3 per 8 cores), H100 SXM GPUs 0-3 on socket 0 and 4-7
    on socket 1, two per host bridge, plus the NIC / NVMe / BMC of `_io`."""
    gpus = [Pci(bus=_bus(i), node=i // 4, vendor=NVIDIA, device=H100_SXM, class_code=DISPLAY_3D_CLASS)
            for i in range(8)]
    return Machine(sockets=2, cores_per_socket=16, pci=gpus + _io())


def pcie_2gpu() -> Machine:
    """A PCIe server, 2 x 8 cores, one H100 PCIe per socket: GPU 0 on node 0, GPU 1 on node 1."""
    gpus = [Pci(bus=_bus(i, 1), node=i, vendor=NVIDIA, device=H100_PCIE, class_code=DISPLAY_3D_CLASS)
            for i in range(2)]
    return Machine(sockets=2, cores_per_socket=8, pci=gpus + _io())


def messy() -> Machine:
    """Everything sysfs does to you at once, on a 2 x 16-core machine with 4 cards."""
    return Machine(
        sockets=2,
        cores_per_socket=16,
        nul_terminated=True,
        masks_only=True,
        offline={5, 37},  # core 5 of socket 0 and its sibling
        nodeless={30, 62},  # core 30: online, in no node
        cpuless_nodes=(4,),  # sparse id, memory only
        l3_index=2,
        pci=[
            Pci(bus=_bus(0, 1), node=0),
            Pci(bus=_bus(1, 1), node=-1, local_cpus_node=1),  # locality only from local_cpulist
            Pci(bus=_bus(2, 1), node=1),
            Pci(bus=_bus(3, 1), node=1),
            *_io(),
        ],
    )


def sparse_nodes() -> Machine:
    """A real machine's numbering (issue 35): 48 CPUs (kernel_max 47), 8 NUMA nodes whose ids are sparse,
    node/online `0-2,33-34,45,72-73`: node ids beyond kernel_max are the kernel's to give."""
    return Machine(sockets=2, cores_per_socket=12, nps=4, cores_per_l3=3, kernel_max=47,
                   node_ids=(0, 1, 2, 33, 34, 45, 72, 73), pci=[Pci(bus=_bus(0, 1), node=45), *_io()])


def container() -> Machine:
    """The 8-card R282 seen from a container limited to socket 0's first L3 domain."""
    m = r282_z93(8)
    m.cgroup_cpus = "0-7,32-39"
    return m


PAPER_SYSTEMS = {
    "r282-z93-5cards": lambda: r282_z93(5),
    "r282-z93-8cards": lambda: r282_z93(8),
    "g292-z43-16cards": g292_z43,
}

OTHER_SYSTEMS = {"messy": messy, "nvidia-box": nvidia_box, "container": container, "hgx-h100": hgx_h100,
                 "pcie-2gpu": pcie_2gpu, "sparse-nodes": sparse_nodes}
ALL_SYSTEMS = {**PAPER_SYSTEMS, **OTHER_SYSTEMS}


def build(name: str, parent: Path) -> Path:
    """Write fixture `name` (a key of ALL_SYSTEMS) into parent/name once and return that root.

    Tests pass one session-wide parent (shared_trees) so the 256-CPU tree is written only once.
    """
    root = parent / name
    if not root.exists():
        root.mkdir(parents=True)
        write_machine(root, ALL_SYSTEMS[name]())
    return root


def shared_trees(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's directory of fixture trees (pytest's tmp_path_factory base)."""
    return tmp_path_factory.getbasetemp() / "trees"
