"""Issue 43: tune keeps its cards' sessions across batch sizes where the provider allows. Candidates that differ only
in batch size are timed one after the other and their cards take the session the last one left
(harness.run.cards.kept_sessions): real onnxruntime InferenceSessions are counted as onnxruntime makes them. Before,
every candidate made every card's session again (on a GPU each with its model upload and graph optimisation)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from helpers import appliance
from onnx import TensorProto, helper
from test_gpu_iobinding import _spec

from harness.data.models import IR_VERSION
from harness.run.cards import make_card
from harness.run.cards.backends import RECORDS
from harness.run.cards.kept_sessions import KeptSessions
from harness.run.cards.spec import BackendSpec
from harness.tune.search import by_session


@pytest.fixture
def sessions_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many InferenceSessions onnxruntime made meanwhile: its own constructor, run as it is, counted."""
    made = [0]
    real = ort.InferenceSession.__init__

    def counted(self: ort.InferenceSession, *args: object, **kwargs: object) -> None:
        made[0] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "__init__", counted)
    return made


def _tune(data_dir: Path, out: Path, *args: object) -> dict:
    assert appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime", "--precisions", "fp32",
                     "-s", "Offline", "-o", out, "-q", *args) == 0
    record: dict = json.loads(out.read_text())
    return record


@pytest.mark.slow
@pytest.mark.parametrize("io_binding", ["0", "1"])
def test_tune_makes_a_card_session_once_per_layout_not_once_per_batch(data_dir, tmp_path, monkeypatch,
                                                                      sessions_made, io_binding):
    monkeypatch.setenv("APPLIANCE_IO_BINDING", io_binding)  # the plain card, then the IO-binding one
    record = _tune(data_dir, tmp_path / "t.json", "--batch-sizes", "1,2,4", "--cards", "auto,emulate:2")
    rows = record["measured"]
    assert [(m["layout"], m["batch_size"]) for m in rows] == [
        ("auto", 1), ("auto", 2), ("auto", 4), ("emulate:2", 1), ("emulate:2", 2), ("emulate:2", 4)]
    cards = {m["layout"]: m["cards"] for m in rows}
    assert sessions_made[0] == sum(cards.values())  # one per card of each layout (was 3 x as many: one per batch)
    assert all(m["samples_per_second"] > 0 and m["batch_latency_ms"] > 0 for m in rows)
    assert record["chosen"]["Offline"]["batch_size"] in (1, 2, 4)


def test_candidates_that_differ_only_in_batch_size_are_timed_in_a_row():
    cpu = RECORDS["onnxruntime"]
    given = [("auto", "fp32", cpu, n, 1, o) for n in (1, 2) for o in ("a", "b")] + [("x", "fp32", cpu, 1, 1, "a")]
    assert by_session(given) == [("auto", "fp32", cpu, 1, 1, "a"), ("auto", "fp32", cpu, 2, 1, "a"),
                                 ("auto", "fp32", cpu, 1, 1, "b"), ("auto", "fp32", cpu, 2, 1, "b"),
                                 ("x", "fp32", cpu, 1, 1, "a")]


def _relu(path: Path, batch: int | str) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize(("batch", "kept"), [("N", True), (1, False)])
def test_a_session_is_kept_only_where_its_batch_dimension_is_dynamic(tmp_path, batch, kept):
    sessions = KeptSessions()
    spec = BackendSpec(RECORDS["onnxruntime"], _relu(tmp_path / "m.onnx", batch), "x", ("y",), (((4,), "float32"),),
                       None, sessions=sessions)
    first = make_card(spec, 0, (0,))
    session = first.session
    first.close()
    second = make_card(spec, 0, (0,))
    assert (second.session is session) == kept and sessions.made == (1 if kept else 2)
    assert np.array_equal(second.infer(np.full((1, 4), -1, np.float32), 1)[0], np.zeros((1, 4), np.float32))
    other = make_card(spec, 1, (0,))  # another slot never takes this one's session
    assert other.session is not second.session
    sessions.close()


def test_the_io_binding_card_keeps_no_session_that_captured_graphs(data_dir):
    """A graph replays the addresses of the card's own buffers, which its close frees: such a session ends with it.
    (No graph is captured on the CPU provider: the card's setting stands for one.)"""
    sessions = KeptSessions()
    card = make_card(replace(_spec(data_dir, 2, (1, 2)), sessions=sessions), 0, (0,))
    assert card.keepable()
    card.settings["cuda_graph"] = True
    assert not card.keepable()
    card.close()
    assert sessions.take(card.kept_key) is None
    again = make_card(replace(_spec(data_dir, 4, (1, 4)), sessions=sessions), 0, (0,))
    session = again.session
    again.close()  # no graphs: kept, and a card of another batch size takes it with its buckets made anew
    bigger = make_card(replace(_spec(data_dir, 8, (1, 8)), sessions=sessions), 0, (0,))
    assert bigger.session is session and sorted(bigger.buckets) == [1, 8]
    assert bigger.info.details["io_binding"]["input"] == again.info.details["io_binding"]["input"]
    bigger.close()
    sessions.close()
