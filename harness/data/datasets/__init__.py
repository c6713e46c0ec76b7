"""Dataset readers, synthetic generators and the preprocessed-shard store.

Every dataset family (ImageNet, COCO 2017, the MLPerf OpenImages subset) is one `DatasetFormat`: how
to read its official layout into a `Listing` and how to draw a synthetic one in that same layout.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from harness.core import inbound
from harness.core.errors import DataError

MAX_PIXELS = 64 << 20  # 8192 x 8192; the datasets' largest images are a few megapixels


def decode_image(path: Path, listed_in: str) -> np.ndarray:
    """Decode like the references (`cv2.imread`, 3-channel BGR), refusing damaged files loudly, and an image
    whose header claims more than MAX_PIXELS before a byte of it is decoded (a small PNG can claim 30,000 x
    30,000 pixels: 2.7 GB)."""
    try:
        data = inbound.read_bytes(path, inbound.RECORD, what="image")
    except OSError as exc:
        raise DataError(f"cannot read image {path}: {exc.strerror}") from None
    pixels = inbound.image_pixels(data)
    if pixels is not None and pixels > MAX_PIXELS:
        raise DataError(f"image {path} claims {pixels:,} pixels, more than the {MAX_PIXELS:,} an image of these "
                        f"datasets may have; replace it or remove it from {listed_in}")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
    # libjpeg decodes a truncated file with a warning only; a JPEG must end with the EOI marker.
    truncated = data[:2] == b"\xff\xd8" and not data.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9")
    if img is None or truncated:
        raise DataError(f"corrupt or truncated image {path}: replace it or remove it from {listed_in}")
    return img
