"""One declarative record per benchmark: everything the rest of the code needs to know about it.

Nothing elsewhere branches on a benchmark's name; it reads the record instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.errors import ApplianceError

if TYPE_CHECKING:
    from harness.accuracy import Scorer
    from harness.datasets import DatasetFormat

SCENARIOS = ("Offline", "Server", "SingleStream", "MultiStream")
CARD_OUTPUTS = ("fp32", "quantised")
# (outputs, QSL indices of the batch) -> (float32 payload, offsets [B+1] into it: sample j is payload[o[j]:o[j+1]])
Encoder = Callable[[list[np.ndarray], Sequence[int]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class FixedWidth:
    """An encoder whose every sample logs `width` float32s (classification). Card threads call `into`
    to write a batch straight into a preallocated payload and complete it from addresses computed
    once: the generic path's per-batch allocation, offsets and address arithmetic cost more than the
    responses themselves (tools/bench_harness.py --backend null)."""

    width: int
    into: Callable[[list[np.ndarray], np.ndarray], None]  # (outputs, out float32 [n * width]) -> None

    def __call__(self, outputs: list[np.ndarray], qsl: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        payload = np.empty(len(qsl) * self.width, np.float32)
        self.into(outputs, payload)
        return payload, np.arange(0, payload.size + 1, self.width)


@dataclass(frozen=True)
class OutputCast:
    """The reduced precision a card returns one output in: float16, or uint8 = round(x / scale) + zero_point."""

    dtype: str
    scale: float = 1.0
    zero_point: int = 0


@dataclass(frozen=True)
class Benchmark:
    name: str                         # LoadGen / mlperf.conf model name
    title: str
    dataset: DatasetFormat            # dataset family: official layout, reader, synthetic generator
    input_name: str
    input_shape: tuple[int, int, int]  # C, H, W of one preprocessed sample
    input_mean: tuple[float, ...]      # subtracted per channel when a batch is staged
    outputs: tuple[str, ...]
    performance_sample_count: int     # SPEC table 1 / mlperf.conf
    server_latency_ms: int | None     # None: edge-only benchmark
    quality_metric: str               # "top-1" or "mAP"
    quality_reference: float          # FP32 reference accuracy, percent
    quality_fraction: float           # closed division: fraction of the reference to reach
    params_reference: float           # published parameter count
    gops_reference: float             # published operations per sample (GOPS = 2 x GMACs)
    official_model: str               # file name of the official artefact
    default_batch: int
    output_specs: tuple[tuple[tuple[int, ...], str], ...]  # per-sample shape and dtype of each output
    build_model: Callable[[int], object]
    preprocess: Callable[[Path], np.ndarray]
    preprocessing: str                # what `preprocess` does, for the manifest
    encode_response: Encoder          # card outputs -> LoadGen's log payload of each sample
    accuracy: Scorer                  # scores accuracy logs; makes the golden reference at prepare time
    # (scenario or "*", key, value): settings of the benchmark's round that LoadGen's built-in mlperf.conf lacks
    loadgen_conf: tuple[tuple[str, str, int], ...] = ()
    # reduced-precision outputs a real card returns, selectable per run (`--card-outputs`), one cast per output
    output_variants: dict[str, tuple[OutputCast | None, ...]] = field(default_factory=dict)
    output_casts: tuple[OutputCast | None, ...] = ()  # the variant this record runs with (() = as the model gives)
    card_outputs: str = "fp32"
    host_postprocess: bool = False    # encoding is heavy (NMS): done on a per-card thread pipelined with the card

    def with_card_outputs(self, kind: str) -> Benchmark:
        """This record with the card returning its outputs as `kind` (fp32: as the model computes them)."""
        if kind == "fp32":
            return self
        casts = self.output_variants.get(kind)
        if casts is None:
            have = ", ".join(["fp32", *self.output_variants])
            raise ApplianceError(f"{self.name} has no {kind} card outputs; choose one of: {have}")
        specs = tuple((shape, cast.dtype if cast else dtype) for (shape, dtype), cast
                      in zip(self.output_specs, casts, strict=True))
        return replace(self, output_specs=specs, output_casts=casts, card_outputs=kind)

    @property
    def quality_target(self) -> float:
        return self.quality_reference * self.quality_fraction

    def prepare_hint(self, data_dir: Path) -> str:
        return f"appliance prepare --benchmark {self.name} --data-dir {data_dir}"


def _resnet50() -> Benchmark:
    from harness.accuracy import imagenet as top1
    from harness.datasets import imagenet
    from harness.models import resnet50

    return Benchmark(
        name="resnet50", title="ResNet50-v1.5 image classification", dataset=imagenet.FORMAT,
        input_name=resnet50.INPUT, input_shape=(3, 224, 224), input_mean=imagenet.MEAN_RGB,
        outputs=(resnet50.OUTPUT_ARGMAX, resnet50.OUTPUT_SOFTMAX),
        performance_sample_count=1024, server_latency_ms=15,
        quality_metric="top-1", quality_reference=76.46, quality_fraction=0.99,
        params_reference=25.6e6, gops_reference=7.8, official_model="resnet50_v1.onnx",
        default_batch=8, output_specs=(((), "int64"), ((resnet50.NUM_CLASSES,), "float32")),
        build_model=resnet50.build, preprocess=imagenet.preprocess, encode_response=FixedWidth(1, _argmax_into),
        preprocessing="MLCommons reference: BGR->RGB, INTER_AREA resize of the short side to 256, centre crop 224",
        accuracy=top1.SCORER,
    )


def _argmax_into(outputs: list[np.ndarray], out: np.ndarray) -> None:
    """ResNet50 log payload as the reference writes it: one float32 class id, background removed."""
    np.subtract(outputs[0].ravel(), 1.0, out=out, casting="unsafe")


def _detections_response(benchmark: str, outputs: list[np.ndarray], qsl: Sequence[int]) -> tuple[np.ndarray,
                                                                                              np.ndarray]:
    """Host NMS per image (harness.nms): rows of 7 float32 [qsl_idx, ymin, xmin, ymax, xmax, score, class]."""
    from harness import nms

    rows = [nms.postprocess(benchmark, *(o[j] for o in outputs), qsl_idx=int(i)) for j, i in enumerate(qsl)]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([r.size for r in rows], out=offsets[1:])
    return (np.concatenate(rows).ravel() if rows else np.empty(0, np.float32)), offsets


def _detection(name: str, title: str, dataset: DatasetFormat, model: tuple[Callable[[int], object], str,
               tuple[str, ...]], preprocess: Callable[[Path], np.ndarray], mean: tuple[float, ...],
               **fields: object) -> Benchmark:
    """A detection record: the model cut before NMS, host NMS in the encoder, COCO mAP."""
    from harness import nms
    from harness.accuracy import coco

    lay = nms.layout(name)
    specs = tuple((lay.shapes[role], "int64" if role == "indices" else "float32") for role in lay.outputs)
    variants = {}
    if lay.quantised_score_dtype:
        quant = {"scores": lay.score_quant if lay.quantised_score_dtype == "uint8" else None, "boxes": lay.box_quant}
        variants["quantised"] = tuple(
            None if role == "indices" else OutputCast("float16") if quant[role] is None
            else OutputCast("uint8", quant[role].scale, quant[role].zero_point) for role in lay.outputs)
    build, input_name, outputs = model
    size = lay.image_size
    return Benchmark(name=name, title=title, dataset=dataset, input_name=input_name, input_shape=(3, size, size),
                     input_mean=mean, outputs=outputs, quality_metric="mAP", quality_fraction=0.99,
                     output_specs=specs, build_model=build, preprocess=preprocess,
                     encode_response=partial(_detections_response, name), accuracy=coco.SCORER,
                     host_postprocess=True,
                     output_variants=variants, **fields)  # type: ignore[arg-type]


IMAGENET_MEAN_RGB = (123.675, 116.28, 103.53)  # torchvision's (0.485, 0.456, 0.406) x 255
# MLPerf v2.x values the built-in mlperf.conf of LoadGen 6.x no longer carries for the retired SSD models
OFFLINE_MIN_SAMPLES = ("Offline", "min_query_count", 24576)


def _ssd_mobilenet() -> Benchmark:
    from harness.datasets import coco
    from harness.models import detection as d

    return _detection(
        "ssd-mobilenet", "SSD-MobileNet-v1 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_mobilenet, d.SSD_MOBILENET_INPUT, (d.SSD_MOBILENET_BOXES, d.SSD_MOBILENET_SCORES)),
        coco.preprocess_ssd_mobilenet, (127.5, 127.5, 127.5),  # the model's own (x - 127.5) / 127.5
        performance_sample_count=256, server_latency_ms=None, quality_reference=22.0,
        params_reference=6.91e6, gops_reference=2.47, official_model="ssd_mobilenet_v1_coco_2018_01_28.onnx",
        default_batch=4, loadgen_conf=(OFFLINE_MIN_SAMPLES,),
        preprocessing="MLCommons reference pre_process_coco_mobilenet: float32, BGR->RGB, INTER_LINEAR resize to "
                      "300x300, cast to uint8 (truncating)")


def _ssd_resnet34() -> Benchmark:
    from harness.datasets import coco
    from harness.models import detection as d

    return _detection(
        "ssd-resnet34", "SSD-ResNet34 1200x1200 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_resnet34, d.SSD_RESNET34_INPUT, (d.SSD_RESNET34_BOXES, d.SSD_RESNET34_SCORES)),
        coco.preprocess_ssd_resnet34, IMAGENET_MEAN_RGB,
        performance_sample_count=64, server_latency_ms=100, quality_reference=20.0,
        params_reference=36.3e6, gops_reference=433.0, official_model="resnet34-ssd1200.onnx", default_batch=1,
        loadgen_conf=(("*", "performance_sample_count_override", 64), ("Server", "target_latency", 100),
                      OFFLINE_MIN_SAMPLES),
        preprocessing="MLCommons reference pre_process_coco_resnet34 up to its normalisation: float32, BGR->RGB, "
                      "INTER_LINEAR resize to 1200x1200, rounded to uint8")


def _retinanet() -> Benchmark:
    from harness.datasets import coco
    from harness.models import detection as d

    return _detection(
        "retinanet", "RetinaNet ResNeXt50-32x4d FPN 800x800 object detection (OpenImages, host NMS)",
        coco.OPENIMAGES.format(),
        (d.build_retinanet, d.RETINANET_INPUT, (d.RETINANET_BOXES, d.RETINANET_SCORES, d.RETINANET_INDICES)),
        coco.preprocess_retinanet, IMAGENET_MEAN_RGB,
        # no published parameter count: torchvision's RetinaNet with this backbone and 264 classes counts 37.1M
        performance_sample_count=64, server_latency_ms=100, quality_reference=37.55,
        # nor GOPS: 402 is this graph's own count (2 x MACs of Conv/Gemm), the figure prepare compares against
        params_reference=37.1e6, gops_reference=402.0, official_model="resnext50_32x4d_fpn.onnx", default_batch=1,
        preprocessing="MLCommons reference pre_process_openimages_retinanet up to its /255: float32, BGR->RGB, "
                      "INTER_LINEAR resize to 800x800, rounded to uint8")


_FACTORIES: dict[str, Callable[[], Benchmark]] = {"resnet50": _resnet50, "ssd-mobilenet": _ssd_mobilenet,
                                                  "ssd-resnet34": _ssd_resnet34, "retinanet": _retinanet}
NAMES = tuple(_FACTORIES)


def get(name: str) -> Benchmark:
    """The record for `name`, or a one-line error listing the choices."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ApplianceError(f"unknown benchmark {name!r}; choose one of: {', '.join(NAMES)}") from None
