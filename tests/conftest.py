"""Shared fixtures: one prepared ResNet50 data dir (seeded model + small synthetic dataset) per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SAMPLES, appliance


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    assert appliance("prepare", "--benchmark", "resnet50", "--data-dir", d, "--samples", SAMPLES, "-q") == 0
    return d
