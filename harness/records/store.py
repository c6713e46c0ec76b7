"""Preprocessed samples stored once as memory-mappable uint8 `.npy` shards with a sha256 manifest.

Layout of a prepared folder::

    manifest.json            what was made, from what, how, and the digest of every file
    samples-00000.npy ...    [n, C, H, W] uint8, SHARD_SIZE samples per shard, in LoadGen index order
    labels.npy               per sample: class label (ImageNet) or image id (COCO format)
    annotations.json         COCO-format ground truth of exactly these samples (detection datasets)
    golden.npy | golden.json the FP32 reference pass of the model named in the manifest: labels, or
                             its detections as COCO annotations
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict, cast

import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.core.outbound import mapped_array, save_array

__all__ = ["FORMAT_VERSION", "MANIFEST", "SHARD_SIZE", "ArrayEntry", "FileEntry", "PreparedData", "PreparedManifest",
           "close_array", "create_array", "digested_files", "open_prepared", "shard_name", "verify_digests",
           "write_array"]

MANIFEST = "manifest.json"
SHARD_SIZE = 1024
FORMAT_VERSION = 1


class FileEntry(TypedDict):
    """One file of the folder in its manifest: its name and digest (a golden reference adds its model's)."""
    file: str
    sha256: str
    model_sha256: NotRequired[str]


class ArrayEntry(FileEntry):
    """An `.npy` file: its shape too (a shard adds the index of its first sample)."""
    shape: list[int]
    start: NotRequired[int]


class PreparedManifest(TypedDict):
    """manifest.json of a prepared folder, as `appliance prepare` writes it (harness.prepare.steps); read back
    by `open_prepared`, which checks the entries a run loads."""
    format: int
    benchmark: str
    dataset: str
    count: int
    synthetic: bool
    source: str
    source_index: str
    source_index_sha256: str
    layout: str
    dtype: str
    sample_shape: list[int]
    preprocessing: str
    shards: list[ArrayEntry]
    labels: ArrayEntry
    annotations: FileEntry | None
    golden: FileEntry | None


def shard_name(i: int) -> str:
    return f"samples-{i:05d}.npy"


def write_array(folder: Path, name: str, array: np.ndarray) -> ArrayEntry:
    """Save one array and return its manifest entry (file, shape, sha256)."""
    path = folder / name
    save_array(path, array)
    return {"file": name, "shape": list(array.shape), "sha256": sha256_file(path)}


def create_array(folder: Path, name: str, shape: tuple[int, ...]) -> np.memmap:
    """A new uint8 `.npy` file mapped for writing, so a shard of large images never sits in RAM whole.

    Its blocks are allocated at once: a disk too full for it fails here with ENOSPC, where writing
    into a sparse mapping would kill the process with SIGBUS."""
    return mapped_array(folder / name, shape)


def close_array(folder: Path, name: str, array: np.memmap) -> ArrayEntry:
    """Flush an array from `create_array` and return its manifest entry (file, shape, sha256)."""
    array.flush()
    return {"file": name, "shape": list(array.shape), "sha256": sha256_file(folder / name)}


@dataclass
class PreparedData:
    """A prepared folder opened for a run: samples stay on disk until LoadGen asks for them."""

    root: Path
    manifest: PreparedManifest
    shards: list[np.ndarray]
    labels: np.ndarray
    golden: np.ndarray | None  # golden labels (.npy); a golden.json is read by its scorer

    @property
    def count(self) -> int:
        return int(self.manifest["count"])

    @property
    def synthetic(self) -> bool:
        return bool(self.manifest["synthetic"])

    @property
    def source(self) -> Path:
        """The raw dataset it was made from: recorded relative to the data dir (<data>/preprocessed/<name>
        is this folder) when inside it, else absolute."""
        recorded = Path(self.manifest["source"])
        return recorded if recorded.is_absolute() else self.root.parent.parent / recorded

    @property
    def golden_model(self) -> str | None:
        """The sha256 of the model whose FP32 pass made the golden reference; None without a golden reference."""
        gold = self.manifest.get("golden")
        return gold.get("model_sha256") if gold else None

    def gather(self, indices: np.ndarray, out: np.ndarray) -> None:
        """Copy samples `indices` (sorted or not) into `out` [len(indices), C, H, W]."""
        for j, idx in enumerate(indices):
            shard, off = divmod(int(idx), SHARD_SIZE)
            out[j] = self.shards[shard][off]


def _named(root: Path, name: object) -> Path:
    """A file the manifest names: a plain name inside the prepared folder, never a path out of it."""
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(f"file {name!r} is not a plain file name of the folder")
    return root / name


def open_prepared(root: Path, prepare_hint: str) -> PreparedData:
    """Open a prepared folder, checking that every shard is present and has the recorded shape."""
    mpath = root / MANIFEST
    rerun = f"; rerun `{prepare_hint}`" if prepare_hint else ""
    if inbound.what_is(mpath) is None:  # a FIFO or a device there is damaged data, said as what it is below
        raise DataError(f"no prepared data in {root}: run `{prepare_hint}` first")
    try:
        manifest = cast(PreparedManifest, inbound.read_json_object(mpath, inbound.RECORD))  # checked below
        if manifest.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {manifest.get('format')!r}, expected {FORMAT_VERSION}")
        shards = []
        for entry in manifest["shards"]:
            arr = inbound.load_npy(_named(root, entry["file"]), mmap=True)
            if list(arr.shape) != entry["shape"] or arr.dtype != np.uint8:
                raise ValueError(f"{entry['file']} has shape {arr.shape} {arr.dtype}, manifest says {entry['shape']}")
            shards.append(arr)
        labels = inbound.load_npy(_named(root, manifest["labels"]["file"]), mmap=False, limit=inbound.RECORD)
        golden = None
        for listed in (manifest.get("annotations"), manifest.get("golden")):
            if listed and not (named := _named(root, listed["file"])).is_file():
                raise ValueError(f"{listed['file']} {inbound.absent(named, 'is missing')}")
        gold = manifest.get("golden")
        if gold and gold["file"].endswith(".npy"):
            golden = inbound.load_npy(_named(root, gold["file"]), mmap=False, limit=inbound.ARRAY)
        complete = sum(s.shape[0] for s in shards) == manifest["count"] == len(labels)
    except inbound.Refused as exc:
        raise DataError(f"prepared data in {root} is damaged ({exc})" + rerun) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        why = (f"{exc} is missing" if isinstance(exc, KeyError) else  # a number or `null` where a list is
               f"an entry of the wrong JSON kind: {exc}" if isinstance(exc, TypeError | AttributeError) else exc)
        raise DataError(f"prepared data in {root} is damaged ({why})" + rerun) from None
    if not complete:
        raise DataError(f"prepared data in {root} is incomplete" + rerun)
    return PreparedData(root, manifest, shards, labels, golden)


def digested_files(manifest: PreparedManifest) -> list[FileEntry]:
    """The manifest entries of every file a run reads: shards, labels, annotations, golden reference."""
    return [*manifest["shards"], manifest["labels"],
            *(entry for entry in (manifest.get("annotations"), manifest.get("golden")) if entry)]


def verify_digests(root: Path, manifest: PreparedManifest,
                   digest: Callable[[Path], str] = sha256_file) -> list[str]:
    """Names of the files whose sha256 no longer matches the manifest, or that are gone (empty when
    all match). harness.data.integrity passes a digest that hashes each file once per process."""
    bad = []
    for entry in digested_files(manifest):
        try:
            if digest(root / entry["file"]) != entry["sha256"]:
                bad.append(entry["file"])
        except FileNotFoundError:
            bad.append(entry["file"])
    return bad
