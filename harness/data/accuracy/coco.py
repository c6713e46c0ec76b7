"""COCO mAP from mlperf_log_accuracy.json with pycocotools, as MLCommons' accuracy-coco.py and
accuracy-openimages.py compute it.

Each logged response is rows of 7 float32 `[qsl_idx, ymin, xmin, ymax, xmax, score, class]`, boxes
normalised to 0..1, class the dataset's category id; the QSL index is the position of the image in the
annotation file. A sample logged twice counts once; a sample with no rows counts as an image without
detections.

Golden annotations: the detections of an FP32 reference pass (the same model and host NMS) written as
ground truth, so a correct harness scores 100% mAP against them. Only what COCOeval can match is
written: the first 100 detections per image and category (its maxDets) and boxes with a positive
width and height (pycocotools gives a zero-area box IoU 0, even with itself). Scoring against golden
leaves zero-area detections out for the same reason (YOLO's boxes clipped to the image can be
degenerate; each would be a false positive that no ground truth can take); against the dataset every
detection counts, as in the official accuracy-coco.py.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import TypedDict

import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.data.accuracy import read_log
from harness.records.benchmark_record import CocoAnnotation, CocoImage, Score, Scorer
from harness.records.store import PreparedData

ROW = 7
MAX_DETS = 100  # COCOeval's maxDets for the AP it reports first


def ground_truth_file(data: PreparedData, against: str) -> Path | None:
    entry = data.manifest.get("annotations") if against == "dataset" else data.manifest.get("golden")
    return None if not entry else data.root / entry["file"]


def to_coco(row: np.ndarray, height: int, width: int) -> tuple[int, float, list[float]]:
    """(category, score, [x, y, w, h] pixels) of one row, computed as the reference does (float32)."""
    _, ymin, xmin, ymax, xmax, score, label = row
    ymin, xmin, ymax, xmax = ymin * height, xmin * width, ymax * height, xmax * width
    return int(label), float(score), [float(xmin), float(ymin), float(xmax - xmin), float(ymax - ymin)]


class Detection(TypedDict):
    """One detection in pycocotools' results format (`COCO.loadRes`)."""
    image_id: int
    category_id: int
    bbox: list[float]
    score: float


def detections(log_path: Path, images: list[CocoImage]) -> tuple[list[Detection], set[int], int]:
    """pycocotools results of an accuracy log, the ids of the images it covers, and how many had no rows."""
    dets: list[Detection] = []
    image_ids: set[int] = set()
    seen: set[int] = set()
    empty = 0
    for rec in read_log(log_path):
        idx = int(rec["qsl_idx"])
        if idx in seen:
            continue
        seen.add(idx)
        if idx >= len(images):
            raise DataError(f"{log_path}: sample {idx} is beyond the {len(images)} images of the annotation file")
        image = images[idx]
        image_ids.add(image["id"])
        data = np.frombuffer(bytes.fromhex(rec["data"]), np.float32)
        if len(data) < ROW:
            empty += 1
            continue
        for row in data[:len(data) // ROW * ROW].reshape(-1, ROW):
            if int(row[0]) != idx:
                raise DataError(f"{log_path}: LoadGen sample {idx} carries a detection of sample {int(row[0])}")
            cat, score, box = to_coco(row, image["height"], image["width"])
            dets.append({"image_id": image["id"], "category_id": cat, "bbox": box, "score": score})
    return dets, image_ids, empty


def score(log_path: Path, data: PreparedData, against: str) -> Score | None:
    """mAP (IoU 0.50:0.95, all areas, 100 detections) against the dataset's or the golden annotations."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    path = ground_truth_file(data, against)
    if path is None:
        return None
    gt = COCO()
    gt.dataset = inbound.read_json_object(path, inbound.ANNOTATIONS, what="annotations")
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # pycocotools prints its progress and table
        gt.createIndex()
        dets, image_ids, empty = detections(log_path, gt.dataset["images"])
        degenerate = 0
        if against == "golden":  # what golden.json leaves out as unmatchable is left out of the detections too
            kept = [d for d in dets if d["bbox"][2] > 0 and d["bbox"][3] > 0]
            degenerate, dets = len(dets) - len(kept), kept
        percent = 0.0
        if dets:
            evaluator = COCOeval(gt, gt.loadRes(dets), iouType="bbox")
            evaluator.params.imgIds = sorted(image_ids)
            evaluator.evaluate()
            evaluator.accumulate()
            evaluator.summarize()
            percent = max(0.0, 100.0 * float(evaluator.stats[0]))  # -1: no ground truth to match at all
    details = {"images": len(image_ids), "detections": len(dets), "images_without_detections": empty,
               **({"zero_area_detections_left_out": degenerate} if degenerate else {}),
               "cocoeval": text.getvalue().splitlines()[-12:]}
    return Score("mAP", percent, f"mAP={percent:.3f}%", details)


def golden(payloads: list[np.ndarray], data: PreparedData) -> tuple[str, bytes, str]:
    """golden.json: the dataset's images and categories, the reference pass's detections as ground truth."""
    path = ground_truth_file(data, "dataset")
    assert path is not None
    doc = inbound.read_json_object(path, inbound.ANNOTATIONS, what="annotations")
    anns: list[CocoAnnotation] = []
    dropped = 0
    for image, payload in zip(doc["images"], payloads, strict=True):
        per_class: dict[int, int] = {}
        for row in payload.reshape(-1, ROW):
            cat, _, box = to_coco(row, image["height"], image["width"])
            per_class[cat] = per_class.get(cat, 0) + 1
            if per_class[cat] > MAX_DETS or box[2] <= 0 or box[3] <= 0:
                dropped += 1
                continue
            anns.append({"id": len(anns) + 1, "image_id": image["id"], "category_id": cat, "bbox": box,
                         "area": box[2] * box[3], "iscrowd": 0})
    doc["annotations"] = anns
    doc["info"] = {"description": "golden annotations: detections of an FP32 reference pass of the model"}
    summary = f"{len(anns)} boxes over {len(payloads)} images" + (f" ({dropped} not matchable, left out)"
                                                                  if dropped else "")
    return "golden.json", json.dumps(doc).encode(), summary


SCORER = Scorer(score, golden)
