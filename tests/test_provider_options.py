"""Issue 36: the CUDA provider's own options in tune's grid, built in one function (`provider_options.build`),
carried by the tuned record to every run. No GPU here: the options a GPU card hands onnxruntime are read from
the session's constructor call (the CUDA provider cannot start without a GPU), its session options from the
SessionOptions it was given."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import onnxruntime as ort
import pytest
from helpers import appliance, tuned_record

from harness.core.errors import ApplianceError
from harness.run.cards import gpu_iobinding, onnxruntime_card, provider_options
from harness.run.cards.backends import RECORDS
from harness.run.cards.onnxruntime_card import GpuSettings
from harness.run.cards.spec import BackendSpec
from harness.tune.search import Sweep

EVERY = "prefer_nhwc=1 cudnn_conv_algo_search=HEURISTIC fuse_conv_bias=1 cudnn_conv_use_max_workspace=0"


class _Stopped(Exception):
    pass


class _FakeCopies:
    """The card's CUDA stream, without CUDA."""

    device, stream = "cuda", 4242

    def __init__(self, *_: object) -> None:
        pass

    def close(self) -> None:
        pass


def _gpu_card_session_call(data_dir: Path, monkeypatch: pytest.MonkeyPatch, tuned: str) -> dict:
    """What a GPU card (the IO-binding card onnxruntime-cuda makes) passes to InferenceSession."""
    seen: dict = {}

    def session(source: object, opts: ort.SessionOptions, providers: list) -> None:
        seen.update(providers=providers, threads=opts.intra_op_num_threads,
                    fallback=opts.get_session_config_entry(onnxruntime_card.NO_CPU_FALLBACK),
                    spinning=opts.get_session_config_entry("session.intra_op.allow_spinning"))
        raise _Stopped("stopped before the session is made")

    monkeypatch.setattr(onnxruntime_card, "require_provider", lambda backend: None)
    monkeypatch.setattr(gpu_iobinding, "CudaCopies", _FakeCopies)
    monkeypatch.setattr(onnxruntime_card.ort, "InferenceSession", session)
    monkeypatch.delenv(gpu_iobinding.SEARCH_ENV, raising=False)
    from test_gpu_iobinding import _spec

    spec: BackendSpec = replace(_spec(data_dir, batch=2, buckets=(1, 2), gpu=GpuSettings((), tuned)),
                                backend=RECORDS["onnxruntime-cuda"])
    with pytest.raises((_Stopped, ApplianceError)):
        gpu_iobinding.IoBindingCard(spec, 0, (0,))
    return seen


@pytest.mark.ortgpu  # runs in both venvs: ci/test's GPU venv has the CUDA provider's onnxruntime, without CUDA
def test_every_tuned_option_reaches_the_gpu_cards_session(data_dir, monkeypatch):
    seen = _gpu_card_session_call(data_dir, monkeypatch, EVERY)
    ((provider, options),) = seen["providers"]
    assert provider == "CUDAExecutionProvider"
    assert options == {"device_id": "0", "use_tf32": "0", "enable_cuda_graph": "1", "has_user_compute_stream": "1",
                       "user_compute_stream": "4242", **provider_options.parse(EVERY)}
    assert options == {"device_id": "0", **provider_options.build(
        provider, EVERY, cudnn_conv_algo_search="EXHAUSTIVE", enable_cuda_graph="1", has_user_compute_stream="1",
        user_compute_stream="4242")}  # the one function: the tuned options win over the card's defaults
    assert (seen["threads"], seen["fallback"], seen["spinning"]) == (1, "1", "0")  # the session options with them
    # without tuned options: the card's own, the search EXHAUSTIVE
    ((_, plain),) = _gpu_card_session_call(data_dir, monkeypatch, "")["providers"]
    assert plain["cudnn_conv_algo_search"] == "EXHAUSTIVE" and "prefer_nhwc" not in plain


def test_options_are_parsed_in_one_place_and_refused_in_one_line():
    assert provider_options.canonical("prefer_nhwc=1  cudnn_conv_algo_search=heuristic") == \
        "cudnn_conv_algo_search=HEURISTIC prefer_nhwc=1"
    for bad in ("prefer_nhwc", "prefer_nhwc=2", "no_such_option=1"):
        with pytest.raises(ApplianceError) as info:
            provider_options.parse(bad)
        assert "\n" not in str(info.value) and "prefer_nhwc=0|1" in str(info.value)
    with pytest.raises(ApplianceError, match="not CPUExecutionProvider"):
        provider_options.build("CPUExecutionProvider", "prefer_nhwc=1")
    assert provider_options.build("CPUExecutionProvider") == {}


def test_the_grid_times_provider_options_on_the_cuda_provider_only():
    gpu = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), (512,), layouts=("cuda:allx1",))
    assert [c[-1] for c in gpu.candidates()] == list(provider_options.GPU_GRID)
    given = replace(gpu, options=("", EVERY))
    assert [c[-1] for c in given.candidates()] == ["", EVERY]
    assert [c[-1] for c in Sweep(("fp32",), (RECORDS["onnxruntime"],), (8,)).candidates()] == [""]
    with pytest.raises(ApplianceError, match="--provider-options are for CUDAExecutionProvider"):
        Sweep(("fp32",), (RECORDS["onnxruntime"],), (8,), options=("prefer_nhwc=1",)).check()


def test_the_records_options_and_deadline_go_to_the_run_and_its_manifest(data_dir, tmp_path):
    """`run --tuned` takes the choice's provider options and Server deadline (resolve: what plan, the cards and
    the manifest's backend_choice get); --provider-options / --max-wait-us given win."""
    from harness.run import tuned_choice
    from harness.run.loadgen_settings import Requested
    from harness.run.options import Auto, RunOptions

    choice = {"precision": "fp32", "backend": "onnxruntime-cuda", "batch_size": 64, "requests": 1,
              "cards": "cuda:allx2", "why": "tuned", "provider_options": "prefer_nhwc=1", "max_wait_us": 750,
              "server_qps": 900.0, "confirmed_qps": 850.0}
    path, record = tuned_record(data_dir, tmp_path, "Server", choice)
    opts = RunOptions("resnet50", Requested("Server", "performance"), data_dir, tmp_path, backend=Auto.AUTO,
                      tuned=path)
    resolved, why = tuned_choice.resolve(opts)
    assert (resolved.provider_options, resolved.max_wait_us) == ("prefer_nhwc=1", 750)
    assert (why.provider_options, why.max_wait_us) == ("prefer_nhwc=1", 750) and why.server_bound is None
    assert "server_bound" not in why.to_json()
    given, why = tuned_choice.resolve(replace(opts, provider_options="", max_wait_us=100))
    assert (given.provider_options, given.max_wait_us) == ("", 100) and "--provider-options given" in why.why
    # a record whose Server choice meets the bound with no batch: said before the run
    record["chosen"]["Server"] = {**choice, "server_qps": 0.0}
    path.write_text(json.dumps(record))
    assert "Server cannot meet its latency bound" in str(tuned_choice.resolve(opts)[1].server_bound)


def test_provider_options_on_a_cpu_backend_are_refused_in_one_line(data_dir, tmp_path, capsys):
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--provider-options",
                     "prefer_nhwc=1", "--duration-ms", 100) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not CPUExecutionProvider" in err[0], err
    assert appliance("tune", "--data-dir", data_dir, "--provider-options", "bogus=1", "-o", tmp_path / "t.json") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "provider option 'bogus=1'" in err[0], err
