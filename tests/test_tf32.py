"""Issue 43, finding 4: TF32 as a precision (harness.prepare.tf32), where FP32 ran with `use_tf32=0` forced.

The emulation rounds what cuBLAS / cuDNN round (checked bit for bit against a mask-and-round reference); the
CUDA provider option `use_tf32` follows the model's precision in the options a GPU card hands onnxruntime, and no
tuned option can set it; prepare records the tf32 model's agreement, which makes it eligible as any reduced
precision; the default without a tuned record stays FP32; a run at tf32 records it in its manifest, and an accuracy
run at tf32 whose own score misses the rule says so (its manifest's verdict, the summary's NOT SUBMITTABLE). No GPU
here: the GPU card's session call is read as tests/test_provider_options.py reads it, the runs go through the fake
GPU backend of tests/test_fake_backend.py (zeros: an accuracy that fails), the CPU backend refuses tf32.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnxruntime as ort
import pytest
from helpers import appliance, linked_copy
from test_fake_backend import FAKE, fake_gpu  # noqa: F401 (the fixture)
from test_provider_options import _gpu_card_session_call

from harness.core.errors import ApplianceError
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks
from harness.records import model_record
from harness.records.layout import Layout
from harness.run.cards import backends, provider_options
from harness.run.loadgen_settings import Requested
from harness.run.options import RunOptions
from harness.run.plan import resolve


def _tf32_reference(x: np.ndarray) -> np.ndarray:
    """FP32 rounded to nearest at 10 mantissa bits, on the bits (13 dropped; ties to even)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.astype(np.uint32).view(np.float32)


def test_the_emulation_rounds_both_operands_to_tf32():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from harness.prepare import tf32

    rng = np.random.default_rng(43)
    x = rng.standard_normal((4, 4)).astype(np.float32) * np.float32(1000)
    assert np.array_equal(tf32.rounded(x), _tf32_reference(x))  # random values: no ties
    assert not np.array_equal(tf32.rounded(x), x)
    # MatMul(a, w) with a = x, w = I gives round(x); with a = I, w = x gives round(x): each operand is rounded
    eye = np.eye(4, dtype=np.float32)
    for a, w in ((x, eye), (eye, x)):
        graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
                                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                                  [numpy_helper.from_array(w, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        emulated = tf32.emulation(model)
        onnx.checker.check_model(emulated)
        session = ort.InferenceSession(emulated.SerializeToString(), providers=["CPUExecutionProvider"])
        (y,) = session.run(None, {"a": a})
        assert np.array_equal(y, _tf32_reference(x))
        (plain,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"a": a})
        assert np.array_equal(plain, x)  # the FP32 model itself does not round


@pytest.mark.ortgpu
@pytest.mark.parametrize(("precision", "tf32"), [("tf32", "1"), ("fp32", "0"), ("fp16", "0"), ("int8", "0")])
def test_use_tf32_follows_the_precision_in_the_gpu_cards_session(data_dir, monkeypatch, precision, tf32):
    from harness.run.cards import gpu_iobinding

    made = gpu_iobinding.IoBindingCard.__init__

    def with_precision(self, spec, index, cpus):
        made(self, dataclasses.replace(spec, precision=precision), index, cpus)

    monkeypatch.setattr(gpu_iobinding.IoBindingCard, "__init__", with_precision)
    seen = _gpu_card_session_call(data_dir, monkeypatch, "prefer_nhwc=1")
    ((_, options),) = seen["providers"]
    assert options["use_tf32"] == tf32 and options["prefer_nhwc"] == "1"


def test_no_tuned_option_sets_tf32():
    with pytest.raises(ApplianceError, match="provider option 'use_tf32=1'"):
        provider_options.parse("use_tf32=1")
    assert provider_options.build(provider_options.CUDA, "prefer_nhwc=1", "tf32", use_tf32="0")["use_tf32"] == "1"
    assert provider_options.build(provider_options.CUDA, "", "fp32", use_tf32="1")["use_tf32"] == "0"
    assert "tf32" in backends.get("onnxruntime-cuda").precisions
    assert "tf32" not in backends.get("onnxruntime").precisions  # a CPU computes FP32
    assert "tf32" not in backends.get("onnxruntime-tensorrt").precisions  # no use_tf32 there


@pytest.fixture(scope="module")
def tf32_data_dir(data_dir, tmp_path_factory):
    """The session's ResNet50 data dir plus `prepare --precision tf32` (its emulated agreement measured)."""
    d = linked_copy(data_dir, tmp_path_factory.mktemp("tf32") / "data")
    assert appliance("prepare", "--data-dir", d, "--samples", 48, "--precision", "tf32", "-q") == 0
    return d


@pytest.fixture
def tf32_fake(fake_gpu, monkeypatch):  # noqa: F811
    """The fake GPU backend on the CUDA provider, computing tf32 as onnxruntime-cuda does."""
    monkeypatch.setitem(backends.RECORDS, FAKE, dataclasses.replace(
        backends.RECORDS[FAKE], provider=provider_options.CUDA, precisions=backends.get("onnxruntime-cuda").precisions))


def _plan(data_dir, tmp_path, mode=Mode.PERFORMANCE, **kw):
    return resolve(RunOptions("resnet50", Requested(Scenario.OFFLINE, mode), data_dir, tmp_path / "r",
                              backend=backends.RECORDS[FAKE], batch_size=8, **kw))


@pytest.mark.usefixtures("tf32_fake")
def test_tf32_is_eligible_by_its_agreement_but_never_the_default(tf32_data_dir, tmp_path):
    bench = benchmarks.get("resnet50")
    record = model_record.read(Layout(tf32_data_dir, bench).record_for("tf32"))
    assert (record.precision, record.inference_precision) == ("tf32", "tf32")
    assert record.quantization is not None and "TF32" in record.quantization["agreement_computed_on"]
    eligible, why = model_record.eligibility(bench, record)
    assert eligible and "top-1 agreement with FP32 100.00% >= the 99%" in why, why
    assert _plan(tf32_data_dir, tmp_path).opts.precision == "fp32"  # no tuned record: FP32 strict
    plan = _plan(tf32_data_dir, tmp_path, precision="tf32")
    assert plan.model.precision == "tf32" and plan.not_submittable == ""
    # the accuracy run decides: its own golden score against the 99%
    assert plan.judged(99.5)[0] and "its accuracy run" in plan.judged(99.5)[1]
    failed = plan.refusal(plan.judged(97.0))
    assert "tf32 is not submittable for resnet50: its accuracy run" in failed and "97.00% < the 99%" in failed
    fp32 = _plan(tf32_data_dir, tmp_path, precision="fp32")
    assert fp32.judged(0.0) == fp32.eligibility  # the reference keeps its verdict


def test_tf32_on_a_cpu_backend_is_refused_in_one_line(tf32_data_dir, tmp_path, capsys):
    assert appliance("run", "--data-dir", tf32_data_dir, "--results", tmp_path / "r", "--precision", "tf32",
                     "--duration-ms", 100) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--precision tf32 runs on --backend onnxruntime-cuda only" in err[0], err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("manifest.json"))


@pytest.mark.slow  # a LoadGen accuracy run
@pytest.mark.usefixtures("tf32_fake")
def test_a_tf32_accuracy_run_that_fails_the_rule_says_so(tf32_data_dir, tmp_path, capsys):
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", tf32_data_dir, "--results", results, "--backend", FAKE, "--precision",
                     "tf32", "--batch-size", 8, "--mode", "accuracy") == 0
    out = capsys.readouterr().out
    (path,) = results.glob("*/resnet50/Offline/accuracy/manifest.json")
    manifest = json.loads(path.read_text())
    assert (manifest["precision"], manifest["inference_precision"]) == ("tf32", "tf32")
    verdict = manifest["precision_eligibility"]
    assert verdict["eligible"] is False and verdict["why"].startswith("its accuracy run: top-1 against the FP32")
    assert "NOT SUBMITTABLE" in out and "warning: tf32 is not submittable for resnet50: its accuracy run" in out
