"""`prepare --precision P` looks P's preparer up in one table: every reduced precision has one."""

from __future__ import annotations

from harness.prepare.precision import PREPARERS
from harness.records.layout import PRECISIONS


def test_every_reduced_precision_has_a_preparer() -> None:
    assert set(PREPARERS) == set(PRECISIONS) - {"fp32"}
