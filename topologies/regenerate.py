"""Regenerate the paper servers' maps (harness/hw/topology/maps/*.yaml, package data) from the sysfs
fixtures with the tool itself, or check they match.

python topologies/regenerate.py          # rewrite the maps
python topologies/regenerate.py --check  # exit 1 if a committed map differs from the tool's output
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAPS = REPO / "harness" / "hw" / "topology" / "maps"
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sysfs_fixtures import PAPER_SYSTEMS, build  # noqa: E402

from harness.cli.main import main as appliance  # noqa: E402


def generate(name: str, out: Path, scratch: Path) -> None:
    root = build(name, scratch)
    code = appliance(["topology", "detect", "--sysfs-root", str(root), "--format", "yaml", "-o", str(out)])
    if code:
        raise SystemExit(f"appliance topology detect failed for {name} (exit {code})")


def stale_maps(trees: Path | None = None) -> list[str]:
    """Names of committed maps that differ from what the tool writes now (fixtures built in `trees`)."""
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(PAPER_SYSTEMS):
            fresh = Path(tmp) / f"{name}.yaml"
            generate(name, fresh, trees or Path(tmp) / "trees")
            committed = MAPS / f"{name}.yaml"
            if not committed.exists() or committed.read_text() != fresh.read_text():
                stale.append(name)
    return stale


def regenerate() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(PAPER_SYSTEMS):
            generate(name, MAPS / f"{name}.yaml", Path(tmp))
            print(f"wrote {MAPS.relative_to(REPO)}/{name}.yaml")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        stale = stale_maps()
        if stale:
            sys.exit(f"stale maps: {', '.join(stale)}; run python topologies/regenerate.py")
        print("harness/hw/topology/maps/*.yaml match the tool's output")
    else:
        regenerate()
