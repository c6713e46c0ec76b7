"""One declarative record per benchmark: everything the rest of the code needs to know about it.

Nothing elsewhere branches on a benchmark's name; it reads the record instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ApplianceError

SCENARIOS = ("Offline", "Server", "SingleStream", "MultiStream")


@dataclass(frozen=True)
class Benchmark:
    name: str                         # LoadGen / mlperf.conf model name
    title: str
    dataset: str                      # dataset family; folder name under the data dir
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
    encode_response: Callable[[list[np.ndarray]], np.ndarray]  # outputs -> [B, k] float32 log payload
    host_postprocess: bool = False    # encoding is heavy (NMS): done on a per-card thread pipelined with the card

    @property
    def quality_target(self) -> float:
        return self.quality_reference * self.quality_fraction

    def prepare_hint(self, data_dir: Path) -> str:
        return f"appliance prepare --benchmark {self.name} --data-dir {data_dir}"


def _resnet50() -> Benchmark:
    from harness.datasets import imagenet
    from harness.models import resnet50

    return Benchmark(
        name="resnet50", title="ResNet50-v1.5 image classification", dataset="imagenet",
        input_name=resnet50.INPUT, input_shape=(3, 224, 224), input_mean=imagenet.MEAN_RGB,
        outputs=(resnet50.OUTPUT_ARGMAX, resnet50.OUTPUT_SOFTMAX),
        performance_sample_count=1024, server_latency_ms=15,
        quality_metric="top-1", quality_reference=76.46, quality_fraction=0.99,
        params_reference=25.6e6, gops_reference=7.8, official_model="resnet50_v1.onnx",
        default_batch=8, output_specs=(((), "int64"), ((resnet50.NUM_CLASSES,), "float32")),
        build_model=resnet50.build, preprocess=imagenet.preprocess, encode_response=_argmax_response,
    )


def _argmax_response(outputs: list[np.ndarray]) -> np.ndarray:
    """ResNet50 log payload as the reference writes it: float32 class id, background removed."""
    return (outputs[0].astype(np.float32) - 1.0).reshape(-1, 1)


_FACTORIES: dict[str, Callable[[], Benchmark]] = {"resnet50": _resnet50}
NAMES = tuple(_FACTORIES)


def get(name: str) -> Benchmark:
    """The record for `name`, or a one-line error listing the choices."""
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise ApplianceError(f"unknown benchmark {name!r}; choose one of: {', '.join(NAMES)}") from None
