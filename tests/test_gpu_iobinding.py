"""The GPU data path without a GPU (issue 27): the IO-binding card on onnxruntime's CPU provider (the same code
path with OrtValues in host memory), the buckets it warms, its batches copied straight from the sample replica
run by run (or staged where the replica cannot be page-locked), `--cards cuda:allxN` and the cards-per-GPU plan,
the TensorRT engine-cache keys, tune's GPU grid and the GPU energy arithmetic. What needs a GPU (the CUDA
stream, page-locking, graph capture) is in tests marked `gpu`, skipped here, and in tools/gpu_bench.sh."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from itertools import accumulate, pairwise
from pathlib import Path

import mlperf_loadgen as lg
import numpy as np
import onnxruntime as ort
import pytest
from helpers import SAMPLES, appliance
from hypothesis import given
from hypothesis import strategies as st
from sysfs_fixtures import build, shared_trees
from test_gpu_card import HAS_GPU, needs_gpu

from harness.core.errors import ApplianceError, BatchDoesNotFit
from harness.data import benchmarks
from harness.hw import gpu_energy, gpu_plan
from harness.hw.gpu import GpuRef
from harness.hw.topology import detect, plan
from harness.hw.topology.cards import parse_card_spec
from harness.records import engine_cache, store
from harness.records.layout import Layout, read_model_record
from harness.run.cards import cuda_runtime, make_card
from harness.run.cards.backends import RECORDS
from harness.run.cards.base import CardInfo, FromReplica, PageableHostBuffers, ReplicaReader, Synchronous, as_async
from harness.run.cards.cuda_runtime import CudaCopies, HostCopies
from harness.run.cards.gpu_iobinding import WARM_RUNS, IoBindingCard, IoBindingSettings, cuda_settings
from harness.run.cards.onnxruntime_card import GpuSettings, OnnxRuntimeCard, batch_fault
from harness.run.cards.spec import BackendSpec
from harness.run.plan import _per_gpu
from harness.run.qsl import ReplicaRows, SampleLibrary, row_runs
from harness.run.sut import CardSlot, SystemUnderTest
from harness.tune.search import GPU_BATCHES, GPU_COARSE, Sweep

BENCH = benchmarks.get("resnet50")


# --cards spelling and the cards-per-GPU plan ---------------------------------------------------------------
@pytest.mark.parametrize(("text", "ordinals", "per_gpu"), [
    ("cuda:all", None, None), ("cuda:0,1", (0, 1), None), ("cuda:allx4", None, (4,)), ("CUDA:ALLX2", None, (2,)),
    ("cuda:0x2,1x2", (0, 1), (2, 2)), ("cuda:1x3", (1,), (3,)), ("cuda:0,1x2", (0, 1), (1, 2))])
def test_cards_per_gpu_spelling(text, ordinals, per_gpu):
    spec = parse_card_spec(text)
    assert (spec.kind, spec.ordinals, spec.per_gpu) == ("cuda", ordinals, per_gpu)


@pytest.mark.parametrize(("text", "words"), [
    ("cuda:allx0", "cards per GPU must be 1 to 16, not 0"), ("cuda:allx17", "not 17"),
    ("cuda:0,0", "names a GPU twice"), ("cuda:0x2,0x1", "names a GPU twice"), ("cuda:0x", "is not understood"),
    ("cuda:x2", "is not understood"), ("cuda:allx", "is not understood")])
def test_cards_per_gpu_refusals_are_one_line(text, words):
    with pytest.raises(ApplianceError) as err:
        parse_card_spec(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_gpus_cores_are_split_between_its_cards():
    cores = tuple((2 * i, 2 * i + 1) for i in range(8))  # 8 cores of 2 threads
    cpus = tuple(c for core in cores for c in core)
    slots = gpu_plan.split_gpu_cards([(cpus, cores, 0)], (3,))
    assert [len(s.cpus) for s in slots] == [6, 6, 4] and not any(s.shared_cpus for s in slots)
    assert sorted(c for s in slots for c in s.cpus) == list(cpus)  # disjoint, whole cores, all of them
    assert [(s.on_gpu, s.per_gpu) for s in slots] == [(0, 3), (1, 3), (2, 3)]
    two = gpu_plan.split_gpu_cards([(cpus[:4], cores[:2], 0), (cpus[4:], cores[2:], 1)], (2, 1))
    assert [(s.gpu_card, s.cpus, s.node) for s in two] == [(0, (0, 1), 0), (0, (2, 3), 0), (1, cpus[4:], 1)]
    few = gpu_plan.split_gpu_cards([(cpus[:4], cores[:2], None)], (4,))
    assert all(s.shared_cpus and s.cpus == cpus[:4] for s in few)


def test_plan_makes_n_cards_per_gpu_on_the_gpus_local_cores(tmp_path_factory, monkeypatch):
    for var in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    topo = detect(build("pcie-2gpu", shared_trees(tmp_path_factory)))
    cmap = plan(topo, "cuda:allx2")
    gpus = tuple(GpuRef(c.ordinal, c.pci, c.model) for c in cmap.cards)
    slots, refs, how = _per_gpu(cmap.cards, (2,), topo, gpus, "--cards cuda:allx2")
    assert [r.ordinal for r in refs] == [0, 0, 1, 1] and [s.index for s in slots] == [0, 1, 2, 3]
    for gpu_card, pair in zip(cmap.cards, (slots[:2], slots[2:]), strict=True):
        assert set(pair[0].cpus).isdisjoint(pair[1].cpus)
        assert set(pair[0].cpus) | set(pair[1].cpus) == set(gpu_card.cpus)
        assert all(s.node == gpu_card.numa_node for s in pair)
    assert "4 cards on 2 GPU(s)" in how


def test_gpu_cards_per_gpu_need_a_gpu_backend(data_dir, tmp_path, capsys):
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--cards", "cuda:allx2",
                   "--duration-ms", 100)
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and "names NVIDIA GPUs" in lines[0]


# buckets ------------------------------------------------------------------------------------------------------
def test_buckets_cover_every_batch_size_a_run_sends():
    assert gpu_plan.bucket_sizes(1) == (1,)
    assert gpu_plan.bucket_sizes(8) == (1, 2, 4, 8)
    assert gpu_plan.bucket_sizes(100) == (1, 2, 4, 8, 16, 32, 64, 100)
    sizes = gpu_plan.bucket_sizes(100)
    assert all(gpu_plan.bucket_for(n, sizes) >= n for n in range(1, 101))
    assert [gpu_plan.bucket_for(n, sizes) for n in (1, 3, 64, 65)] == [1, 4, 64, 100]
    with pytest.raises(ValueError):
        gpu_plan.bucket_for(101, sizes)
    assert gpu_plan.run_buckets("Server", 8) == (1, 2, 4, 8) == gpu_plan.run_buckets("MultiStream", 8)
    assert gpu_plan.run_buckets("Offline", 256) == (1, 256) and gpu_plan.run_buckets("SingleStream", 1) == (1,)


def test_the_outputs_left_on_the_device_are_never_read_by_the_encoder():
    """ResNet50's encoder reads the ArgMax alone: with NaN for the softmax it writes the same payload."""
    n, rng = 5, np.random.default_rng(0)
    argmax = rng.integers(1, 1001, size=(n,), dtype=np.int64)
    softmax = rng.random((n, 1001), dtype=np.float32)
    reads = BENCH.outputs_read(2)
    assert reads == (True, False)
    left = [a if r else np.broadcast_to(np.float32(np.nan), a.shape) for a, r in zip((argmax, softmax), reads,
                                                                                     strict=True)]
    qsl = list(range(n))
    full, offsets = BENCH.encode_response([argmax, softmax], qsl)
    kept, kept_offsets = BENCH.encode_response(left, qsl)
    assert np.array_equal(full, kept) and np.array_equal(offsets, kept_offsets)
    assert benchmarks.get("yolo-99").outputs_read(1) == (True,)  # detection: the host NMS reads every output


# the IO-binding card on the CPU provider ----------------------------------------------------------------------
def _spec(data_dir: Path, batch: int = 1, buckets: tuple[int, ...] = (),
          gpu: GpuSettings | None = None) -> BackendSpec[IoBindingSettings]:
    """The onnxruntime CPU record's spec with APPLIANCE_IO_BINDING=1's settings (`gpu`: the GPU records')."""
    model = read_model_record(Layout(data_dir, BENCH), "fp32")
    return BackendSpec(RECORDS["onnxruntime"], Path(model.path), BENCH.input_name, BENCH.outputs, BENCH.output_specs,
                       IoBindingSettings(batch, buckets, "resnet50", gpu))


def _qsl(data_dir: Path, n: int) -> SampleLibrary:
    """A sample library with samples 0..n-1 loaded (one replica)."""
    qsl = SampleLibrary(BENCH, store.open_prepared(Layout(data_dir, BENCH).preprocessed, "prepare"))
    qsl.load(list(range(n)))
    return qsl


def _samples(data_dir: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n stored uint8 samples, and the same mean-subtracted in float32 (what the plain card reads)."""
    qsl = _qsl(data_dir, n)
    u8 = qsl.stage(np.arange(n), qsl.staging_buffer(n, "uint8"))
    f32 = qsl.stage(np.arange(n), qsl.staging_buffer(n, "float32"))
    return u8, f32


def test_io_binding_card_on_cpu_ortvalues_matches_the_plain_card(data_dir):
    spec = _spec(data_dir, batch=8, buckets=(1, 2, 4, 8))
    card = make_card(spec, 0, (0,))
    plain = OnnxRuntimeCard(replace(spec, settings=None), 0, (0,))
    try:
        assert isinstance(card, IoBindingCard)
        assert card.input_dtype == "uint8" and plain.input_dtype == "float32"  # Cast + Sub(mean) in the graph
        io = card.info.details["io_binding"]
        assert io["device"] == "cpu:0" and io["buckets"] == [1, 2, 4, 8] and io["input"].startswith("uint8 as stored")
        assert io["outputs_to_host"] == [BENCH.outputs[0]] and io["outputs_on_device"] == [BENCH.outputs[1]]
        assert set(io["warm_up_ms"]) == {"1", "2", "4", "8", "1 replay", "2 replay", "4 replay", "8 replay"}
        # every bucket warmed before the first batch, each with its own device buffers bound once; the smallest once
        # more, against a regular run of the same input (the replay check)
        assert card.runs == {1: WARM_RUNS + 1, 2: WARM_RUNS, 4: WARM_RUNS, 8: WARM_RUNS}
        assert io["graph_check"].startswith("the bound path agrees with a regular run")
        inputs = {size: b[0] for size, b in card.buckets.items()}
        assert all(v.device_name() == "cpu" and v.shape()[0] == size for size, v in inputs.items())
        assert len({v.data_ptr() for v in inputs.values()}) == 4
        u8, f32 = _samples(data_dir, 8)
        for n in (8, 3, 1):
            out = card.infer(u8[:n], n)
            want = plain.infer(f32[:n], n)
            assert out[0].shape == (n,) and out[0].dtype == np.int64
            assert np.array_equal(out[0], want[0])  # the same classes, bit for bit the host's arithmetic
            assert out[1].shape == (n, 1001) and np.isnan(out[1]).all() and not out[1].flags.writeable
        assert card.runs == {1: WARM_RUNS + 2, 2: WARM_RUNS, 4: WARM_RUNS + 1, 8: WARM_RUNS + 1}  # 3 ran in 4
        assert inputs == {size: b[0] for size, b in card.buckets.items()}  # the same buffers: addresses never move
        with pytest.raises(ApplianceError, match="contiguous"):
            card.infer(f32[:2], 2)  # a float batch is not what this card reads
    finally:
        card.close()
        plain.close()


def test_io_binding_card_refuses_buckets_that_miss_the_batch(data_dir):
    with pytest.raises(ValueError, match="do not end at the batch"):
        IoBindingCard(_spec(data_dir, batch=8, buckets=(1, 2)), 0, (0,))


def test_cpu_ortvalues_are_really_bound_not_copied_by_run():
    """onnxruntime writes a bound CPU output OrtValue in place: the card's outputs come from its own buffers."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    session = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
                                   .SerializeToString(), providers=["CPUExecutionProvider"])
    x = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cpu", 0)
    y = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cpu", 0)
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    x.update_inplace(np.array([[-1, 2, -3], [4, -5, 6]], np.float32))
    before = y.data_ptr()
    session.run_with_iobinding(binding)
    assert y.data_ptr() == before and np.array_equal(y.numpy(), [[0, 2, 0], [4, 0, 6]])


def test_cuda_settings_escape_hatches(monkeypatch):
    assert cuda_settings() == {"cuda_graph": None, "user_stream": True, "cudnn_conv_algo_search": "EXHAUSTIVE"}
    monkeypatch.setenv("APPLIANCE_CUDA_GRAPH", "0")
    monkeypatch.setenv("APPLIANCE_CUDNN_SEARCH", "heuristic")
    assert cuda_settings()["cuda_graph"] is False and cuda_settings()["cudnn_conv_algo_search"] == "HEURISTIC"
    monkeypatch.setenv("APPLIANCE_CUDNN_SEARCH", "fastest")
    with pytest.raises(ApplianceError, match="it takes one of EXHAUSTIVE"):
        cuda_settings()


# batches straight from the replica ------------------------------------------------------------------------------
@given(st.lists(st.integers(0, 40), max_size=64))
def test_row_runs_rebuild_the_batch_in_maximal_runs(rows):
    runs = row_runs(np.asarray(rows, np.int64))
    assert [first + j for first, _, k in runs for j in range(k)] == rows  # every row, in batch order
    ends = list(accumulate(k for *_, k in runs))
    assert [at for _, at, _ in runs] == ([0, *ends[:-1]] if runs else [])  # each run lands where the last ended
    assert all(k >= 1 for *_, k in runs)
    assert all(a[0] + a[2] != b[0] for a, b in pairwise(runs))  # maximal: none continues the last


def test_row_runs_edge_cases():
    assert row_runs(np.array([], np.int64)) == []
    assert row_runs(np.array([7])) == [(7, 0, 1)]
    assert row_runs(np.arange(5, 13)) == [(5, 0, 8)]  # a consecutive batch is one copy
    assert row_runs(np.array([3, 3, 3])) == [(3, 0, 1), (3, 1, 1), (3, 2, 1)]  # a repeated row starts a new run
    assert row_runs(np.array([4, 3, 2])) == [(4, 0, 1), (3, 1, 1), (2, 2, 1)]  # descending rows are no run
    assert row_runs(np.array([0, 1, 5, 6, 7, 2])) == [(0, 0, 2), (5, 2, 3), (2, 5, 1)]


def test_rows_are_the_replicas_and_checked_as_staging_is(data_dir):
    qsl = SampleLibrary(BENCH, store.open_prepared(Layout(data_dir, BENCH).preprocessed, "prepare"))
    qsl.load([9, 3, 4, 5, 20])  # rows in index order: 3 4 5 9 20
    rows = qsl.rows(np.array([4, 5, 9, 9, 3]))
    assert rows.replica is qsl.replicas[0].buffer and rows.n == 5
    assert rows.runs == [(1, 0, 3), (3, 3, 1), (0, 4, 1)]
    with pytest.raises(RuntimeError, match="not loaded"):
        qsl.rows(np.array([3, 6]))
    with pytest.raises(IndexError):
        qsl.rows(np.array([-1]))


def test_the_qsl_tells_a_watching_card_each_load_and_when_it_is_emptied(data_dir):
    qsl = _qsl(data_dir, 4)
    told: list[tuple[object, object]] = []

    def watch(buf, node):
        told.append((buf, node))

    qsl.watch(0, watch)
    assert len(told) == 1 and told[0][0] is qsl.replicas[0].buffer  # loaded already: told at once
    qsl.load([1, 2])
    assert len(told) == 2 and told[1][0] is qsl.replicas[0].buffer
    qsl.unload([1])
    assert len(told) == 2  # one sample left: the replica is still read
    qsl.unload([2])
    assert told[2] == (None, None)
    qsl.unwatch(watch)
    qsl.load([1])
    assert len(told) == 3


class _Runtime:
    """A stand-in for libcudart's five calls CudaCopies.pin / unpin make, recording them."""

    def __init__(self, calls: list[tuple[str, int]]) -> None:
        self.calls = calls

    def cudaSetDevice(self, ordinal: int) -> int:
        self.calls.append(("set", ordinal))
        return 0

    def cudaHostRegister(self, ptr: int, nbytes: int, flags: int) -> int:
        self.calls.append(("register", ptr))
        return 2 if ptr == 99 else 0  # cudaErrorMemoryAllocation

    def cudaHostUnregister(self, ptr: int) -> int:
        self.calls.append(("unregister", ptr))
        return 0

    def cudaGetLastError(self) -> int:
        self.calls.append(("clear", 0))
        return 0

    def cudaGetErrorString(self, status: int) -> bytes:
        return b"out of memory"


def test_one_cudaHostRegister_per_buffer_however_many_cards_pin_it(monkeypatch):
    """A replica read by two cards (on two GPUs here) is registered once, unregistered when the last lets go; a
    refusal is one line and the error is cleared."""
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(cuda_runtime, "_REGISTERED", {})
    a, b = CudaCopies.__new__(CudaCopies), CudaCopies.__new__(CudaCopies)
    for ordinal, c in enumerate((a, b)):
        c.rt, c.ordinal, c.stream, c._pinned = _Runtime(calls), ordinal, 0, []
    assert a.pin(4096, 100) is None and b.pin(4096, 100) is None
    assert [c for c in calls if c[0] == "register"] == [("register", 4096)]
    a.unpin(4096)
    a.unpin(4096)  # no longer held: nothing
    assert not any(c[0] == "unregister" for c in calls)
    b.close()
    assert calls[-2:] == [("set", 1), ("unregister", 4096)] and cuda_runtime._REGISTERED == {}
    assert a.pin(99, 100) == "cudaHostRegister of 100 bytes failed: CUDA error 2 (out of memory)"
    assert calls[-1] == ("clear", 0) and a._pinned == [] and cuda_runtime._REGISTERED == {}


class _Copies(HostCopies):
    """The CPU provider's copies as a GPU's are: what the card copies from is page-locked first. `pin` refuses
    the addresses in `refuse`; every pin and unpin is recorded."""

    needs_pinning = True
    REFUSAL = "cudaHostRegister of 1 bytes failed: CUDA error 2 (out of memory)"

    def __init__(self, refuse: tuple[int, ...] = ()) -> None:
        self.refuse = refuse
        self.pins: list[tuple[int, int]] = []
        self.unpins: list[int] = []

    def pin(self, ptr: int, nbytes: int) -> str | None:
        if ptr in self.refuse:
            return self.REFUSAL
        self.pins.append((ptr, nbytes))
        return None

    def unpin(self, ptr: int) -> None:
        self.unpins.append(ptr)


@pytest.fixture(scope="module")
def io_cards(data_dir):
    """The IO-binding card, the plain card, and a sample library of the whole (small) dataset."""
    spec = _spec(data_dir, batch=8, buckets=(1, 2, 4, 8))
    card, plain = make_card(spec, 0, (0,)), OnnxRuntimeCard(replace(spec, settings=None), 0, (0,))
    try:
        yield card, plain, _qsl(data_dir, SAMPLES)
    finally:
        card.close()
        plain.close()


def test_the_io_binding_card_reads_the_replica_and_the_plain_card_does_not(io_cards):
    card, plain, _ = io_cards
    assert isinstance(card, ReplicaReader) and type(as_async(card)) is FromReplica
    assert not isinstance(plain, ReplicaReader) and type(as_async(plain)) is Synchronous


@pytest.mark.parametrize("kind", ["random", "consecutive", "repeated"])
def test_a_batch_copied_from_the_replica_is_the_plain_cards_batch(io_cards, kind):
    """Batches of n = 1, 3 and 8 (the full batch) straight from the replica, run by run: the bucket's input holds
    the samples asked for, and the classes are the plain card's."""
    card, plain, qsl = io_cards
    replica = qsl.replicas[0].buffer
    assert card.replica_loaded(replica, 0) is True
    rng = np.random.default_rng(["random", "consecutive", "repeated"].index(kind))
    f32 = qsl.staging_buffer(8, "float32")
    copies = 0
    for n in (1, 3, 8):
        indices = {"random": rng.choice(SAMPLES, n, replace=False), "consecutive": np.arange(20, 20 + n),
                   "repeated": np.array([5, 5, 5, 30, 30, 2, 2, 2])[:n]}[kind]
        rows = qsl.rows(indices)
        copies += len(rows.runs)
        out = card.infer_rows(rows)
        bucket = card.buckets[gpu_plan.bucket_for(n, card.sizes)][0].numpy()
        assert np.array_equal(bucket[:n], replica[indices])  # the rows copied are the samples asked for
        want = plain.infer(qsl.stage(indices, f32), n)
        assert out[0].shape == (n,) and np.array_equal(out[0], want[0])
        assert out[1].shape == (n, 1001) and np.isnan(out[1]).all()
    if kind != "random":
        assert copies == {"consecutive": 3, "repeated": 1 + 3 + 8}[kind]  # one copy a batch; one a repeated row
    assert (card.rows_batches, card.rows_copies) == (3, copies)
    card.replica_loaded(None, None)  # described at each load and at close
    io = card.info.details["io_binding"]
    assert io["input_path"] == f"memmoves from the replica (node 0), {copies / 3:.2f} copies per batch on average; " \
                               f"the CPU provider: host memory, nothing page-locked"
    assert io["replica_bytes_pinned"] == 0 and io["host_buffers_pinned"] == 0


def test_a_batch_from_another_replica_is_refused_in_one_line(io_cards, data_dir):
    card, _, qsl = io_cards
    card.replica_loaded(qsl.replicas[0].buffer, 0)
    other = _qsl(data_dir, 8)
    with pytest.raises(ApplianceError, match="did not page-lock") as err:
        card.infer_rows(other.rows(np.arange(2)))
    assert "\n" not in str(err.value)


def test_the_replica_is_page_locked_at_each_load_and_let_go_of(io_cards, data_dir, monkeypatch):
    card, _, qsl = io_cards
    card.replica_loaded(None, None)  # let go of the replica an earlier test left it
    copies = _Copies()
    monkeypatch.setattr(card, "copies", copies)
    replica = qsl.replicas[0].buffer
    assert card.replica_loaded(replica, 1) is True
    assert copies.pins == [(replica.ctypes.data, replica.nbytes)] and copies.unpins == []
    io = card.info.details["io_binding"]
    assert io["replica_bytes_pinned"] == replica.nbytes
    assert io["input_path"] == "DMA from the page-locked replica (node 1), no batch yet"
    card.infer_rows(qsl.rows(np.array([1, 2, 3, 7])))
    other = _qsl(data_dir, 8).replicas[0].buffer
    assert card.replica_loaded(other, None) is True  # loaded again: the last one let go of, the new one locked
    assert copies.unpins == [replica.ctypes.data] and copies.pins[-1] == (other.ctypes.data, other.nbytes)
    card.infer_rows(_rows(other, [0, 1, 2, 3, 5]))
    assert card.replica_loaded(None, None) is False  # every sample unloaded
    assert copies.unpins == [replica.ctypes.data, other.ctypes.data]
    assert io["input_path"] == "DMA from the page-locked replica (no NUMA node), 2.00 copies per batch on average"
    assert io["host_buffers_pinned"] == 0  # no staging buffer was locked


def _rows(replica: np.ndarray, rows: list[int]) -> ReplicaRows:
    return ReplicaRows(replica, row_runs(np.asarray(rows)), len(rows))


def test_a_replica_that_cannot_be_page_locked_is_staged_and_says_why(io_cards, monkeypatch):
    """The fallback: the staging buffers are page-locked then (once), the batches staged, the manifest says why."""
    card, plain, qsl = io_cards
    replica = qsl.replicas[0].buffer
    copies = _Copies(refuse=(replica.ctypes.data,))
    monkeypatch.setattr(card, "copies", copies)
    monkeypatch.setattr(card, "_staging_pinned", False)
    monkeypatch.setattr(card, "_staging", [])
    staging = [qsl.staging_buffer(8, "uint8") for _ in range(3)]
    card.register_host_buffers(staging)
    io = card.info.details["io_binding"]
    assert copies.pins == [] and io["host_buffers_pinned"] == 0  # not yet: only if the replica cannot be
    loads, staged = card.replica_loads, card.staged_loads
    assert card.replica_loaded(replica, 0) is False
    assert io["input_path"] == f"staged ({_Copies.REFUSAL})"
    assert (io["replica_loads"], io["replica_loads_staged"]) == (loads + 1, staged + 1)
    assert copies.pins == [(b.ctypes.data, b.nbytes) for b in staging]
    assert io["host_buffers_pinned"] == sum(b.nbytes for b in staging) and io["replica_bytes_pinned"] == 0
    assert card.replica_loaded(replica, 0) is False and len(copies.pins) == len(staging)  # locked once
    indices = np.array([3, 3, 40, 41])
    out = card.infer(qsl.stage(indices, staging[0]), 4)  # the staged path: the plain card's classes
    assert np.array_equal(out[0], plain.infer(qsl.stage(indices, qsl.staging_buffer(4, "float32")), 4)[0])


def test_a_model_that_reads_float32_is_always_staged(io_cards, monkeypatch):
    card, _, qsl = io_cards
    monkeypatch.setattr(card, "in_dtype", np.dtype(np.float32))
    assert card.replica_loaded(qsl.replicas[0].buffer, 0) is False
    assert card.info.details["io_binding"]["input_path"] == \
        "staged (the model reads float32: the mean is subtracted on the host)"


# the worker's seam: rows for a replica reader, staged batches for every other card ----------------------------
class _Card(PageableHostBuffers):
    """Answers each sample's first byte + 1 as its class and records how each batch came (staged or as rows)."""

    input_dtype = "uint8"

    def __init__(self, index: int) -> None:
        self.info = CardInfo(index, "fake", "fake", (0,), emulated=True)
        self.ways: list[str] = []
        self.seen: list[int] = []

    def infer(self, batch, n):
        assert isinstance(batch, np.ndarray)
        self.ways.append("staged")
        return self._answer(batch[:n, 0, 0, 0])

    def _answer(self, first: np.ndarray) -> list[np.ndarray]:
        self.seen += first.tolist()
        return [first.astype(np.int64) + 1, np.zeros((len(first), 1001), np.float32)]

    def close(self) -> None:
        pass


class _Reader(_Card):
    """The same card as a replica reader that takes the replica (`accept`) or not."""

    def __init__(self, index: int, accept: bool) -> None:
        super().__init__(index)
        self.accept = accept
        self.told: list[object] = []

    def replica_loaded(self, replica, node):
        self.told.append(replica)
        return self.accept and replica is not None

    def infer_rows(self, rows: ReplicaRows) -> list[np.ndarray]:
        assert rows.replica is self.told[-1]
        first = np.concatenate([rows.replica[f:f + k, 0, 0, 0] for f, _, k in rows.runs])
        assert len(first) == rows.n
        self.ways.append("rows")
        return self._answer(first)


@pytest.fixture
def completions(monkeypatch):
    got: list[int] = []
    monkeypatch.setattr(lg, "QuerySamplesComplete", lambda responses: got.extend(r.id for r in responses))
    return got


@pytest.mark.parametrize("kind", ["reads the replica", "refuses it", "not a reader"])
def test_the_worker_hands_a_replica_reader_rows_and_every_other_card_a_staged_batch(data_dir, completions, kind):
    card = _Card(0) if kind == "not a reader" else _Reader(0, kind == "reads the replica")
    qsl = _qsl(data_dir, SAMPLES)
    sut = SystemUnderTest(BENCH, qsl, [CardSlot(0, tuple(sorted(os.sched_getaffinity(0)))[:1], 0)],
                          lambda i, cpus: card, 4)
    sut.load_cards()
    worker = sut.workers[0]
    if kind == "not a reader":
        assert worker.reader is None and qsl._watches == []
    else:  # loaded already: told at once
        assert card.told == [qsl.replicas[0].buffer] and worker.from_replica is (kind == "reads the replica")
    sut.warm_up(timed=False)  # warm-up loads samples itself: the reader is told, and a batch runs its way
    qsl.load(list(range(SAMPLES)))  # LoadGen's own load, after warm-up
    if kind != "not a reader":
        assert len(card.told) == 3 and card.told[-1] is qsl.replicas[0].buffer
    sut.start()
    ids = np.arange(40, dtype=np.uint64)
    indices = (ids * 7 % SAMPLES).astype(np.int64)  # scattered: runs of one row
    sut.intake.push(ids, indices)
    end = time.monotonic() + 60
    while len(completions) < 40 and time.monotonic() < end:
        time.sleep(0.01)
    sut.stop()
    assert sorted(completions) == list(range(40))
    assert set(card.ways) == {"rows" if kind == "reads the replica" else "staged"}
    replica = qsl.replicas[0].buffer
    assert sorted(card.seen[-40:]) == sorted(replica[indices, 0, 0, 0].tolist())  # the samples asked for
    assert qsl._watches == []  # the card closed with the SUT: it watches no more


@pytest.mark.slow
def test_a_run_through_the_io_binding_card(data_dir, tmp_path, monkeypatch):
    """`appliance run` with APPLIANCE_IO_BINDING=1: Server warms every bucket, the manifest says so; accuracy
    against the FP32 golden reference is that of the plain card."""
    monkeypatch.setenv("APPLIANCE_IO_BINDING", "1")
    results = tmp_path / "r"
    common = ("--data-dir", data_dir, "--results", results, "--batch-size", 4, "-q")
    assert appliance("run", *common, "-s", "Server", "--duration-ms", 300, "--count", 16) == 0
    (path,) = results.glob("*/resnet50/Server/performance/run_1/manifest.json")
    card = json.loads(path.read_text())["cards"][0]
    assert card["io_binding"]["buckets"] == [1, 2, 4] and card["io_binding"]["device"] == "cpu:0"
    assert card["io_binding"]["input_path"].startswith("memmoves from the replica (node ")  # no host gather
    assert "copies per batch on average" in card["io_binding"]["input_path"]
    assert appliance("run", *common, "--mode", "accuracy") == 0
    (acc,) = results.glob("*/resnet50/Offline/accuracy/manifest.json")
    manifest = json.loads(acc.read_text())
    assert manifest["cards"][0]["io_binding"]["buckets"] == [1, 4]
    assert manifest["result"]["golden_top1"] == 100.0


# TensorRT engine cache ----------------------------------------------------------------------------------------
def _key(**kw) -> engine_cache.EngineKey:
    base = {"model_sha256": "ab" * 32, "gpu": "NVIDIA H100 80GB HBM3", "tensorrt": "10.13.3", "precision": "int8",
            "input_name": "input_tensor:0", "sample_shape": (3, 224, 224), "min_batch": 1, "opt_batch": 256,
            "max_batch": 256}
    return engine_cache.EngineKey(**{**base, **kw})


def test_engine_cache_key_changes_with_what_makes_the_engine(tmp_path):
    key = _key()
    assert key.digest() == _key().digest()
    for change in ({"model_sha256": "cd" * 32}, {"gpu": "NVIDIA L40S"}, {"tensorrt": "10.14.0"}, {"precision": "fp16"},
                   {"max_batch": 512}, {"opt_batch": 128}):
        assert _key(**change).digest() != key.digest(), change
    options = engine_cache.provider_options(key, tmp_path / "models")
    folder = tmp_path / "models" / "engines" / key.digest()[:24]
    assert folder.is_dir() and options["trt_engine_cache_path"] == str(folder)
    assert options["trt_profile_min_shapes"] == "input_tensor:0:1x3x224x224"
    assert options["trt_profile_max_shapes"] == "input_tensor:0:256x3x224x224"
    assert (options["trt_int8_enable"], options["trt_fp16_enable"], options["trt_engine_cache_enable"]) == ("1",) * 3
    assert engine_cache.provider_options(_key(precision="fp32"), tmp_path)["trt_fp16_enable"] == "0"
    assert not engine_cache.cached(key, tmp_path / "models")
    engine_cache.write_key(key, tmp_path / "models")
    assert json.loads((folder / "key.json").read_text())["tensorrt"] == "10.13.3"
    (folder / "TensorrtExecutionProvider_x.engine").write_bytes(b"engine")
    assert engine_cache.cached(key, tmp_path / "models")


@pytest.mark.skipif(engine_cache.tensorrt_version() is not None, reason="TensorRT is installed here")
def test_tensorrt_missing_is_one_line():
    with pytest.raises(ApplianceError) as err:
        engine_cache.require_tensorrt()
    assert "TensorRT" in str(err.value) and "onnxruntime-cuda" in str(err.value) and "\n" not in str(err.value)


# tune's GPU grid ----------------------------------------------------------------------------------------------
def test_tune_grid_on_gpus_is_precision_x_batch_x_cards_per_gpu():
    sweep = Sweep(("fp32", "fp16"), (RECORDS["onnxruntime-cuda"],), None)
    got = sweep.candidates()
    assert {c for c, *_ in got} == {"cuda:allx1", "cuda:allx2", "cuda:allx3", "cuda:allx4"}
    assert {n for _, _, _, n, _, _ in got} == set(GPU_COARSE) and max(GPU_BATCHES) == 1024  # coarse (issue 43)
    assert {o for *_, o in got} == {"prefer_nhwc=1"}  # NHWC first; the other set refines (issue 36, 43)
    assert len(got) == 2 * len(GPU_COARSE) * 4
    # a CPU backend keeps its layouts; an explicit GPU layout is timed as given
    assert {c for c, *_ in Sweep(("fp32",), (RECORDS["onnxruntime"],), None).candidates()} == {"auto"}
    given = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), (64,), layouts=("cuda:0x2",))
    assert {c for c, *_ in given.candidates()} == {"cuda:0x2"}
    # the card says a batch does not fit by its error's type, which tune catches (issue 37), not by words
    oom = batch_fault("card 0 (cuda:0)", 1024, RuntimeError("CUDA failure 2: out of memory\n  at bfc_arena.cc"))
    assert isinstance(oom, BatchDoesNotFit) and "does not fit in the GPU's memory" in str(oom) and "\n" not in str(oom)
    other = batch_fault("card 0 (cuda:0)", 8, RuntimeError("Non-zero status code returned while running Conv node"))
    assert not isinstance(other, BatchDoesNotFit) and isinstance(other, ApplianceError)


# energy -------------------------------------------------------------------------------------------------------
def test_gpu_energy_per_card_shares_its_gpus_counter():
    a, b = GpuRef(0, "0000:17:00.0", "H100"), GpuRef(1, "0000:65:00.0", "H100")
    cards = gpu_energy.per_card((a, a, b), (300, 100, 0), {a.pci: 200.0, b.pci: 50.0})
    assert [c["joules_per_sample"] for c in cards] == [0.5, 0.5, None]
    assert [c["gpu"] for c in cards] == [a.pci, a.pci, b.pci]


def test_gpu_energy_without_gpus_says_why():
    meter = gpu_energy.GpuEnergyMeter((), lambda: [])
    meter.start()
    meter.stop()
    assert meter.result() == {"available": False, "note": "GPU energy not measured: no GPU cards"}


# on a GPU -----------------------------------------------------------------------------------------------------
@needs_gpu
@pytest.mark.gpu
def test_gpu_io_binding_card_streams_graphs_and_pinning(data_dir):
    from harness.run.cards.onnxruntime_card import check_gpu_libraries

    check_gpu_libraries(RECORDS["onnxruntime-cuda"])  # CUDA_DEVICE_ORDER, NVIDIA's libraries preloaded
    spec = _spec(data_dir, batch=8, buckets=(1, 2, 4, 8), gpu=GpuSettings((GpuRef(0, "", "GPU"),)))
    spec = replace(spec, backend=RECORDS["onnxruntime-cuda"])
    card = make_card(spec, 0, (0,))
    try:
        assert isinstance(card, IoBindingCard)
        io = card.info.details["io_binding"]
        assert io["cuda_graph"] and io["graph_ids"] == {"1": 0, "2": 1, "4": 2, "8": 3} and io["user_compute_stream"]
        assert card.info.details["intra_op_threads"] == 1 and io["allow_spinning"] == "0"
        qsl = _qsl(data_dir, 8)
        u8 = qsl.stage(np.arange(8), qsl.staging_buffer(8, "uint8"))
        card.register_host_buffers([u8])
        assert card.info.details["io_binding"]["host_buffers_pinned"] == 0  # only if the replica cannot be
        replica = qsl.replicas[0].buffer
        assert card.replica_loaded(replica, 0) is True
        assert io["replica_bytes_pinned"] == replica.nbytes
        assert dict(cuda_runtime._REGISTERED) == {replica.ctypes.data: 1}
        staged = card.infer(u8, 8)[0]
        assert np.array_equal(card.infer_rows(qsl.rows(np.arange(8)))[0], staged)
        indices = np.array([7, 1, 2, 2, 5])
        assert np.array_equal(card.infer_rows(qsl.rows(indices))[0], staged[indices])
        assert io["input_path"].startswith("DMA from the page-locked replica (node 0)")
    finally:
        card.close()
    assert cuda_runtime._REGISTERED == {}  # unregistered at close


# YOLO11l: the fp16 outputs a GPU card returns, on the CPU provider ----------------------------------------------
@pytest.mark.slow
def test_yolo_fp16_outputs_through_io_binding_match_the_plain_card(tmp_path):
    """The card returns [84, 8400] in fp16 (a Cast in the graph), from its bound device buffer, equal to the plain
    card's, and the host NMS (the benchmark's encoder) reads it."""
    import onnx

    from harness.data.models import yolo

    bench = benchmarks.get("yolo-99").with_card_outputs("quantised")
    path = tmp_path / "yolo.onnx"
    onnx.save(yolo.build_uint8(0), str(path))
    spec = BackendSpec(RECORDS["onnxruntime"], path, bench.input_name, bench.outputs, bench.output_specs,
                       IoBindingSettings(2, (1, 2), bench.name), output_casts=bench.output_casts)
    card, plain = make_card(spec, 0, (0,)), OnnxRuntimeCard(replace(spec, settings=None), 0, (0,))
    try:
        assert isinstance(card, IoBindingCard) and card.input_dtype == "uint8" == plain.input_dtype
        assert card.info.details["io_binding"]["outputs_to_host"] == list(bench.outputs)
        images = np.random.default_rng(0).integers(0, 256, (2, *bench.input_shape), dtype=np.uint8)
        (out,) = card.infer(images[:1], 1)
        assert out.shape == (1, 84, 8400) and out.dtype == np.float16
        assert np.array_equal(out, plain.infer(images[:1], 1)[0])
        sized = bench.with_image_sizes(np.array([[480, 640]]))
        payload, offsets = sized.encode_response([out], np.zeros(1, np.int64))
        assert offsets[0] == 0 and len(payload) == offsets[-1]
    finally:
        card.close()
        plain.close()


@pytest.mark.ortgpu
@pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers() or HAS_GPU,
                    reason="needs onnxruntime-gpu on a machine without a GPU (ci/test's GPU venv)")
def test_io_binding_gpu_card_without_a_gpu_is_one_line(data_dir):
    """The GPU card made directly (no plan, no library check) on a machine with no GPU: refused in one line
    naming the card, never a CPU result."""
    spec = replace(_spec(data_dir, batch=2, buckets=(1, 2), gpu=GpuSettings()), backend=RECORDS["onnxruntime-cuda"])
    with pytest.raises(ApplianceError) as info:
        make_card(spec, 0, (0,))
    assert "card 0 (cuda:0" in str(info.value) and "\n" not in str(info.value)
