"""Accuracy scripts: read LoadGen's mlperf_log_accuracy.json and score it like the references do.

Each benchmark's record names one `Scorer`: how to score an accuracy log against the dataset's
ground truth or against the golden reference made by `appliance prepare`, and how to make that
golden reference from the per-sample payloads of an FP32 reference pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from harness.core import inbound
from harness.core.errors import DataError


class Response(TypedDict):
    """One record of LoadGen's mlperf_log_accuracy.json: the sample and its response bytes in hex."""
    seq_id: int
    qsl_idx: int
    data: str


def read_log(log_path: Path) -> list[Response]:
    """The records of an accuracy log, as LoadGen wrote them (each scorer checks the fields it reads)."""
    try:
        records = inbound.read_json(log_path, inbound.ACCURACY_LOG)
    except OSError as exc:
        raise DataError(f"cannot read accuracy log {log_path}: {exc}") from None
    if not isinstance(records, list):
        raise DataError(f"accuracy log {log_path} is not a list of responses")
    return records
