"""Compliance tests TEST01 / TEST04 / TEST05: real LoadGen runs with audit.config, verified like MLCommons."""

from __future__ import annotations

import json

import pytest
from helpers import STEADY_PROFILE, appliance

from harness.compliance import verify_accuracy, verify_bracketed, verify_performance


def _tree(tmp_path, data_dir, scenario, card=("--backend", "null")):
    common = ("--data-dir", data_dir, "--results", tmp_path, "-s", scenario, "--system", "sut", "-q")
    assert appliance("run", *common, *card, "--duration-ms", 1000) == 0
    assert appliance("run", *common, *card, "--mode", "accuracy") == 0
    return common, tmp_path / "sut" / "resnet50" / scenario


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_test01_and_test04_pass_on_an_honest_sut(scenario, data_dir, tmp_path):
    """A simulated card with a steady latency, so its speed swings less with the machine's load.

    SingleStream's verdicts compare millisecond latencies of 1-second runs, which a busy 2-core
    machine moves by more than the 10% threshold; there the performance verdicts are checked for
    being written, and their PASS is shown by full-length runs (tools/rehearse_submission.sh).
    """
    profile = tmp_path / "steady.yaml"
    profile.write_text(STEADY_PROFILE)
    card = ("--cards", f"simulate:{profile}:1")
    common, folder = _tree(tmp_path, data_dir, scenario, card)
    for test in ("TEST01", "TEST04"):
        assert appliance("run", *common, *card, "--duration-ms", 1000, "--mode", test) == 0
    assert (folder / "TEST01" / "verify_accuracy.txt").read_text().rstrip().endswith("TEST PASS")
    expected = ("TEST PASS",) if scenario == "Offline" else ("TEST PASS", "TEST FAIL")
    assert (folder / "TEST01" / "verify_performance.txt").read_text().rstrip().endswith(expected)
    assert (folder / "TEST04" / "verify_performance.txt").read_text().rstrip().endswith(expected)
    assert (folder / "TEST01" / "accuracy" / "mlperf_log_accuracy.json").is_file()
    assert (folder / "TEST04" / "performance" / "run_1" / "mlperf_log_summary.txt").is_file()
    # the performance verdicts compare the test run with reference runs right before and after it, and say so
    for test in ("TEST01", "TEST04"):
        verdict = (folder / test / "verify_performance.txt").read_text()
        assert verdict.startswith("compared: the test run against 2 plain performance runs"), verdict
        for k in (1, 2):
            ref = folder / test / "reference" / f"run_{k}"
            assert f"reference: {ref / 'mlperf_log_detail.txt'}" in verdict, verdict
            assert (ref / "mlperf_log_detail.txt").is_file() and not (ref / "audit.config").exists()
        assert "submission's performance run (not compared)" in verdict
    audit = (folder / "TEST04" / "performance" / "run_1" / "audit.config").read_text()
    assert "performance_issue_same = 1" in audit
    assert not list(folder.glob(".*staging*"))


def test_test01_fails_when_performance_responses_differ(data_dir, tmp_path):
    """Accuracy from the real model, performance from a card that answers zeros: TEST01 must fail."""
    common, folder = _tree(tmp_path, data_dir, "Offline", card=("--backend", "onnxruntime"))
    assert appliance("run", *common, "--backend", "null", "--duration-ms", 800, "--mode", "TEST01") == 0
    verdict = (folder / "TEST01" / "verify_accuracy.txt").read_text()
    assert verdict.rstrip().endswith("TEST FAIL")
    assert "num_perf_log_data_mismatch = 0" not in verdict


def test_accuracy_verdict_flags_one_changed_response(tmp_path):
    ref = [{"seq_id": i, "qsl_idx": i, "data": "0000803F"} for i in range(4)]
    test = [{"seq_id": 9, "qsl_idx": 2, "data": "0000803F"}, {"seq_id": 10, "qsl_idx": 3, "data": "00000040"}]
    (tmp_path / "a.json").write_text(json.dumps(ref))
    (tmp_path / "t.json").write_text(json.dumps(test))
    verdict = verify_accuracy(tmp_path / "a.json", tmp_path / "t.json")
    assert not verdict.passed and "num_perf_log_data_mismatch = 1" in verdict.text()
    (tmp_path / "t.json").write_text(json.dumps(test[:1]))
    assert verify_accuracy(tmp_path / "a.json", tmp_path / "t.json").passed


def _detail(path, scenario, key, value, validity="VALID"):
    recs = [("effective_scenario", scenario), (key, value), ("result_validity", validity)]
    path.write_text("".join(f':::MLLOG {json.dumps({"key": k, "value": v, "metadata": {}})}\n' for k, v in recs))
    return path


def test_bracketed_verdict_passes_against_either_reference(tmp_path):
    """A machine that slowed down between the first reference and the test: the reference right after
    the test is as slow, so an honest SUT passes; a test faster than both references still fails TEST04."""
    before = _detail(tmp_path / "b.txt", "Offline", "result_samples_per_second", 190.0)
    after = _detail(tmp_path / "a.txt", "Offline", "result_samples_per_second", 150.0)
    slow = _detail(tmp_path / "t.txt", "Offline", "result_samples_per_second", 145.0)
    assert not verify_performance(before, slow, no_faster_only=False).passed  # the single-reference flip
    verdict = verify_bracketed([before, after], slow, no_faster_only=False)
    assert verdict.passed and verdict.text().count("against reference/run_") == 2
    cached = _detail(tmp_path / "c.txt", "Offline", "result_samples_per_second", 260.0)
    assert not verify_bracketed([before, after], cached, no_faster_only=True).passed
    invalid = _detail(tmp_path / "i.txt", "Offline", "result_samples_per_second", 150.0, "INVALID")
    assert not verify_bracketed([invalid, invalid], slow, no_faster_only=False).passed


def test_test04_fails_when_sample_reuse_is_faster(tmp_path):
    ref = _detail(tmp_path / "ref.txt", "Offline", "result_samples_per_second", 1000.0)
    ok = _detail(tmp_path / "ok.txt", "Offline", "result_samples_per_second", 1050.0)
    cached = _detail(tmp_path / "fast.txt", "Offline", "result_samples_per_second", 1500.0)
    assert verify_performance(ref, ok, no_faster_only=True).passed
    assert not verify_performance(ref, cached, no_faster_only=True).passed
    # SingleStream compares latencies: a 40% lower latency is 'faster' and fails
    ref = _detail(tmp_path / "rs.txt", "SingleStream", "early_stopping_latency_ss", 10_000_000)
    fast = _detail(tmp_path / "fs.txt", "SingleStream", "early_stopping_latency_ss", 6_000_000)
    assert not verify_performance(ref, fast, no_faster_only=True).passed
    invalid = _detail(tmp_path / "inv.txt", "Offline", "result_samples_per_second", 990.0, "INVALID")
    assert "INVALID" in verify_performance(tmp_path / "ref.txt", invalid, no_faster_only=False).text()


def test_compliance_needs_its_reference_runs(data_dir, tmp_path, capsys):
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--mode", "TEST01", "-q",
                     "--backend", "null") == 2
    assert "appliance run --mode performance" in capsys.readouterr().err


def test_test05_runs_with_the_alternate_seeds(data_dir, tmp_path):
    common = ("--data-dir", data_dir, "--results", tmp_path, "--system", "sut", "-q", "--backend", "null")
    assert appliance("run", *common, "--duration-ms", 800) == 0
    assert appliance("run", *common, "--duration-ms", 800, "--mode", "TEST05") == 0
    folder = tmp_path / "sut" / "resnet50" / "Offline" / "TEST05"
    from harness.results import read_detail

    detail = read_detail(folder / "performance" / "run_1" / "mlperf_log_detail.txt")
    assert detail["effective_qsl_rng_seed"] == 7975553102935885558  # mlperf.conf's test05_qsl_rng_seed
    assert (folder / "verify_performance.txt").read_text().rstrip().endswith(("TEST PASS", "TEST FAIL"))
