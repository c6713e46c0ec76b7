"""Top-1 accuracy from mlperf_log_accuracy.json, scored as MLCommons' accuracy-imagenet.py does.

Each logged response is one float32 class id (background already removed); a sample logged twice
counts once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.outbound import npy_bytes
from harness.data.accuracy import read_log
from harness.records.benchmark_record import Score, Scorer
from harness.records.store import PreparedData


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
    found: dict[int, int] = {}
    for rec in read_log(log_path):
        idx = int(rec["qsl_idx"])
        if idx in found:
            continue
        data = np.frombuffer(bytes.fromhex(rec["data"]), dtype=np.float32)
        found[idx] = int(data[0]) if data.size else -1
    return found


def top1(found: dict[int, int], labels: np.ndarray) -> TopOne:
    good = sum(1 for idx, pred in found.items() if pred == int(labels[idx]))
    return TopOne(good=good, total=len(found))


def score(log_path: Path, data: PreparedData, against: str) -> Score | None:
    """Top-1 against the dataset's labels, or against the golden labels (None when there are none)."""
    labels = data.labels if against == "dataset" else data.golden
    if labels is None:
        return None
    s = top1(predictions(log_path), labels)
    return Score("top1", s.percent, s.line(), {"good": s.good, "total": s.total})


def golden(payloads: list[np.ndarray], data: PreparedData) -> tuple[str, bytes, str]:
    """golden.npy: each sample's label from the FP32 reference pass."""
    labels = np.asarray([int(p[0]) for p in payloads], dtype=np.int32)
    return "golden.npy", npy_bytes(labels), f"{len(np.unique(labels))} distinct classes over {len(labels)} samples"


SCORER = Scorer(score, golden)
