"""Shared fixtures, one per session: a prepared ResNet50 data dir and a prepared detection data dir (seeded
models + small synthetic datasets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import DETECTION_SAMPLES, SAMPLES, appliance


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    assert appliance("prepare", "--benchmark", "resnet50", "--data-dir", d, "--samples", SAMPLES, "-q") == 0
    return d


@pytest.fixture(scope="session")
def det_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ssd-mobilenet, ssd-resnet34 and retinanet prepared side by side (COCO and OpenImages layouts)."""
    d = tmp_path_factory.mktemp("det-data")
    for bench, n in DETECTION_SAMPLES.items():
        assert appliance("prepare", "--benchmark", bench, "--data-dir", d, "--samples", n, "-q") == 0
    return d
