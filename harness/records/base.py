"""What the appliance's versioned JSON records share (the model record, the tuned record, a run's manifest):
reading the file, and checking it is a record of the format this appliance reads, in one line when not.

Each record keeps its own dataclass, writer and field checks; only the reading and the version check are
here, so the three say the same thing the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.inbound import json_kind


def load_json(path: Path, damaged: str = "is unreadable", fix: str = "", name: str | None = None) -> object:
    """The JSON in `path`. FileNotFoundError is raised as it is (each record says what a missing one
    means); a file that cannot be read or parsed is DataError "<name> <damaged> (why)<fix>"."""
    try:
        return inbound.read_json(path, inbound.RECORD)
    except FileNotFoundError:
        raise
    except inbound.Refused as exc:
        raise DataError(f"{name or path} {damaged} ({exc.reason}){fix}") from None
    except OSError as exc:
        raise DataError(f"{name or path} {damaged} ({exc}){fix}") from None


def versioned(data: object, where: Path | str, kind: str, version: int, fix: str = "", *,
              unversioned: int | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """`data` as the JSON object of a `kind` of format `version` (`unversioned`: the format a record
    without the key is) with every `required` key, or DataError: one line naming what is wrong, then `fix`."""
    if not isinstance(data, dict):
        raise DataError(f"{where} is not a {kind}: it holds {json_kind(data)}, not a JSON object{fix}")
    found = data.get("format", unversioned)
    if found is None:
        raise DataError(f"{where} is not a {kind}: it has no 'format' key (this appliance reads format {version}){fix}")
    if found != version:
        raise DataError(f"{where} is a format-{found} {kind}; this appliance reads format {version}{fix}")
    for key in required:
        if key not in data:
            raise DataError(f"{where} is not a complete {kind}: {key!r} is missing{fix}")
    return data
