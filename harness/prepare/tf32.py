"""`appliance prepare --precision tf32`: the FP32 weights computed in TensorFloat-32 by onnxruntime's CUDA provider.

TF32 is a math mode, not a set of weights (as bf16 is for OpenVINO): with the CUDA provider's `use_tf32=1` (its own
default, which the appliance turns off for every other precision: provider_options.numerics) cuBLAS and cuDNN round
the FP32 operands of MatMul / Gemm and of the convolutions to TF32 (FP32's 8-bit exponent, 10 of its 23 mantissa
bits) on Ampere and later GPUs and accumulate in FP32. MLPerf judges numerics by the accuracy rule alone, so tf32 is
chosen as a precision is: prepare measures its agreement with FP32 (`model_record.eligibility`), tune may choose it
where that meets the rule and it is faster, and an accuracy run at tf32 on the GPU gives the verdict that counts
(runner: the manifest's `precision_eligibility` from the run's own golden score).

The agreement is computed on the CPU, on an emulation (`emulation`): the same graph with each TF32 op's two floating
operands rounded to TF32 (weights once, activations by three FP32 nodes each: Veltkamp's split by 2**13 + 1 keeps
the nearest value with 11 significant bits), FP32 arithmetic inside each op. A GPU may truncate instead of rounding
and orders its sums differently: the accuracy run on the GPU decides.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.core import inbound, progress
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file, tmp_prefix
from harness.core.outbound import save_onnx, scratch_dir
from harness.prepare.quantize import agreement
from harness.prepare.steps import Made, reduced_model, reference_pass, u8_file
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import TF32, stored_path
from harness.records.model_record import ModelRecord

if TYPE_CHECKING:
    import onnx

Echo = Callable[[str], None]
OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")  # what cuDNN / cuBLAS compute in TF32 under use_tf32=1
SPLIT = np.float32(2**13 + 1)  # Veltkamp: x*S - (x*S - x) is x rounded to 24 - 13 = 11 significant bits


def rounded(x: np.ndarray) -> np.ndarray:
    """FP32 values rounded to TF32 (kept as FP32), by the same three operations the emulation's nodes do."""
    x = np.asarray(x, dtype=np.float32)
    c = x * SPLIT
    out: np.ndarray = c - (c - x)
    return out


def emulation(model: onnx.ModelProto) -> onnx.ModelProto:
    """An FP32 graph computing what the CUDA provider computes under use_tf32=1: the first two inputs of every op
    in OPS rounded to TF32 (an initializer as a rounded copy, an activation by Mul, Sub, Sub before the op)."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    weights = {i.name: i for i in m.graph.initializer}
    m.graph.initializer.append(numpy_helper.from_array(np.array(SPLIT, np.float32), "tf32/split"))
    made: set[str] = set()
    nodes = []
    for node in m.graph.node:
        if node.op_type in OPS:
            for k, name in enumerate(list(node.input[:2])):
                out = f"{name}/tf32"
                if out not in made and name in weights:
                    m.graph.initializer.append(numpy_helper.from_array(
                        rounded(numpy_helper.to_array(weights[name])), out))
                elif out not in made:
                    nodes += [helper.make_node("Mul", [name, "tf32/split"], [f"{name}/tf32c"]),
                              helper.make_node("Sub", [f"{name}/tf32c", name], [f"{name}/tf32d"]),
                              helper.make_node("Sub", [f"{name}/tf32c", f"{name}/tf32d"], [out])]
                made.add(out)
                node.input[k] = out
        nodes.append(node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def prepare_tf32(models_dir: Path, record_path: Path, bench: Benchmark, fp32: ModelRecord,
                 data: store.PreparedData, echo: Echo) -> ModelRecord:
    """The tf32 model record of `fp32` (its record): the FP32 model reading uint8 samples, with the agreement of the
    TF32 emulation with the FP32 golden reference; skipped if up to date."""
    if data.golden_model != fp32.sha256:
        raise DataError(f"no FP32 golden reference for {fp32.path}; run `{bench.prepare_hint(models_dir.parent)}`")
    key = {"fp32_sha256": fp32.sha256, "converter_sha256": sha256_file(Path(__file__)),
           "dataset_manifest_sha256": sha256_file(data.root / store.MANIFEST)}

    def make() -> Made:
        path = u8_file(models_dir, bench, fp32)
        with scratch_dir(tmp_prefix("tf32"), models_dir) as tmp:
            with progress.spinner(f"emulating TF32 for {bench.title}"):
                emulated = tmp / "emulation.onnx"
                save_onnx(emulation(inbound.load_onnx(path)), emulated)
            metric, agree = agreement(reference_pass(emulated, bench, data, bench.default_batch,
                                                     f"tf32 {bench.quality_metric} over the prepared dataset"),
                                      bench, data)
        return Made(path, metric, agree, inference_precision=TF32,
                    quantization={"tool": "onnxruntime CUDA provider, use_tf32=1",
                                  "weights": "FP32 in the file; cuBLAS / cuDNN round the operands of "
                                             f"{', '.join(OPS)} to TF32 (10-bit mantissa), FP32 accumulation",
                                  "input": "uint8 samples; Cast + Sub(mean) or Mul(1/255) in the graph",
                                  "fp32_model": stored_path(models_dir.parent, Path(fp32.path)), "key": key,
                                  "agreement_computed_on": "onnxruntime CPU, an FP32 emulation: the operands of "
                                                           f"{', '.join(OPS)} rounded to TF32 (harness.prepare.tf32)"},
                    after_path=" (FP32 weights, computed in TF32 by the CUDA provider)",
                    after_agreement=" (computed on the CPU: TF32 operands emulated; the GPU's accuracy run decides)")

    return reduced_model(TF32, models_dir, record_path, fp32, data, key, make, echo)
