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
from pathlib import Path


def parse_cpulist(text: str) -> set[int]:
    """Parse the kernel's list format ("0-3,8,10-11"); raise ValueError on garbage."""
    cpus: set[int] = set()
    for part in text.strip().strip("\0").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            first, last = int(lo), int(hi)
            if last < first:
                raise ValueError(f"bad cpu range {part!r}")
            cpus.update(range(first, last + 1))
        else:
            cpus.add(int(part))
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


def parse_mask(text: str) -> set[int]:
    """Parse a kernel hex mask ("ffffffff,00000000"): 32-bit words, most significant first."""
    words = text.strip().strip("\0").replace("0x", "").split(",")
    value = int("".join(w.strip().rjust(8, "0") for w in words) or "0", 16)
    cpus: set[int] = set()
    bit = 0
    while value:
        if value & 1:
            cpus.add(bit)
        value >>= 1
        bit += 1
    return cpus


class Sysfs:
    """Reads files below a filesystem root (the directory that contains `sys/`, like HWLOC_FSROOT)."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self.garbage: dict[Path, str] = {}  # file -> the unparseable value it held

    def _bad(self, rel: str, value: str) -> None:
        self.garbage.setdefault(self.path(rel), value)

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def text(self, rel: str) -> str | None:
        """File content without trailing NUL bytes and whitespace; None if unreadable."""
        try:
            raw = self.path(rel).read_bytes()
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

    def cpulist(self, rel: str) -> set[int] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse_cpulist(text)
        except ValueError:
            self._bad(rel, text)
            return None

    def mask(self, rel: str) -> set[int] | None:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return parse_mask(text)
        except ValueError:
            self._bad(rel, text)
            return None

    def cpus(self, list_rel: str, mask_rel: str) -> set[int] | None:
        """A CPU set from its `*_list` file, falling back to the hex mask older kernels only have."""
        cpus = self.cpulist(list_rel)
        return cpus if cpus is not None else self.mask(mask_rel)

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def realpath(self, rel: str) -> Path:
        return Path(os.path.realpath(self.path(rel)))
