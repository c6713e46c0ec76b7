"""MLPerf Power in `submission check`: SIMULATED power results (tests/power_fixtures.py) accepted in every round,
each of the power checker's rules broken one at a time (one problem line naming the file), the official metric;
and, where the fetched mirror of inference_results_v4.1 is here, a real power tree checked against the figures
the official v4.1 checker printed for it (docs/audit-corpus.md)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.audit.submission.check import check_tree
from harness.audit.submission.rounds import ROUNDS
from tests.power_fixtures import QUERIES, RUN_S, WATTS, add_power, at_testing, rehash
from tests.submission_fixtures import make_tree

SCENARIOS = ("Offline", "SingleStream", "MultiStream")


def _tree(tmp_path: Path, version: str = "v5.1", scenarios: tuple[str, ...] = ("Offline",)) -> tuple[Path, Path]:
    sub = make_tree(tmp_path, version, benchmarks={"resnet50": SCENARIOS})
    scen = sub / "results" / "sys1" / "resnet50" / scenarios[0]
    return tmp_path, add_power(scen, version, scenarios[0])


@pytest.mark.parametrize("version", list(ROUNDS))
def test_a_simulated_power_result_passes_every_round_with_the_official_metric(tmp_path, version):
    root, _ = _tree(tmp_path, version)
    rep = check_tree(root, version)
    assert rep.ok, rep.problems
    [p] = rep.power
    assert p.status == "checked" and p.unit == "Watts"
    assert p.metric == pytest.approx(WATTS) and p.samples_per_joule == pytest.approx(1234.5 / WATTS)
    assert "power result(s) checked" in rep.lines()[-1]
    assert json.loads(json.dumps(rep.to_json()))["power"][0]["metric"] == pytest.approx(WATTS)


def test_single_stream_metric_is_millijoules_per_query(tmp_path):
    sub = make_tree(tmp_path, "v5.1", benchmarks={"resnet50": SCENARIOS})
    add_power(sub / "results" / "sys1" / "resnet50" / "SingleStream", "v5.1", "SingleStream")
    rep = check_tree(tmp_path, "v5.1")
    assert rep.ok, rep.problems
    [p] = rep.power
    # the samples strictly inside the window: one per second, the two at its ends excluded
    assert p.unit == "millijoules" and p.metric == pytest.approx(WATTS * RUN_S * 1000 / QUERIES)
    assert p.samples_per_joule == pytest.approx(1000 / p.metric)
    assert "mJ/query" in p.line()


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _lines(path: Path, edit) -> None:
    path.write_text(edit(path.read_text()))


# fault -> (edit of the performance folder, the file the one problem line must name, a word it must say)
FAULTS = {
    # without power/, the result is not a power result: pre-v6.0, run_1's spl.txt is then a file too many
    "power/ deleted": (lambda p: shutil.rmtree(p / "power"), "run_1", "no performance/power/"),
    "ranging/ deleted": (lambda p: shutil.rmtree(p / "ranging"), "performance/ranging", "missing folder"),
    "run_1/spl.txt deleted": (lambda p: (p / "run_1" / "spl.txt").unlink(), "run_1", "spl.txt"),
    "power/server.json deleted": (lambda p: (p / "power" / "server.json").unlink(), "power", "server.json"),
    "extra file in power/": (lambda p: (p / "power" / "notes.txt").write_text("x"), "power", "notes.txt"),
    "client source changed": (lambda p: _edit_json(p / "power" / "client.json",
                                                   lambda d: d["sources"].update({"client.py": "0" * 40})),
                              "power/client.json", "sources"),
    "PTD version": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d["ptd_messages"][1].update(
        reply=d["ptd_messages"][1]["reply"].replace("version=1.1", "version=9.9"))), "power/server.json", "version"),
    "analyzer not accepted": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d["ptd_messages"][1].update(
        reply=d["ptd_messages"][1]["reply"].replace("YokogawaWT310", "HiokiPW3335"))), "power/server.json", "analyzer"),
    "server UUID": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d["uuid"].update(
        server="00000000-0000-4000-8000-000000000000")), "power/server.json", "UUID"),
    "clocks 2 s apart": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d["phases"]["testing"][1]
                                              .__setitem__(0, d["phases"]["testing"][1][0] + 2)),
                         "power/server.json", "ms off"),
    # v5.1 on, the checker looks up the 4th SR,A command too: a session with three is refused
    "no 4th SR,A command": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d.update(ptd_messages=[
        m for i, m in enumerate(d["ptd_messages"]) if i != 4])), "power/server.json", "SR,A command number 4"),
    "server debug": (lambda p: _edit_json(p / "power" / "server.json", lambda d: d.update(debug=True)),
                     "power/server.json", "debug"),
    "detail log edited after the session": (lambda p: _lines(p / "ranging" / "mlperf_log_detail.txt",
                                                             lambda t: t.replace('"PySUT"', '"OtherSUT"')),
                                            "ranging/mlperf_log_detail.txt", "changed since"),
    "PTD error in the testing run": (lambda p: (_lines(p / "power" / "ptd_logs.txt", lambda t: t + (
        f"{at_testing(60)}: ERROR: Bad watts reading nan from analyzer\n")), rehash(p, "power/ptd_logs.txt")),
                                     "power/ptd_logs.txt", "outside the ranging run"),
    "uncertainty over 1%": (lambda p: (_lines(p / "power" / "ptd_logs.txt", lambda t: t + (
        f"{at_testing(900)}: WARNING: Uncertainty 1.52%, which is above 1.00% limit for the last sample!\n")),
        rehash(p, "power/ptd_logs.txt")), "power/ptd_logs.txt", "uncertainty"),
    "no uncertainty checking": (lambda p: (_lines(p / "power" / "ptd_logs.txt", lambda t: re.sub(
        r".*Uncertainty checking.*\n", "", t)), rehash(p, "power/ptd_logs.txt")), "power/ptd_logs.txt", "Uncertainty"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_power_fault_is_one_line_naming_the_file(tmp_path, fault):
    root, perf = _tree(tmp_path)
    edit, names, says = FAULTS[fault]
    edit(perf)
    rep = check_tree(root, "v5.1")
    assert not rep.ok
    hits = [p for p in rep.problems if names in p]
    assert hits and says.lower() in " ".join(hits).lower(), rep.problems
    assert len(rep.problems) == 1, rep.problems


def test_windows_not_overlapping_and_spl_from_another_measurement(tmp_path):
    root, perf = _tree(tmp_path)
    # the testing run's spl.txt from a measurement a day later: no sample inside LoadGen's window
    _lines(perf / "run_1" / "spl.txt", lambda t: t.replace("01-05-2026", "01-06-2026"))
    rehash(perf, "run_1/spl.txt")
    rep = check_tree(root, "v5.1")
    assert any("run_1/spl.txt: no power samples inside" in p for p in rep.problems), rep.problems
    assert rep.power[0].status == "failed" and rep.power[0].metric is None


def test_ranging_at_other_settings_is_refused(tmp_path):
    sub = make_tree(tmp_path, "v5.1", benchmarks={"resnet50": SCENARIOS})
    add_power(sub / "results" / "sys1" / "resnet50" / "Offline", "v5.1", "Offline", ranging_watts=WATTS * 1.2)
    rep = check_tree(tmp_path, "v5.1")
    assert [p for p in rep.problems if "same settings" in p and "run_1/spl.txt" in p], rep.problems


def test_pre_v6_power_needs_analyzer_table_and_power_settings(tmp_path):
    root, _ = _tree(tmp_path, "v4.1")
    meas = next(root.glob("closed/*/measurements/sys1/resnet50/Offline"))
    (meas / "analyzer_table.md").unlink()
    rep = check_tree(root, "v4.1")
    assert rep.problems == [f"{meas.relative_to(root)}: no analyzer_table.* here or in the folders above it "
                            f"(a power result describes its analyzer and power settings)"]
    assert check_tree(_tree(tmp_path / "v61", "v6.1")[0], "v6.1").ok  # v6.x: not asked for


def test_other_benchmarks_power_is_named_not_checked(tmp_path):
    root, _ = _tree(tmp_path)
    other = root / "closed" / "OrgA" / "results" / "sys1" / "bert-99" / "Offline" / "performance" / "power"
    other.mkdir(parents=True)
    rep = check_tree(root, "v5.1")
    assert any(p.where.endswith("bert-99/Offline") and p.status.startswith("not checked") for p in rep.power)


V41 = Path("/work/.mirror/mlcommons+inference_results_v4.1/repo")
# What the official v4.1 checker (mlcommons/inference tag v4.1) printed for this tree (docs/audit-corpus.md)
OFFICIAL = {"multistream": "61.316697 mJ/query, 130.470173 samples/J",
            "offline": "398.329985 W, 423.568414 samples/J",
            "singlestream": "29.238987 mJ/query, 34.200911 samples/J"}


@pytest.mark.skipif(not (V41 / "HEAD").exists(), reason="needs the fetched mirror of mlcommons/inference_results_v4.1 "
                                                         "(real power trees are never committed)")
def test_real_v41_untetherai_power_tree_matches_the_official_figures(tmp_path):
    sub = "closed/UntetherAI"
    paths = [f"{sub}/systems/h13_u3_slim.json", f"{sub}/results/h13_u3_slim/resnet50",
             f"{sub}/measurements/h13_u3_slim", f"{sub}/compliance/h13_u3_slim/resnet50", f"{sub}/calibration.md",
             f"{sub}/code/resnet50/image_classification_using_uai_kilt_run/README.md"]
    archive = subprocess.run(["git", "-C", str(V41), "archive", "HEAD", *paths], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    rep = check_tree(tmp_path, "v4.1")
    assert rep.ok, rep.problems
    got = {p.where.rsplit("/", 1)[1]: p.line().split(": ", 1)[1].split(" (")[0] for p in rep.power}
    assert got == OFFICIAL
    # one byte of a hashed file changed: the power checker's results checksum refuses it
    detail = tmp_path / sub / "results/h13_u3_slim/resnet50/offline/performance/ranging/mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace("3066443479025735752", "3066443479025735753", 1))
    bad = check_tree(tmp_path, "v4.1")
    assert any("ranging/mlperf_log_detail.txt: changed since" in p for p in bad.problems), bad.problems


def test_a_simulated_session_is_a_synthetic_finding_and_the_rest_still_checked(tmp_path):
    root, perf = _tree(tmp_path)
    for rec in ("client.json", "server.json"):
        _edit_json(perf / "power" / rec, lambda d: d.update(SIMULATED="a stand-in", sources={"standin.py": "0" * 40}))
    rep = check_tree(root, "v5.1")
    assert rep.ok, rep.problems
    assert rep.power[0].status == "simulated"
    assert any("SIMULATED" in s for s in rep.synthetic) and any("sources" in s for s in rep.synthetic)
    (perf / "power" / "client.log").write_text("edited\n")
    assert [p for p in check_tree(root, "v5.1").problems if "power/client.log: changed since" in p]
