"""The benchmark record is the only description of a benchmark: the rules and NMS choices read from it."""

from __future__ import annotations

import numpy as np
import pytest

from harness import benchmarks, compliance, nms
from harness.errors import ApplianceError
from harness.submission import check


def test_round_tables_come_from_the_records() -> None:
    """v6.1's per-benchmark rules, derived from the records, are the ones the round had written out."""
    rnd = check.ROUNDS["v6.1"]
    assert rnd.dataset_size == {"resnet50": 50000}
    assert rnd.compliance_tests == {"resnet50": ("TEST01", "TEST04")}
    assert rnd.required_scenarios == {
        "edge": {"resnet50": ("SingleStream", "MultiStream", "Offline")},
        "datacenter,edge": {"resnet50": ("SingleStream", "MultiStream", "Offline", "Server")},
        "edge,datacenter": {"resnet50": ("SingleStream", "MultiStream", "Offline", "Server")},
        "datacenter": {"resnet50": ("Server", "Offline")},
    }


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
    alt = benchmarks._variant(benchmarks.YOLO_DETECTION, "anchor-major")
    assert alt.shapes == {"output": (8400, 84)} and alt is benchmarks._variant(benchmarks.YOLO_DETECTION,
                                                                                 "anchor-major")
