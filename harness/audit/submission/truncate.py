"""The official accuracy-log truncation (MLCommons `tools/submission/truncate_accuracy_log.py`).

A submission keeps the sha256 of the full `mlperf_log_accuracy.json` as a `hash=` line in
`accuracy.txt` and ships only the log's first and last 4096 characters, joined by a `...` line.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.outbound import atomic_write_bytes

VIEWABLE_BYTES = 4096           # kept from each end of the log
MAX_ACCURACY_LOG_BYTES = 10 * 1024  # the checker's limit for a truncated log
HASH_LINE = re.compile(r"^hash=([\w\d]+)$")


def truncate_accuracy_log(src: Path, dst: Path) -> str:
    """Write the truncated form of `src` to `dst`; returns the sha256 of the full `src`. Read once, in pages,
    keeping only its two ends: a 2 GB log (or a sparse one) never sits in memory whole."""
    digest = hashlib.sha256()
    head, tail, size = b"", b"", 0
    with inbound.open_bounded(src, inbound.ACCURACY_LOG, sole=True) as f:
        while page := f.read(1 << 20):
            digest.update(page)
            size += len(page)
            head += page[:max(0, VIEWABLE_BYTES - len(head))]
            tail = (tail + page)[-VIEWABLE_BYTES:]
    atomic_write_bytes(dst, head if size < VIEWABLE_BYTES else head + b"\n\n...\n\n" + tail)
    return digest.hexdigest()


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
