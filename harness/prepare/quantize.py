"""`appliance prepare --precision int8`: onnxruntime static quantisation fed the prepared uint8 samples.

The int8 model reads the offline-preprocessed uint8 samples as they are stored: its graph starts
with Cast + Sub(mean) in front of the first QuantizeLinear, so staging a batch is a plain byte copy
and no float copy of an input is ever made in Python. Weights are int8 per output channel, activations
uint8 (the U8S8 form that VNNI / AMX kernels want), QDQ format so every backend (onnxruntime,
OpenVINO) can fuse it its own way. Calibration reads an MLPerf-style list of image names
(`cal_image_list_option_1.txt`: one file name of the dataset per line).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core import inbound, progress
from harness.core.errors import DataError
from harness.core.fsutil import sha256_file, tmp_prefix
from harness.core.outbound import atomic_write_text, move_into_place, save_onnx, scratch_dir
from harness.data.models.uint8_front import uint8_input
from harness.prepare.steps import Made, reduced_model, reference_pass
from harness.records import store
from harness.records.benchmark_record import Benchmark, KeptFp32
from harness.records.layout import stored_path
from harness.records.model_record import ModelRecord

if TYPE_CHECKING:
    pass

Echo = Callable[[str], None]
CAL_COUNT = 128        # synthetic calibration list length (MLPerf's ImageNet lists have 500 names)
CAL_SEED = 2027
CAL_BATCH = 8
METHOD = "Percentile"  # measured: more top-1 agreement with FP32 than MinMax on the seeded model


def read_calibration_list(path: Path, dataset_names: list[str]) -> list[int]:
    """Dataset indices of the images a calibration list names (one file name per line, MLPerf form)."""
    try:
        names = [line.strip() for line in inbound.read_text(path, inbound.RECORD).splitlines() if line.strip()]
    except (OSError, inbound.Refused) as exc:
        raise DataError(f"cannot read --calibration-list {path}: {exc}") from None
    where = {n: i for i, n in enumerate(dataset_names)}
    missing = [n for n in names if n not in where]
    if not names or missing:
        what = "is empty" if not names else (f"names {len(missing)} of its {len(names)} images that are not in the "
                                             f"prepared dataset (first: {missing[0]})")
        raise DataError(f"--calibration-list {path} {what}; list file names of the prepared dataset, one per line")
    return sorted({where[n] for n in names})


def synthetic_calibration_list(path: Path, dataset_names: list[str]) -> None:
    """A seeded list of CAL_COUNT names of the (synthetic) dataset, written in the MLPerf form."""
    rng = np.random.default_rng(CAL_SEED)
    pick = sorted(rng.choice(len(dataset_names), size=min(CAL_COUNT, len(dataset_names)), replace=False))
    atomic_write_text(path, "".join(f"{dataset_names[i]}\n" for i in pick))


def _quantize(fp32_u8: Path, out: Path, bench: Benchmark, data: store.PreparedData, indices: list[int]) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):  # type: ignore[misc]  # onnxruntime ships no types
        def __init__(self) -> None:
            self.starts = iter(range(0, len(indices), CAL_BATCH))
            self.bar = progress.bar(len(indices), f"calibrating on {len(indices)} images")

        def get_next(self) -> dict[str, np.ndarray] | None:
            start = next(self.starts, None)
            if start is None:
                self.bar.close()
                return None
            part = np.asarray(indices[start:start + CAL_BATCH])
            u8 = np.empty((len(part), *bench.input_shape), dtype=np.uint8)
            data.gather(part, u8)
            self.bar.update(len(part))
            return {bench.input_name: u8}


    pre = fp32_u8.with_name(fp32_u8.stem + ".pre.onnx")
    quant_pre_process(str(fp32_u8), str(pre), skip_symbolic_shape=True)
    fp32 = kept_fp32(inbound.load_onnx(str(pre)).graph, bench.int8_fp32)  # the record says which, and why
    with contextlib.redirect_stdout(io.StringIO()):  # the calibrator prints its progress
        quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, METHOD), nodes_to_exclude=fp32)


def kept_fp32(graph: Any, keep: KeptFp32) -> list[str]:  # an onnx GraphProto
    """The names of the nodes `keep` (the benchmark record's `int8_fp32`) leaves in FP32, in graph order."""
    tail = set(_tail(graph, keep.tail_concat_axis)) if keep.tail_concat_axis is not None else set()
    return [n.name for n in graph.node if n.op_type in keep.ops or n.name in tail]


def _tail(graph: Any, axis: int) -> list[str]:
    """From each Concat along `axis` (the levels' predictions joined): back through the levels' Reshape /
    Concat to the prediction convs, no further, then every node after them."""
    consumers: dict[str, list[Any]] = {}
    producer = {o: n for n in graph.node for o in n.output}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    todo = [n for n in graph.node if n.op_type == "Concat" and any(a.name == "axis" and a.i == axis
                                                                   for a in n.attribute)]
    up = list(todo)
    while up:  # back through the levels' Reshape / Concat to the prediction convs, no further
        n = up.pop()
        for i in n.input:
            p = producer.get(i)
            if p is not None and p.op_type in ("Reshape", "Concat", "Conv") and p not in todo:
                todo.append(p)
                if p.op_type != "Conv":
                    up.append(p)
    seen: dict[str, None] = {}
    while todo:
        n = todo.pop()
        if n.name not in seen:
            seen[n.name] = None
            todo += [c for o in n.output for c in consumers.get(o, [])]
    return list(seen)


def agreement(passes: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]], bench: Benchmark,
              data: store.PreparedData) -> tuple[str, float]:
    """How a reduced-precision model's pass over the prepared dataset (`dataset_pass`) agrees with the FP32
    golden reference: top-1 agreement, or mAP against the golden annotations (detection: the reference
    pass's detections as ground truth). Returns the `AGREEMENT` key and the percentage."""
    if bench.quality_metric == "top-1":
        assert data.golden is not None
        labels = np.empty(data.count, dtype=np.int32)
        for part, payload, offsets in passes:
            labels[part] = payload[offsets[:-1]].astype(np.int32)  # one class id per sample
        return "agreement_top1_pct", 100.0 * float(np.mean(labels == data.golden))
    records = []
    for part, payload, offsets in passes:
        records += [{"seq_id": int(i), "qsl_idx": int(i), "data": payload[offsets[j]:offsets[j + 1]].tobytes().hex()}
                    for j, i in enumerate(part)]
    with scratch_dir("appliance-agreement-") as tmp:
        log = tmp / "mlperf_log_accuracy.json"
        atomic_write_text(log, json.dumps(records))
        score = bench.accuracy.score(log, data, "golden")
    assert score is not None
    return "golden_map_pct", score.percent


def prepare_int8(models_dir: Path, record_path: Path, bench: Benchmark, fp32: ModelRecord,
                 data: store.PreparedData, cal_list: Path | None, echo: Echo) -> ModelRecord:
    """Quantise the FP32 model of `fp32` (its record) and report top-1 agreement with it; skip if up to date."""

    if not data.manifest.get("golden"):
        raise DataError(f"no FP32 golden reference for {bench.name}; run `{bench.prepare_hint(models_dir.parent)}`")
    names = bench.dataset.read(data.source, data.count).names
    if cal_list is None:
        cal_list = models_dir / f"{bench.name}-cal_image_list.txt"
        if not cal_list.is_file():
            synthetic_calibration_list(cal_list, names)
    indices = read_calibration_list(cal_list, names)
    key = {"fp32_sha256": fp32.sha256, "calibration_sha256": sha256_file(cal_list), "method": METHOD,
           "quantizer_sha256": sha256_file(Path(__file__)),
           "dataset_manifest_sha256": sha256_file(data.root / store.MANIFEST)}

    def make() -> Made:
        if data.golden_model != fp32.sha256:
            raise DataError(f"no FP32 golden labels for {fp32.path}; "
                            f"run `{bench.prepare_hint(models_dir.parent)}`")
        path = models_dir / f"{bench.name}-int8-{fp32.sha256[:12]}.onnx"
        with scratch_dir(tmp_prefix("int8"), models_dir) as tmp:
            u8in = tmp / "u8in.onnx"
            save_onnx(uint8_input(inbound.load_onnx(fp32.path), bench), u8in)
            with progress.spinner(f"quantising {bench.title} (QDQ, per-channel int8 weights, {METHOD} calibration)"):
                _quantize(u8in, tmp / "int8.onnx", bench, data, indices)
            move_into_place(tmp / "int8.onnx", path)
        metric, agree = agreement(reference_pass(path, bench, data, bench.default_batch,
                                                 f"int8 {bench.quality_metric} over the prepared dataset"),
                                  bench, data)
        return Made(path, metric, agree,
                    quantization={"tool": "onnxruntime.quantization.quantize_static", "format": "QDQ",
                                  "weights": "int8 per channel", "activations": "uint8 per tensor",
                                  "fp32_nodes": bench.int8_fp32.why or "none",
                                  "method": METHOD, "input": "uint8 samples; Cast + Sub(mean) or Mul(1/255) in the "
                                                             "graph",
                                  "fp32_model": stored_path(models_dir.parent, Path(fp32.path)),
                                  "calibration_list": stored_path(models_dir.parent, cal_list),
                                  "calibration_images": len(indices), "key": key},
                    after_path=f"\n  calibrated on {len(indices)} images of {cal_list}")

    return reduced_model("int8", models_dir, record_path, fp32, data, key, make, echo)

