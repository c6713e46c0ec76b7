"""The official accuracy-log truncation (MLCommons `tools/submission/truncate_accuracy_log.py`).

A submission keeps the sha256 of the full `mlperf_log_accuracy.json` as a `hash=` line in
`accuracy.txt` and ships only the log's first and last 4096 characters, joined by a `...` line.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.core.outbound import atomic_write_bytes

VIEWABLE_BYTES = 4096           # kept from each end of the log
MAX_ACCURACY_LOG_BYTES = 10 * 1024  # the checker's limit for a truncated log
HASH_LINE = re.compile(r"^hash=([\w\d]+)$")


def truncate_accuracy_log(src: Path, dst: Path) -> str:
    """Write the truncated form of `src` to `dst`; returns the sha256 of the full `src`."""
    digest = sha256_file(src)
    data = inbound.read_bytes(src, inbound.ACCURACY_LOG)
    if len(data) < VIEWABLE_BYTES:
        atomic_write_bytes(dst, data)
    else:
        atomic_write_bytes(dst, data[:VIEWABLE_BYTES] + b"\n\n...\n\n" + data[-VIEWABLE_BYTES:])
    return digest


def hash_of(accuracy_txt: str) -> str | None:
    """The value of the `hash=` line, as the checker reads it (first match)."""
    for line in accuracy_txt.splitlines():
        m = HASH_LINE.match(line)
        if m:
            return m.group(1)
    return None


def with_hash(accuracy_txt: str, digest: str, where: str) -> str:
    """`accuracy.txt` text carrying `hash=<digest>`: kept when it matches, appended when absent."""
    found = hash_of(accuracy_txt)
    if not accuracy_txt.strip():
        return f"hash={digest}\n"
    if found is None:
        return accuracy_txt.rstrip("\n") + f"\nhash={digest}\n"
    if found != digest:
        raise DataError(f"{where}: hash line {found[:12]}… does not match the sha256 of its "
                        f"mlperf_log_accuracy.json ({digest[:12]}…); the log was changed after scoring")
    return accuracy_txt if accuracy_txt.endswith("\n") else accuracy_txt + "\n"
