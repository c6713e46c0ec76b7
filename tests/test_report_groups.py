"""`appliance report` on a mixed results folder: grouped by benchmark, scenario and card setup, scaling only
across card counts of one setup, verdicts on their reference run, and a list of what was left out.

The folder is written here as `appliance run` lays it out (manifest.json + LoadGen detail log lines), so
every grouping case is present without an hour of runs; tests/test_report.py renders real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import appliance, manifest_json

from harness.report.groups import by_scenario, collect, latest_per_setup, scaling_series

NULL = {"device": "none", "backend": "null"}
SIM = {"device": "cloud-ai-100 (simulated)", "backend": "simulated"}
CPU = {"device": "cpu-emulated", "backend": "onnxruntime"}


def _run(root: Path, rel: str, bench: str, scenario: str, card: dict[str, str], n: int,  # noqa: PLR0913
         created: str, metric: float = 100.0, mode: str = "performance") -> Path:  # a run as its folder holds it
    folder = root / rel
    folder.mkdir(parents=True)
    cards = [{**card, "index": i, "cpus": [i % 2], "samples_completed": 10} for i in range(n)]
    manifest = manifest_json(benchmark=bench, scenario=scenario, mode=mode, backend=card["backend"], cards=cards,
                             created_utc=created, result={"top1": 99.0})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    records = {"effective_scenario": scenario, "result_validity": "VALID", "result_samples_per_second": metric,
               "result_completed_samples_per_sec": metric, "early_stopping_latency_ss": 2e6}
    records.update({f"result_{p}_percentile_latency_ns": 1e6 * (1 + i) * (1000 if scenario == "Offline" else 1)
                    for i, p in enumerate(("50.00", "90.00", "95.00", "97.00", "99.00", "99.90"))})
    (folder / "mlperf_log_detail.txt").write_text("".join(
        f':::MLLOG {json.dumps({"key": k, "value": v, "metadata": {}})}\n' for k, v in records.items()))
    return folder


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Two benchmarks, three scenarios, three card setups, a repeat, a compliance test, leftovers."""
    r = tmp_path / "results"
    _run(r, "null/resnet50/Offline/performance/run_1", "resnet50", "Offline", NULL, 1, "2026-01-01T00:01", 467_000)
    _run(r, "sim1/resnet50/Offline/performance/run_1", "resnet50", "Offline", SIM, 1, "2026-01-01T00:02", 20_000)
    _run(r, "sim2/resnet50/Offline/performance/run_1", "resnet50", "Offline", SIM, 2, "2026-01-01T00:03", 39_000)
    _run(r, "sim2/resnet50/Offline/performance/run_2", "resnet50", "Offline", SIM, 2, "2026-01-01T00:04", 40_000)
    _run(r, "sim2/resnet50/Offline/TEST01/performance/run_1", "resnet50", "Offline", SIM, 2, "2026-01-01T00:05")
    (r / "sim2/resnet50/Offline/TEST01/verify_performance.txt").write_text(
        "reference: /elsewhere/sim2/resnet50/Offline/performance/run_1/mlperf_log_detail.txt\ntest: x\nTEST PASS\n")
    (r / "sim2/resnet50/Offline/TEST01/verify_accuracy.txt").write_text("reference: a.json\nTEST FAIL\n")
    _run(r, "cpu/resnet50/Server/performance/run_1", "resnet50", "Server", CPU, 1, "2026-01-01T00:06", 7)
    _run(r, "cpu/resnet50/Offline/accuracy", "resnet50", "Offline", CPU, 1, "2026-01-01T00:07", mode="accuracy")
    _run(r, "cpu/ssd-mobilenet/SingleStream/performance/run_1", "ssd-mobilenet", "SingleStream", CPU, 1,
         "2026-01-01T00:08")
    _run(r, "cpu/resnet50/Server/performance/.run_2.staging-123", "resnet50", "Server", CPU, 1, "2026-01-01T00:09")
    broken = r / "cpu/resnet50/Server/performance/run_3"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    return r


def test_groups_setups_and_leftovers(mixed):
    got = collect(mixed)
    assert len(got.runs) == 7 and all(r.test is None for r in got.runs)
    groups = by_scenario(got.runs)
    assert list(groups) == [("resnet50", "Offline"), ("resnet50", "Server"), ("ssd-mobilenet", "SingleStream")]
    offline_perf = [r for r in groups[("resnet50", "Offline")] if r.mode == "performance"]
    shown, repeats = latest_per_setup(offline_perf)
    assert [(r.setup.backend, r.cards) for r in shown] == [("null", 1), ("simulated", 1), ("simulated", 2)]
    assert [r.path.name for r in repeats] == ["run_1"] and repeats[0].cards == 2

    # the verdicts go to the run they name (matched inside this folder, though the path was elsewhere)
    owner = mixed / "sim2/resnet50/Offline/performance/run_1"
    assert sorted(v.text() for v in got.verdicts[owner]) == ["TEST01 accuracy FAIL", "TEST01 performance PASS"]
    assert len(got.verdicts) == 1

    left = "\n".join(got.left_out)
    assert ".run_2.staging-123: an unfinished run" in left
    assert "run_3/manifest.json: not valid JSON (Expecting property name" in left
    assert "1 compliance run(s)" in left


def test_scaling_only_across_card_counts_of_one_setup(mixed):
    series, left_out = scaling_series(collect(mixed).runs)
    assert len(series) == 1
    (only,) = series
    assert only.benchmark == "resnet50" and only.setup.backend == "simulated"
    assert {n: r.path.name for n, r in only.points.items()} == {1: "run_1", 2: "run_2"}  # latest per count
    assert len(left_out) == 1 and "resnet50 on none (null), batch 8" in left_out[0] and "1 card(s) only" in left_out[0]


def test_report_draws_a_latency_plot_per_scenario_and_says_what_it_left_out(mixed, tmp_path, capsys):
    out = tmp_path / "out" / "report.html"
    assert appliance("report", mixed, "-o", out) == 0
    assert capsys.readouterr().out.strip() == f"report: {out}"
    pngs = sorted(p.name for p in out.parent.glob("*.png"))
    assert pngs == ["report-card-map.png", "report-latency-resnet50-offline.png", "report-latency-resnet50-server.png",
                    "report-latency-ssd-mobilenet-singlestream.png", "report-per-card.png",
                    "report-scaling-resnet50-0.png"]
    page = out.read_text()
    assert page.count("<h3>") == 3 and "<h3>resnet50 Offline</h3>" in page
    assert "TEST01 accuracy FAIL, TEST01 performance PASS" in page
    left = page.split('<h2 id="left-out">')[1].split("</ul>")[0]
    for text in ("unfinished run", "manifest.json: not valid JSON", "no scaling curve for resnet50 on none (null)",
                 "earlier run(s) of a card setup"):
        assert text in left, text
    # every run is one row: 7 reference runs, none of the compliance runs
    assert page.count("<tr><td>") == 7


def test_report_of_a_folder_without_runs_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert appliance("report", tmp_path / "empty", "-o", tmp_path / "r.html") == 2
    err = capsys.readouterr().err.strip()
    assert "no finished runs" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r.html").exists()
