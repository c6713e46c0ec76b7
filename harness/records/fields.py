"""Parse, don't trust: a JSON document read into its dataclass field by field, every value checked for its kind
and its bounds (finite numbers, integer ranges, string lengths, list and map sizes), or one DataError line naming
the file and the field ("r/manifest.json: cards[0].cpus[0] is [1], not an integer").

A record's dataclass is its schema: each field's annotation says the kind (str, int, float, bool, None,
tuple[T, ...] or list[T], dict[str, T], a nested record, `object` for a sub-document kept as found), and
`bound(...)` its limits.
Keys a record does not know are ignored (a newer writer's), unless a field is marked `rest` (it takes them).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from harness.core.errors import DataError

T = TypeVar("T")

MAX_TEXT = 4096        # characters in one string (PATH_MAX), unless a field says otherwise
MAX_ITEMS = 4096       # entries in one list or map, unless a field says otherwise
MAX_NODES = 100_000    # values in one kept-as-found sub-document
MAX_DEPTH = 32         # nesting of one kept-as-found sub-document
INT_RANGE = (-(2**63), 2**63 - 1)


def bound(*, lo: float | None = None, hi: float | None = None, items: int | None = None, text: int | None = None,
          one_of: tuple[str, ...] | None = None, rest: bool = False) -> dict[str, object]:
    """A field's limits, as its `dataclasses.field(metadata=...)`: `lo`/`hi` for numbers (and a list's numbers),
    `items` for a list or map's size, `text` for a string's length, `one_of` its only spellings; `rest`: it
    takes the keys the record does not name."""
    return {k: v for k, v in (("lo", lo), ("hi", hi), ("items", items), ("text", text), ("one_of", one_of),
                              ("rest", rest)) if v is not None and v is not False}


def show(v: object) -> str:
    """A value as the error line shows it: its kind, and its start when it is short enough to help."""
    if isinstance(v, str):
        return repr(v) if len(v) <= 40 else f"a string of {len(v)} characters"
    if isinstance(v, list):
        return f"a list of {len(v)}" if len(v) > 4 else repr(v)[:40]
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, bool) or v is None:
        return "true" if v is True else "false" if v is False else "null"
    if isinstance(v, int):
        return str(v) if abs(v) < 10**30 else f"an integer of {len(str(abs(v)))} digits"
    return repr(v)


class _Bad(Exception):
    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path} {what}" if path else what)


def parse(record: type[T], data: object, where: object) -> T:
    """`data` as a `record`, or DataError "<where>: <field> is <value>, <what it must be>"."""
    try:
        return typing.cast(T, _record(record, data, ""))
    except _Bad as exc:
        raise DataError(f"{where}: {exc}") from None


def to_json(record: object) -> dict[str, object]:
    """A record back to its JSON object: a `rest` field's keys merged in, a section's unset optional keys left out
    (as its writer left them out)."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(typing.cast(Any, record)):
        v = getattr(record, f.name)
        if f.metadata.get("rest"):
            out.update(v)
        elif v is None and f.default is None and f.metadata.get("omit", True):
            continue
        else:
            out[f.name] = _plain(v)
    return out


def _plain(v: object) -> object:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return to_json(v)
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _record(record: type, data: object, path: str) -> object:
    if not isinstance(data, dict):
        raise _Bad(path, f"is {show(data)}, not an object") if path else _Bad("", f"holds {show(data)}, not an object")
    hints = typing.get_type_hints(record)
    values: dict[str, object] = {}
    named = set()
    for f in dataclasses.fields(record):
        named.add(f.name)
        if f.metadata.get("rest"):
            continue
        here = f"{path}.{f.name}" if path else f.name
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Bad(here, "is missing")
            continue
        values[f.name] = _value(hints[f.name], data[f.name], here, f.metadata)
    for f in dataclasses.fields(record):
        if f.metadata.get("rest"):
            extra = {k: v for k, v in data.items() if k not in named}
            values[f.name] = _value(hints[f.name], extra, path or "the document", f.metadata)
    return record(**values)


def _value(tp: Any, v: object, path: str, meta: Mapping[str, Any]) -> object:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(inner, v, path, meta)
    if tp is object:
        _document(v, path, 0, [0])
        return v
    if tp in _SCALARS:
        return _SCALARS[tp](v, path, meta)
    if origin in (tuple, list):
        if not isinstance(v, list):
            raise _Bad(path, f"is {show(v)}, not a list")
        _sized(v, path, meta)
        return origin(_value(args[0], x, f"{path}[{i}]", meta) for i, x in enumerate(v))
    if origin is dict:
        if not isinstance(v, dict):
            raise _Bad(path, f"is {show(v)}, not an object")
        _sized(v, path, meta)
        for k in v:
            _text(k, f"{path} key", {})
        return {k: _value(args[1], x, f"{path}.{k}" if len(k) <= 40 else f"{path}[...]", meta) for k, x in v.items()}
    if dataclasses.is_dataclass(tp):
        return _record(typing.cast(type, tp), v, path)
    raise TypeError(f"fields.parse cannot read a {tp!r}")  # a schema this module does not know: a bug, not input


def _flag(v: object, path: str, meta: Mapping[str, Any]) -> bool:
    if not isinstance(v, bool):
        raise _Bad(path, f"is {show(v)}, not true or false")
    return v


def _integer(v: object, path: str, meta: Mapping[str, Any]) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(path, f"is {show(v)}, not an integer")
    return int(_in_range(v, path, meta))


def _number(v: object, path: str, meta: Mapping[str, Any]) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Bad(path, f"is {show(v)}, not a number")
    if isinstance(v, int) and not INT_RANGE[0] <= v <= INT_RANGE[1]:
        raise _Bad(path, f"is {show(v)}, out of range")
    if not math.isfinite(v):
        raise _Bad(path, f"is {show(v)}, not a finite number")
    return float(_in_range(float(v), path, meta))


def _text(v: object, path: str, meta: Mapping[str, Any]) -> str:
    if not isinstance(v, str):
        raise _Bad(path, f"is {show(v)}, not a string")
    most = meta.get("text", MAX_TEXT)
    if len(v) > most:
        raise _Bad(path, f"is a string of {len(v)} characters, more than the {most} it may hold")
    if "one_of" in meta and v not in meta["one_of"]:
        raise _Bad(path, f"is {show(v)}, not one of {', '.join(meta['one_of'])}")
    return v


_SCALARS: dict[object, typing.Callable[[object, str, Mapping[str, Any]], object]] = {
    bool: _flag, int: _integer, float: _number, str: _text}


def _in_range(v: float, path: str, meta: Mapping[str, Any]) -> Any:
    lo, hi = meta.get("lo", INT_RANGE[0]), meta.get("hi", INT_RANGE[1])
    if not lo <= v <= hi:
        raise _Bad(path, f"is {show(v)}, outside {_bound_text(lo)}..{_bound_text(hi)}")
    return v


def _bound_text(b: float) -> str:
    return str(int(b)) if float(b).is_integer() and abs(b) < 1e15 else f"{b:g}"


def _sized(v: list[object] | dict[str, object], path: str, meta: Mapping[str, Any]) -> None:
    most = meta.get("items", MAX_ITEMS)
    if len(v) > most:
        raise _Bad(path, f"holds {len(v)} entries, more than the {most} it may hold")


def _document(v: object, path: str, depth: int, count: list[int]) -> None:
    """A sub-document kept as found: JSON values only, finite numbers, bounded in size and depth."""
    count[0] += 1
    if count[0] > MAX_NODES or depth > MAX_DEPTH:
        raise _Bad(path, f"is larger than {MAX_NODES} values or deeper than {MAX_DEPTH}")
    if isinstance(v, float) and not math.isfinite(v):
        raise _Bad(path, f"is {show(v)}, not a finite number")
    if isinstance(v, int) and not isinstance(v, bool) and not INT_RANGE[0] <= v <= INT_RANGE[1]:
        raise _Bad(path, f"is {show(v)}, out of range")
    if isinstance(v, str) and len(v) > 1024 * 1024:
        raise _Bad(path, f"is a string of {len(v)} characters")
    if isinstance(v, list):
        for i, x in enumerate(v):
            _document(x, f"{path}[{i}]", depth + 1, count)
    elif isinstance(v, dict):
        for k, x in v.items():
            _document(x, f"{path}.{k}" if len(str(k)) <= 40 else f"{path}[...]", depth + 1, count)
