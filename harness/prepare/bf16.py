"""`appliance prepare --precision bf16`: the FP32 weights computed in bfloat16 by OpenVINO's CPU plugin.

bf16 is an inference precision, not a new set of weights: OpenVINO converts the FP32 weights and
activations to bf16 when it compiles the model (INFERENCE_PRECISION_HINT bf16), on CPUs with
AVX512_BF16 (AMD Zen 4, Intel Cooper Lake) or AMX-BF16 (Intel Sapphire Rapids and later). On such
CPUs it is OpenVINO's own default for an FP32 model, so a user's `benchmark_app` runs FP32 models in
bf16; the appliance does it only when asked, and only after prepare has measured that the bf16
results agree with FP32 well enough (the same rule as int8: `model_record.AGREEMENT`, `model_record.eligibility`).

The model file is the FP32 model with its input retyped to uint8 (Cast + Sub(mean) in the graph, as
the int8 model has), so staging a batch is a byte copy. onnxruntime has no bf16 path on x86 CPUs
(its CPU provider computes FP32; its bf16 GEMM fast-math option is arm64 only): bf16 runs on
`--backend openvino` cards and is refused for the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from harness.core import inbound
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file
from harness.hw import system
from harness.hw.bf16_support import CPU_FLAGS, HINT, PRECISION, check_compiled, require
from harness.prepare.quantize import agreement
from harness.prepare.steps import Made, dataset_pass, reduced_model, u8_file
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import stored_path
from harness.records.model_record import ModelRecord

Echo = Callable[[str], None]


def openvino_pass(model_path: Path, bench: Benchmark, data: store.PreparedData, batch: int,
                  label: str) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The model compiled by OpenVINO for the CPU at bf16, over the prepared dataset (`dataset_pass`);
    the compiled model's own precision is checked to be bf16, so a silent FP32 fallback is refused."""
    import openvino as ov

    core = ov.Core()
    with inbound.held(model_path, inbound.ARRAY, what="model") as name:  # the file checked, not its name
        model = core.read_model(name)
    model.reshape({bench.input_name: [batch, *bench.input_shape]})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": HINT, "PERFORMANCE_HINT": "LATENCY"})
    check_compiled(compiled)
    request = compiled.create_infer_request()
    outputs = [compiled.output(name) for name in bench.outputs]
    raw = compiled.input(bench.input_name).get_element_type() == ov.Type.u8
    padded = np.zeros((batch, *bench.input_shape), np.uint8 if raw else np.float32)

    def infer(x: np.ndarray) -> list[np.ndarray]:
        n = len(x)
        padded[:n] = x
        request.infer([padded])
        return [request.get_tensor(o).data[:n].copy() for o in outputs]

    return dataset_pass(infer, raw, bench, data, batch, label)


def prepare_bf16(models_dir: Path, record_path: Path, bench: Benchmark, fp32: ModelRecord,
                 data: store.PreparedData, echo: Echo) -> ModelRecord:
    """The bf16 model record of `fp32` (its record), with the top-1 agreement (or golden mAP) of a bf16
    pass with the FP32 golden reference, measured on this CPU; skipped if up to date."""
    import openvino as ov

    require("--precision bf16")
    if data.golden_model != fp32.sha256:
        raise DataError(f"no FP32 golden reference for {fp32.path}; run `{bench.prepare_hint(models_dir.parent)}`")
    key = {"fp32_sha256": fp32.sha256, "dataset_manifest_sha256": sha256_file(data.root / store.MANIFEST),
           "converter_sha256": sha256_file(Path(__file__)), "openvino": ov.get_version(),
           "cpu": system.cpu_model()}

    def make() -> Made:
        path = u8_file(models_dir, bench, fp32)
        metric, agree = agreement(openvino_pass(path, bench, data, bench.default_batch,
                                                f"bf16 {bench.quality_metric} over the prepared dataset"), bench, data)
        flags = ", ".join(sorted(set(CPU_FLAGS) & system.cpu_flags()))
        return Made(path, metric, agree, inference_precision=HINT,
                    quantization={"tool": f"OpenVINO {ov.get_version()} CPU plugin, INFERENCE_PRECISION_HINT {HINT}",
                                  "weights": "FP32 in the file, converted to bf16 by OpenVINO when it compiles",
                                  "input": "uint8 samples; Cast + Sub(mean) or Mul(1/255) in the graph",
                                  "fp32_model": stored_path(models_dir.parent, Path(fp32.path)),
                                  "measured_on": f"{system.cpu_model()} ({flags})", "key": key},
                    after_path=f" (FP32 weights, computed in bf16 by OpenVINO on {system.cpu_model()})")

    return reduced_model(PRECISION, models_dir, record_path, fp32, data, key, make, echo)
