"""The official MLCommons model artefacts and a verified, resumable download path.

A result is only comparable with published ones if it ran the official model, so every model file
is identified by its digest; a file that carries an official name but the wrong bytes is refused.

The artefacts are the catalogue's: each benchmark record carries its official models
(`Benchmark.official_models`, harness.data.benchmarks), and the caller hands the record in (this module sits
below the catalogue: it imports no benchmark). Their URLs and digests come from the MLCommons inference
README. They could not be reached from the build machine, so they are unverified beyond it: `fetch` checks what
it downloads, and `check_model_file` reports anything it cannot match.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from harness.core import inbound
from harness.core.errors import DataError
from harness.records.artefact import Artefact
from harness.records.benchmark_record import Benchmark

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelCheck:
    """What is known about a model file; `warning` is set when it is not a known official artefact."""

    path: Path
    md5: str
    sha256: str
    artefact: Artefact | None
    warning: str | None


def file_digests(path: Path) -> tuple[str, str]:
    """(md5, sha256) in one streaming pass: models are hundreds of MB and read from slow disks."""
    md5, sha256 = hashlib.md5(), hashlib.sha256()
    with inbound.open_bounded(path, inbound.ARRAY) as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
    return md5.hexdigest(), sha256.hexdigest()


def check_model_file(path: Path, bench: Benchmark, registry: Sequence[Artefact] | None = None) -> ModelCheck:
    """Identify a model file by digest; refuse a missing file or one that impersonates an official name.
    `registry`: the candidates (default: the record's `official_models`)."""
    benchmark = bench.name
    if not path.is_file():
        raise DataError(
            f"model file {path} {inbound.absent(path)}; pass --model FILE or fetch the official one with "
            f"`appliance prepare --benchmark {benchmark} --fetch`"
        )
    md5, sha256 = file_digests(path)
    candidates = list(bench.official_models if registry is None else registry)
    for artefact in candidates:
        if artefact.md5 == md5:
            return ModelCheck(path, md5, sha256, artefact, None)
    known = [a.md5 for a in candidates if a.filename == path.name and a.md5 is not None]
    if known:
        raise DataError(
            f"model file {path}: md5 {md5} does not match the official {path.name} "
            f"({', '.join(known)}); re-download it with `appliance prepare --benchmark {benchmark} --fetch`"
        )
    if any(a.filename == path.name for a in candidates):
        reason = "no md5 was published for it, so it cannot be verified"
    else:
        reason = "its digest is unknown"
    warning = (
        f"WARNING: model {path} (md5 {md5}) is not a known official {benchmark} artefact ({reason}); "
        "the results will be marked as run with an unverified model"
    )
    return ModelCheck(path, md5, sha256, None, warning)


def _mismatch(path: Path, artefact: Artefact) -> str | None:
    """Why `path` is not `artefact`, or None when it matches everything that was published."""
    if artefact.size is not None and (size := path.stat().st_size) != artefact.size:
        return f"size {size} bytes, expected {artefact.size}"
    if artefact.md5 is not None and (md5 := file_digests(path)[0]) != artefact.md5:
        return f"md5 {md5}, expected {artefact.md5}"
    return None


def _one_line(error: BaseException) -> str:
    """The cause on one line: a URLError's reason is the real cause, an HTTPError's str has the status."""
    is_wrapper = isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError)
    reason = error.reason if isinstance(error, urllib.error.URLError) and is_wrapper else error
    return " ".join(str(reason).split()) or type(error).__name__


def fetch(artefact: Artefact, dest_dir: Path, *, progress: bool = True, timeout: float = 30.0) -> Path:
    """Download `artefact` into `dest_dir`, resuming a `.part` left by an interrupted run.

    The final name appears only after the bytes are verified, so a file under that name is always
    complete; a network failure keeps the `.part` so the next call continues where this one stopped.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / artefact.filename
    part = dest_dir / f"{artefact.filename}.part"
    if final.is_file() and _mismatch(final, artefact) is None:
        return final
    try:
        _download(artefact.url, part, progress=progress, timeout=timeout)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        raise DataError(
            f"could not download {artefact.url}: {_one_line(e)}; check the network or pass --model FILE"
        ) from e
    problem = _mismatch(part, artefact)
    if problem is not None:
        part.unlink()
        raise DataError(
            f"downloaded {artefact.url} has {problem}; the partial file was deleted, "
            "run the download again or pass --model FILE"
        )
    os.replace(part, final)
    return final


def _download(url: str, part: Path, *, progress: bool, timeout: float) -> None:
    """Append the rest of `url` to `part`, or rewrite it when the server does not honour the Range."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    # A fresh opener reads the proxy settings of the environment at call time.
    opener = urllib.request.build_opener()
    try:
        resp = opener.open(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            e.close()
            return  # nothing left past `offset`: the .part is complete, verification decides
        raise
    with resp:
        if resp.status == 206:
            content_range = resp.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {offset}-"):
                raise http.client.HTTPException(f"server answered Range {offset}- with {content_range!r}")
        else:
            offset = 0
        length = resp.headers.get("Content-Length")
        expected = int(length) if length is not None else None
        received = 0
        show = progress and sys.stderr.isatty()
        total = offset + expected if expected is not None else None
        with (
            open(part, "ab" if offset else "wb") as f,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                disable=not show,
                desc=part.name.removesuffix(".part"),
            ) as bar,
        ):
            while chunk := resp.read(_CHUNK):
                f.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
            f.flush()
            os.fsync(f.fileno())
        if expected is not None and received < expected:
            raise http.client.IncompleteRead(b"", expected - received)
