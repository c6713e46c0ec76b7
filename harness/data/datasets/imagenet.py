"""ImageNet 2012 validation in its official layout: JPEG files plus `val_map.txt` (`<relpath> <label>`).

Synthetic images are drawn in that same layout so the real folder can be swapped in with
`--source DIR` and go through the very same reading and preprocessing code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.outbound import make_dirs, write_staged
from harness.data.datasets import decode_image
from harness.records.benchmark_record import DatasetFormat, Listing

VAL_MAP = "val_map.txt"
NUM_LABELS = 1000
MEAN_RGB = (123.68, 116.78, 103.94)  # MLCommons reference `pre_process_vgg`
CROP_SCALE = 87.5  # percent: resize the short side to 224 / 0.875 = 256 before the centre crop
GRAY_EVERY = 100
TEMPLATE_SEED = 10_000  # the synthetic world's class scenes; fixed, so every seeded dataset shares them


MAX_LABEL = 1000  # ImageNet's 1,000 classes, and the background class some label sets add


def read_val_map(root: Path, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """Image paths (relative to `root`) and labels, in file order (= LoadGen sample index)."""
    path = root / VAL_MAP
    if not path.is_file():
        raise DataError(f"{path} {inbound.absent(path, 'not found')}: an ImageNet folder holds the JPEG files "
                        f"and val_map.txt")
    names: list[str] = []
    labels: list[int] = []
    for lineno, line in enumerate(inbound.read_text(path, inbound.RECORD).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not inbound.is_digits(parts[1]):
            raise DataError(f"{path}:{lineno}: expected '<image> <label>', got {line[:80]!r}")
        if len(parts[1]) > 4 or int(parts[1]) > MAX_LABEL:
            raise DataError(f"{path}:{lineno}: label {parts[1][:20]} is not an ImageNet class (0..{MAX_LABEL}); "
                            f"val_map.txt lines are '<image> <class 0..999>'")
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
    return preprocess_bgr(decode_image(path, VAL_MAP), size)


def preprocess_bgr(bgr: np.ndarray, size: int = 224) -> np.ndarray:
    """`preprocess` of an already decoded BGR picture (the seeded model renders its class templates so)."""
    img = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    h, w, _ = img.shape
    short = int(100.0 * size / CROP_SCALE)
    new_w, new_h = (short, int(short * h / w)) if h > w else (int(short * w / h), short)
    img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_AREA)
    top, left = int((new_h - size) / 2), int((new_w - size) / 2)
    img = img[top:top + size, left:left + size]
    return np.ascontiguousarray(img.transpose(2, 0, 1))


def render_template(label: int, height: int, width: int) -> np.ndarray:
    """The seeded scene of class `label` (BGR): a smooth colour field with a few solid shapes.

    Synthetic ImageNet is a world of NUM_LABELS such scenes. Its pictures are jittered renderings of
    them and the seeded model's classifier knows each scene's features (models/resnet50.py), so the
    model classifies the synthetic set with wide margins the way a trained network classifies real
    photographs, and int8 quantisation keeps its top-1 for the same reason.
    """
    rng = np.random.default_rng(TEMPLATE_SEED + label)
    coarse = rng.integers(0, 256, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3)).astype(np.uint8)
    img = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    for _ in range(int(rng.integers(2, 6))):
        circle, (cx, cy), radius, (qx, qy) = rng.random() < 0.5, rng.random(2), rng.uniform(0.1, 0.4), rng.random(2)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        centre = (int(cx * width), int(cy * height))
        if circle:
            cv2.circle(img, centre, int(radius * min(height, width)), colour, -1)
        else:
            cv2.rectangle(img, centre, (int(qx * width), int(qy * height)), colour, -1)
    if gray_scene(label):
        img = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    return img


def gray_scene(label: int) -> bool:
    """One class in GRAY_EVERY is a gray scene, its pictures grayscale JPEGs (ImageNet holds some)."""
    return label % GRAY_EVERY == GRAY_EVERY - 1


def _draw(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """One picture of a random class: its scene, colour-shifted and noisy, at a random size and aspect.

    The scene fills the centred square of the short side, which the reference centre crop keeps, and
    a stretched rendering fills the rest, so portrait and landscape pictures both go through the
    preprocessing while every crop shows its class's scene.
    """
    label = int(rng.integers(0, NUM_LABELS))
    short = int(rng.integers(300, 520))
    h, w = (short, int(short * rng.uniform(1.0, 1.6)))[::1 if rng.random() < 0.5 else -1]
    img = render_template(label, h, w)
    top, left = (h - short) // 2, (w - short) // 2
    img[top:top + short, left:left + short] = render_template(label, short, short)
    noisy = img.astype(np.float32) + rng.normal(0, 3, 3) + rng.normal(0, 3, img.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8), label


def make_synthetic(root: Path, count: int, seed: int, on_image: Callable[[], None] | None = None) -> None:
    """Write `count` seeded JPEGs of varied sizes (about 1 in GRAY_EVERY grayscale) and `val_map.txt`."""
    make_dirs(root)
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(1, count + 1):
        name = f"ILSVRC2012_val_{i:08d}.JPEG"
        img, label = _draw(rng)
        if gray_scene(label):  # one channel in the file; decoding gives the reference 3 equal channels
            img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise DataError(f"could not encode synthetic image {name}")
        write_staged(root / name, buf.tobytes())
        lines.append(f"{name} {label}")
        if on_image:
            on_image()
    write_staged(root / VAL_MAP, ("\n".join(lines) + "\n").encode())


def _listing(root: Path, limit: int | None) -> Listing:
    names, labels = read_val_map(root, limit)
    return Listing(names, labels, None)


FORMAT = DatasetFormat("imagenet", VAL_MAP, _listing, make_synthetic)
