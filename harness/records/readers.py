"""Typed readers for files in trees other people's tools wrote: every odd value becomes one problem line.

Nothing here raises on content: `null`, a string where a number belongs, a truncated or empty file, a
file too large to read, an unreadable file each give a `Problem` naming the file (and the key), and the
caller carries on with what could be read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records.base import json_kind

MAX_LOG_BYTES = 50 * 1024 * 1024   # the official checker's limit for any file in a tree (FILE_SIZE_LIMIT_MB)
MAX_TEXT_BYTES = 1024 * 1024       # accuracy.txt, verify_*.txt, user.conf: read at most this much

Problem = Callable[[str], None]


def unreadable(exc: OSError, where: str) -> str:
    """The one problem line for a file that could not be read: missing, a folder, or the OS's reason."""
    if isinstance(exc, FileNotFoundError):
        return f"{where}: missing"
    if isinstance(exc, IsADirectoryError):
        return f"{where}: a folder where a file belongs"
    return f"{where}: cannot read ({exc.strerror or exc})"


def read_text(path: Path, where: str, problem: Problem, limit: int = MAX_TEXT_BYTES) -> str | None:
    """The text of a small file (its first `limit` bytes), or None after reporting why not."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except OSError as exc:
        problem(unreadable(exc, where))
        return None
    return data.decode("utf-8", errors="replace")


def read_json_object(path: Path, where: str, problem: Problem) -> dict[str, Any] | None:
    """A JSON file that must hold an object."""
    size = _size(path)
    if size is not None and size > MAX_LOG_BYTES:
        problem(f"{where}: {size} bytes, larger than the {MAX_LOG_BYTES // 2**20} MB a tree may hold per file")
        return None
    text = read_text(path, where, problem, limit=MAX_LOG_BYTES)
    if text is None:
        return None
    if not text.strip():
        problem(f"{where}: empty")
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        problem(f"{where}: not valid JSON ({str(exc).splitlines()[0][:120]})")
        return None
    if not isinstance(data, dict):
        problem(f"{where}: holds {json_kind(data)}, not a JSON object")
        return None
    return data


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The appliance's own manifest.json of a run folder; None when absent or unusable (others' trees)."""
    if not (run_dir / "manifest.json").is_file():
        return None
    return read_json_object(run_dir / "manifest.json", str(run_dir / "manifest.json"), lambda _: None)


def _size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


@dataclass
class Detail:
    """The values of one mlperf_log_detail.txt, read through typed getters."""

    where: str
    problem: Problem
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    garbled: bool = False  # a `:::MLLOG` line that is not a JSON record (reported once)

    def has(self, key: str) -> bool:
        return key in self.values

    def raw(self, key: str) -> Any:
        return self.values.get(key)

    def integer(self, key: str) -> int | None:
        """An integer value (LoadGen logs them as JSON numbers); anything else is a problem line."""
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                return int(v)
            self.problem(f"{self.where}: {key} is {_show(v)}, not an integer")
            return None
        return v

    def number(self, key: str) -> float | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.problem(f"{self.where}: {key} is {_show(v)}, not a number")
            return None
        return float(v)

    def text(self, key: str) -> str | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if not isinstance(v, str):
            self.problem(f"{self.where}: {key} is {_show(v)}, not a string")
            return None
        return v

    def flag(self, key: str) -> bool | None:
        v = self.values.get(key)
        if key not in self.values:
            self.problem(f"{self.where}: no {key} in it")
            return None
        if not isinstance(v, bool):
            self.problem(f"{self.where}: {key} is {_show(v)}, not true/false")
            return None
        return v


def _show(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def read_detail(path: Path, where: str, problem: Problem) -> Detail | None:
    """Every `:::MLLOG` record of a LoadGen detail log (last value per key); None if unreadable or too big."""
    size = _size(path)
    if size is not None and size > MAX_LOG_BYTES:
        problem(f"{where}: {size} bytes, larger than the {MAX_LOG_BYTES // 2**20} MB a tree may hold per file")
        return None
    detail = Detail(where, problem)
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if not raw.startswith(b":::MLLOG"):
                    continue
                try:
                    rec = json.loads(raw[len(b":::MLLOG"):].decode("utf-8", errors="replace"))
                except (json.JSONDecodeError, RecursionError):
                    # the official checker's parser (strict) refuses such a log: a cut or edited record
                    if not detail.garbled:
                        problem(f"{where}: line {number} is not a whole LoadGen record (a truncated or edited log)")
                    detail.garbled = True
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                    continue
                detail.values[rec["key"]] = rec.get("value")
                meta = rec.get("metadata")
                if isinstance(meta, dict) and meta.get("is_error"):
                    detail.errors.append(f"{rec['key']}: {_show(rec.get('value'))}")
    except OSError as exc:
        problem(unreadable(exc, where))
        return None
    return detail
