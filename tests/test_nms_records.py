"""The NMS kernels' parameter records are unpacked by position (numba types a plain tuple in C, a NamedTuple in
Python: harness/data/nms_kernels.py says why), so the field order is a contract: every unpacking of a record
parameter takes all its fields, in the declared order, each by its declared name or `_`; no indexing."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from harness.data import nms_kernels

SOURCE = Path(nms_kernels.__file__)
RECORDS = {name: cls._fields for name, cls in vars(nms_kernels).items()
           if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")}


def broken_unpackings(source: str) -> list[str]:
    """Each unpacking or indexing of a record parameter that does not follow its declared fields."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = {a.arg: a.annotation.id for a in fn.args.args
                  if isinstance(a.annotation, ast.Name) and a.annotation.id in RECORDS}
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in params:
                found.append(f"{fn.name}:{node.lineno}: {node.value.id}[…] indexes a {params[node.value.id]}")
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params
                    and isinstance(node.targets[0], ast.Tuple)):
                continue
            fields = RECORDS[params[node.value.id]]
            names = [e.id if isinstance(e, ast.Name) else "?" for e in node.targets[0].elts]
            if len(names) != len(fields) or any(n not in ("_", f) for n, f in zip(names, fields, strict=False)):
                found.append(f"{fn.name}:{node.lineno}: ({', '.join(names)}) = {node.value.id}, declared "
                             f"({', '.join(fields)})")
    return found


def test_every_record_unpacking_follows_the_declared_fields() -> None:
    assert {"ScoreCodes", "BoxCoder", "NMSLimits", "TopkLevels", "YoloParams"} <= set(RECORDS), RECORDS
    assert broken_unpackings(SOURCE.read_text()) == []
    used = {n.value.id for n in ast.walk(ast.parse(SOURCE.read_text()))
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and isinstance(n.targets[0], ast.Tuple)}
    assert {"scores", "limits", "coder", "levels"} <= used  # the check has unpackings to read


def test_the_check_fails_on_a_swapped_short_or_indexed_unpacking() -> None:
    snippet = typing.cast(str, """
def k(scores: ScoreCodes, limits: NMSLimits) -> None:
    hi, lo, _, _, _ = scores
    class_shift, _ = limits
    kind = scores[2]
""")
    found = broken_unpackings(snippet)
    assert len(found) == 3, found
    assert "declared (lo, hi, kind, scale, zero_point)" in found[0] and "indexes a ScoreCodes" in found[2]
