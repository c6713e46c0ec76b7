"""Which PCI functions are accelerator cards, and the `--cards` spec (auto | emulate:N | simulate:PROFILE:N |
cuda:all | cuda:0,1 | map).

A card is recognised by vendor id plus PCI class (or device id where a vendor's class is shared with
its other products); NICs, NVMe drives, bridges and the BMC's VGA never match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.core import environment
from harness.core.errors import ApplianceError
from harness.hw import gpu, gpu_plan
from harness.hw.topology.model import PciDevice, Topology


@dataclass(frozen=True)
class CardKind:
    vendor_id: int
    vendor: str
    classes: frozenset[int]  # 16-bit class codes; empty: any class, but only the listed device ids
    models: dict[int, str]
    fallback_model: str
    device_templates: tuple[str, ...]  # /dev nodes for `docker --device` when sysfs names none; {i}=index
    runtime: str = "device"  # "gpus": docker's --gpus (NVIDIA container toolkit) instead of --device

    def matches(self, dev: PciDevice) -> bool:
        if dev.vendor != self.vendor_id:
            return False
        return dev.class_code in self.classes if self.classes else dev.device in self.models

    def model(self, device: int) -> str:
        return self.models.get(device, f"{self.fallback_model} [{self.vendor_id:04x}:{device:04x}]")


KINDS: tuple[CardKind, ...] = (
    CardKind(
        0x10DE,
        "NVIDIA",
        frozenset({0x0300, 0x0302}),
        {
            0x20B0: "A100-SXM4-40GB",
            0x20B2: "A100-SXM4-80GB",
            0x20F1: "A100-PCIE-40GB",
            0x20B5: "A100-PCIE-80GB",
            0x2330: "H100-SXM5-80GB",
            0x2331: "H100-PCIE-80GB",
            0x2335: "H200-SXM-141GB",  # pci.ids: GH100 [H200 SXM 141GB]
            0x233B: "H200-NVL",  # pci.ids: GH100 [H200 NVL]
            0x26B9: "L40S",
            0x27B8: "L4",
        },
        "NVIDIA GPU",
        (),
        runtime="gpus",
    ),
    # Qualcomm's vendor id also covers Wi-Fi and modem chips: match device ids only.
    CardKind(
        0x17CB,
        "Qualcomm",
        frozenset(),
        {0xA100: "Cloud AI 100", 0xA080: "Cloud AI 080"},
        "Cloud AI",
        ("/dev/accel/accel{i}",),
    ),
    CardKind(
        0x1002,
        "AMD",
        frozenset({0x1200}),
        {
            0x738C: "Instinct MI100",
            0x740F: "Instinct MI210",
            0x740C: "Instinct MI250X",
            0x74A1: "Instinct MI300X",
        },
        "Instinct",
        ("/dev/kfd", "/dev/dri/renderD{128+i}"),
    ),
    CardKind(
        0x1DA3,
        "Intel Habana",
        frozenset({0x1200}),
        {0x1000: "Gaudi", 0x1020: "Gaudi2"},
        "Gaudi",
        ("/dev/accel/accel{i}",),
    ),
    CardKind(0x1E52, "Tenstorrent", frozenset({0x1200}), {}, "Tenstorrent", ("/dev/tenstorrent/{i}",)),
)
EMULATED_VENDOR, EMULATED_MODEL = "emulated", "CPU-emulated card"


@dataclass(frozen=True)
class FoundCard:
    """A card before placement: where it is and what it is; emulated cards have no PCI address."""

    pci: str | None
    vendor: str
    model: str
    numa_node: int | None
    device_nodes: tuple[str, ...]
    runtime: str = "none"
    ordinal: int | None = None  # NVIDIA GPU: its CUDA device ordinal (bus-id order, after the visibility variables)


def kind_of(dev: PciDevice) -> CardKind | None:
    return next((kind for kind in KINDS if kind.matches(dev)), None)


def default_device_nodes(vendor: str, index: int) -> tuple[str, ...]:
    """The /dev nodes a vendor's driver usually creates for card `index`, when sysfs does not say."""
    kind = next((k for k in KINDS if k.vendor == vendor), None)
    if kind is None:
        return ()
    return tuple(t.replace("{128+i}", str(128 + index)).replace("{i}", str(index)) for t in kind.device_templates)


@dataclass(frozen=True)
class CardSpec:
    """`--cards`, parsed once: `auto`, `emulate:N`, `simulate:PROFILE:N`, `cuda:all` / `cuda:0,1` (NVIDIA GPUs
    by CUDA ordinal), or a saved card map (.yaml / .yml)."""

    text: str
    kind: str                 # auto | emulate | simulate | cuda | map
    count: int | None = None  # emulate / simulate
    profile: str | None = None  # simulate
    path: Path | None = None  # map
    ordinals: tuple[int, ...] | None = None  # cuda: the CUDA ordinals named; None for cuda:all
    per_gpu: tuple[int, ...] | None = None  # cuda:allxN / cuda:0x2,1x2: cards per GPU (harness.hw.gpu_plan)

    def __str__(self) -> str:
        return self.text


CARD_SPEC_HELP = ("use auto, emulate:N, simulate:PROFILE:N (e.g. simulate:cloud-ai-100:16), cuda:all, cuda:0,1, "
                  "cuda:allx4 or cuda:0x2,1x2 (cards per GPU), or a card map .yaml")
# Each card is a worker thread (two for an asynchronous card) with its own batch buffers and queue; the
# harness is measured up to 16 cards (tools/bench_scaling.py). 100,000 simulated cards ran out of threads
# after two minutes; a bound checked before anything starts says so at once.
MAX_CARDS = 256


def check_card_count(count: int, what: str) -> None:
    """Refuse, before anything is made, more cards than one process can drive."""
    if count > MAX_CARDS:
        raise ApplianceError(f"{what}: {count} cards; at most {MAX_CARDS} (each card is a worker thread with its "
                             f"own batch buffers; the harness is measured up to 16 cards)")


def parse_card_spec(text: str) -> CardSpec:
    """The one reader of `--cards`; a spec it does not understand is one line naming the accepted forms."""
    spec = text.strip()
    if spec.endswith((".yaml", ".yml")):
        return CardSpec(spec, "map", path=Path(spec))
    lower = spec.lower()
    if lower == "auto":
        return CardSpec(spec, "auto")
    kind = profile = None
    if m := re.fullmatch(r"emulate:([0-9]+)", lower):
        kind, number = "emulate", m[1]
    elif m := re.fullmatch(r"simulate:(.+):([0-9]+)", spec, flags=re.IGNORECASE):
        kind, profile, number = "simulate", m[1], m[2]
    if kind is not None:
        count = int(number)
        if count < 1:
            example = "emulate:1" if profile is None else f"simulate:{profile}:1"
            raise ApplianceError(f"--cards {spec!r}: N, the number of cards, must be at least 1, e.g. {example}")
        check_card_count(count, f"--cards {spec!r}")
        return CardSpec(spec, kind, count=count, profile=profile)
    cuda = gpu_plan.parse_cuda(spec)
    if cuda is not None:
        if cuda.per_gpu is not None:
            check_card_count(sum(cuda.per_gpu), f"--cards {spec!r}")
        return CardSpec(spec, "cuda", ordinals=cuda.ordinals, per_gpu=cuda.per_gpu)
    raise ApplianceError(f"--cards {spec!r} is not understood; {CARD_SPEC_HELP}")


def find_cards(topology: Topology, spec: str | CardSpec = "auto") -> list[FoundCard]:
    """Cards in PCI address order for `auto` (NVIDIA GPUs: the visible ones); `emulate:N` gives N cards;
    `cuda:…` the visible NVIDIA GPUs it names, in CUDA ordinal order; no card found: one per L3 domain."""
    card_spec = spec if isinstance(spec, CardSpec) else parse_card_spec(spec)
    if card_spec.kind == "emulate":
        assert card_spec.count is not None
        return _emulated(card_spec.count)
    if card_spec.kind not in ("auto", "cuda"):
        raise ApplianceError(f"--cards {card_spec.text!r} is not understood here; use auto, emulate:N with N >= 1, "
                             f"cuda:all or cuda:0,1")
    ordinals = cuda_ordinals(topology)
    found = [FoundCard(dev.address, kind.vendor, kind.model(dev.device), dev.numa_node, dev.device_nodes, kind.runtime,
                       ordinals.get(dev.address))
             for dev in topology.pci_devices  # already in PCI address order
             if (kind := kind_of(dev)) is not None and (kind.vendor != "NVIDIA" or dev.address in ordinals)]
    if card_spec.kind == "auto":
        return found or _emulated(len(topology.cache_domains()))
    gpus = sorted((c for c in found if c.ordinal is not None), key=lambda c: c.ordinal or 0)
    if not gpus:
        hidden = [f"{v}={environment.raw(v) or ''}" for v in gpu.VISIBLE_ENVS if environment.present(v)]
        raise ApplianceError(f"--cards {card_spec.text}: no NVIDIA GPU is visible ("
                             + (f"{', '.join(hidden)} hides them all" if hidden and _nvidia(topology) else
                                "none on PCI") + ")")
    if card_spec.ordinals is None:
        return gpus
    missing = [i for i in card_spec.ordinals if i >= len(gpus)]
    if missing:
        shown = ", ".join(f"cuda:{c.ordinal} {c.pci}" for c in gpus)
        raise ApplianceError(f"--cards {card_spec.text}: there is no cuda:{missing[0]}, {len(gpus)} GPU(s) are "
                             f"visible ({shown}); name ordinals below {len(gpus)} or use cuda:all")
    return [gpus[i] for i in card_spec.ordinals]


def _nvidia(topology: Topology) -> list[str]:
    return [dev.address for dev in topology.pci_devices if (k := kind_of(dev)) is not None and k.vendor == "NVIDIA"]


def cuda_ordinals(topology: Topology) -> dict[str, int]:
    """Bus id -> CUDA ordinal of each NVIDIA GPU this process may use (harness.hw.gpu.visible)."""
    env = {v: environment.raw(v) or "" for v in gpu.VISIBLE_ENVS if environment.present(v)}
    uuids = gpu.uuid_map() if any("GPU-" in value for value in env.values()) else None
    return {pci: i for i, pci in enumerate(gpu.visible(_nvidia(topology), env, uuids))}


def _emulated(count: int) -> list[FoundCard]:
    return [FoundCard(None, EMULATED_VENDOR, EMULATED_MODEL, None, ()) for _ in range(count)]
