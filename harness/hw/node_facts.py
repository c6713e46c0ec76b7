"""What a fleet compares between nodes of one system beyond the hardware: the CPU frequency governor, the
NUMA layout, the NVIDIA GPUs' clocks and the host name, recorded in each run's manifest (host.node) so a slow node
can be explained."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections import Counter

from harness.core import environment
from harness.core.sysfs import Sysfs

__all__ = ["CLOCK_QUERY", "facts", "gpu_clocks", "parse_clocks"]

# nvidia-smi --query-gpu fields (`nvidia-smi --help-query-gpu`): the application clocks an administrator sets
# (`nvidia-smi -ac`) and the GPU's maximum SM clock; the current clocks are left out, as they follow the load of the
# moment and would differ between any two nodes.
CLOCK_QUERY = ("pci.bus_id", "clocks.applications.graphics", "clocks.applications.memory", "clocks.max.sm")


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


def parse_clocks(text: str) -> str:
    """nvidia-smi's `--query-gpu=<CLOCK_QUERY> --format=csv,noheader,nounits` lines (one per GPU: "00000000:18:00.0,
    1755, 2619, 1980"; "[N/A]" / "[Not Supported]" where a GPU has no such clock) as one fact:
    "8 x applications 1755/2619 MHz (graphics/memory), max SM 1980 MHz", kinds sorted when the GPUs differ."""
    seen: Counter[str] = Counter()
    for line in text.splitlines()[:64]:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(CLOCK_QUERY) or not fields[0]:
            continue
        graphics, memory, sm = (f if f.isdigit() else "n/a" for f in fields[1:])
        seen[f"applications {graphics}/{memory} MHz (graphics/memory), max SM {sm} MHz"] += 1
    if not seen:
        return "unknown (no GPU line in nvidia-smi's answer)"
    return ", ".join(f"{n} x {kind}" for kind, n in sorted(seen.items()))


def gpu_clocks() -> str | None:
    """The NVIDIA GPUs' clocks from nvidia-smi (parse_clocks), "unknown (...)" where it fails, None where the node
    has no nvidia-smi (no NVIDIA driver: nothing to compare)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, f"--query-gpu={','.join(CLOCK_QUERY)}", "--format=csv,noheader,nounits"],
                              env=environment.child(), capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown (nvidia-smi: {type(exc).__name__})"
    if done.returncode != 0:
        why = (done.stdout + done.stderr).strip().splitlines()
        return f"unknown (nvidia-smi exit {done.returncode}: {why[0][:120] if why else 'no message'})"
    return parse_clocks(done.stdout)


def facts(cpus: tuple[int, ...], root: str = "/") -> dict[str, str]:
    """The node's facts for the manifest; nothing here raises (a fact unread is "unknown")."""
    fs = Sysfs(root)
    try:
        layout = numa_layout(fs)
    except OSError:
        layout = "unknown (no sysfs node list)"
    out = {"hostname": socket.gethostname(), "cpu_governor": governors(cpus, fs), "numa": layout}
    clocks = gpu_clocks()
    if clocks is not None:
        out["gpu_clocks"] = clocks
    return out
