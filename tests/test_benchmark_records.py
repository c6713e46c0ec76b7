"""The benchmark record is the only description of a benchmark: the rules and NMS choices read from it."""

from __future__ import annotations

import numpy as np
import pytest

from harness.audit import compliance
from harness.audit.submission import rounds
from harness.core.errors import ApplianceError
from harness.data import benchmarks, nms
from harness.records.benchmark_record import _variant


@pytest.mark.parametrize("name", ["resnet50", "yolo-95", "yolo-99"])
def test_the_current_round_agrees_with_the_records(name: str) -> None:
    """The v6.1 round record (the official checker's facts) and the benchmark record (what a run and the
    tree builder use) are written separately: they must state the same rules for every benchmark of the round."""
    if name not in benchmarks.NAMES:
        pytest.skip(f"{name} has no record on this branch")
    record, rnd = benchmarks.get(name), rounds.ROUNDS["v6.1"]
    rules = rnd.benchmarks[rnd.model_of(name)]
    assert rules.performance_sample_count == record.performance_sample_count
    assert rules.compliance_tests == record.compliance_tests
    assert rules.loadgen_model == record.loadgen_model
    assert rules.accuracy_target == pytest.approx(record.quality_reference * record.quality_fraction, abs=1e-6)
    assert rnd.required("edge", rnd.model_of(name)) == ("SingleStream", "MultiStream", "Offline")


@pytest.mark.parametrize(("bench", "target"), [("resnet50", 4096), ("ssd-mobilenet", 1024)])
def test_test01_sampling_target_from_the_record(bench: str, target: int) -> None:
    assert f"*.*.accuracy_log_sampling_target = {target}\n" in compliance.audit_config("TEST01", bench)


def test_nms_parameter_set_is_chosen_per_run() -> None:
    """`with_nms_params("krai")` changes what the record's encoder logs to the KRAI set's detections."""
    record = benchmarks.get("ssd-mobilenet")
    boxes = np.zeros((1, 1917, 4), np.float32)
    scores = np.zeros((1, 1917, 91), np.float32)
    scores[0, 1, 5], scores[0, 4, 5] = 0.9, 0.8  # one anchor shape in neighbouring cells, moved closer:
    boxes[0, 4, 1] = -5.0                        # IoU between KRAI's 0.45 and the reference's 0.6
    ref, _ = record.encode_response([boxes, scores], [4])
    krai_record = record.with_nms_params("krai")
    krai, _ = krai_record.encode_response([boxes, scores], [4])
    np.testing.assert_array_equal(ref.reshape(-1, 7), nms.postprocess(record, boxes[0], scores[0], qsl_idx=4))
    np.testing.assert_array_equal(krai.reshape(-1, 7),
                                  nms.postprocess(record, boxes[0], scores[0], params="krai", qsl_idx=4))
    assert (len(ref) // 7, len(krai) // 7) == (2, 1)
    assert krai_record.nms_params == "krai" and record.with_nms_params("reference") is record
    with pytest.raises(ApplianceError, match="resnet50 runs no host NMS"):
        benchmarks.get("resnet50").with_nms_params("krai")


def test_output_layouts_and_loadgen_name() -> None:
    record = benchmarks.get("ssd-resnet34")
    assert record.with_output_layout("class-major") is record
    with pytest.raises(ApplianceError, match="ssd-resnet34 has no anchor-major output layout"):
        record.with_output_layout("anchor-major")
    assert record.loadgen_model == "ssd-resnet34" and benchmarks.get("resnet50").compliance_tests == ("TEST01",
                                                                                                      "TEST04")
    assert benchmarks.YOLO_DETECTION.variants == ("anchor-major",)
    alt = _variant(benchmarks.YOLO_DETECTION, "anchor-major")
    assert alt.shapes == {"output": (8400, 84)} and alt is _variant(benchmarks.YOLO_DETECTION,
                                                                                 "anchor-major")
