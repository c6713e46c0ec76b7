"""Issue 41 (round 4's leftover): `prepare --samples 32` stopped over a prepared set of another size leaves that
set, its golden reference and its synthetic images as they were. The new set is built aside (images, shards
and golden) and swapped in at the end; before, the shards were swapped in first, so a stop in the golden step
left 32 samples and no golden (`internal error: ImportError: initialization failed` when it came during
onnxruntime's import), and the synthetic images were redrawn in place before the shards."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import SAMPLES, linked_copy
from test_interrupts import CODES, WORDS, _one_line, _signalled_in

# a moment in each step: the shards being written, and the golden reference's FP32 pass
STEPS = ["harness.records.store.close_array", "harness.prepare.steps.reference_pass"]


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_prepare_keeps_the_prepared_set(step: str, sig: signal.Signals, data_dir: Path,
                                                  tmp_path: Path) -> None:
    local = linked_copy(data_dir, tmp_path / "data")
    before = _contents(local)
    assert '"golden": {' in before["preprocessed/resnet50/manifest.json"].decode()
    done = _signalled_in(step, sig, "prepare", "--data-dir", local, "--samples", SAMPLES // 2, "-q")
    assert done.returncode == CODES[sig], done.stderr
    said = _one_line(done.stderr)
    assert said == f"appliance: {WORDS[sig]}", said
    after = _contents(local)
    assert sorted(after) == sorted(before)
    assert [name for name in before if after[name] != before[name]] == []
    assert [p for p in local.rglob(".*") if p.name != ".synthetic.json"] == []  # no staging left


def test_an_unstopped_prepare_swaps_in_the_new_set_whole(data_dir: Path, tmp_path: Path) -> None:
    """The control: the same command not stopped leaves the smaller set with its golden reference."""
    import json
    import subprocess
    import sys

    local = linked_copy(data_dir, tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "prepare", "--data-dir", str(local), "--samples",
                           str(SAMPLES // 2), "-q"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((local / "preprocessed" / "resnet50" / "manifest.json").read_text())
    assert manifest["count"] == SAMPLES // 2 and manifest["golden"]["file"]
    assert (local / "preprocessed" / "resnet50" / manifest["golden"]["file"]).is_file()
    assert [p for p in local.rglob(".*") if p.name != ".synthetic.json"] == []
