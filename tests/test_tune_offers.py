"""Issue 41, round 4's leftover: with onnxruntime-gpu installed and no driver, `tune --backends` offered
onnxruntime-cuda and onnxruntime-tensorrt, then refused them. The offer now comes from the backend record's
availability check, which loads the provider's library as a card would.

onnxruntime-gpu without a driver lists its CUDA and TensorRT providers; this CPU wheel's list is made to say
the same (the one thing set here), and the real check then finds the provider libraries do not load."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from harness.tune.search import available_backends


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="a GPU build: its libraries")
def test_providers_listed_but_unloadable_are_not_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(ort, "get_available_providers", lambda: listed)
    offered = [b.name for b in available_backends()]
    assert "onnxruntime" in offered
    assert "onnxruntime-cuda" not in offered and "onnxruntime-tensorrt" not in offered, offered
