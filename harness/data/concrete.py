"""The one step that makes a catalogue record concrete for a run, as LoadGen makes one TestSettings: the
card outputs and NMS parameter set asked for, the output layout the prepared model was recorded in, and the
original image sizes of the prepared samples (host NMS maps boxes back through YOLO's letterbox). The
plan (harness.run.plan) calls it once; `tune`, prepare's reference passes and the tools call it too, so
no one else rewrites a record."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.data import benchmarks
from harness.records.benchmark_record import Benchmark
from harness.records.model_record import ModelRecord
from harness.records.store import PreparedData

__all__ = ["for_prepared", "for_run", "image_sizes"]


def for_run(name: str, card_outputs: str = "fp32", nms_params: str = "reference",
            model: ModelRecord | None = None, data: PreparedData | None = None) -> Benchmark:
    """The record `name` as a run uses it: `card_outputs` (fp32 | quantised), host NMS with `nms_params`,
    reading `model`'s recorded output layout (prepare's --output-layout), with `data`'s original image sizes.
    Each part is checked here, in one line when it does not apply."""
    bench = benchmarks.get(name).with_card_outputs(card_outputs).with_nms_params(nms_params)
    kind = None if model is None else model.output_layout
    if kind is not None:
        bench = bench.with_output_layout(kind)
    return bench if data is None else for_prepared(bench, data)


def image_sizes(annotations: dict[str, Any]) -> np.ndarray:
    """[N, 2] int (height, width) of the prepared samples, in QSL order, from their annotations document."""
    return np.asarray([(im["height"], im["width"]) for im in annotations["images"]], dtype=np.int32).reshape(-1, 2)



def for_prepared(bench: Benchmark, data: PreparedData) -> Benchmark:
    """`bench` with the original image sizes of `data`'s samples, when its host NMS undoes a letterbox (YOLO):
    read from the prepared annotations, whose images are the samples in QSL order."""
    spec = bench.detection
    entry = data.manifest.get("annotations")
    if spec is None or not spec.letterbox:
        return bench
    if not entry:
        raise DataError(f"{data.root} has no annotations to take the original image sizes from; rerun "
                        f"`appliance prepare --benchmark {bench.name}`")
    try:
        doc = inbound.read_json_object(data.root / entry["file"], inbound.ANNOTATIONS, what="annotations")
    except inbound.Refused as exc:
        raise DataError(f"{exc}; rerun `appliance prepare --benchmark {bench.name}`") from None
    return bench.with_image_sizes(image_sizes(doc))
