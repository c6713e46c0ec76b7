"""`--backend openvino` as an asynchronous card: several infer requests in flight on one card."""

from __future__ import annotations

import json

import pytest
from helpers import appliance

pytest.importorskip("openvino")


def test_openvino_card_keeps_its_requests_in_flight(data_dir, tmp_path):
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--backend", "openvino", "--requests", 2,
                     "--duration-ms", 300, "--count", 16, "--batch-size", 2, "-q") == 0
    manifest = json.loads(next(tmp_path.glob("*/resnet50/Offline/performance/run_1/manifest.json")).read_text())
    card = manifest["cards"][0]
    assert card["infer_requests"] == 2 and card["num_streams"] == 2 and card["batches_in_flight"] == 2
    assert card["performance_hint"] == "THROUGHPUT" and card["samples_completed"] > 0
    assert manifest["result"]["valid"] is True
    assert manifest["requests_per_card"] == 2 and manifest["backend_choice"]["requests"] == 2
