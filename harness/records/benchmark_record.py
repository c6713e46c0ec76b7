"""The benchmark record's types: what a benchmark is (`Benchmark`), how a detection benchmark's outputs are read
(`DetectionSpec`, `NMSParams`), the reduced forms a card may return (`OutputQuant`) and how a sample's outputs
become LoadGen's log payload (`Encoder`). The catalogue of records is harness.data.benchmarks; every module that
only needs the types imports them from here, below the datasets, models and NMS that fill the records in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast, runtime_checkable

import numpy as np

from harness.core.errors import ApplianceError, DataError
from harness.core.scenarios import Scenario
from harness.records.artefact import Artefact

if TYPE_CHECKING:
    from harness.records.store import PreparedData

__all__ = ["CARD_OUTPUTS", "NMS_PARAM_SETS", "Benchmark", "CocoAnnotation", "CocoDocument", "CocoImage",
           "DatasetFormat", "DetectionSpec", "Encoder", "FixedWidth", "HostNMSEncoder", "KeptFp32", "Listing",
           "NMSParams", "OutputQuant", "Score", "Scorer"]


CARD_OUTPUTS = ("fp32", "quantised")



# (outputs, QSL indices of the batch) -> (float32 payload, offsets [B+1] into it: sample j is payload[o[j]:o[j+1]])
# card outputs and the batch's QSL indices (a list, or the intake's int64 array) -> (payload, offsets)
Encoder = Callable[[list[np.ndarray], Sequence[int] | np.ndarray], tuple[np.ndarray, np.ndarray]]



@runtime_checkable
class HostNMSEncoder(Protocol):
    """A detection record's encoder: host NMS per image with these settings (harness.data.nms.DetectionEncoder,
    a dataclass, so `Benchmark` makes variants of it with `dataclasses.replace`)."""

    spec: DetectionSpec
    params: str
    image_sizes: np.ndarray | None

    def __call__(self, outputs: list[np.ndarray], qsl: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ...


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



NMS_PARAM_SETS = ("reference", "krai")  # MLCommons reference values, KRAI's NMS-ABP values



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

    @cached_property
    def priors(self) -> np.ndarray:
        """The anchors, computed once per spec (read-only; empty when boxes decode without)."""
        if self.make_priors is None:
            return np.empty((0, 4))
        p = np.ascontiguousarray(self.make_priors())
        assert p.shape == (self.num_anchors, 4), p.shape
        p.setflags(write=False)
        return p

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



@dataclass(frozen=True)
class KeptFp32:
    """What `prepare --precision int8` leaves in FP32, and why: a fact of the benchmark's graph, which
    harness.prepare.quantize finds the nodes of (`kept_fp32`)."""

    ops: tuple[str, ...] = ()            # every node of these op types
    tail_concat_axis: int | None = None  # the Concat along this axis joining every level's predictions: it, the
                                         # prediction convs and Reshape / Concat feeding it, and all after it
    why: str = ""                        # the model record's `fp32_nodes`


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
    int8_fp32: KeptFp32 = KeptFp32()  # what int8 quantisation leaves in FP32 (nothing: every node quantised)
    test01_sampling_target: int = 1024  # compliance/TEST01/<model>/audit.config accuracy_log_sampling_target
    min_queries: dict[Scenario, int] = field(default_factory=dict)  # the checker's minimum query count per scenario
    # Offline batch of a GPU card without a tuned record, before the memory cap (harness.run.gpu_defaults)
    gpu_batch: int = 64
    # CUDA graphs (harness.run.cards.gpu_iobinding.graph_rule): (precision, output dtypes, the GPU run) that a GPU
    # captured and replayed, and those whose replay faulted there
    graphs_replayed: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    graphs_faulted: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # the official submission checker's model name for a tree folder of this benchmark, when it differs from
    # `name` (its model_mapping: resnet50 -> resnet); the submission rounds are keyed by it
    checker_name: str = ""
    checker_dataset_size: int | None = None  # the accuracy run's sample count the checker demands (None: none)
    offline_min_samples_per_query: int = 24576  # the checker's Offline minimum samples per query
    # per output, whether the host reads it (the encoder; a GPU card copies only those back); (): every output
    host_reads: tuple[bool, ...] = ()
    # the published model files a result of this benchmark is comparable with (harness.data.models.registry)
    official_models: tuple[Artefact, ...] = ()

    @property
    def official_model(self) -> str:
        """File name of the (first) official artefact; "" when none is published."""
        return self.official_models[0].filename if self.official_models else ""

    @property
    def loadgen_model(self) -> str:
        """The model name LoadGen reads mlperf.conf / user.conf lines under."""
        return self.loadgen_name or self.name

    @property
    def checker_model(self) -> str:
        """The official submission checker's model name of this benchmark."""
        return self.checker_name or self.name

    def outputs_read(self, outputs: int) -> tuple[bool, ...]:
        """Per output of a card returning `outputs` outputs, whether the host reads it (`host_reads`; every
        output when the record says nothing or names another count)."""
        reads = self.host_reads
        return reads if len(reads) == outputs else (True,) * outputs

    def with_nms_params(self, which: str) -> Benchmark:
        """This detection record with host NMS using parameter set `which` (reference | krai)."""
        if which == self.nms_params:
            return self
        if self.detection is None:
            raise ApplianceError(f"{self.name} runs no host NMS; --nms-params applies to detection benchmarks")
        self.detection.params(which)
        return replace(self, nms_params=which, encode_response=self._encoder(params=which))

    def _encoder(self, **changes: Any) -> Encoder:
        enc = self.encode_response
        if not isinstance(enc, HostNMSEncoder):
            raise ApplianceError(f"{self.name} has no host NMS encoder")
        encoder: Encoder = replace(cast(Any, enc), **changes)  # a dataclass (HostNMSEncoder says so)
        return encoder

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



@cache
def _variant(spec: DetectionSpec, kind: str) -> DetectionSpec:
    """`spec` with its one output in the other layout of a transposable pair (shapes reversed); cached, so
    the NMS caches keyed on the spec's identity hold."""
    shapes = {role: tuple(reversed(shape)) for role, shape in spec.shapes.items()}
    quantised = {role: replace(q, axis=len(shapes[role]) - 1 - q.axis) for role, q in spec.quantised.items()}
    return replace(spec, kind=kind, shapes=shapes, quantised=quantised, variants=(spec.kind,))


class CocoImage(TypedDict):
    """An `images` entry of a COCO-format annotation file."""
    id: int
    file_name: str
    height: int
    width: int


class CocoAnnotation(TypedDict):
    """An `annotations` entry of a COCO-format file (ground truth; golden.json's are an FP32 pass's boxes)."""
    id: int
    image_id: int
    category_id: int
    bbox: list[float]       # x, y, w, h in pixels
    area: float
    iscrowd: int


class CocoDocument(TypedDict, total=False):
    """A COCO-format annotation file, as pycocotools reads it (harness.data.datasets.coco checks the lists)."""
    info: dict[str, str]
    licenses: list[object]
    images: list[CocoImage]
    annotations: list[CocoAnnotation]
    categories: list[dict[str, object]]


@dataclass(frozen=True)
class Listing:
    """The samples of a dataset folder, in LoadGen index order."""

    names: list[str]                     # image paths relative to the dataset root
    labels: np.ndarray                   # per sample: class label (ImageNet) or image id (COCO format)
    annotations: CocoDocument | None     # COCO-format ground truth of exactly these images, in this order



@dataclass(frozen=True)
class DatasetFormat:
    name: str                            # folder under the data dir
    index_file: str                      # the file listing the samples, relative to the dataset root
    read: Callable[[Path, int | None], Listing]                              # (root, limit)
    make_synthetic: Callable[[Path, int, int, Callable[[], None] | None], None]  # (root, count, seed, on_image)
    prefix_stable: bool = False  # a synthetic set of N images is the first N of any larger one (same seed)


@dataclass(frozen=True)
class Score:
    key: str            # manifest key and metric name: "top1" or "mAP"
    percent: float
    line: str           # the official first line of accuracy.txt
    details: dict[str, Any] = field(default_factory=dict)



@dataclass(frozen=True)
class Scorer:
    score: Callable[[Path, PreparedData, str], Score | None]  # (log, data, against) -> None: no golden made
    golden: Callable[[list[np.ndarray], PreparedData], tuple[str, bytes, str]]  # payloads -> (file, bytes, summary)
