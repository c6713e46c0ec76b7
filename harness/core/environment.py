"""One reader for the environment: every variable the appliance reads is named, parsed and bounded here.

An environment variable is input like a file: `APPLIANCE_INTRA_OP_THREADS=100000` made 32,174 threads and
17 GB, `=abc` was a ValueError, `=٣` (an Arabic-Indic three) was taken for 3. So each variable has one kind
here (a path, a count bounded by the machine, a 0/1 switch, a choice, a short text), a wrong value is one line
naming the variable and what it takes, and no other module reads `os.environ` (tests/test_environment_rule.py).
The table in docs/environment.md lists the same variables; a test keeps the two alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ApplianceError

__all__ = ["MAX_TEXT", "VARIABLES", "Variable", "assign", "check_all", "child", "choice", "count", "folder",
           "machine_cpus", "path", "present", "raw", "switch", "threads", "tristate"]

MAX_TEXT = 4096  # the longest value any variable here may hold (a path: PATH_MAX)


@dataclass(frozen=True)
class Variable:
    kind: str  # path, folder, count, switch, tristate, choice, text, list
    default: str
    meaning: str
    choices: tuple[str, ...] = ()


VARIABLES: dict[str, Variable] = {
    "APPLIANCE_DATA_DIR": Variable("path", "data", "--data-dir's default (click reads it)"),
    "APPLIANCE_RESULTS_DIR": Variable("path", "results", "--results' default (click reads it)"),
    "APPLIANCE_BACKEND": Variable("text", "auto", "--backend's default (click reads it, one of its choices)"),
    "APPLIANCE_RUN_REGISTRY": Variable("path", "/run/appliance-runs", "the machine-wide folder of live runs' "
                                       "entries (harness.run.neighbours); a folder of its own, never another's"),
    "APPLIANCE_POWERCAP_ROOT": Variable("folder", "/", "a /-like tree holding sys/class/powercap (tests, dry runs)"),
    "APPLIANCE_INTRA_OP_THREADS": Variable("count", "the card's CPUs", "threads per CPU-emulated card "
                                           "(onnxruntime, OpenVINO): 1 to the machine's CPUs"),
    "APPLIANCE_OPENVINO_PROCESS": Variable("switch", "0", "1: each OpenVINO card in a process of its own"),
    "APPLIANCE_IO_BINDING": Variable("switch", "0", "1: `--backend onnxruntime` runs the GPU cards' IO-binding "
                                     "data path on the CPU provider (the GPU check's rehearsal; "
                                     "run/cards/cpu_card.settings)"),
    "APPLIANCE_CUDA_GRAPH": Variable("tristate", "", "0: GPU cards run without CUDA graphs; 1: with them wherever "
                                     "no capture hazard is found; unset: where a GPU has replayed the configuration "
                                     "(the benchmark record's graphs_replayed; run/cards/gpu_iobinding.graph_rule)"),
    "APPLIANCE_CUDA_USER_STREAM": Variable("switch", "1", "0: GPU cards run on onnxruntime's own stream"),
    "APPLIANCE_CUDNN_SEARCH": Variable("choice", "EXHAUSTIVE", "cuDNN's convolution algorithm search",
                                       ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")),
    "APPLIANCE_IMAGE_VERSION": Variable("text", "", "the container image's version (set by the Dockerfile)"),
    "APPLIANCE_IMAGE_REVISION": Variable("text", "", "the image's source revision (set by the Dockerfile)"),
    "APPLIANCE_IMAGE_VARIANT": Variable("text", "", "the image's variant, cpu or gpu (set by the Dockerfile)"),
    "APPLIANCE_IMAGE_DIGEST": Variable("text", "", "the image's id, passed in by its launcher"),
    "NVIDIA_VISIBLE_DEVICES": Variable("list", "", "the GPUs a container may see (applied first)"),
    "CUDA_VISIBLE_DEVICES": Variable("list", "", "the GPUs this process may use"),
    "CUDA_DEVICE_ORDER": Variable("text", "PCI_BUS_ID", "set to PCI_BUS_ID before CUDA starts, so ordinals "
                                  "follow bus ids"),
    "CUDNN_LOGLEVEL_DBG": Variable("text", "0", "cuDNN 9's own log level: set to 0 before cuDNN loads unless the "
                                   "user set it (harness.core.native_lines)"),
    "CUDNN_FRONTEND_LOG_INFO": Variable("text", "0", "the cuDNN frontend's own log: set to 0 likewise"),
    "container": Variable("text", "", "set by podman / systemd-nspawn inside a container (any value)"),
    "PYTHONPATH": Variable("text", "", "passed on to an OpenVINO card's process, the harness first"),
    "HWLOC_FSROOT": Variable("path", "", "set for lstopo only, to a --sysfs-root copy"),
    "HWLOC_COMPONENTS": Variable("text", "", "set for lstopo only, with HWLOC_FSROOT (linux,stop)"),
    "OMP_NUM_THREADS": Variable("count", "", "set to 1 by tools/bench_nms.py for its single-thread figures"),
}


def _bad(name: str, value: str, takes: str) -> ApplianceError:
    shown = value if len(value) <= 60 else value[:60] + "…"
    return ApplianceError(f"{name}={shown!r} is not understood: it takes {takes}; set it so or unset it")


def raw(name: str) -> str | None:
    """The variable's text, None when unset or empty; a value too long or not text is one line."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of the variables harness.core.environment names")
    value = os.environ.get(name)
    if not value:
        return None
    if len(value) > MAX_TEXT:
        raise _bad(name, value, f"at most {MAX_TEXT} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept by Python as surrogates
        raise _bad(name, value.encode("utf-8", "replace").decode(), "UTF-8 text") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _bad(name, value, "text without control characters")
    return value


def path(name: str) -> Path | None:
    value = raw(name)
    return None if value is None else Path(value)


def folder(name: str) -> Path | None:
    """A path that must name an existing folder when set (a tree the appliance reads, never makes): a file or
    device there is one line, where it would be silently read as an empty tree."""
    value = path(name)
    if value is not None and not value.is_dir():
        raise _bad(name, str(value), "an existing folder")
    return value


def switch(name: str) -> bool:
    """A 0 / 1 variable (its default when unset)."""
    value = raw(name) or VARIABLES[name].default
    if value not in ("0", "1"):
        raise _bad(name, value, "0 or 1")
    return value == "1"


def tristate(name: str) -> bool | None:
    """A 0 / 1 variable whose absence means something of its own: None when unset."""
    value = raw(name)
    if value is None:
        return None
    if value not in ("0", "1"):
        raise _bad(name, value, "0 or 1 (or leave it unset)")
    return value == "1"


def choice(name: str) -> str:
    given = raw(name) or VARIABLES[name].default
    if given.upper() not in VARIABLES[name].choices:
        raise _bad(name, given, f"one of {', '.join(VARIABLES[name].choices)}")
    return given.upper()


def _allowed_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_AT_START = _allowed_cpus()  # read on the importing (main) thread, before any card thread is pinned


def machine_cpus() -> int:
    """The CPUs this process may run on: the bound of any thread count read here. The larger of the set at
    start and the calling thread's own, since a card reads its thread count on its thread, pinned to its
    few CPUs (the bound is the process's, not that thread's)."""
    return max(_AT_START, _allowed_cpus())


def count(name: str, most: int) -> int | None:
    """A whole number of 1 to `most` in ASCII digits; None when unset."""
    value = raw(name)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= most:
        raise _bad(name, value, f"a whole number from 1 to {most} in ASCII digits")
    return int(value)


def threads(name: str) -> int | None:
    """A thread count, bounded by the CPUs this machine lets the process use."""
    return count(name, machine_cpus())


def present(name: str) -> bool:
    """Whether the variable is set at all (some mean something by being there)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of the variables harness.core.environment names")
    return name in os.environ


def assign(name: str, value: str | None) -> None:
    """Set (None: unset) a variable that a library or a child reads later (CUDA_DEVICE_ORDER)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of the variables harness.core.environment names")
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def check_all() -> None:
    """Every APPLIANCE_* variable that is set, parsed as its kind: a wrong one is one line before any work."""
    readers = {"count": threads, "folder": folder, "switch": switch, "tristate": tristate, "choice": choice}
    for name, var in VARIABLES.items():
        if name.startswith("APPLIANCE_"):
            readers.get(var.kind, raw)(name)


def child(**extra: str) -> dict[str, str]:
    """The environment for a child process this appliance starts: ours, with `extra` (named here) set."""
    unknown = sorted(set(extra) - set(VARIABLES))
    if unknown:
        raise KeyError(f"{', '.join(unknown)} not among the variables harness.core.environment names")
    return {**os.environ, **extra}
