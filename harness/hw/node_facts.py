"""What a fleet compares between nodes of one system beyond the hardware: the CPU frequency governor, the
NUMA layout and the host name, recorded in each run's manifest (host.node) so a slow node can be explained."""

from __future__ import annotations

import os
import socket
from collections import Counter

from harness.core.sysfs import Sysfs

__all__ = ["facts"]


def governors(cpus: tuple[int, ...], fs: Sysfs) -> str:
    """The cpufreq governor of the run's CPUs: "performance", "powersave x2, performance x30", or
    "unknown (no cpufreq)" where the kernel or a VM exposes none."""
    seen = Counter(fs.text(f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor") or "unknown" for c in cpus)
    if set(seen) == {"unknown"}:
        return "unknown (no cpufreq)"
    if len(seen) == 1:
        return next(iter(seen))
    return ", ".join(f"{g} x{n}" for g, n in sorted(seen.items()))


def numa_layout(fs: Sysfs) -> str:
    """NUMA nodes with their CPU lists: "node0 0-31; node1 32-63" (what a different BIOS setting changes)."""
    online = fs.text("sys/devices/system/node/online")
    if not online:
        return "unknown (no sysfs node list)"
    nodes = sorted(int(n.removeprefix("node")) for n in os.listdir(fs.path("sys/devices/system/node"))
                   if n.startswith("node") and n[4:].isdigit())
    return "; ".join(f"node{n} {fs.text(f'sys/devices/system/node/node{n}/cpulist') or '?'}" for n in nodes)


def facts(cpus: tuple[int, ...], root: str = "/") -> dict[str, str]:
    """The node's facts for the manifest; nothing here raises (a fact unread is "unknown")."""
    fs = Sysfs(root)
    try:
        layout = numa_layout(fs)
    except OSError:
        layout = "unknown (no sysfs node list)"
    return {"hostname": socket.gethostname(), "cpu_governor": governors(cpus, fs), "numa": layout}
