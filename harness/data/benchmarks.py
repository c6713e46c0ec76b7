"""The catalogue: one declarative record per benchmark (the types are harness.records.benchmark_record), made from
the dataset readers, model builders, scorers and host NMS below it. Nothing elsewhere branches on a benchmark's
name; it reads the record instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from harness.core.errors import ApplianceError
from harness.core.scenarios import Scenario
from harness.data import nms
from harness.data.accuracy import coco as coco_map
from harness.data.accuracy import imagenet as top1
from harness.data.datasets import coco, imagenet
from harness.data.models import detection as d
from harness.data.models import resnet50, yolo
from harness.data.nms import DetectionEncoder
from harness.records.artefact import Artefact
from harness.records.benchmark_record import (
    Benchmark,
    DatasetFormat,
    DetectionSpec,
    FixedWidth,
    KeptFp32,
    NMSParams,
    OutputQuant,
)

__all__ = ["COCO_80_IDS", "IMAGENET_MEAN_RGB", "NAMES", "OFFLINE_MIN_SAMPLES", "RESNET50", "RESNET50_MODELS",
           "RETINANET", "RETINANET_MODEL", "SSD_MOBILENET", "SSD_MOBILENET_MODEL", "SSD_RESNET34", "SSD_RESNET34_MODEL",
           "YOLO11L_MODEL", "YOLO_95", "YOLO_99", "YOLO_DETECTION", "get", "of_folder"]

# The catalogue's names: everything outside harness/data names a benchmark through these (or reads NAMES).
RESNET50, SSD_MOBILENET, SSD_RESNET34, RETINANET, YOLO_95, YOLO_99 = (
    "resnet50", "ssd-mobilenet", "ssd-resnet34", "retinanet", "yolo-95", "yolo-99")


# The official MLCommons model files, from the MLCommons inference README (unverified beyond it: the registry
# checks what it downloads and reports any file it cannot match).
RESNET50_MODELS = (
    Artefact(
        name="resnet50_v1 (opset 11)",
        filename="resnet50_v1.onnx",
        url="https://zenodo.org/record/4735647/files/resnet50_v1.onnx",
        md5="f6a4da60cd5f084d97efc2c1ddb10beb",
        size=None,
        note="zenodo record 4735647; the reference ONNX model (opset 11)",
    ),
    Artefact(
        name="resnet50_v1 (opset 8)",
        filename="resnet50_v1.onnx",
        url="https://zenodo.org/record/2592612/files/resnet50_v1.onnx",
        md5="a638cf028b5870da29e09ccc2f7182e7",
        size=None,
        note="zenodo record 2592612; the older opset-8 export of the same model",
    ),
)


def _resnet50() -> Benchmark:

    return Benchmark(
        name=RESNET50, title="ResNet50-v1.5 image classification", dataset=imagenet.FORMAT,
        input_name=resnet50.INPUT, input_shape=(3, 224, 224), input_mean=imagenet.MEAN_RGB,
        outputs=(resnet50.OUTPUT_ARGMAX, resnet50.OUTPUT_SOFTMAX),
        performance_sample_count=1024, server_latency_ms=15,
        quality_metric="top-1", quality_reference=76.46, quality_fraction=0.99,
        test01_sampling_target=4096,  # compliance/TEST01/resnet50/audit.config
        params_reference=25.6e6, gops_reference=7.8, official_models=RESNET50_MODELS,
        default_batch=8, gpu_batch=512, output_specs=(((), "int64"), ((resnet50.NUM_CLASSES,), "float32")),
        graphs_replayed=(("fp32", ("int64", "float32"), "H100, 2026-11-27: gpu_check fp32 Offline, Server, "
                                                        "SingleStream, accuracy VALID under graphs"),
                         ("fp16", ("int64", "float32"), "H100, 2026-11-27: gpu_check and gpu_bench fp16 runs VALID "
                                                        "under graphs")),
        build_model=resnet50.build, preprocess=imagenet.preprocess, encode_response=FixedWidth(1, _argmax_into),
        preprocessing="MLCommons reference: BGR->RGB, INTER_AREA resize of the short side to 256, centre crop 224",
        accuracy=top1.SCORER,
        # the official checker: model "resnet", 50,000 ImageNet images (constants.py "dataset-size")
        checker_name="resnet", checker_dataset_size=50000,
        # the encoder reads the ArgMax alone (_argmax_into): the 1001 softmax floats never leave a GPU
        host_reads=(True, False),
        # the classifier head (0.05% of the MACs): uint8 logits would have to span all 1001 classes and would round
        # near-ties together, which costs top-1 agreement for nothing
        int8_fp32=KeptFp32(("Gemm", "MatMul", "ArgMax", "Softmax"), why="the classifier head (Gemm, MatMul, ArgMax, "
                                                                       "Softmax)"),
    )


def _argmax_into(outputs: list[np.ndarray], out: np.ndarray) -> None:
    """ResNet50 log payload as the reference writes it: one float32 class id, background removed."""
    np.subtract(outputs[0].ravel(), 1.0, out=out, casting="unsafe")


def _detection(name: str, title: str, dataset: DatasetFormat, model: tuple[Callable[[int], object], str,
               tuple[str, ...]], preprocess: Callable[[Path], np.ndarray], mean: tuple[float, ...],
               spec: DetectionSpec, **fields: object) -> Benchmark:
    """A detection record: the model cut before NMS, host NMS in the encoder, COCO mAP."""

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
                     encode_response=DetectionEncoder(spec), accuracy=coco_map.SCORER,
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


SSD_MOBILENET_MODEL = Artefact(
    name="ssd_mobilenet_v1_coco_2018_01_28",
    filename="ssd_mobilenet_v1_coco_2018_01_28.onnx",
    url="https://zenodo.org/record/4735652/files/ssd_mobilenet_v1_coco_2018_01_28.onnx",
    md5=None,
    size=None,
    note="zenodo record 4735652 (also 3163026); no md5 published, so it cannot be verified",
)
SSD_RESNET34_MODEL = Artefact(
    name="resnet34-ssd1200",
    filename="resnet34-ssd1200.onnx",
    url="https://zenodo.org/record/3228411/files/resnet34-ssd1200.onnx",
    md5=None,
    size=None,
    note="zenodo record 3228411; no md5 published, so it cannot be verified",
)
RETINANET_MODEL = Artefact(
    name="retinanet resnext50_32x4d_fpn",
    filename="resnext50_32x4d_fpn.onnx",
    url="https://zenodo.org/record/6617879/files/resnext50_32x4d_fpn.onnx",
    md5="4544f4e56e0a4684215831cc937ea45c",
    size=None,
    note="zenodo record 6617879; 800x800 input",
)
YOLO11L_MODEL = Artefact(  # one model file, two accuracy targets (yolo-95, yolo-99)
    name="yolo11l (Ultralytics ONNX export, 640)",
    filename="yolo11l.onnx",
    url="https://inference.mlcommons-storage.org/index.html",
    md5=None,
    size=None,
    note="MLCommons storage (mlcommons/inference vision/classification_and_detection/yolo/README.md); "
         "no direct URL or md5 published yet: export yolo11l.pt with `yolo export format=onnx imgsz=640` "
         "and pass --model",
)


def _ssd_mobilenet() -> Benchmark:

    return _detection(
        SSD_MOBILENET, "SSD-MobileNet-v1 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_mobilenet, d.SSD_MOBILENET_INPUT, (d.SSD_MOBILENET_BOXES, d.SSD_MOBILENET_SCORES)),
        coco.preprocess_ssd_mobilenet, (127.5, 127.5, 127.5),  # the model's own (x - 127.5) / 127.5
        DetectionSpec(
            "box-major", 1917, 91, ("boxes", "scores"), {"boxes": (1917, 4), "scores": (1917, 91)}, 300,
            (10.0, 10.0, 5.0, 5.0), nms.ssd_mobilenet_priors, tuple(range(91)),  # 91 TF classes: COCO ids already
            {"reference": NMSParams(0.3, 0.6, 0, 100, 100), "krai": NMSParams(0.3, 0.45, 0, 100, 100)},
            # box scale calibrated to the seeded model's encodings (|t| < 2): 0.125 cost 2 points of mAP
            {"scores": OutputQuant("uint8", 1 / 255, 0), "boxes": OutputQuant("uint8", 1 / 64, 128)}),
        performance_sample_count=256, server_latency_ms=None, quality_reference=22.0,
        params_reference=6.91e6, gops_reference=2.47, official_models=(SSD_MOBILENET_MODEL,),
        default_batch=4, loadgen_conf=(OFFLINE_MIN_SAMPLES,),
        preprocessing="MLCommons reference pre_process_coco_mobilenet: float32, BGR->RGB, INTER_LINEAR resize to "
                      "300x300, cast to uint8 (truncating)")


def _ssd_resnet34() -> Benchmark:

    return _detection(
        SSD_RESNET34, "SSD-ResNet34 1200x1200 object detection (COCO, host NMS)", coco.COCO.format(),
        (d.build_ssd_resnet34, d.SSD_RESNET34_INPUT, (d.SSD_RESNET34_BOXES, d.SSD_RESNET34_SCORES)),
        coco.preprocess_ssd_resnet34, IMAGENET_MEAN_RGB,
        DetectionSpec(
            "class-major", 15130, 81, ("boxes", "scores"), {"boxes": (4, 15130), "scores": (81, 15130)}, 1200,
            (0.1, 0.2), nms.ssd_resnet34_priors, (0, *COCO_80_IDS),  # 81 classes: [0] + coco.getCatIds()
            {"reference": NMSParams(0.05, 0.5, 200, 200, 200), "krai": NMSParams(0.05, 0.5, 0, 100, 600)},
            {"scores": OutputQuant("float16"), "boxes": OutputQuant("uint8", 0.0625, 128)}),
        performance_sample_count=64, server_latency_ms=100, quality_reference=20.0,
        params_reference=36.3e6, gops_reference=433.0, official_models=(SSD_RESNET34_MODEL,), default_batch=1,
        loadgen_conf=(("*", "performance_sample_count_override", 64), (Scenario.SERVER, "target_latency", 100),
                      OFFLINE_MIN_SAMPLES),
        checker_name=RETINANET,  # the checker's model_mapping (v4.1 to v6.1) counts ssd-resnet34 folders as retinanet
        # its prediction head, as YOLO's: one uint8 scale over box and class logits would round both coarsely
        int8_fp32=KeptFp32(("Softmax",), tail_concat_axis=2,
                           why="the prediction convs of every level, their Reshape / Concat over the levels and "
                               "the class Softmax"),
        preprocessing="MLCommons reference pre_process_coco_resnet34 up to its normalisation: float32, BGR->RGB, "
                      "INTER_LINEAR resize to 1200x1200, rounded to uint8")


def _retinanet() -> Benchmark:

    return _detection(
        RETINANET, "RetinaNet ResNeXt50-32x4d FPN 800x800 object detection (OpenImages, host NMS)",
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
        params_reference=37.1e6, gops_reference=402.0, official_models=(RETINANET_MODEL,), default_batch=1,
        checker_dataset_size=24781,  # OpenImages MLPerf validation (constants.py "dataset-size", v5.1 on)
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
        return _detection(
            f"yolo-{round(fraction * 100)}", "YOLO11l object detection (COCO 2017 safe, host NMS)",
            coco.COCO_SAFE.format(), (yolo.build_uint8, yolo.INPUT, (yolo.OUTPUT,)), coco.preprocess_yolo,
            (0.0, 0.0, 0.0),  # /255 is folded into the graph (harness/data/models/yolo.py)
            YOLO_DETECTION, quality_fraction=fraction, loadgen_name="yolo", adopt_model=yolo.uint8_input,
            performance_sample_count=64, server_latency_ms=None, quality_reference=53.4,
            # Ultralytics' published yolo11l: 25.3M parameters, 86.9 GFLOPs at 640
            params_reference=25.3e6, gops_reference=86.9, official_models=(YOLO11L_MODEL,), default_batch=1,
            gpu_batch=32, checker_dataset_size=1525, offline_min_samples_per_query=1525,
            graphs_replayed=(("fp16", ("float16",), "H100, 2026-11-27: gpu_bench yolo-99 Offline, accuracy, "
                                                    "SingleStream (fp16 outputs, 2 cards, batch 16) under graphs"),),
            graphs_faulted=(("fp32", ("float32",), "its replay faulted on the H100, 2026-11-27 (CUDA error 700, "
                                                   "cuda_graph.cc, 2 cards, batch 16, accuracy mode)"),),
            compliance_tests=("TEST01",), test01_sampling_target=64,
            # the attention's MatMul / Softmax (C2PSA), and the decode tail: uint8 would round boxes to 2.5 px and
            # every score below 0.004 to 0, under the reference's 0.001 threshold
            int8_fp32=KeptFp32(("MatMul", "Softmax"), tail_concat_axis=2,
                               why="the attention's MatMul and Softmax, the prediction convs and the box decoding "
                                   "after the anchors' Concat"),
            min_queries={Scenario.SINGLE_STREAM: 1024, Scenario.MULTI_STREAM: 270336, Scenario.OFFLINE: 1},
            preprocessing="Ultralytics LetterBox to 640x640 (scale by the longer side, pad 114 centred), "
                          "BGR->RGB, uint8 CHW; /255 in the graph")
    return make


_FACTORIES: dict[str, Callable[[], Benchmark]] = {RESNET50: _resnet50, SSD_MOBILENET: _ssd_mobilenet,
                                                  SSD_RESNET34: _ssd_resnet34, RETINANET: _retinanet,
                                                  YOLO_95: _yolo(0.95), YOLO_99: _yolo(0.99)}
NAMES = tuple(_FACTORIES)


@cache
def get(name: str) -> Benchmark:
    """The record for `name` (made once: records are immutable), or a one-line error listing the choices."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ApplianceError(f"unknown benchmark {name!r}; choose one of: {', '.join(NAMES)}") from None
    return factory()


def of_folder(folder: str) -> str:
    """The catalogue name of a submission tree's benchmark folder: a name of the catalogue as it is, else the
    benchmark the official checker's model name stands for (`checker_name`: resnet -> resnet50); else the
    folder itself (not a benchmark of the catalogue)."""
    if folder in _FACTORIES:
        return folder
    return next((name for name in NAMES if get(name).checker_name == folder), folder)
