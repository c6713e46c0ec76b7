"""The card interface shared by every backend; the harness knows nothing else about the hardware.

Threading contract: a card is used by exactly one worker thread, the one that created it, so a
backend may keep per-thread state and inherits that thread's CPU affinity for its own threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class CardInfo:
    """What a card is, for logs, summaries and the manifest."""

    index: int
    backend: str            # "onnxruntime", "null", ...
    device: str             # "cpu-emulated", "cuda:0", ...
    cpus: tuple[int, ...]   # host CPUs the card's threads may run on
    emulated: bool          # True when no accelerator is behind it
    details: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        kind = "CPU-emulated" if self.emulated else self.device
        return f"card {self.index} ({kind}, {self.backend}, {len(self.cpus)} CPUs)"


class Card(Protocol):
    info: CardInfo

    def infer(self, batch: np.ndarray) -> list[np.ndarray]:
        """Run one batch [B, C, H, W] float32; return the model's outputs in the benchmark's order."""
        ...

    def close(self) -> None: ...
