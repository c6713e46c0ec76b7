"""TensorRT engines for `--backend onnxruntime-tensorrt`: built once, kept in the data dir, never mid-run.

onnxruntime's TensorRT provider builds an engine per model, precision and shape profile; without a cache it
rebuilds it in every process (minutes for ResNet50 at int8) and, without explicit profiles, again for each
new batch size, mid-run in Server. Here every engine has one explicit profile (batch 1 up to the run's
batch, optimised for the run's batch) and lives in `<data dir>/models/engines/<key>/`, where the key is the
sha256 of what determines the engine: the model bytes the session is given (after the harness's in-graph
input and output conversions), the GPU's model (NVML's name), the TensorRT version, the precision
flags and the profile. A different GPU, TensorRT or batch is another folder, so a stale engine is never
loaded. The card builds a missing engine while it loads, before LoadGen starts (`tune` loads the cards of
each candidate, so a tuned run finds its engine; `prepare` builds none yet), and the key and whether the
engine was found or built go to the manifest.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.core.errors import ApplianceError
from harness.core.outbound import atomic_write_json, make_dirs

ENGINES = "engines"


@dataclass(frozen=True)
class EngineKey:
    model_sha256: str       # of the bytes the session loads
    gpu: str                # the GPU's model as NVML names it, e.g. "NVIDIA H100 80GB HBM3"
    tensorrt: str           # e.g. "10.13.3"
    precision: str          # fp32 | fp16 | int8
    input_name: str
    sample_shape: tuple[int, ...]
    min_batch: int
    opt_batch: int
    max_batch: int

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def folder(self, models_dir: Path) -> Path:
        return models_dir / ENGINES / self.digest()[:24]

    def shapes(self, batch: int) -> str:
        return f"{self.input_name}:" + "x".join(str(d) for d in (batch, *self.sample_shape))


def tensorrt_version() -> str | None:
    """The TensorRT this process would load (its Python package, else libnvinfer itself), or None."""
    try:
        import tensorrt  # type: ignore[import-not-found]

        return str(tensorrt.__version__)
    except ImportError:
        pass
    for lib in ("libnvinfer.so.10", "libnvinfer.so"):
        try:
            version = int(ctypes.CDLL(lib).getInferLibVersion())
        except (OSError, AttributeError):
            continue
        major, rest = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return None


def require_tensorrt() -> str:
    version = tensorrt_version()
    if version is None:
        raise ApplianceError("--backend onnxruntime-tensorrt needs TensorRT (libnvinfer.so.10, e.g. the tensorrt-cu13 "
                             "wheels, over a gigabyte), which is not installed; use --backend onnxruntime-cuda")
    return version


def provider_options(key: EngineKey, models_dir: Path) -> dict[str, str]:
    """The TensorRT provider's options for an engine of `key`, cached under `models_dir` (made here)."""
    folder = key.folder(models_dir)
    make_dirs(folder)
    return {"trt_fp16_enable": "1" if key.precision in ("fp16", "int8") else "0",
            "trt_int8_enable": "1" if key.precision == "int8" else "0",  # the int8 model is QDQ: scales in-graph
            "trt_engine_cache_enable": "1", "trt_engine_cache_path": str(folder),
            "trt_timing_cache_enable": "1", "trt_timing_cache_path": str(folder),
            "trt_profile_min_shapes": key.shapes(key.min_batch), "trt_profile_opt_shapes": key.shapes(key.opt_batch),
            "trt_profile_max_shapes": key.shapes(key.max_batch), "trt_cuda_graph_enable": "1"}


def cached(key: EngineKey, models_dir: Path) -> bool:
    """Whether an engine for `key` is already in the cache (onnxruntime writes *.engine files there)."""
    folder = key.folder(models_dir)
    return folder.is_dir() and any(folder.glob("*.engine"))


def write_key(key: EngineKey, models_dir: Path) -> None:
    """The key beside the engine, so a folder says what it holds."""
    folder = key.folder(models_dir)
    atomic_write_json(folder / "key.json", asdict(key))
