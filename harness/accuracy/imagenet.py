"""Top-1 accuracy from mlperf_log_accuracy.json, scored as MLCommons' accuracy-imagenet.py does.

Each logged response is one float32 class id (background already removed); a sample logged twice
counts once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import DataError


@dataclass(frozen=True)
class TopOne:
    good: int
    total: int

    @property
    def percent(self) -> float:
        return 100.0 * self.good / self.total if self.total else 0.0

    def line(self) -> str:
        """The official first line of accuracy.txt."""
        return f"accuracy={self.percent:.3f}%, good={self.good}, total={self.total}"


def predictions(log_path: Path) -> dict[int, int]:
    """qsl_idx -> predicted label from an accuracy log."""
    try:
        records = json.loads(log_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read accuracy log {log_path}: {exc}") from None
    found: dict[int, int] = {}
    for rec in records:
        idx = int(rec["qsl_idx"])
        if idx in found:
            continue
        data = np.frombuffer(bytes.fromhex(rec["data"]), dtype=np.float32)
        found[idx] = int(data[0]) if data.size else -1
    return found


def top1(found: dict[int, int], labels: np.ndarray) -> TopOne:
    good = sum(1 for idx, pred in found.items() if pred == int(labels[idx]))
    return TopOne(good=good, total=len(found))
