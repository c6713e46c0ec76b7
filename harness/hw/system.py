"""Facts about the host that every result records: CPU model, package versions, a default system name."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from functools import cache

from harness.core import environment, inbound

__all__ = ["PACKAGES", "available_cpus", "cpu_flags", "cpu_model", "default_system_name", "gb", "image_identity",
           "memory_available", "package_versions", "slug"]

PACKAGES = ("mlcommons-loadgen", "onnxruntime", "onnxruntime-gpu", "nvidia-ml-py", "onnx", "numpy",
            "opencv-python-headless", "pycocotools",
            "click", "pyyaml", "psutil", "tqdm")


@cache
def cpu_model() -> str:
    from harness.core.sysfs import Sysfs

    for line in (Sysfs().text("proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo `flags`): which vector and matrix instructions it has."""
    from harness.core.sysfs import Sysfs

    for line in (Sysfs().text("proc/cpuinfo") or "").splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def available_cpus() -> tuple[int, ...]:
    """CPUs this process may run on (a container's cpuset included)."""
    return tuple(sorted(os.sched_getaffinity(0)))


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["python"] = platform.python_version()
    return out


def image_identity() -> dict[str, str | None] | None:
    """The container image this runs in (baked in as env by the Dockerfile), or None outside one.

    The image id / digest cannot be known inside the image itself; the launcher passes it in
    APPLIANCE_IMAGE_DIGEST (e.g. `-e APPLIANCE_IMAGE_DIGEST=$(docker image inspect -f '{{.Id}}' IMAGE)`).
    """
    env = environment.raw
    if not any(env(k) for k in ("APPLIANCE_IMAGE_VERSION", "APPLIANCE_IMAGE_REVISION", "APPLIANCE_IMAGE_DIGEST")):
        return None
    return {"version": env("APPLIANCE_IMAGE_VERSION"), "revision": env("APPLIANCE_IMAGE_REVISION"),
            "variant": env("APPLIANCE_IMAGE_VARIANT"), "digest": env("APPLIANCE_IMAGE_DIGEST")}


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def default_system_name(backend: str, cards: int, emulated: bool) -> str:
    """Stable across hosts of the same kind, so an auditor's tree lines up with the submitter's."""
    cpu = re.sub(r"\((R|TM)\)|CPU|Processor|@.*", "", cpu_model())
    kind = "cpu-emulated" if emulated else backend
    return f"{slug(cpu)}_{cards}x{kind}-{slug(backend)}"


def memory_available() -> tuple[int, str]:
    """Bytes this process may still allocate, and where that figure comes from: the least of the host's
    available memory (psutil), its cgroup's memory.max less what the cgroup uses (a container's limit,
    which the host figure does not show) and RLIMIT_AS less this process's size (`ulimit -v`)."""
    import resource

    import psutil

    from harness.core.sysfs import Sysfs

    limits = [(int(psutil.virtual_memory().available), "available memory")]
    fs = Sysfs()
    for line in (fs.text("proc/self/cgroup") or "").splitlines():
        if line.startswith("0::"):
            base = f"sys/fs/cgroup{line[3:].rstrip('/')}"
            top, used = fs.text(f"{base}/memory.max"), fs.integer(f"{base}/memory.current")
            if top is not None and inbound.is_digits(top) and used is not None:
                limits.append((max(0, int(top) - used), "the cgroup's memory.max less its use"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append((max(0, soft - psutil.Process().memory_info().vms), "the address-space limit (ulimit -v) "
                                                                          "less this process's size"))
    return min(limits)


def gb(n: float) -> str:
    """Bytes as GB for a message, e.g. "181 GB"."""
    return f"{n / 1e9:.3g} GB"
