"""`appliance prepare --precision fp16`: the FP32 model in half precision, for GPU cards.

The fp16 model reads the stored uint8 samples as the int8 model does (Cast + Sub(mean) in front,
`uint8_front.uint8_input`), and is converted by onnxruntime's own `convert_float_to_float16` (inputs and
outputs kept in their types, its default list of ops that stay FP32). It may be chosen by the same rule
as int8 (`model_record.eligibility`: top-1 agreement with FP32, or mAP against the FP32 golden detections), and
that agreement is measured at prepare, on the CPU, so no GPU is needed to decide it.

onnxruntime's CPU provider does run the fp16 model, but not in fp16: having almost no fp16 kernels on
x86 it inserts Casts to FP32 around every node (270 on ResNet50) and removes the back-to-back ones, so
the activations stay FP32 and only the weights are rounded. A GPU stores every activation in fp16.
The agreement is therefore computed on an emulation (`emulation`): the fp16 model's own weights, widened
exactly to FP32, with every floating output of every node the converter put in fp16 rounded to fp16
(a Cast pair, which onnxruntime keeps), and FP32 arithmetic inside each op, as GPU tensor cores
accumulate fp16 products in FP32.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.core import inbound, progress
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file, tmp_prefix
from harness.core.outbound import move_into_place, save_onnx, scratch_dir
from harness.data.models.uint8_front import uint8_input
from harness.prepare.quantize import agreement
from harness.prepare.steps import Made, reduced_model, reference_pass
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import stored_path
from harness.records.model_record import ModelRecord

if TYPE_CHECKING:
    import onnx

Echo = Callable[[str], None]
TOOL = "onnxruntime.transformers.float16.convert_float_to_float16"


def convert(fp32_u8: onnx.ModelProto) -> onnx.ModelProto:
    """The uint8-input FP32 model in fp16 (graph inputs and outputs keep their types)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model: onnx.ModelProto = convert_float_to_float16(fp32_u8, keep_io_types=True)
    return model


def emulation(fp32_u8: onnx.ModelProto, fp16: onnx.ModelProto) -> onnx.ModelProto:
    """An FP32 graph computing what the fp16 model computes on a GPU: the fp16 weights widened exactly, and
    each floating node output rounded to fp16, except for the ops the converter left in FP32."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST

    half = {i.name: numpy_helper.to_array(i) for i in fp16.graph.initializer if i.data_type == TensorProto.FLOAT16}
    m = onnx.shape_inference.infer_shapes(fp32_u8)
    floats = {v.name for v in [*m.graph.value_info, *m.graph.output, *m.graph.input]
              if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    for init in m.graph.initializer:
        if init.name in half:
            init.CopyFrom(numpy_helper.from_array(half[init.name].astype(np.float32), init.name))
    nodes = []
    for node in m.graph.node:
        nodes.append(node)
        if node.op_type in DEFAULT_OP_BLOCK_LIST:
            continue
        for i, out in enumerate(list(node.output)):
            if out not in floats:
                continue
            node.output[i] = f"{out}/fp32"
            nodes += [helper.make_node("Cast", [f"{out}/fp32"], [f"{out}/fp16"], to=TensorProto.FLOAT16),
                      helper.make_node("Cast", [f"{out}/fp16"], [out], to=TensorProto.FLOAT)]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    del m.graph.value_info[:]
    return m


def prepare_fp16(models_dir: Path, record_path: Path, bench: Benchmark, fp32: ModelRecord,
                 data: store.PreparedData, echo: Echo) -> ModelRecord:
    """Convert the FP32 model of `fp32` (its record) and report its agreement with FP32; skip if up to date."""

    if data.golden_model != fp32.sha256:
        raise DataError(f"no FP32 golden reference for {fp32.path}; run `{bench.prepare_hint(models_dir.parent)}`")
    key = {"fp32_sha256": fp32.sha256, "converter_sha256": sha256_file(Path(__file__)),
           "dataset_manifest_sha256": sha256_file(data.root / store.MANIFEST)}

    def make() -> Made:
        path = models_dir / f"{bench.name}-fp16-{fp32.sha256[:12]}.onnx"
        with scratch_dir(tmp_prefix("fp16"), models_dir) as tmp:
            with progress.spinner(f"converting {bench.title} to fp16 ({TOOL})"):
                u8 = uint8_input(inbound.load_onnx(fp32.path), bench)
                half = convert(u8)
                save_onnx(half, tmp / "fp16.onnx")
                emulated = tmp / "emulation.onnx"
                save_onnx(emulation(u8, half), emulated)
            metric, agree = agreement(reference_pass(emulated, bench, data, bench.default_batch,
                                                     f"fp16 {bench.quality_metric} over the prepared dataset"),
                                      bench, data)
            move_into_place(tmp / "fp16.onnx", path)
        return Made(path, metric, agree,
                    quantization={"tool": TOOL,
                                  "format": "fp16 weights and activations; graph inputs and outputs keep their "
                                            "types; the converter's default FP32 ops stay FP32",
                                  "input": "uint8 samples; Cast + Sub(mean) or Mul(1/255) in the graph",
                                  "fp32_model": stored_path(models_dir.parent, Path(fp32.path)), "key": key,
                                  "agreement_computed_on": "onnxruntime CPU, an FP32 emulation: the fp16 weights, "
                                                           "every fp16 activation rounded to fp16, FP32 inside each "
                                                           "op (harness.prepare.fp16)"},
                    after_agreement=" (computed on the CPU: fp16 weights and activations emulated)")

    return reduced_model("fp16", models_dir, record_path, fp32, data, key, make, echo)
