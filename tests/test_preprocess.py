"""Preprocessing equals the MLCommons reference recipe, and damaged input is refused cleanly."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from helpers import appliance

from harness.data.datasets import imagenet
from harness.records import store


def reference_preprocess(path) -> np.ndarray:
    """Written out from the reference's dataset.py (pre_process_vgg, without the mean), independently."""
    img = cv2.imread(str(path))
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    height, width, _ = img.shape
    new_height = int(100.0 * 224 / 87.5)
    new_width = int(100.0 * 224 / 87.5)
    if height > width:
        w, h = new_width, int(new_height * height / width)
    else:
        h, w = new_height, int(new_width * width / height)
    img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    height, width, _ = img.shape
    left, right = int((width - 224) / 2), int((width + 224) / 2)
    top, bottom = int((height - 224) / 2), int((height + 224) / 2)
    return np.asarray(img[top:bottom, left:right]).transpose(2, 0, 1)


def test_shards_equal_reference(data_dir):
    raw = data_dir / "imagenet"
    names, labels = imagenet.read_val_map(raw)
    data = store.open_prepared(data_dir / "preprocessed" / "resnet50", "prepare")
    assert data.count == len(names) and (data.labels == labels).all()
    assert store.verify_digests(data.root, data.manifest) == []
    grays = 0
    for i, name in enumerate(names):
        np.testing.assert_array_equal(data.shards[0][i], reference_preprocess(raw / name), err_msg=name)
        grays += cv2.imread(str(raw / name), cv2.IMREAD_UNCHANGED).ndim == 2
    sizes = {cv2.imread(str(raw / n)).shape[:2] for n in names}
    assert len(sizes) > len(names) // 2, "synthetic images should have varied sizes"


@pytest.mark.slow
def test_synthetic_has_grayscale_and_varied_aspect(tmp_path):
    imagenet.make_synthetic(tmp_path, 300, seed=7)
    names, _ = imagenet.read_val_map(tmp_path)
    shapes = [cv2.imread(str(tmp_path / n), cv2.IMREAD_UNCHANGED).shape for n in names]
    assert any(len(s) == 2 for s in shapes)
    ratios = [s[1] / s[0] for s in shapes]
    assert min(ratios) < 0.8 and max(ratios) > 1.25


@pytest.mark.slow
def test_corrupt_jpeg_in_source_names_file_and_leaves_nothing(tmp_path, capsys):
    src = tmp_path / "src"
    imagenet.make_synthetic(src, 6, seed=3)
    names, _ = imagenet.read_val_map(src)
    victim = src / names[4]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncated download
    data = tmp_path / "data"
    rc = appliance("prepare", "--data-dir", data, "--source", src, "--model", data / "missing.onnx")
    assert rc != 0  # missing model first
    rc = appliance("prepare", "--data-dir", data, "--source", src)
    err = capsys.readouterr().err
    assert rc == 2
    assert names[4] in err and "Traceback" not in err
    assert not (data / "preprocessed" / "resnet50").exists()
    assert not list((data / "preprocessed").glob(".*tmp*"))


@pytest.mark.slow
def test_real_source_path_is_recorded(tmp_path):
    src = tmp_path / "imagenet-val"
    imagenet.make_synthetic(src, 5, seed=11)
    data = tmp_path / "data"
    assert appliance("prepare", "--data-dir", data, "--source", src, "--samples", 4) == 0
    manifest = json.loads((data / "preprocessed" / "resnet50" / "manifest.json").read_text())
    assert manifest["synthetic"] is False and manifest["count"] == 4
    assert manifest["source"] == str(src.resolve())
