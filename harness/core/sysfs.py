"""Small typed readers for sysfs files, every path relative to an injectable filesystem root.

Sysfs is messy: files end in NUL bytes, `*_list` files are missing where only hex masks exist,
reads fail on hot-unplugged devices. Every reader therefore returns None ("unknown") instead of
raising, and callers write their fallback chains out explicitly. A file that is there but holds no
valid value (a copied tree gone wrong) is also None, and is remembered in `Sysfs.garbage` so that
detection can refuse a map built around it instead of silently losing a CPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.core import inbound

__all__ = ["FIXED_BOUND", "FIXED_MAX_CPU", "FIXED_MAX_NODE", "FIXED_NODE_BOUND", "KERNEL_MAX_CAP", "MAX_FILE_BYTES",
           "CpuBound", "Sysfs", "cpu_bound", "format_cpulist", "parse_cpulist", "parse_mask"]

FIXED_MAX_CPU = 8191   # NR_CPUS 8192, the most a Linux kernel is built for (x86-64 CONFIG_MAXSMP)
KERNEL_MAX_CAP = 65535  # a kernel_max above this is not a kernel's: the fixed bound applies
MAX_FILE_BYTES = inbound.SYSFS  # a sysfs or proc file read here is a page or a few (cpuinfo on 8192 CPUs: ~4 MB)


@dataclass(frozen=True)
class CpuBound:
    """The highest CPU id a list may name, and where that bound comes from (for the message)."""

    max_id: int
    source: str
    what: str = "CPU"  # what the ids name: "CPU", or "NUMA node"


FIXED_BOUND = CpuBound(FIXED_MAX_CPU, f"the fixed bound {FIXED_MAX_CPU} (NR_CPUS 8192)")
# NUMA node ids are bounded by the kernel's node limit, not its CPU limit: a 48-CPU machine (kernel_max 47)
# may number its nodes 0-2,33-34,45,72-73. MAX_NUMNODES is 1 << CONFIG_NODES_SHIFT, at most 1 << 10.
FIXED_MAX_NODE = 1023
FIXED_NODE_BOUND = CpuBound(FIXED_MAX_NODE, f"the fixed node bound {FIXED_MAX_NODE} (MAX_NUMNODES 1024)",
                            "NUMA node")


def cpu_bound(root: str | os.PathLike[str] = "/") -> CpuBound:
    """The kernel's kernel_max under the sysfs root in use, else the fixed bound (said in the source)."""
    path = Path(root) / "sys/devices/system/cpu/kernel_max"
    try:
        value = int(inbound.read_bytes(path, inbound.SYSFS)[:64].strip(b"\0 \n"))
    except (OSError, ValueError, inbound.Refused):
        return CpuBound(FIXED_MAX_CPU, f"the fixed bound {FIXED_MAX_CPU} (NR_CPUS 8192; no readable {path})")
    if not 0 <= value <= KERNEL_MAX_CAP:
        return CpuBound(FIXED_MAX_CPU, f"the fixed bound {FIXED_MAX_CPU} ({path} holds {value}, not a kernel's)")
    return CpuBound(value, f"kernel_max {value} in {path}")


def parse_cpulist(text: str, bound: CpuBound = FIXED_BOUND) -> set[int]:
    """Parse the kernel's list format ("0-3,8,10-11"); raise ValueError on garbage and on an id beyond
    `bound` (checked before the range is made: "0-999999999" would be a billion ints)."""
    cpus: set[int] = set()
    for part in text.strip().strip("\0").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi) if hi else int(lo)
        if first < 0 or last < first:
            raise ValueError(f"bad cpu range {part!r}")
        if last > bound.max_id:
            raise ValueError(f"{bound.what} {last} is beyond {bound.source}")
        cpus.update(range(first, last + 1))
    return cpus


def format_cpulist(cpus: Iterable[int]) -> str:
    """The kernel's canonical list string: sorted, consecutive ids collapsed ("64-71,192-199")."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_mask(text: str, bound: CpuBound = FIXED_BOUND) -> set[int]:
    """Parse a kernel hex mask ("ffffffff,00000000"): 32-bit words, most significant first; ValueError on
    garbage and on a bit beyond `bound`."""
    words = text.strip().strip("\0").replace("0x", "").split(",")
    value = int("".join(w.strip().rjust(8, "0") for w in words) or "0", 16)
    if value.bit_length() - 1 > bound.max_id:
        raise ValueError(f"CPU {value.bit_length() - 1} is beyond {bound.source}")
    cpus: set[int] = set()
    bit = 0
    while value:
        if value & 1:
            cpus.add(bit)
        value >>= 1
        bit += 1
    return cpus


def _read_capped(path: Path, within: Path) -> bytes:
    """At most MAX_FILE_BYTES, read in pages through the one door in (inbound.Refused past it, or for a FIFO
    or device): /proc/sys files allocate a kernel buffer of the size asked for, so one read of
    MAX_FILE_BYTES fails there with ENOMEM (boot_id read as unreadable)."""
    chunks: list[bytes] = []
    with inbound.open_bounded(path, MAX_FILE_BYTES, within=within) as f:
        while chunk := f.read(1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


class Sysfs:
    """Reads files below a filesystem root (the directory that contains `sys/`, like HWLOC_FSROOT)."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        for top in ("sys", "proc"):  # a copy whose sys/ links to the live /sys would describe this machine
            inbound.check_within(self.root / top, self.root, f"sysfs root {root}: its {top}/")
        self.garbage: dict[Path, str] = {}  # file -> the unparseable value it held
        self.why: dict[Path, str] = {}      # file -> why its value is refused, where more than "garbage"
        self._bound: CpuBound | None = None
        self._node_bound: CpuBound | None = None

    @property
    def bound(self) -> CpuBound:
        """The highest CPU id this root's lists may name (read once)."""
        if self._bound is None:
            self._bound = cpu_bound(self.root)
        return self._bound

    @property
    def node_bound(self) -> CpuBound:
        """The highest NUMA node id this root's node lists may name: node/possible's highest, else the fixed
        bound (the kernel's node limit; kernel_max bounds CPU ids only)."""
        if self._node_bound is None:
            rel = "sys/devices/system/node/possible"
            text = self.text(rel)
            try:
                possible = parse_cpulist(text, FIXED_NODE_BOUND) if text else set()
            except ValueError:
                possible = set()
            self._node_bound = CpuBound(max(possible), f"the possible nodes {text} in {self.path(rel)}",
                                                                "NUMA node") if possible \
                else FIXED_NODE_BOUND
        return self._node_bound

    def _bad(self, rel: str, value: str, why: str | None = None) -> None:
        self.garbage.setdefault(self.path(rel), value[:80])
        if why is not None:
            self.why.setdefault(self.path(rel), why)

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def text(self, rel: str) -> str | None:
        """File content without trailing NUL bytes and whitespace; None if unreadable."""
        try:
            raw = _read_capped(self.path(rel), self.root)  # a link out of the root is refused, not followed
        except inbound.Refused as exc:
            self._bad(rel, "(not read)", f"larger than {MAX_FILE_BYTES >> 20} MB, or not a regular file ({exc})")
            return None
        except OSError:
            return None
        try:
            return raw.replace(b"\0", b"").decode("ascii").strip()
        except UnicodeDecodeError:
            self._bad(rel, repr(raw[:40]))
            return None

    def integer(self, rel: str) -> int | None:
        """A decimal or 0x-prefixed number."""
        text = self.text(rel)
        if text is None:
            return None
        try:
            return int(text, 0)
        except ValueError:
            self._bad(rel, text)
            return None

    def cpulist(self, rel: str, bound: CpuBound | None = None) -> set[int] | None:
        """A list of CPU ids (bounded by kernel_max), or of node ids with `bound=self.node_bound`."""
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse_cpulist(text, bound or self.bound)
        except ValueError as exc:
            self._bad(rel, text, str(exc) if "beyond" in str(exc) else None)
            return None

    def mask(self, rel: str) -> set[int] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse_mask(text, self.bound)
        except ValueError as exc:
            self._bad(rel, text, str(exc) if "beyond" in str(exc) else None)
            return None

    def cpus(self, list_rel: str, mask_rel: str) -> set[int] | None:
        """A CPU set from its `*_list` file, falling back to the hex mask older kernels only have."""
        cpus = self.cpulist(list_rel)
        return cpus if cpus is not None else self.mask(mask_rel)

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(inbound.check_within(self.path(rel), self.root)))
        except (OSError, inbound.Refused):
            return []

    def realpath(self, rel: str) -> Path:
        return Path(os.path.realpath(self.path(rel)))
