"""The machine's layout as plain immutable records: what the affinity policy needs and nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.sysfs import format_cpulist

__all__ = ["Card", "CardMap", "Core", "PciDevice", "Topology"]


@dataclass(frozen=True)
class Core:
    """One physical core; `cpus` are its online hardware threads (SMT siblings), lowest first."""

    package: int
    cpus: tuple[int, ...]

    @property
    def first(self) -> int:
        """The core's name in the paper's tables and in `cores`: its first hardware thread."""
        return self.cpus[0]


@dataclass(frozen=True)
class PciDevice:
    """A PCI function and its locality; `numa_node` None means the platform does not say."""

    address: str
    class_code: int  # 16-bit base class + subclass, e.g. 0x1200 (processing accelerator)
    vendor: int
    device: int
    numa_node: int | None
    local_cpus: frozenset[int]
    device_nodes: tuple[str, ...] = ()  # e.g. ("/dev/accel/accel0",), found under the device in sysfs


@dataclass(frozen=True)
class Topology:
    """Packages, cores, NUMA nodes and L3 domains as sets of online CPU ids.

    `allowed` is the subset this process may run on (container cpuset, taskset); the description of
    the machine uses all online CPUs, the card map only allowed ones.
    """

    online: frozenset[int]
    allowed: frozenset[int]
    packages: tuple[frozenset[int], ...]
    cores: tuple[Core, ...]
    numa_nodes: dict[int, frozenset[int]]  # every online node, CPU-less ones with an empty set
    l3_domains: tuple[frozenset[int], ...]
    pci_devices: tuple[PciDevice, ...]
    source: str

    def node_of(self, cpu: int) -> int | None:
        for node, cpus in self.numa_nodes.items():
            if cpu in cpus:
                return node
        return None

    def cache_domains(self) -> tuple[frozenset[int], ...]:
        """L3 domains, or NUMA nodes then packages on machines that report no L3."""
        if self.l3_domains:
            return self.l3_domains
        nodes = tuple(cpus for cpus in self.numa_nodes.values() if cpus)
        return nodes or self.packages


@dataclass(frozen=True)
class Card:
    """One card's share of the host: `cores` are first hardware threads, `cpus` every thread of them.

    `floating` cards could not be given cores of their own and run on every allowed core; `l3` holds
    the indices of the L3 domains (into CardMap.l3_domains) their cores come from.
    """

    index: int
    pci: str | None  # None for an emulated card
    vendor: str
    model: str
    numa_node: int | None
    cores: tuple[int, ...]
    cpus: tuple[int, ...]
    l3: tuple[int, ...] = ()
    floating: bool = False
    device_nodes: tuple[str, ...] = ()
    runtime: str = "none"  # how a container reaches it: "device" nodes, NVIDIA "gpus", or "none"
    ordinal: int | None = None  # NVIDIA GPU: its CUDA device ordinal (harness.hw.topology.cards.cuda_ordinals)


@dataclass(frozen=True)
class CardMap:
    """The machine's description plus each card's cores; what `--format json|yaml` writes."""

    packages: tuple[frozenset[int], ...]
    numa_nodes: dict[int, frozenset[int]]
    l3_domains: tuple[frozenset[int], ...]
    cards: tuple[Card, ...]

    def to_json_dict(self) -> dict[str, object]:
        fmt = format_cpulist
        return {
            "packages": [fmt(p) for p in self.packages],
            "numa_nodes": {str(node): fmt(cpus) for node, cpus in sorted(self.numa_nodes.items())},
            "l3_domains": [fmt(d) for d in self.l3_domains],
            "cards": [
                {
                    "index": c.index,
                    "pci": c.pci,
                    "vendor": c.vendor,
                    "model": c.model,
                    "numa_node": c.numa_node,
                    "cores": fmt(c.cores),
                    "cpus": fmt(c.cpus),
                    **({"cuda": c.ordinal} if c.ordinal is not None else {}),
                }
                for c in self.cards
            ],
        }
