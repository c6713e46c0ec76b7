"""NVIDIA GPUs: which ones this process may use and what they are, without a CUDA context.

CUDA numbers GPUs by PCI bus id once `CUDA_DEVICE_ORDER=PCI_BUS_ID` is set (`cuda_order`, before any
CUDA initialisation), so the GPUs sysfs lists, sorted by bus id, are CUDA's ordinals. A container's
`NVIDIA_VISIBLE_DEVICES` (the NVIDIA container toolkit's: indices, UUIDs, all, none) picks from them
first, then `CUDA_VISIBLE_DEVICES` (indices or UUIDs, as CUDA reads it) from what is left; CUDA
ordinal i is the i-th GPU left (`visible`). UUIDs are resolved with NVML (nvidia-ml-py), which also
gives each GPU's name, memory and the driver (`read_nvml`); where NVML cannot be loaded, a UUID is
refused in one line rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from harness.core import environment, inbound
from harness.core.errors import ApplianceError

ORDER_ENV = "CUDA_DEVICE_ORDER"
VISIBLE_ENVS = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")  # applied in this order


def cuda_order() -> None:
    """Make CUDA number GPUs by PCI bus id (its default, FASTEST_FIRST, need not match sysfs order)."""
    environment.assign(ORDER_ENV, "PCI_BUS_ID")


def bus_id(text: str) -> str:
    """A PCI address as sysfs writes it ("0000:17:00.0"); NVML writes "00000000:17:00.0", upper case."""
    parts = text.strip().lower().split(":")
    if len(parts) == 3 and parts[0]:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    return text.strip().lower()


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as NVML reports it."""

    name: str
    pci: str          # sysfs form, "0000:17:00.0"
    uuid: str         # "GPU-…"
    memory_mib: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pci": self.pci, "uuid": self.uuid, "memory_mib": self.memory_mib}


@dataclass(frozen=True)
class Nvml:
    driver: str        # e.g. "580.159.04"
    cuda_driver: str   # the newest CUDA the driver supports, e.g. "13.0"
    gpus: tuple[GpuFacts, ...]

    def by_pci(self, pci: str) -> GpuFacts | None:
        return next((g for g in self.gpus if g.pci == pci), None)


def read_nvml() -> Nvml | str:
    """The driver and every GPU NVML sees, or why NVML is unavailable (one phrase). No CUDA context is made."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no libnvidia-ml.so (no driver), or the driver is not loaded
        return f"NVML: {exc}"
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(GpuFacts(name=str(pynvml.nvmlDeviceGetName(h)),
                                 pci=bus_id(str(pynvml.nvmlDeviceGetPciInfo(h).busId)),
                                 uuid=str(pynvml.nvmlDeviceGetUUID(h)),
                                 memory_mib=int(pynvml.nvmlDeviceGetMemoryInfo(h).total) >> 20))
        return Nvml(driver=str(pynvml.nvmlSystemGetDriverVersion()), cuda_driver=f"{cuda // 1000}.{cuda % 1000 // 10}",
                    gpus=tuple(sorted(gpus, key=lambda g: g.pci)))
    except pynvml.NVMLError as exc:
        return f"NVML: {exc}"
    finally:
        pynvml.nvmlShutdown()


@cache
def nvml() -> Nvml | str:
    """`read_nvml`, once per process."""
    return read_nvml()


def uuid_map() -> dict[str, str] | None:
    """GPU UUID -> bus id from NVML; None where NVML is unavailable."""
    facts = nvml()
    return None if isinstance(facts, str) else {g.uuid: g.pci for g in facts.gpus}


def visible(pcis: Sequence[str], env: Mapping[str, str], uuids: Mapping[str, str] | None) -> list[str]:
    """The bus ids of the GPUs this process may use, in CUDA ordinal order, from the NVIDIA GPUs `pcis`
    (any order) and the visibility variables in `env`; a variable naming no GPU is refused in one line."""
    gpus = sorted(pcis)
    for var in VISIBLE_ENVS:
        value = env.get(var)
        if value is None:
            continue
        value = value.strip()
        if var == "NVIDIA_VISIBLE_DEVICES" and value in ("", "all", "void"):
            continue  # the toolkit's default: every GPU it was given
        if value in ("none", "-1") or (value == "" and var == "CUDA_VISIBLE_DEVICES"):
            gpus = []
            continue
        gpus = [_pick(var, entry.strip(), gpus, uuids) for entry in value.split(",")]
        if len(set(gpus)) != len(gpus):
            raise ApplianceError(f"{var}={value} names a GPU twice; name each GPU once")
    return gpus


def _pick(var: str, entry: str, gpus: list[str], uuids: Mapping[str, str] | None) -> str:
    """One entry of a visibility variable: an index into `gpus` or a GPU UUID (or a unique prefix of one)."""
    shown = ", ".join(f"{i}: {p}" for i, p in enumerate(gpus)) or "none"
    if inbound.is_digits(entry):
        if int(entry) >= len(gpus):
            raise ApplianceError(f"{var} names GPU {entry}, but only {len(gpus)} GPU(s) are there to pick from "
                                 f"({shown}); name an index below {len(gpus)} or a GPU UUID")
        return gpus[int(entry)]
    if entry.startswith("MIG-"):
        raise ApplianceError(f"{var} names MIG instance {entry}; MIG instances are not cards here: name whole GPUs")
    if not entry.startswith("GPU-"):
        raise ApplianceError(f"{var} entry {entry!r} is neither a GPU index nor a GPU UUID (GPU-…)")
    if uuids is None:
        raise ApplianceError(f"{var} names GPU {entry} by UUID, which needs NVML to resolve ({nvml_reason()}); "
                             f"name GPUs by index instead, e.g. {var}=0,1")
    found = [pci for uuid, pci in uuids.items() if uuid.startswith(entry) and pci in gpus]
    if len(found) != 1:
        what = "no GPU here has" if not found else f"{len(found)} GPUs match"
        known = ", ".join(f"{u} ({p})" for u, p in sorted(uuids.items(), key=lambda kv: kv[1]) if p in gpus) or "none"
        raise ApplianceError(f"{var} names GPU {entry}, which {what} (GPUs: {known}); fix the UUID or use an index")
    return found[0]


def nvml_reason() -> str:
    facts = nvml()
    return facts if isinstance(facts, str) else "NVML is available"


def driver_line() -> str:
    """The driver and the CUDA it supports, for a one-line GPU error."""
    facts = nvml()
    return f"driver version unknown ({facts})" if isinstance(facts, str) else \
        f"driver {facts.driver} (supports CUDA {facts.cuda_driver})"


@dataclass(frozen=True)
class GpuRef:
    """The GPU a card runs on: its CUDA ordinal, bus id and model (from the card map)."""

    ordinal: int
    pci: str
    model: str


def libraries() -> dict[str, str]:
    """The CUDA runtime and cuDNN this process loaded (onnxruntime.preload_dlls), asked of the libraries
    themselves (neither call makes a CUDA context); "not loaded" where a library is not there."""
    import ctypes

    out = {}
    try:
        runtime = ctypes.c_int()
        ctypes.CDLL("libcudart.so.13").cudaRuntimeGetVersion(ctypes.byref(runtime))
        out["cuda_runtime"] = f"{runtime.value // 1000}.{runtime.value % 1000 // 10}"
    except (OSError, AttributeError):
        out["cuda_runtime"] = "not loaded"
    try:
        cudnn = ctypes.CDLL("libcudnn.so.9")
        cudnn.cudnnGetVersion.restype = ctypes.c_size_t
        v = int(cudnn.cudnnGetVersion())
        out["cudnn"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    except (OSError, AttributeError):
        out["cudnn"] = "not loaded"
    return out


def card_facts(ref: GpuRef | None, ordinal: int) -> dict[str, object]:
    """What a GPU card's manifest entry records: which GPU (NVML's name, UUID, memory where NVML sees it),
    the driver, the CUDA it supports, and the CUDA runtime / cuDNN / onnxruntime-gpu build in use."""
    from onnxruntime.capi import onnxruntime_validation

    facts = nvml()
    found = None if isinstance(facts, str) or ref is None else facts.by_pci(ref.pci)
    return {"gpu": {"cuda_ordinal": ordinal, "pci": ref.pci if ref else None, "model": ref.model if ref else None,
                    **(found.to_json() if found else {"nvml": facts if isinstance(facts, str) else "not seen"})},
            "driver": facts if isinstance(facts, str) else facts.driver,
            "cuda_driver": None if isinstance(facts, str) else facts.cuda_driver,
            "onnxruntime_cuda_build": onnxruntime_validation.get_package_name_and_version_info()[2] or None,
            **libraries()}


def host_facts() -> dict[str, object]:
    """The host's NVIDIA driver and GPUs from NVML (the manifest's host.gpus), or why NVML is unavailable."""
    facts = nvml()
    if isinstance(facts, str):
        return {"nvml": facts}
    return {"driver": facts.driver, "cuda_driver": facts.cuda_driver, "gpus": [g.to_json() for g in facts.gpus]}
