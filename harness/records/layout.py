"""The data dir's layout, owned here: where a benchmark's model records, models, raw dataset, preprocessed
shards and tuned record live, which precisions a data dir can hold, and how records name files in it.

    models/<benchmark>[-<precision>].json   which model runs: path, digests, synthetic or official, size
    models/<file>.onnx                      the seeded model (or the fetched official one) and its variants
    <dataset>/                              raw dataset in its official layout (synthetic unless --source)
    preprocessed/<benchmark>/               uint8 shards + manifest (harness.records.store)
    tuned/<benchmark>.json                  `appliance tune`'s record (harness.records.tuned) and its user.conf

Records name files inside the data dir relative to it (`stored_path`), so a prepared data dir can be
copied, moved or mounted read-only anywhere and used from any working directory. `appliance prepare`
(harness.prepare) writes this layout; everything else reads it through this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core import inbound
from harness.core.errors import DataError
from harness.records import model_record
from harness.records.benchmark_record import Benchmark
from harness.records.model_record import ModelRecord

__all__ = ["PRECISIONS", "TF32", "Layout", "existing_record", "located", "read_model_record", "stored_path"]

TF32 = "tf32"  # the FP32 weights computed in TensorFloat-32 by the CUDA provider (harness.prepare.tf32)
PRECISIONS = ("fp32", "int8", "fp16", "bf16", TF32)  # from the fp32 model: harness.prepare (quantize, fp16, bf16, tf32)






@dataclass(frozen=True)
class Layout:
    """Where a benchmark's files live under a data dir."""

    data_dir: Path
    bench: Benchmark

    @property
    def model_record(self) -> Path:
        return self.data_dir / "models" / f"{self.bench.name}.json"

    def record_for(self, precision: str) -> Path:
        """The model record of `precision` (fp32: `model_record`)."""
        return self.model_record if precision == "fp32" else self.model_record.with_name(
            f"{self.bench.name}-{precision}.json")

    @property
    def raw(self) -> Path:
        return self.data_dir / self.bench.dataset.name

    @property
    def preprocessed(self) -> Path:
        return self.data_dir / "preprocessed" / self.bench.name

    @property
    def tuned(self) -> Path:
        """Where `appliance tune` writes its record by default, and `--backend auto` looks for it."""
        return self.data_dir / "tuned" / f"{self.bench.name}.json"



def stored_path(data_dir: Path, path: Path) -> str:
    """How a record names `path`: relative to the data dir when inside it, else absolute."""
    full, root = path.resolve(), data_dir.resolve()
    return str(full.relative_to(root)) if full.is_relative_to(root) else str(full)



def located(data_dir: Path, recorded: str, folder: str) -> Path:
    """The file a record names. Relative: inside the data dir. Records from before paths were relative
    hold absolute or working-directory-relative paths: taken as given if the file is there, else its
    name in the data dir's `folder` (so an old data dir that was moved still works)."""
    given = Path(recorded)
    candidates = [given] if given.is_absolute() else [data_dir / given, given]
    candidates.append(data_dir / folder / given.name)
    return Path(os.path.abspath(next((c for c in candidates if c.is_file()), data_dir / given)))



def read_model_record(layout: Layout, precision: str = "fp32") -> ModelRecord:
    """The model record (harness.records.model_record), its `path` made absolute: located in this data dir
    wherever the dir now lives."""
    hint = layout.bench.prepare_hint(layout.data_dir) + ("" if precision == "fp32" else f" --precision {precision}")
    path = layout.record_for(precision)
    try:
        record = model_record.read(path)
    except FileNotFoundError:
        raise DataError(f"no {precision} model prepared for {layout.bench.name} in {layout.data_dir}: "
                        f"run `{hint}`") from None
    except DataError as exc:
        raise DataError(f"{exc}; rerun `{hint}`") from None
    model = located(layout.data_dir, record.path, "models")
    if not model.is_file():
        raise DataError(f"model {model} (named in {path}) {inbound.absent(model, 'is missing')}; rerun `{hint}`")
    return replace(record, path=str(model))


def existing_record(path: Path) -> ModelRecord | None:
    """The model record at `path` (<data>/models/x.json) as `read_model_record` gives it, or None."""
    try:
        record = model_record.read(path)
    except (FileNotFoundError, DataError):
        return None
    return replace(record, path=str(located(path.parent.parent, record.path, "models")))
