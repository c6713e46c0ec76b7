"""`systems/<system>.json`: the 35 keys of the round, detected on this host, from the runs' manifests,
or taken from a YAML of overrides for what no program can see (status, cooling, …).

Every value is non-empty: a numeric 0 is written as "0" (the checker treats 0 as empty), and a key
that is neither detected nor overridden gets an explicit "not specified …" text and is listed by
`undetected()` so the build can say which overrides to write.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

from harness import __version__
from harness.core import inbound
from harness.core.errors import DataError
from harness.core.scenarios import Scenario
from harness.hw import system
from harness.records.manifest import Card, RunManifest
from harness.run.cards import backends
from harness.run.cards.backends import Backend

STATUSES = ("available", "preview", "rdi")
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
NOT_SPECIFIED = "not specified (set it with --system-overrides)"
MAX_VALUE = 1000  # characters in one override key or value (v4.1's 120 published system JSONs: at most 209)
Value = str | int | float | bool | None  # a systems/<system>.json value: the round's keys hold plain values


class HostFacts(TypedDict):
    """What `detect_host` reads of this host (a fact it cannot read is an "unknown" text, never a failure)."""
    packages: int
    cores_per_package: int
    numa_nodes: int
    frequency: str
    caches: str
    memory: str
    storage_type: str
    storage_capacity: str
    networking: str
    network_cards: int
    os: str


def load_overrides(path: Path | None) -> dict[str, Value]:
    """The overrides YAML: a mapping of system-JSON keys to values (unknown keys are kept, as extras)."""
    if path is None:
        return {}
    try:
        data = inbound.read_yaml(path, inbound.TEXT, what="system overrides")
    except OSError as exc:
        raise DataError(f"system overrides {path}: cannot read ({exc.strerror})") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise DataError(f"system overrides {path} must be a mapping of system JSON keys to values")
    bad = [k for k, v in data.items() if isinstance(v, dict | list)]
    if bad:
        raise DataError(f"system overrides {path}: {', '.join(bad)} must be plain values, not lists or mappings")
    long = [k for k, v in data.items() if len(k) > MAX_VALUE or _too_long(v)]
    if long:
        raise DataError(f"system overrides {path}: {', '.join(k[:60] for k in long)} longer than {MAX_VALUE} "
                        f"characters (the longest published value is about 200): shorten it")
    if "status" in data and str(data["status"]).lower() not in STATUSES:
        raise DataError(f"system overrides {path}: status {data['status']!r} is not one of {', '.join(STATUSES)}")
    if "system_type" in data and str(data["system_type"]) not in SYSTEM_TYPES:
        raise DataError(f"system overrides {path}: system_type {data['system_type']!r} is not one of "
                        f"{', '.join(SYSTEM_TYPES)}")
    return data


def _too_long(value: object) -> bool:
    """Longer than any system JSON value needs (an int by its bits: str() of a 5,000-digit one raises)."""
    if isinstance(value, int):
        return value.bit_length() > 64
    return len(str(value)) > MAX_VALUE


def default_system_type(scenarios: Sequence[str]) -> str:
    """An edge system unless a Server result is present (then it is entered in both categories)."""
    return "datacenter,edge" if Scenario.SERVER in scenarios else "edge"


def build(division: str, submitter: str, system_name: str, manifests: Sequence[RunManifest],
          scenarios: Sequence[str], overrides: Mapping[str, Value], root: str = "/") -> dict[str, Value]:
    """All 35 keys (plus any extra override keys), overrides winning over detection."""
    host = detect_host(root)
    first = manifests[0] if manifests else None
    cards: tuple[Card, ...] = max((m.cards for m in manifests), key=len, default=())
    packages = {k: v for k, v in first.packages.items() if v is not None} if first and first.packages else \
        system.package_versions()
    cpu = (first.host.cpu_model if first else None) or system.cpu_model()
    values: dict[str, Value] = {
        "division": division, "submitter": submitter, "system_name": system_name,
        "status": "available", "system_type": default_system_type(scenarios),
        "system_type_detail": NOT_SPECIFIED, "number_of_nodes": 1,
        "host_processor_model_name": cpu,
        "host_processors_per_node": host["packages"], "host_processor_core_count": host["cores_per_package"],
        "host_processor_frequency": host["frequency"], "host_processor_caches": host["caches"],
        "host_processor_interconnect": NOT_SPECIFIED,
        "host_memory_capacity": host["memory"],
        "host_memory_configuration": f"{host['numa_nodes']} NUMA node(s); DIMM layout {NOT_SPECIFIED}",
        "host_storage_type": host["storage_type"], "host_storage_capacity": host["storage_capacity"],
        "host_networking": host["networking"], "host_networking_topology": NOT_SPECIFIED,
        "host_network_card_count": host["network_cards"],
        "cooling": NOT_SPECIFIED,
        "framework": _framework(cards, packages),
        "operating_system": host["os"],
        "other_software_stack": ", ".join(
            [f"python {packages.get('python', platform.python_version())}"]
            + [f"{name} {packages[name]}" for name in ("mlcommons-loadgen", "numpy", "onnx", "opencv-python-headless")
               if name in packages]
            + [f"mlperf-appliance {__version__}"]),
        **_accelerator_keys(cards),
        "hw_notes": _hw_notes(cards),
        "sw_notes": _sw_notes(manifests, packages),
    }
    values.update(overrides)
    return {k: ("0" if _is_zero(v) else v) for k, v in values.items()}


def undetected(values: Mapping[str, Value]) -> list[str]:
    """Keys still carrying the "not specified" text, or a defaulted status, for the build to name."""
    return [k for k, v in values.items() if isinstance(v, str) and NOT_SPECIFIED in v]


def _is_zero(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == 0


def _gpu(card: Card) -> dict[str, object]:
    """A GPU card's NVML facts (harness.hw.gpu.card_facts), {} for any other card."""
    found = card.details.get("gpu")
    return found if isinstance(found, dict) else {}


def _accelerator_keys(cards: Sequence[Card]) -> dict[str, Value]:
    if not cards:
        return {"accelerators_per_node": 0, "accelerator_model_name": "N/A (no cards in the runs' manifests)",
                **{k: "N/A" for k in ("accelerator_memory_capacity", "accelerator_memory_configuration",
                                      "accelerator_host_interconnect", "accelerator_interconnect",
                                      "accelerator_interconnect_topology", "accelerator_frequency",
                                      "accelerator_on-chip_memories")}}
    card = cards[0]
    backend, device = card.backend, card.device
    what = _no_inference(card)
    if what is not None:  # simulated or null cards: emulated too, but nothing ran on the host's cores either
        return {"accelerators_per_node": len(cards), "accelerator_model_name": f"{what} card: no inference was done",
                **{k: f"N/A ({what} card)" for k in ("accelerator_memory_capacity", "accelerator_memory_configuration",
                                                "accelerator_host_interconnect", "accelerator_interconnect",
                                                "accelerator_interconnect_topology", "accelerator_frequency",
                                                "accelerator_on-chip_memories")}}
    if card.emulated:
        return {
            "accelerators_per_node": len(cards),
            "accelerator_model_name": f"CPU-emulated card ({backend}: {device}) on pinned host cores",
            "accelerator_memory_capacity": "shared with host memory (emulated card)",
            "accelerator_memory_configuration": "host DRAM (emulated card)",
            "accelerator_host_interconnect": "none: emulated on the host CPU",
            "accelerator_interconnect": "N/A",
            "accelerator_interconnect_topology": "N/A",
            "accelerator_frequency": "host CPU frequency (emulated card)",
            "accelerator_on-chip_memories": "host CPU caches (emulated card)",
        }
    found = _gpu(card)
    values: dict[str, Value] = {
        "accelerators_per_node": len(cards),
        "accelerator_model_name": str(found.get("name") or found.get("model") or f"{device} ({backend})"),
        **{k: NOT_SPECIFIED for k in ("accelerator_memory_capacity", "accelerator_memory_configuration",
                                      "accelerator_host_interconnect", "accelerator_interconnect",
                                      "accelerator_interconnect_topology", "accelerator_frequency",
                                      "accelerator_on-chip_memories")}}
    mib = found.get("memory_mib")  # NVML's figure (harness.hw.gpu.card_facts)
    if isinstance(mib, int | float) and not isinstance(mib, bool) and 0 < mib < 2**40:
        values["accelerator_memory_capacity"] = f"{mib / 1024:.0f} GB"
    return values


def _hw_notes(cards: Sequence[Card]) -> str:
    if not cards:
        return "N/A"
    maps = "; ".join(f"card {c.index}: cpus {_cpulist(c.cpus)}" for c in cards)
    what = next((w for c in cards if (w := _no_inference(c)) is not None), None)
    emulated = f" Cards are {what}: no inference was done; not accelerators." if what else \
        " Cards are CPU-emulated, not accelerators." if any(c.emulated for c in cards) else ""
    return f"Card-to-core map: {maps}.{emulated}"


def _no_inference(card: Card) -> str | None:
    """What a manifest's card was when it inferred nothing ("SIMULATED (profile cloud-ai-100)", "null"),
    else None."""
    if card.simulated:
        return f"SIMULATED (profile {card.details.get('profile', 'unknown')})"
    record = _record(card.backend)
    return record.name if record.harness_only else None


def _record(name: str) -> Backend:
    """The record of a backend a manifest names: a name in a document, so one this appliance has no record of is
    one line, not a KeyError."""
    record = backends.RECORDS.get(name)
    if record is None:
        raise DataError(f"a run manifest names backend {name!r}, which this appliance does not have "
                        f"({', '.join(backends.RECORDS)}); build the tree with the appliance that made the run")
    return record


def _framework(cards: Sequence[Card], packages: Mapping[str, str]) -> str:
    what = _no_inference(cards[0]) if cards else None
    if what is not None:
        return f"none: {what} cards, no inference was done"
    gpu = packages.get("onnxruntime-gpu", "not installed")
    if gpu != "not installed":
        return f"onnxruntime-gpu {gpu}"
    return f"onnxruntime {packages.get('onnxruntime', 'unknown')}"


def _sw_notes(manifests: Sequence[RunManifest], packages: Mapping[str, str]) -> str:
    notes = [f"MLCommons LoadGen {packages.get('mlcommons-loadgen', 'unknown')} (PyPI mlcommons-loadgen), "
             f"mlperf-appliance {__version__} harness"]
    if any(m.synthetic.weights for m in manifests):
        notes.append("model weights are SYNTHETIC (seeded, official architecture and I/O signature)")
    if any(m.synthetic.data for m in manifests):
        notes.append("dataset is SYNTHETIC (official layout, smaller than the official set)")
    reduced = sorted({m.precision for m in manifests if m.precision != "fp32"})
    if reduced:
        notes.append(f"precision {', '.join(reduced)} (agreement with FP32 measured at prepare, in each run's "
                     f"manifest)")
    cards = [c for m in manifests for c in m.cards]
    gpus = [_gpu(c) for c in cards if _gpu(c)]
    if gpus:
        g = gpus[0]
        notes.append(f"NVIDIA driver {g.get('driver')} (CUDA {g.get('cuda_driver')}), CUDA runtime "
                     f"{g.get('cuda_runtime')}, cuDNN {g.get('cudnn')}, onnxruntime-gpu "
                     f"{packages.get('onnxruntime-gpu', 'unknown')} (built for CUDA {g.get('onnxruntime_cuda_build')})")
    if any(c.simulated for c in cards):
        notes.append("SIMULATED cards: each batch held for a profile's latency, no inference was done")
    if any(_record(m.backend).harness_only for m in manifests):
        notes.append("null backend: no inference was done (harness overhead only)")
    return "; ".join(notes)


def _cpulist(cpus: Sequence[int]) -> str:
    cpus = sorted(cpus)
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out) or "-"


# --- host detection: small readers that return a readable "unknown" rather than fail ---------------

def detect_host(root: str = "/") -> HostFacts:
    base = Path(root)
    packages, cores, nodes = _cpu_layout(root)
    return {
        "packages": packages, "cores_per_package": max(1, cores // max(1, packages)), "numa_nodes": nodes,
        "frequency": _frequency(base), "caches": _caches(base), "memory": _memory(base),
        "storage_type": _storage(base)[0], "storage_capacity": _storage(base)[1],
        "networking": _networking(base)[0], "network_cards": _networking(base)[1], "os": _os(base),
    }


def _cpu_layout(root: str) -> tuple[int, int, int]:
    try:
        from harness.hw.topology import detect

        topo = detect(root)
        return len(topo.packages), len(topo.cores), max(1, sum(1 for c in topo.numa_nodes.values() if c))
    except Exception:
        n = os.cpu_count() or 1
        return 1, n, 1


def _read(path: Path) -> str | None:
    try:
        return inbound.read_text(path, inbound.SYSFS).strip()
    except (OSError, inbound.Refused):
        return None


def _frequency(base: Path) -> str:
    khz = _read(base / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if khz and inbound.is_digits(khz):
        return f"{int(khz) // 1000} MHz (max)"
    text = _read(base / "proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("cpu MHz"):
            return f"{float(line.split(':', 1)[1]):.0f} MHz"
    return "unknown"


def _size_text(kib: int) -> str:
    return f"{kib // 1024} MiB" if kib >= 1024 and kib % 1024 == 0 else f"{kib} KiB"


def _caches(base: Path) -> str:
    parts = []
    cache = base / "sys/devices/system/cpu/cpu0/cache"
    for idx in sorted(cache.glob("index*")):
        level, kind, size = (_read(idx / n) for n in ("level", "type", "size"))
        if not (level and size and inbound.is_digits(size.rstrip("K"))):
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind or "", "")
        parts.append(f"L{level}{suffix} {_size_text(int(size.rstrip('K')))}")
    return ", ".join(parts) + " (per cpu0, from sysfs)" if parts else "unknown"


def _memory(base: Path) -> str:
    for line in (_read(base / "proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return f"{round(int(line.split()[1]) / 1024 ** 2)} GiB"
    return "unknown"


def _storage(base: Path) -> tuple[str, str]:
    kinds, total = set(), 0
    block = base / "sys/block"
    for dev in sorted(block.glob("*")) if block.is_dir() else []:
        if dev.name.startswith(("loop", "ram", "zram", "dm-", "sr", "md", "nbd")):
            continue
        sectors = _read(dev / "size")
        if not sectors or not inbound.is_digits(sectors) or int(sectors) == 0:
            continue
        total += int(sectors) * 512
        kinds.add("NVMe SSD" if dev.name.startswith("nvme") else
                  "HDD" if _read(dev / "queue/rotational") == "1" else "SSD")
    if not total:
        return "unknown", "unknown"
    return ", ".join(sorted(kinds)), f"{total / 1e12:.1f} TB" if total >= 1e12 else f"{total / 1e9:.0f} GB"


def _networking(base: Path) -> tuple[str, int]:
    names, physical = [], 0
    net = base / "sys/class/net"
    for iface in sorted(net.glob("*")) if net.is_dir() else []:
        if iface.name == "lo":
            continue
        speed = _read(iface / "speed")
        names.append(f"{iface.name} ({speed} Mb/s)" if speed and inbound.is_digits(speed.lstrip("-")) and int(speed) > 0
                     else iface.name)
        physical += (iface / "device").exists()
    return (", ".join(names) or "none"), physical


def _os(base: Path) -> str:
    for line in (_read(base / "etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return f"{line.split('=', 1)[1].strip(chr(34))} (Linux {platform.release()})"
    return f"{platform.system()} {platform.release()}"
