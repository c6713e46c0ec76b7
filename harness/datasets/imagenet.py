"""ImageNet 2012 validation in its official layout: JPEG files plus `val_map.txt` (`<relpath> <label>`).

Synthetic images are drawn in that same layout so the real folder can be swapped in with
`--source DIR` and go through the very same reading and preprocessing code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from harness.datasets import DatasetFormat, Listing, decode_image
from harness.errors import DataError

VAL_MAP = "val_map.txt"
NUM_LABELS = 1000
MEAN_RGB = (123.68, 116.78, 103.94)  # MLCommons reference `pre_process_vgg`
CROP_SCALE = 87.5  # percent: resize the short side to 224 / 0.875 = 256 before the centre crop


def read_val_map(root: Path, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """Image paths (relative to `root`) and labels, in file order (= LoadGen sample index)."""
    path = root / VAL_MAP
    if not path.is_file():
        raise DataError(f"{path} not found: an ImageNet folder holds the JPEG files and val_map.txt")
    names: list[str] = []
    labels: list[int] = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise DataError(f"{path}:{lineno}: expected '<image> <label>', got {line!r}")
        names.append(parts[0])
        labels.append(int(parts[1]))
        if limit is not None and len(names) >= limit:
            break
    if not names:
        raise DataError(f"{path} lists no images")
    return names, np.asarray(labels, dtype=np.int32)


def preprocess(path: Path, size: int = 224) -> np.ndarray:
    """MLCommons reference ResNet50 preprocessing up to (not including) the mean subtraction.

    BGR->RGB, resize with INTER_AREA so the short side is size/0.875, centre crop, CHW uint8. The mean
    is subtracted when a batch is staged for the card, so the stored data stays one byte per pixel.
    """
    img = cv2.cvtColor(decode_image(path, VAL_MAP), cv2.COLOR_BGR2RGB)
    h, w, _ = img.shape
    short = int(100.0 * size / CROP_SCALE)
    new_w, new_h = (short, int(short * h / w)) if h > w else (int(short * w / h), short)
    img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_AREA)
    top, left = int((new_h - size) / 2), int((new_w - size) / 2)
    img = img[top:top + size, left:left + size]
    return np.ascontiguousarray(img.transpose(2, 0, 1))


def _draw(rng: np.random.Generator) -> np.ndarray:
    """One image-like picture: a smooth colour field with a few solid shapes, of a random size."""
    h, w = (int(v) for v in rng.integers(160, 640, 2))
    coarse = rng.integers(0, 256, (int(rng.integers(2, 8)), int(rng.integers(2, 8)), 3)).astype(np.uint8)
    img = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    for _ in range(int(rng.integers(1, 6))):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        if rng.random() < 0.5:
            cv2.circle(img, centre, int(rng.integers(8, max(9, min(h, w) // 2))), colour, -1)
        else:
            corner = (int(rng.integers(0, w)), int(rng.integers(0, h)))
            cv2.rectangle(img, centre, corner, colour, -1)
    noise = rng.normal(0, 6, img.shape)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def make_synthetic(root: Path, count: int, seed: int, on_image: Callable[[], None] | None = None) -> None:
    """Write `count` seeded JPEGs of varied sizes (about 1 in 25 grayscale) and `val_map.txt`."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(1, count + 1):
        name = f"ILSVRC2012_val_{i:08d}.JPEG"
        img = _draw(rng)
        if rng.random() < 0.04:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise DataError(f"could not encode synthetic image {name}")
        (root / name).write_bytes(buf.tobytes())
        lines.append(f"{name} {int(rng.integers(0, NUM_LABELS))}")
        if on_image:
            on_image()
    (root / VAL_MAP).write_text("\n".join(lines) + "\n")


def _listing(root: Path, limit: int | None) -> Listing:
    names, labels = read_val_map(root, limit)
    return Listing(names, labels, None)


FORMAT = DatasetFormat("imagenet", VAL_MAP, _listing, make_synthetic)
