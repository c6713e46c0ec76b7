"""One published model file (`Artefact`): the type the benchmark record carries its official models in
(harness.data.benchmarks fills them in) and harness.data.models.registry verifies and downloads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Artefact:
    """One published model file; md5/size are None where MLCommons published none."""

    name: str
    filename: str
    url: str
    md5: str | None
    size: int | None
    note: str
