"""Shared fixtures, one per session: a prepared ResNet50 data dir and a prepared detection data dir (seeded
models + small synthetic datasets).

The `slow` marker (`pytest -m "not slow"`, the inner loop): every test that needs the prepared detection
data is slow (three seeded detection models and their golden references: minutes on a busy 2-core
machine), as are the tests marked `@pytest.mark.slow` in their files (real inference or LoadGen runs of
seconds). The ResNet50 data dir (about 25 s on an idle 2-core machine) is part of the inner loop.
ci/test runs everything."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from helpers import DETECTION_SAMPLES, SAMPLES, appliance, linked_copy

from harness.data.datasets import imagenet
from harness.run.neighbours import REGISTRY_ENV

PREPARED_DATA = ("det_data_dir", "int8_data_dir")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(name in PREPARED_DATA for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    """The suite launched under `nohup` (SIGHUP ignored, which every child inherits, and which `appliance` rightly
    leaves ignored) would see its SIGHUP tests' runs go on to the end: SIGHUP at its default here, as in a terminal,
    so those tests judge the handling, not how the suite was started."""
    del config
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def run_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's runs see each other on the machine's cores (harness.run.neighbours), not another session's
    run beside it on a shared machine, whose warning would land in this session's summaries."""
    folder = tmp_path_factory.mktemp("run-registry")
    os.environ[REGISTRY_ENV] = str(folder)
    return folder


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    assert appliance("prepare", "--benchmark", "resnet50", "--data-dir", d, "--samples", SAMPLES, "-q") == 0
    return d


@pytest.fixture(scope="session")
def int8_data_dir(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ResNet50 data dir plus an int8 model (`prepare --precision int8` calibrated on 16 images, as
    tests/test_int8.py does), in a folder of its own so the session's data dir holds only fp32 for the
    tests that tune its default precisions: hard links to the prepared files, which nothing rewrites in place."""
    d = linked_copy(data_dir, tmp_path_factory.mktemp("int8") / "data")
    names, _ = imagenet.read_val_map(d / "imagenet")
    cal = d / "cal_image_list.txt"
    cal.write_text("".join(f"{n}\n" for n in names[::3]))
    assert appliance("prepare", "--data-dir", d, "--samples", SAMPLES, "--precision", "int8",
                     "--calibration-list", cal, "-q") == 0
    return d


@pytest.fixture(scope="session")
def det_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ssd-mobilenet, ssd-resnet34 and retinanet prepared side by side (COCO and OpenImages layouts)."""
    d = tmp_path_factory.mktemp("det-data")
    for bench, n in DETECTION_SAMPLES.items():
        assert appliance("prepare", "--benchmark", bench, "--data-dir", d, "--samples", n, "-q") == 0
    return d
