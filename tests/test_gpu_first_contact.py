"""The GPU card's load checks that need no GPU, on the CPU provider (issue 34): every buffer the IO-binding card
binds agrees with the session's own metadata for every benchmark x precision x card-outputs combination, a
mismatch is a one-line refusal at load (on a GPU it would be an illegal address under a captured graph), and a
card's session options set each key once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from harness.core.errors import ApplianceError
from harness.data import benchmarks
from harness.data.models.uint8_front import uint8_input
from harness.prepare import fp16
from harness.records.layout import Layout, read_model_record
from harness.run.cards import make_card
from harness.run.cards.backends import RECORDS
from harness.run.cards.gpu_iobinding import IoBindingSettings, binding_problem, check_outputs
from harness.run.cards.onnxruntime_card import NO_CPU_FALLBACK, SPINNING, cast_outputs, session_options
from harness.run.cards.spec import BackendSpec

RESNET = benchmarks.get("resnet50")


def _session(model: onnx.ModelProto | bytes) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _combinations(name: str, model: onnx.ModelProto):
    """(precision, card outputs, the record as the run makes it, the graph the card loads) for `name`."""
    u8 = uint8_input(model, benchmarks.get(name))
    for precision, graph in (("fp32", u8), ("fp16", fp16.convert(u8))):
        for kind in ("fp32", *benchmarks.get(name).output_variants):
            bench = benchmarks.get(name).with_card_outputs(kind)
            copy = onnx.ModelProto()
            copy.CopyFrom(graph)
            yield precision, kind, bench, \
                cast_outputs(copy, bench.outputs, bench.output_casts) if bench.output_casts else copy


def _problem(bench, session) -> str | None:
    return binding_problem(session, bench.input_name, tuple(bench.input_shape), np.dtype(np.uint8),
                           list(bench.outputs), [s for s, _ in bench.output_specs],
                           [np.dtype(d) for _, d in bench.output_specs])


@pytest.mark.parametrize("name", [n for n in benchmarks.NAMES if n != "yolo-95"])
def test_every_combination_binds_what_the_session_computes(name, data_dir):
    if name == "resnet50":
        model = onnx.load(read_model_record(Layout(data_dir, RESNET), "fp32").path)
    else:
        model = benchmarks.get(name).build_model(0)
    seen = 0
    for precision, kind, bench, graph in _combinations(name, model):
        assert _problem(bench, _session(graph)) is None, (precision, kind)
        seen += 1
    assert seen == 2 * (1 + len(benchmarks.get(name).output_variants))


def test_a_buffer_the_graph_does_not_fit_is_named(data_dir):
    session = _session(uint8_input(onnx.load(read_model_record(Layout(data_dir, RESNET), "fp32").path), RESNET))
    wrong_type = replace(RESNET, output_specs=(((), "int64"), ((1001,), "float16")))
    assert "is tensor(float) in the model, and the card would bind float16" in _problem(wrong_type, session)
    wrong_shape = replace(RESNET, output_specs=(((), "int64"), ((1000,), "float32")))
    assert "the card would bind [batch, 1000]" in _problem(wrong_shape, session)
    outputs = session.run(None, {RESNET.input_name: np.zeros((2, *RESNET.input_shape), np.uint8)})
    assert check_outputs(outputs, 2, [(), (1001,)], [np.dtype(np.int64), np.dtype(np.float32)]) is None
    assert "comes out as float32 [2, 1001]" in check_outputs(outputs, 2, [(), (1000,)],
                                                             [np.dtype(np.int64), np.dtype(np.float32)])


@pytest.mark.parametrize("specs", [(((), "int64"), ((1001,), "float16")), (((), "int64"), ((1000,), "float32"))])
def test_the_io_binding_card_refuses_such_a_buffer_at_load(data_dir, specs):
    path = Path(read_model_record(Layout(data_dir, RESNET), "fp32").path)
    spec = BackendSpec(RECORDS["onnxruntime"], path, RESNET.input_name, RESNET.outputs, specs,
                       IoBindingSettings(2, (1, 2), "resnet50"))
    with pytest.raises(ApplianceError) as info:
        make_card(spec, 0, (0,))
    line = str(info.value)
    assert "\n" not in line and "the card binds no buffer the graph does not fit" in line


@pytest.mark.parametrize("on_gpu", [False, True])
def test_a_cards_session_options_set_each_key_once(on_gpu, capfd):
    """onnxruntime prints "Config with key ... already exists ... will be overwritten" on every session whose
    options set a key twice (32 times on the H100 run): the options are made in one place."""
    capfd.readouterr()
    opts = session_options(1, False, on_gpu)
    _, err = capfd.readouterr()
    assert "already exists" not in err
    assert opts.get_session_config_entry(SPINNING) == "0"
    assert (opts.get_session_config_entry(NO_CPU_FALLBACK) == "1") is on_gpu if on_gpu else True


def test_the_replay_check_compares_the_bound_path_with_a_regular_run(data_dir):
    """At load the card runs its smallest bucket through its bound buffers (on a GPU: a graph replay) and compares
    it with the regular run before capture; on the CPU provider a difference is refused (on a GPU the card would
    drop its graphs instead: docs/developing.md lists that branch among what only a GPU can show)."""
    path = Path(read_model_record(Layout(data_dir, RESNET), "fp32").path)
    spec = BackendSpec(RECORDS["onnxruntime"], path, RESNET.input_name, RESNET.outputs, RESNET.output_specs,
                       IoBindingSettings(2, (1, 2), "resnet50"))
    card = make_card(spec, 0, (0,))
    try:
        batch = np.zeros((1, *RESNET.input_shape), np.uint8)
        reference = card._check_outputs(batch)
        assert card._replay_check(batch, reference).startswith("the bound path agrees")
        wrong = [reference[0] + 1, reference[1]]  # another class for the one output the host reads
        with pytest.raises(ApplianceError, match="differs from a regular run"):
            card._replay_check(batch, wrong)
    finally:
        card.close()
