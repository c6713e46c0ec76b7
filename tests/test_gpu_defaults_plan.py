"""Issue 43, finding 3: a GPU card's defaults wired through `plan.resolve` with no --batch-size and no tuned record
(the GPU image's default command): the batch and precision of harness.run.gpu_defaults and the CUDA provider's
NHWC convolutions (prefer_nhwc=1, which tune chose on the H100 at both precisions), on the fake GPU backend of
tests/test_fake_backend.py given onnxruntime's CUDA provider."""

from __future__ import annotations

import dataclasses

import pytest
from test_fake_backend import FAKE, fake_gpu  # noqa: F401 (the fixture)

from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks
from harness.run import gpu_defaults
from harness.run.cards import backends
from harness.run.cards.provider_options import CUDA
from harness.run.loadgen_settings import Requested
from harness.run.options import RunOptions
from harness.run.plan import resolve


@pytest.fixture
def cuda_fake(fake_gpu, monkeypatch):  # noqa: F811
    monkeypatch.setitem(backends.RECORDS, FAKE, dataclasses.replace(backends.RECORDS[FAKE], provider=CUDA))


def _plan(data_dir, tmp_path, scenario=Scenario.OFFLINE, **kw):
    return resolve(RunOptions("resnet50", Requested(scenario, Mode.PERFORMANCE), data_dir, tmp_path / "r",
                              backend=backends.RECORDS[FAKE], **kw))


@pytest.mark.usefixtures("cuda_fake")
def test_the_default_command_gets_the_gpu_rules_batch_precision_and_nhwc(data_dir, tmp_path):
    plan = _plan(data_dir, tmp_path)
    assert plan.cards.provider_options == gpu_defaults.NHWC == "prefer_nhwc=1"
    assert len(plan.cards.slots) == 1  # one card per GPU (the rule's H100 figures: more sessions added nothing)
    assert plan.choice.provider_options == "prefer_nhwc=1" and "GPU default: prefer_nhwc=1" in plan.choice.why
    assert plan.batch == benchmarks.get("resnet50").gpu_batch  # no NVML here: the benchmark's GPU batch as it is
    assert plan.opts.precision == "fp32" and "GPU default: fp32 (no fp16 model prepared)" in plan.choice.why
    server = _plan(data_dir, tmp_path, Scenario.SERVER)
    assert server.batch == benchmarks.get("resnet50").gpu_batch // 16
    assert _plan(data_dir, tmp_path, Scenario.SINGLE_STREAM).batch == 1


@pytest.mark.usefixtures("cuda_fake")
def test_options_given_or_a_batch_given_win_over_the_defaults(data_dir, tmp_path):
    assert _plan(data_dir, tmp_path, provider_options="").cards.provider_options == ""  # the provider's own, asked
    given = _plan(data_dir, tmp_path, provider_options="prefer_nhwc=0", batch_size=8)
    assert given.cards.provider_options == "prefer_nhwc=0" and given.batch == 8


def test_a_gpu_backend_without_a_cuda_provider_gets_no_provider_options(fake_gpu, data_dir, tmp_path):  # noqa: F811
    plan = _plan(data_dir, tmp_path)
    assert plan.cards.provider_options == "" and plan.batch == benchmarks.get("resnet50").gpu_batch
