"""Issue 43, finding 5: a GPU tune that fits a 15-minute loan. Without --batch-sizes a GPU backend is timed coarse
(GPU_COARSE, NHWC only) then refined around the best Offline and Server candidates; the count and the time expected
are printed before anything is timed. Before: 8 batches x 2 option sets per layout (64 for ResNet50 on one GPU's
four layouts at one precision), each a session with an exhaustive cuDNN search."""

from __future__ import annotations

from harness.data import benchmarks
from harness.records.tuned import Measured
from harness.run.cards.backends import RECORDS
from harness.tune.search import GPU_BATCHES, GPU_COARSE, Sweep, expected

RESNET = benchmarks.get("resnet50")


def _row(batch: int, rate: float, qps: float, options: str = "prefer_nhwc=1", layout: str = "cuda:allx1") -> Measured:
    return Measured("fp16", "onnxruntime-cuda", batch, 1, samples_per_second=rate, single_latency_ms=1.0,
                    batch_latency_ms=batch / rate * 1000, multistream_latency_ms=1.0, server_qps=qps, layout=layout,
                    provider_options=options)


def test_the_default_gpu_grid_is_coarse_and_nhwc_first():
    sweep = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), None)  # layouts auto: cuda:allx1..x4
    got = sweep.candidates()
    assert len(got) == 4 * len(GPU_COARSE) == 12  # was 4 x 8 x 2 = 64
    assert {n for *_, n, _, _ in got} == set(GPU_COARSE) and {o for *_, o in got} == {"prefer_nhwc=1"}
    given = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), (1, 8), layouts=("cuda:allx1",)).candidates()
    assert {o for *_, o in given} == {"prefer_nhwc=0", "prefer_nhwc=1"}  # --batch-sizes given: as asked, every set


def test_refining_times_the_neighbours_of_the_best_offline_and_server_and_the_other_options():
    sweep = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), None, layouts=("cuda:allx1",))
    rows = [_row(8, 3000.0, 2500.0), _row(64, 7000.0, 5000.0), _row(512, 8200.0, 0.0)]
    more = sweep.refinements(rows, RESNET)
    batches = {(n, o) for *_, n, _, o in more}
    assert batches == {(256, "prefer_nhwc=1"), (1024, "prefer_nhwc=1"), (512, "prefer_nhwc=0"),  # Offline: 512
                       (32, "prefer_nhwc=1"), (128, "prefer_nhwc=1"), (64, "prefer_nhwc=0")}  # Server: 64
    assert all(n in GPU_BATCHES for *_, n, _, _ in more)
    timed = rows + [_row(n, 1.0, 0.0, o) for *_, n, _, o in more]
    assert sweep.refinements(timed, RESNET) == []  # the same bests, their neighbours timed: nothing twice
    assert Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), (8, 64)).refinements(rows, RESNET) == []  # batches given


def test_tune_says_how_many_candidates_and_how_long_before_it_starts():
    sweep = Sweep(("fp16",), (RECORDS["onnxruntime-cuda"],), None, layouts=("cuda:allx1", "cuda:allx2"))
    line = expected(sweep.candidates(), sweep)
    assert line.startswith("tune: 6 candidate(s); on a GPU about 36 s") and "refining around the best" in line
    assert expected(Sweep(("fp32",), (RECORDS["onnxruntime"],), (1,)).candidates(), sweep) == "tune: 1 candidate(s)"
