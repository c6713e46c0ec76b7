#!/usr/bin/env python3
"""Ultralytics' own LetterBox and scale_boxes against harness.data.datasets.coco, run in a throwaway venv.

Ultralytics (AGPL) is never a dependency: install it without its dependencies (importing the package
needs torch) into a venv of its own; this script takes LetterBox / scale_boxes / clip_boxes out of the
installed source with `ast` and runs them beside the harness's letterbox and letterbox_geometry on 312
image shapes (1x640 to 1499x1499), printing the largest pixel and box differences:

    python3 -m venv /tmp/ulvenv && /tmp/ulvenv/bin/pip install --no-deps ultralytics
    /tmp/ulvenv/bin/pip install numpy opencv-python-headless
    /tmp/ulvenv/bin/python tools/check_letterbox.py        # from the repository root
"""

from __future__ import annotations

import ast
import glob
import importlib.metadata
import sys
import types
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.data.datasets import coco


def ultralytics_code() -> dict[str, Any]:
    """LetterBox (with its base class), scale_boxes and clip_boxes, executed from the installed source."""
    found = glob.glob(f"{sys.prefix}/lib/python3*/site-packages/ultralytics/data/augment.py")
    if not found:
        raise SystemExit(f"ultralytics is not installed in {sys.prefix}; see this script's docstring")
    ns: dict[str, Any] = {"cv2": cv2, "np": np, "Any": Any, "__name__": "ultralytics_extract",
                          "torch": types.SimpleNamespace(Tensor=type("Tensor", (), {}))}
    for path, names in ((found[0], ("BaseTransform", "LetterBox")),
                        (found[0].replace("data/augment.py", "utils/ops.py"), ("scale_boxes", "clip_boxes"))):
        source = Path(path).read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in names:
                exec("from __future__ import annotations\n" + (ast.get_source_segment(source, node) or ""), ns)
    return ns


def main() -> int:
    ns = ultralytics_code()
    ref = ns["LetterBox"](new_shape=(640, 640), auto=False, scale_fill=False, scaleup=True, center=True, stride=32)
    rng = np.random.default_rng(0)
    shapes = [(480, 640), (640, 480), (427, 640), (640, 427), (375, 500), (333, 500), (640, 640), (1, 640),
              (640, 1), (240, 241), (1200, 800), (2, 3)] + [tuple(int(v) for v in rng.integers(1, 1500, 2))
                                                            for _ in range(300)]
    worst_pixel, worst_box = 0, 0.0
    for h, w in shapes:
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        a, b = ref(image=img.copy()), coco.letterbox(img)
        assert a.shape == b.shape == (640, 640, 3), (h, w, a.shape, b.shape)
        worst_pixel = max(worst_pixel, int(np.abs(a.astype(int) - b.astype(int)).max()))
        boxes = rng.uniform(0, 640, (50, 4))
        boxes[:, 2:] = boxes[:, :2] + rng.uniform(1, 200, (50, 2))
        want = ns["scale_boxes"]((640, 640), boxes.copy(), (h, w))
        gx, gy, px, py = coco.letterbox_geometry(h, w)
        got = np.clip((boxes - [px, py, px, py]) / [gx, gy, gx, gy], 0, [w, h, w, h])
        worst_box = max(worst_box, float(np.abs(want - got).max()))
    print(f"ultralytics {importlib.metadata.version('ultralytics')}: {len(shapes)} image shapes; LetterBox vs "
          f"coco.letterbox max abs pixel diff {worst_pixel}; scale_boxes vs letterbox_geometry max abs diff "
          f"{worst_box:.2e} px")
    return 0 if worst_pixel == 0 and worst_box < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
