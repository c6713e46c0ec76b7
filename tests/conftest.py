"""Shared fixtures: one prepared ResNet50 data dir (seeded model + small synthetic dataset) per session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

SAMPLES = 48


def appliance(*args: str) -> int:
    """Run the CLI in-process, as a user would type it; returns the exit code."""
    return main([str(a) for a in args])


def appliance_subprocess(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, **kw)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    assert appliance("prepare", "--benchmark", "resnet50", "--data-dir", d, "--samples", SAMPLES) == 0
    return d
