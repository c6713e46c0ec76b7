"""Launch checks inside a container: say which `docker run` flag is missing, one warning line each.

A container started without the flags of `appliance topology detect --format docker` still runs, only
slower or on the wrong cores. Three things are noticed:

- a restricted cpuset: the card map made for the whole machine wants CPUs (or NUMA nodes' memory) the
  container may not use -> `--cpuset-cpus` / `--cpuset-mems`;
- `set_mempolicy` refused with EPERM (Docker's default seccomp profile allows it only with
  CAP_SYS_NICE), so sample buffers cannot be bound to a card's NUMA node -> `--cap-add=SYS_NICE`;
- a card's device node (e.g. /dev/accel/accel0) seen on PCI but absent from /dev -> `--device`.

`gather()` reads the machine; `warnings()` is a pure function of what was read, so it is tested with
made-up facts. `check()` is what `appliance run` calls: warnings only, never an error.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.core import environment, syscalls
from harness.core.sysfs import Sysfs, format_cpulist
from harness.hw.topology.model import Topology

MPOL_DEFAULT = 0  # set_mempolicy(2): MPOL_DEFAULT with no node mask resets to the default policy
DOCKER_FLAGS_HINT = "see `appliance topology detect --format docker`"


@dataclass(frozen=True)
class LaunchFacts:
    """What the checks look at; every field may be None when it could not be read."""

    in_container: bool
    allowed_cpus: frozenset[int]                # sched_getaffinity / the cgroup's cpuset
    wanted_cpus: frozenset[int] | None          # the CPUs the card map for the whole machine uses
    allowed_mems: frozenset[int] | None         # cpuset.mems.effective of this cgroup
    wanted_mems: frozenset[int] | None          # NUMA nodes of the wanted CPUs
    mempolicy_errno: int | None                 # 0: set_mempolicy works; EPERM: refused; None: unknown
    missing_devices: tuple[str, ...]            # device nodes of detected cards absent from /dev


def warnings(facts: LaunchFacts) -> list[str]:
    """One line per missing `docker run` flag; nothing outside a container."""
    if not facts.in_container:
        return []
    out = []
    if facts.wanted_cpus and not facts.wanted_cpus <= facts.allowed_cpus:
        out.append(f"this container may use CPUs {format_cpulist(sorted(facts.allowed_cpus))} but the card map "
                   f"wants {format_cpulist(sorted(facts.wanted_cpus))}: add "
                   f"--cpuset-cpus={format_cpulist(sorted(facts.wanted_cpus))} ({DOCKER_FLAGS_HINT})")
    if facts.wanted_mems and facts.allowed_mems is not None and not facts.wanted_mems <= facts.allowed_mems:
        out.append(f"this container may allocate on NUMA nodes {format_cpulist(sorted(facts.allowed_mems))} but the "
                   f"cards' cores are on {format_cpulist(sorted(facts.wanted_mems))}: add "
                   f"--cpuset-mems={format_cpulist(sorted(facts.wanted_mems))} ({DOCKER_FLAGS_HINT})")
    if facts.mempolicy_errno == errno.EPERM:
        out.append("set_mempolicy is not permitted (EPERM), so sample buffers cannot be bound to a card's NUMA "
                   "node: add --cap-add=SYS_NICE (Docker's seccomp profile allows it only with that capability)")
    if facts.missing_devices:
        out.append(f"card device node(s) {', '.join(facts.missing_devices)} are not in this container: add "
                   + " ".join(f"--device={d}" for d in facts.missing_devices) + f" ({DOCKER_FLAGS_HINT})")
    return out


def in_container(root: Path = Path("/")) -> bool:
    """Docker leaves /.dockerenv, Podman and buildah /run/.containerenv; `container=` is set by some runtimes."""
    return (root / ".dockerenv").exists() or (root / "run/.containerenv").exists() or environment.present("container")


def try_set_mempolicy() -> int | None:
    """errno of set_mempolicy(MPOL_DEFAULT, NULL, 0) (0 when it works); None where it cannot be tried.

    MPOL_DEFAULT is the policy a process starts with, so the call changes nothing when it succeeds.
    """
    result = syscalls.call("set_mempolicy", ctypes.c_int(MPOL_DEFAULT), ctypes.c_void_p(None), ctypes.c_ulong(0))
    if result is None:
        return None
    rc, err = result
    return 0 if rc == 0 else err


def _cgroup_mems(root: Path = Path("/")) -> frozenset[int] | None:
    fs = Sysfs(root)
    for rel in ("sys/fs/cgroup/cpuset.mems.effective", "sys/fs/cgroup/cpuset/cpuset.effective_mems"):
        mems = fs.cpulist(rel)
        if mems:
            return frozenset(mems)
    return None


def gather(cards: str = "auto", mempolicy: Callable[[], int | None] = try_set_mempolicy,
           topology: Topology | None = None) -> LaunchFacts:
    """Read this machine (`topology`: a run's own detection, so it is not detected twice): the card map it
    would get without a cpuset, and what the container allows."""
    from harness.hw.topology import detect, plan

    allowed = frozenset(os.sched_getaffinity(0))
    wanted_cpus = wanted_mems = None
    missing: list[str] = []
    try:
        machine = topology or detect("/")
        whole = plan(dataclasses.replace(machine, allowed=machine.online), cards)
        wanted_cpus = frozenset(cpu for card in whole.cards for cpu in card.cpus)
        wanted_mems = frozenset(node for node, cpus in whole.numa_nodes.items() if cpus & wanted_cpus)
        for card in whole.cards:
            missing += [d for d in card.device_nodes if d not in missing and not os.path.exists(d)]
    except Exception:  # the checks only advise; detection problems are reported by the run itself
        pass
    return LaunchFacts(in_container=in_container(), allowed_cpus=allowed, wanted_cpus=wanted_cpus,
                       allowed_mems=_cgroup_mems(), wanted_mems=wanted_mems or None,
                       mempolicy_errno=mempolicy(), missing_devices=tuple(missing))


def check(warn: Callable[[str], None], topology: Topology | None = None) -> list[str]:
    """Warn (one line each) about `docker run` flags this container was started without."""
    if not in_container():
        return []
    lines = warnings(gather() if topology is None else gather(topology=topology))
    for line in lines:
        warn(f"appliance: warning: {line}")
    return lines
