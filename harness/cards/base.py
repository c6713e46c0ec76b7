"""The card interface shared by every backend; the harness knows nothing else about the hardware.

Threading contract: a card is used by exactly one worker thread, the one that created it, so a
backend may keep per-thread state and inherits that thread's CPU affinity for its own threads.

Input contract: `input_dtype` says what the harness stages for the card. "float32": the benchmark's
mean-subtracted float32 tensor (an FP32 model); "uint8": the offline-preprocessed sample bytes as
they are (a quantized accelerator; staging is a plain copy); None: the card reads no input (null).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class CardInfo:
    """What a card is, for logs, summaries and the manifest."""

    index: int
    backend: str            # "onnxruntime", "null", "simulated", ...
    device: str             # "cpu-emulated", "cuda:0", "cloud-ai-100 (simulated)", ...
    cpus: tuple[int, ...]   # host CPUs the card's threads may run on
    emulated: bool          # True when no accelerator is behind it (CPU-emulated, null or simulated)
    details: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False  # True for a modelled card (a profile's latency, no inference at all)

    def label(self) -> str:
        kind = "SIMULATED " + self.device if self.simulated else "CPU-emulated" if self.emulated else self.device
        return f"card {self.index} ({kind}, {self.backend}, {len(self.cpus)} CPUs)"


class ZeroOutputs:
    """Zero-filled outputs of the benchmark's shapes, one cached set per batch size (null, simulated)."""

    def __init__(self, output_shapes: tuple[tuple[tuple[int, ...], str], ...]) -> None:
        self.output_shapes = output_shapes
        self._cache: dict[int, list[np.ndarray]] = {}

    def __call__(self, n: int) -> list[np.ndarray]:
        out = self._cache.get(n)
        if out is None:
            out = self._cache[n] = [np.zeros((n, *shape), dtype=dtype) for shape, dtype in self.output_shapes]
        return out


class Card(Protocol):
    info: CardInfo
    input_dtype: str | None

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        """Run one batch of `n` samples ([n, C, H, W] of `input_dtype`, or None when the card reads no
        input); return the model's outputs in the benchmark's order, first dimension n."""
        ...

    def close(self) -> None: ...
