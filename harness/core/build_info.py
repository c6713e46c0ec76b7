"""Which appliance made a result: the package version and the source commit, for every manifest.

The commit is written into harness/_build_info.py when a wheel or the image is built (setup.py's
build_py; the Dockerfile passes GIT_COMMIT since its context has no .git). Running from a checkout,
it comes from `git` instead, with "-dirty" when the tree has uncommitted changes.
"""

from __future__ import annotations

import functools
import importlib.metadata
import subprocess
from pathlib import Path

import harness

DIST = "mlperf-appliance"


@functools.cache
def appliance_info() -> dict[str, str | None]:
    """{"version", "commit", "commit_from"}: commit_from is "build" (baked in), "git" (a checkout) or None."""
    try:
        version = importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        version = harness.__version__
    try:
        from harness import _build_info  # type: ignore[attr-defined]  # written at build time only

        commit: str | None = str(_build_info.COMMIT) or None
        source: str | None = "build"
    except ImportError:
        commit, source = _git_commit(Path(harness.__file__).resolve().parents[1]), "git"
    return {"version": version, "commit": commit, "commit_from": source if commit else None}


def _git_commit(repo: Path) -> str | None:
    if not (repo / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "") if head else None
