"""What a run loads is what `prepare` made: the model file and every prepared data file, re-hashed.

Each file is hashed in full (sha256) the first time a process uses it and compared with the digest
its prepare record holds; a later use in the same process (tune, compliance tests) re-hashes it only
when its size, mtime or inode changed. A mismatch stops the run before LoadGen starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.data import benchmarks
from harness.records import model_record, store

__all__ = ["Mismatch", "refuse_mismatches", "sha256_once", "verify_loaded", "verify_prepared"]

_HASHED: dict[tuple[str, int, int, int], str] = {}  # (path, size, mtime_ns, inode) -> sha256, this process


@dataclass(frozen=True)
class Mismatch:
    """One file that differs from its prepare record."""

    path: Path
    why: str   # "missing" or "sha256 differs from the prepare record"

    def line(self) -> str:
        return f"{self.path}: {self.why}"


def sha256_once(path: Path) -> str:
    """sha256 of `path`, hashed in full once per process while its size, mtime and inode stay the same."""
    st = os.stat(path)
    key = (str(path.absolute()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _HASHED:
        _HASHED[key] = sha256_file(path)
    return _HASHED[key]


def verify_loaded(model: model_record.ModelRecord, data: store.PreparedData) -> list[Mismatch]:
    """Check a read model record (`layout.read_model_record`) and opened prepared data against the files."""
    return _verify(Path(model.path), model.sha256, data.root, data.manifest)


def verify_prepared(data_dir: Path, benchmark: str, precision: str = "fp32") -> list[Mismatch]:
    """Every file a run of `benchmark` at `precision` would load from `data_dir`, checked against its
    prepare record: empty when all match, a missing or changed file is a Mismatch. Raises DataError
    (one line) when nothing is prepared there or a record is unreadable."""
    from harness.records.layout import Layout, located

    bench = benchmarks.get(benchmark)
    layout = Layout(data_dir, bench)
    hint = bench.prepare_hint(data_dir)
    try:
        record = model_record.read(layout.record_for(precision))
        manifest = cast(store.PreparedManifest,
                        inbound.read_json_object(layout.preprocessed / store.MANIFEST, inbound.RECORD))
        store.digested_files(manifest)  # the entries are there
    except FileNotFoundError as exc:
        raise DataError(f"nothing prepared for {bench.name} {precision} in {data_dir} ({exc.filename} is "
                        f"missing): run `{hint}`") from None
    except (OSError, ValueError, KeyError, TypeError, inbound.Refused) as exc:
        raise DataError(f"the prepare records in {data_dir} are unreadable ({exc}); rerun `{hint}`") from None
    return _verify(located(data_dir, record.path, "models"), record.sha256, layout.preprocessed, manifest)


def _verify(model: Path, model_sha256: str, prepared: Path, manifest: store.PreparedManifest) -> list[Mismatch]:
    bad = []
    try:
        if sha256_once(model) != model_sha256:
            bad.append(Mismatch(model, "sha256 differs from the prepare record"))
    except FileNotFoundError:
        bad.append(Mismatch(model, "missing"))
    for name in store.verify_digests(prepared, manifest, sha256_once):
        file = prepared / name
        bad.append(Mismatch(file, "sha256 differs from the prepare manifest" if file.is_file()
                            else inbound.absent(file, "missing")))
    return bad


def refuse_mismatches(mismatches: list[Mismatch], hint: str) -> None:
    """One line naming the first changed file (and how many more), or nothing when all match."""
    if mismatches:
        more = f" (and {len(mismatches) - 1} more file(s))" if len(mismatches) > 1 else ""
        raise DataError(f"{mismatches[0].line()}{more}: the prepared data was changed after prepare; "
                        f"rerun `{hint}`")
