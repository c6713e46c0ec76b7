"""One declarative record per benchmark: everything the rest of the code needs to know about it.

Nothing elsewhere branches on a benchmark's name; it reads the record instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.errors import ApplianceError, DataError
from harness.core.scenarios import SCENARIOS as SCENARIOS  # the CLI's scenario choices, re-exported
from harness.core.scenarios import Scenario

if TYPE_CHECKING:
    from harness.data.accuracy import Scorer
    from harness.data.datasets import DatasetFormat

CARD_OUTPUTS = ("fp32", "quantised")
# (outputs, QSL indices of the batch) -> (float32 payload, offsets [B+1] into it: sample j is payload[o[j]:o[j+1]])
# card outputs and the batch's QSL indices (a list, or the intake's int64 array) -> (payload, offsets)
Encoder = Callable[[list[np.ndarray], Sequence[int] | np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class FixedWidth:
    """An encoder whose every sample logs `width` float32s (classification). Card threads call `into`
    to write a batch straight into a preallocated payload and complete it from addresses computed
    once: the generic path's per-batch allocation, offsets and address arithmetic cost more than the
    responses themselves (tools/bench_harness.py --backend null)."""

    width: int
    into: Callable[[list[np.ndarray], np.ndarray], None]  # (outputs, out float32 [n * width]) -> None

    def __call__(self, outputs: list[np.ndarray], qsl: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        payload = np.empty(len(qsl) * self.width, np.float32)
        self.into(outputs, payload)
        return payload, np.arange(0, payload.size + 1, self.width)


@dataclass(frozen=True)
class OutputQuant:
    """The reduced form a card returns one output in: float16, or uint8 with value = scale * (q - zero_point).
    `scale` may hold one value per attribute (along `axis` of one sample's output) for outputs that mix
    boxes and scores (YOLO's); `cards` then need per-axis QuantizeLinear."""

    dtype: str                          # "float16" | "uint8"
    scale: float | tuple[float, ...] = 1.0
    zero_point: int = 0
    axis: int = 0

    @property
    def uniform_scale(self) -> float:
        """The one scale of a per-tensor quantisation (what the SSD kernels take)."""
        if not isinstance(self.scale, float | int):
            raise DataError("this output has one scale per attribute; the kernel needs a single one")
        return float(self.scale)

    def _scale(self, ndim: int) -> float | np.ndarray:
        if isinstance(self.scale, float | int):
            return float(self.scale)
        shape = [1] * ndim
        shape[self.axis] = len(self.scale)
        scales: np.ndarray = np.asarray(self.scale, dtype=np.float64).reshape(shape)
        return scales

    def quantise(self, x: np.ndarray) -> np.ndarray:
        if self.dtype == "float16":
            half: np.ndarray = np.asarray(x).astype(np.float16)
            return half
        codes: np.ndarray = np.clip(np.rint(x / self._scale(x.ndim)) + self.zero_point, 0, 255).astype(np.uint8)
        return codes


@dataclass(frozen=True)
class NMSParams:
    score_threshold: float
    iou_threshold: float
    pre_nms_per_class: int  # candidates per class kept (best first) before NMS; 0 = all
    max_per_class: int      # detections per class after NMS (0: no cap)
    max_per_image: int


NMS_PARAM_SETS = ("reference", "krai")  # MLCommons reference values, KRAI's NMS-ABP values (SPEC §4)


@dataclass(frozen=True, eq=False)
class DetectionSpec:
    """Everything host NMS (harness.data.nms) needs about a detection benchmark's outputs, in the spirit of
    KILT's per-model parameter classes: nothing in harness.data.nms is keyed by a benchmark's name.
    Identity-hashed: the NMS caches (priors, plans) are per spec."""

    kind: str                           # box-major | class-major | topk | attribute-major | anchor-major
    num_anchors: int
    num_classes: int                    # model classes (SSD: background 0 included)
    outputs: tuple[str, ...]            # roles of the model outputs, in the record's order
    shapes: dict[str, tuple[int, ...]]  # per-image shape of each role
    image_size: int                     # model input side, pixels
    variances: tuple[float, ...]        # box coder: SSD scale factors / RetinaNet weights
    make_priors: Callable[[], np.ndarray] | None  # the anchors (None: boxes decode without)
    class_map: tuple[int, ...]          # model class index -> dataset category id in the logged rows
    nms: dict[str, NMSParams]           # per NMS_PARAM_SETS name
    quantised: dict[str, OutputQuant]   # role -> the form the paper's cards return it in ({}: no such variant)
    topk_per_level: int = 0
    level_anchors: tuple[int, ...] = ()
    benchmark: str = ""                 # the record's name, for messages
    variants: tuple[str, ...] = ()      # other layouts the output can be given in (`Benchmark.with_output_layout`)
    letterbox: bool = False             # boxes go back through a letterbox to the original image (YOLO)

    def _uint8(self, role: str) -> OutputQuant | None:
        q = self.quantised.get(role)
        return q if q is not None and q.dtype == "uint8" else None

    @property
    def score_quant(self) -> OutputQuant | None:
        return self._uint8("scores")

    @property
    def box_quant(self) -> OutputQuant | None:
        return self._uint8("boxes")

    @property
    def priors(self) -> np.ndarray:
        """The anchors, computed once per spec (read-only)."""
        from harness.data import nms

        return nms.priors(self)

    @property
    def class_ids(self) -> np.ndarray:
        ids = np.asarray(self.class_map, dtype=np.float64)
        ids.setflags(write=False)
        return ids

    def params(self, which: str | NMSParams = "reference") -> NMSParams:
        if isinstance(which, NMSParams):
            return which
        if which not in self.nms:
            raise DataError(f"unknown NMS parameter set {which!r}; choose one of: {', '.join(self.nms)}")
        return self.nms[which]


@dataclass(frozen=True, eq=False)
class DetectionEncoder:
    """Host NMS per image (harness.data.nms) as the record's encoder: rows of 7 float32 [qsl_idx, ymin, xmin,
    ymax, xmax, score, class] per sample. `image_sizes` [N, 2] (height, width) per QSL index: the original
    images, for specs whose boxes go back through a letterbox (None: the model's input size)."""

    spec: DetectionSpec
    params: str = "reference"
    image_sizes: np.ndarray | None = None

    def __call__(self, outputs: list[np.ndarray], qsl: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from harness.data import nms

        post = nms.bound(self.spec, self.params)
        sizes = self.image_sizes
        rows = [post.of([o[j] for o in outputs], int(i), None if sizes is None else (int(sizes[i, 0]),
                                                                                      int(sizes[i, 1])))
                for j, i in enumerate(qsl)]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([r.size for r in rows], out=offsets[1:])
        return (np.concatenate(rows).ravel() if rows else np.empty(0, np.float32)), offsets


@dataclass(frozen=True)
class Benchmark:
    name: str                         # the benchmark's name: CLI, run folders, submission tree (e.g. yolo-99)
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
    output_variants: dict[str, tuple[OutputQuant | None, ...]] = field(default_factory=dict)
    output_casts: tuple[OutputQuant | None, ...] = ()  # the variant this record runs with (() = as the model gives)
    card_outputs: str = "fp32"
    host_postprocess: bool = False    # encoding is heavy (NMS): done on a per-card thread pipelined with the card
    detection: DetectionSpec | None = None  # detection benchmarks: what host NMS needs (layout, decoding, params)
    nms_params: str = "reference"     # the detection spec's NMS parameter set this record runs with
    # a --model file -> the graph the cards run (YOLO: uint8 input, /255 in the graph); None: run it as it is
    adopt_model: Callable[[Any], Any] | None = None
    loadgen_name: str = ""            # LoadGen / mlperf.conf model name, when it differs from `name`
    # the round's rules for this benchmark (submission check and build, compliance runs)
    compliance_tests: tuple[str, ...] = ("TEST01", "TEST04")
    test01_sampling_target: int = 1024  # compliance/TEST01/<model>/audit.config accuracy_log_sampling_target
    edge_scenarios: tuple[Scenario, ...] = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.OFFLINE)
    datacenter_scenarios: tuple[Scenario, ...] = (Scenario.SERVER, Scenario.OFFLINE)
    min_queries: dict[Scenario, int] = field(default_factory=dict)  # the checker's minimum query count per scenario

    @property
    def loadgen_model(self) -> str:
        """The model name LoadGen reads mlperf.conf / user.conf lines under."""
        return self.loadgen_name or self.name

    def with_nms_params(self, which: str) -> Benchmark:
        """This detection record with host NMS using parameter set `which` (reference | krai)."""
        if which == self.nms_params:
            return self
        if self.detection is None:
            raise ApplianceError(f"{self.name} runs no host NMS; --nms-params applies to detection benchmarks")
        self.detection.params(which)
        return replace(self, nms_params=which, encode_response=self._encoder(params=which))

    def _encoder(self, **changes: Any) -> DetectionEncoder:
        enc = self.encode_response
        if not isinstance(enc, DetectionEncoder):
            raise ApplianceError(f"{self.name} has no host NMS encoder")
        return replace(enc, **changes)

    def with_image_sizes(self, sizes: np.ndarray) -> Benchmark:
        """This detection record with the original (height, width) of each QSL sample, [N, 2]: host NMS maps
        boxes back through the letterbox (YOLO). Records without a letterbox are returned as they are."""
        if self.detection is None or not self.detection.letterbox:
            return self
        return replace(self, encode_response=self._encoder(
            image_sizes=np.asarray(sizes, dtype=np.int64).reshape(-1, 2)))

    def with_output_layout(self, kind: str) -> Benchmark:
        """This detection record with the model's output given in layout `kind` (e.g. YOLO's anchor-major
        [8400, 84] instead of attribute-major [84, 8400]): host NMS loops in that layout's order."""
        spec = self.detection
        if spec is not None and kind == spec.kind:
            return self
        if spec is None:
            raise ApplianceError(f"{self.name} has no selectable output layout (no host NMS reads it); "
                                 f"drop --output-layout")
        if kind not in spec.variants:
            have = ", ".join([spec.kind, *spec.variants])
            raise ApplianceError(f"{self.name} has no {kind} output layout; choose one of: {have}")
        alt = _variant(spec, kind)
        specs = tuple((alt.shapes[role], dtype) for role, (_, dtype) in zip(alt.outputs, self.output_specs,
                                                                               strict=True))
        return replace(self, detection=alt, output_specs=specs,
                       encode_response=self._encoder(spec=alt))

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
    from harness.data.accuracy import imagenet as top1
    from harness.data.datasets import imagenet
    from harness.data.models import resnet50

    return Benchmark(
        name="resnet50", title="ResNet50-v1.5 image classification", dataset=imagenet.FORMAT,
        input_name=resnet50.INPUT, input_shape=(3, 224, 224), input_mean=imagenet.MEAN_RGB,
        outputs=(resnet50.OUTPUT_ARGMAX, resnet50.OUTPUT_SOFTMAX),
        performance_sample_count=1024, server_latency_ms=15,
        quality_metric="top-1", quality_reference=76.46, quality_fraction=0.99,
        test01_sampling_target=4096,  # compliance/TEST01/resnet50/audit.config
        params_reference=25.6e6, gops_reference=7.8, official_model="resnet50_v1.onnx",
        default_batch=8, output_specs=(((), "int64"), ((resnet50.NUM_CLASSES,), "float32")),
        build_model=resnet50.build, preprocess=imagenet.preprocess, encode_response=FixedWidth(1, _argmax_into),
        preprocessing="MLCommons reference: BGR->RGB, INTER_AREA resize of the short side to 256, centre crop 224",
        accuracy=top1.SCORER,
    )


def _argmax_into(outputs: list[np.ndarray], out: np.ndarray) -> None:
    """ResNet50 log payload as the reference writes it: one float32 class id, background removed."""
    np.subtract(outputs[0].ravel(), 1.0, out=out, casting="unsafe")


@cache
def _variant(spec: DetectionSpec, kind: str) -> DetectionSpec:
    """`spec` with its one output in the other layout of a transposable pair (shapes reversed); cached, so
    the NMS caches keyed on the spec's identity hold."""
    shapes = {role: tuple(reversed(shape)) for role, shape in spec.shapes.items()}
    quantised = {role: replace(q, axis=len(shapes[role]) - 1 - q.axis) for role, q in spec.quantised.items()}
    return replace(spec, kind=kind, shapes=shapes, quantised=quantised, variants=(spec.kind,))


def _detection(name: str, title: str, dataset: DatasetFormat, model: tuple[Callable[[int], object], str,
               tuple[str, ...]], preprocess: Callable[[Path], np.ndarray], mean: tuple[float, ...],
               spec: DetectionSpec, **fields: object) -> Benchmark:
    """A detection record: the model cut before NMS, host NMS in the encoder, COCO mAP."""
    from harness.data.accuracy import coco

    spec = spec if spec.benchmark else replace(spec, benchmark=name)
    specs = tuple((spec.shapes[role], "int64" if role == "indices" else "float32") for role in spec.outputs)
    variants = {}
    if spec.quantised:
        variants["quantised"] = tuple(spec.quantised.get(role) for role in spec.outputs)
    build, input_name, outputs = model
    size = spec.image_size
    fields.setdefault("quality_fraction", 0.99)
    return Benchmark(name=name, title=title, dataset=dataset, input_name=input_name, input_shape=(3, size, size),
                     input_mean=mean, outputs=outputs, quality_metric="mAP",
                     output_specs=specs, build_model=build, preprocess=preprocess,
                     encode_response=DetectionEncoder(spec), accuracy=coco.SCORER,
                     host_postprocess=True, detection=spec,
                     output_variants=variants, **fields)  # type: ignore[arg-type]


# COCO 2017's 80 category ids: `coco.getCatIds()` of instances_val2017.json (the reference's COCO_80_TO_91).
COCO_80_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28,
               31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54,
               55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81,
               82, 84, 85, 86, 87, 88, 89, 90)
IMAGENET_MEAN_RGB = (123.675, 116.28, 103.53)  # torchvision's (0.485, 0.456, 0.406) x 255
# MLPerf v2.x values the built-in mlperf.conf of LoadGen 6.x no longer carries for the retired SSD models
OFFLINE_MIN_SAMPLES = (Scenario.OFFLINE, "min_query_count", 24576)


def _ssd_mobilenet() -> Benchmark:
    from harness.data import nms
    from harness.data.datasets import coco
    from harness.data.models import detection as d

    return _detection(
        "ssd-mobilenet", "SSD-MobileNet-v1 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_mobilenet, d.SSD_MOBILENET_INPUT, (d.SSD_MOBILENET_BOXES, d.SSD_MOBILENET_SCORES)),
        coco.preprocess_ssd_mobilenet, (127.5, 127.5, 127.5),  # the model's own (x - 127.5) / 127.5
        DetectionSpec(
            "box-major", 1917, 91, ("boxes", "scores"), {"boxes": (1917, 4), "scores": (1917, 91)}, 300,
            (10.0, 10.0, 5.0, 5.0), nms.ssd_mobilenet_priors, tuple(range(91)),  # 91 TF classes: COCO ids already
            {"reference": NMSParams(0.3, 0.6, 0, 100, 100), "krai": NMSParams(0.3, 0.45, 0, 100, 100)},
            # box scale calibrated to the seeded model's encodings (|t| < 2): 0.125 cost 2 points of mAP
            {"scores": OutputQuant("uint8", 1 / 255, 0), "boxes": OutputQuant("uint8", 1 / 64, 128)}),
        performance_sample_count=256, server_latency_ms=None, quality_reference=22.0,
        params_reference=6.91e6, gops_reference=2.47, official_model="ssd_mobilenet_v1_coco_2018_01_28.onnx",
        default_batch=4, loadgen_conf=(OFFLINE_MIN_SAMPLES,),
        preprocessing="MLCommons reference pre_process_coco_mobilenet: float32, BGR->RGB, INTER_LINEAR resize to "
                      "300x300, cast to uint8 (truncating)")


def _ssd_resnet34() -> Benchmark:
    from harness.data import nms
    from harness.data.datasets import coco
    from harness.data.models import detection as d

    return _detection(
        "ssd-resnet34", "SSD-ResNet34 1200x1200 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_resnet34, d.SSD_RESNET34_INPUT, (d.SSD_RESNET34_BOXES, d.SSD_RESNET34_SCORES)),
        coco.preprocess_ssd_resnet34, IMAGENET_MEAN_RGB,
        DetectionSpec(
            "class-major", 15130, 81, ("boxes", "scores"), {"boxes": (4, 15130), "scores": (81, 15130)}, 1200,
            (0.1, 0.2), nms.ssd_resnet34_priors, (0, *COCO_80_IDS),  # 81 classes: [0] + coco.getCatIds()
            {"reference": NMSParams(0.05, 0.5, 200, 200, 200), "krai": NMSParams(0.05, 0.5, 0, 100, 600)},
            {"scores": OutputQuant("float16"), "boxes": OutputQuant("uint8", 0.0625, 128)}),
        performance_sample_count=64, server_latency_ms=100, quality_reference=20.0,
        params_reference=36.3e6, gops_reference=433.0, official_model="resnet34-ssd1200.onnx", default_batch=1,
        loadgen_conf=(("*", "performance_sample_count_override", 64), (Scenario.SERVER, "target_latency", 100),
                      OFFLINE_MIN_SAMPLES),
        preprocessing="MLCommons reference pre_process_coco_resnet34 up to its normalisation: float32, BGR->RGB, "
                      "INTER_LINEAR resize to 1200x1200, rounded to uint8")


def _retinanet() -> Benchmark:
    from harness.data import nms
    from harness.data.datasets import coco
    from harness.data.models import detection as d

    return _detection(
        "retinanet", "RetinaNet ResNeXt50-32x4d FPN 800x800 object detection (OpenImages, host NMS)",
        coco.OPENIMAGES.format(),
        (d.build_retinanet, d.RETINANET_INPUT, (d.RETINANET_BOXES, d.RETINANET_SCORES, d.RETINANET_INDICES)),
        coco.preprocess_retinanet, IMAGENET_MEAN_RGB,
        DetectionSpec(
            "topk", 120087, 264, ("boxes", "scores", "indices"),
            {"boxes": (5000, 4), "scores": (5000,), "indices": (5000,)}, 800, (1.0, 1.0, 1.0, 1.0),
            nms.retinanet_priors, tuple(range(264)),  # OpenImages MLPerf: ids 0..263 (export_to_coco enumerates)
            {"reference": NMSParams(0.05, 0.5, 0, 300, 300), "krai": NMSParams(0.05, 0.5, 0, 200, 1000)}, {},
            topk_per_level=1000, level_anchors=tuple(9 * g * g for g in (100, 50, 25, 13, 7))),
        # no published parameter count: torchvision's RetinaNet with this backbone and 264 classes counts 37.1M
        performance_sample_count=64, server_latency_ms=100, quality_reference=37.55,
        # nor GOPS: 402 is this graph's own count (2 x MACs of Conv/Gemm), the figure prepare compares against
        params_reference=37.1e6, gops_reference=402.0, official_model="resnext50_32x4d_fpn.onnx", default_batch=1,
        preprocessing="MLCommons reference pre_process_openimages_retinanet up to its /255: float32, BGR->RGB, "
                      "INTER_LINEAR resize to 800x800, rounded to uint8")


# YOLO11l as Ultralytics exports it to ONNX: one output [84, 8400] per image, (cx, cy, w, h) in input pixels
# then 80 sigmoid class scores; anchor-major [8400, 84] selectable (`with_output_layout`). NMS as the reference
# predicts (mlcommons/inference vision/classification_and_detection/yolo/yolo_loadgen.py: `model.predict(img,
# conf=0.001)`, the rest Ultralytics' defaults in ultralytics/utils/nms.py: IoU 0.7, max_det 300, class-aware,
# best class per anchor); rows [qsl_idx, ymin, xmin, ymax, xmax, score, COCO_80_TO_91[cls]] normalised to the
# original image (yolo_loadgen.py), so boxes go back through the letterbox (`image_sizes` of the dataset).
# No KRAI parameter set is published for YOLO: the reference set only.
YOLO_DETECTION = DetectionSpec(
    "attribute-major", 8400, 80, ("output",), {"output": (84, 8400)}, 640, (), None, COCO_80_IDS,
    {"reference": NMSParams(0.001, 0.7, 0, 300, 300)},
    {"output": OutputQuant("float16")}, benchmark="yolo", variants=("anchor-major",),
    letterbox=True)


def _yolo(fraction: float) -> Callable[[], Benchmark]:
    """yolo-95 / yolo-99: one model, two accuracy targets. Every figure is MLCommons' (mlcommons/inference
    master): benchmark names, targets 53.4 x 0.95 / x 0.99 mAP (tools/submission/submission_checker/
    constants.py, "accuracy-target"), performance sample count 64 (constants.py and loadgen/mlperf.conf
    `yolo.*.performance_sample_count_override = 64`, whose model name `yolo` LoadGen reads), 1,525 images of
    COCO 2017 "safe" (constants.py dataset size; yolo/README.md: coco_safe/val2017_safe/), minimum queries
    SingleStream 1,024 / MultiStream 270,336 / Offline 1 (constants.py "min-queries"), compliance TEST01
    only (constants.py models_TEST01; not in models_TEST04) with accuracy_log_sampling_target = 64
    (compliance/TEST01/yolo/audit.config), edge scenarios SingleStream, MultiStream, Offline
    (constants.py required-scenarios-edge; none for datacenter)."""
    def make() -> Benchmark:
        from harness.data.datasets import coco
        from harness.data.models import yolo

        return _detection(
            f"yolo-{round(fraction * 100)}", "YOLO11l object detection (COCO 2017 safe, host NMS)",
            coco.COCO_SAFE.format(), (yolo.build_uint8, yolo.INPUT, (yolo.OUTPUT,)), coco.preprocess_yolo,
            (0.0, 0.0, 0.0),  # /255 is folded into the graph (harness/data/models/yolo.py)
            YOLO_DETECTION, quality_fraction=fraction, loadgen_name="yolo", adopt_model=yolo.uint8_input,
            performance_sample_count=64, server_latency_ms=None, quality_reference=53.4,
            # Ultralytics' published yolo11l: 25.3M parameters, 86.9 GFLOPs at 640
            params_reference=25.3e6, gops_reference=86.9, official_model="yolo11l.onnx", default_batch=1,
            compliance_tests=("TEST01",), test01_sampling_target=64,
            min_queries={Scenario.SINGLE_STREAM: 1024, Scenario.MULTI_STREAM: 270336, Scenario.OFFLINE: 1},
            datacenter_scenarios=(),
            preprocessing="Ultralytics LetterBox to 640x640 (scale by the longer side, pad 114 centred), "
                          "BGR->RGB, uint8 CHW; /255 in the graph")
    return make


_FACTORIES: dict[str, Callable[[], Benchmark]] = {"resnet50": _resnet50, "ssd-mobilenet": _ssd_mobilenet,
                                                  "ssd-resnet34": _ssd_resnet34, "retinanet": _retinanet,
                                                  "yolo-95": _yolo(0.95), "yolo-99": _yolo(0.99)}
NAMES = tuple(_FACTORIES)


def required_scenarios(names: Sequence[str]) -> dict[str, dict[str, tuple[Scenario, ...]]]:
    """system_type -> benchmark -> the scenarios a closed submission of that system type needs."""
    out: dict[str, dict[str, tuple[Scenario, ...]]] = {t: {} for t in ("edge", "datacenter", "datacenter,edge",
                                                                   "edge,datacenter")}
    for name in names:
        b = get(name)
        both = tuple(dict.fromkeys((*b.edge_scenarios, *b.datacenter_scenarios)))
        for system_type, scenarios in (("edge", b.edge_scenarios), ("datacenter", b.datacenter_scenarios),
                                       ("datacenter,edge", both), ("edge,datacenter", both)):
            if scenarios:
                out[system_type][name] = scenarios
    return out


@cache
def get(name: str) -> Benchmark:
    """The record for `name` (made once: records are immutable), or a one-line error listing the choices."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ApplianceError(f"unknown benchmark {name!r}; choose one of: {', '.join(NAMES)}") from None
    return factory()
