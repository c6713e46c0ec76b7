"""MLPerf compliance tests TEST01, TEST04 and TEST05: audit.config, the run, and the verdict.

The verdicts follow the semantics of MLCommons' compliance scripts (compliance/TEST0x in
mlcommons/inference), re-implemented here so a run can check itself:

- TEST01 (accuracy log sampled in performance mode): every sampled response must equal the
  accuracy-mode response for the same sample, and the performance must be within 10% of the
  reference run (20% for latencies under 0.2 ms / 1.6 ms, where OS noise dominates).
- TEST04 (the same sample issued again and again): it must not be faster than the reference run
  by more than the same threshold, or the SUT is caching results.
- TEST05 (LoadGen's alternate seeds): the performance must be within the TEST01 threshold.

Layout written beside the reference runs (the submission layout)::

    <Scenario>/TEST01/verify_accuracy.txt  verify_performance.txt  accuracy/  performance/run_1/
    <Scenario>/TEST04/verify_performance.txt  performance/run_1/
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import ApplianceError, DataError
from harness.fsutil import atomic_write_text
from harness.results import METRICS, read_detail

TESTS = ("TEST01", "TEST04", "TEST05")
TEST01_LOG_SEED = 720381539243781796
TEST01_SAMPLING_TARGET = {"resnet50": 4096}  # MLCommons compliance/TEST01/<model>/audit.config


def audit_config(test: str, benchmark: str) -> str:
    """The audit.config MLCommons ships for `test` (and `benchmark`, for TEST01)."""
    head = "# audit.config written by appliance run --mode " + test + "\n"
    if test == "TEST01":
        target = TEST01_SAMPLING_TARGET.get(benchmark, 1024)
        return head + (f"*.*.mode = 2\n*.*.accuracy_log_rng_seed = {TEST01_LOG_SEED}\n"
                       f"*.*.accuracy_log_sampling_target = {target}\n")
    if test == "TEST04":
        return head + "".join(
            f"*.{s}.mode = 2\n*.{s}.performance_issue_unique = 0\n*.{s}.performance_issue_same = 1\n"
            f"*.{s}.performance_issue_same_index = 3\n" for s in ("MultiStream", "Offline", "SingleStream", "Server"))
    if test == "TEST05":  # LoadGen reads test05 itself only from mlperf.conf: the runner sets it
        return head + "*.*.mode = 2\n"
    raise ApplianceError(f"unknown compliance test {test!r}; choose one of: {', '.join(TESTS)}")


@dataclass(frozen=True)
class Verdict:
    passed: bool
    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join((*self.lines, "TEST PASS" if self.passed else "TEST FAIL")) + "\n"


def _score(detail: dict, path: Path) -> tuple[str, float]:
    scenario = detail.get("effective_scenario")
    if scenario not in METRICS:
        raise DataError(f"{path} is not a finished LoadGen detail log (no effective_scenario)")
    value = detail.get(METRICS[scenario][0])
    if value is None:
        raise DataError(f"{path} has no {METRICS[scenario][0]}")
    return scenario, float(value)


def _threshold(scenario: str, ref: float) -> float:
    """10%, relaxed to 20% for very short latencies (ns), as the MLCommons scripts do."""
    short = (scenario == "SingleStream" and ref <= 200_000) or (scenario == "MultiStream" and ref <= 1_600_000)
    return 0.20 if short else 0.10


def verify_performance(ref_detail: Path, test_detail: Path, *, no_faster_only: bool) -> Verdict:
    """TEST01/TEST05 (within the threshold) or TEST04 (`no_faster_only`: not faster than the threshold)."""
    ref, test = read_detail(ref_detail), read_detail(test_detail)
    lines = [f"reference: {ref_detail}", f"test: {test_detail}"]
    for name, d in (("reference", ref), ("test", test)):
        if d.get("result_validity") != "VALID":
            return Verdict(False, (*lines, f"{name} results are INVALID"))
    (r_scen, r_score), (t_scen, t_score) = _score(ref, ref_detail), _score(test, test_detail)
    if r_scen != t_scen:
        return Verdict(False, (*lines, f"scenarios differ: {r_scen} vs {t_scen}"))
    if r_scen == "Server" and ref.get("effective_target_latency_ns") != test.get("effective_target_latency_ns"):
        return Verdict(False, (*lines, "Server target latency mismatch"))
    t = _threshold(r_scen, r_score)
    lines += [f"reference score = {r_score}", f"test score = {t_score}", f"threshold = {t:.0%}"]
    if no_faster_only:
        # TEST04 compares throughputs; latency scenarios become 1e9 / latency.
        latency = METRICS[r_scen][1] == "ms"
        r_tp, t_tp = (1e9 / r_score, 1e9 / t_score) if latency else (r_score, t_score)
        return Verdict(t_tp < r_tp * (1 + t), tuple(lines))
    return Verdict(r_score * (1 - t) <= t_score <= r_score * (1 + t), tuple(lines))


def verify_accuracy(ref_log: Path, test_log: Path) -> Verdict:
    """TEST01: responses logged in performance mode equal the accuracy-mode responses, byte for byte."""
    try:
        ref_records = json.loads(ref_log.read_text())
        test_records = json.loads(test_log.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read accuracy logs for TEST01 ({exc})") from None
    reference: dict[int, str] = {}
    for rec in ref_records:
        reference.setdefault(rec["qsl_idx"], rec["data"])
    matched = mismatched = missing = 0
    for rec in test_records:
        want = reference.get(rec["qsl_idx"])
        if want is None:
            missing += 1
        elif want == rec["data"]:
            matched += 1
        else:
            mismatched += 1
    lines = (f"reference: {ref_log}", f"test: {test_log}", f"num_acc_log_entries = {len(ref_records)}",
             f"num_perf_log_entries = {len(test_records)}", f"num_perf_log_qsl_idx_match = {matched + mismatched}",
             f"num_perf_log_data_mismatch = {mismatched}", f"num_missing_qsl_idxs = {missing}")
    return Verdict(mismatched == 0 and matched > 0, lines)


def _latest_complete(perf_dir: Path) -> Path:
    from harness.runner import latest_run

    run = latest_run(perf_dir)
    if run is None:
        raise DataError(f"no finished performance run in {perf_dir}: run `appliance run --mode performance` "
                        f"for this scenario first (the compliance test compares against it)")
    return run


def run_compliance(test: str, opts, echo=print):  # opts: harness.runner.RunOptions
    """Run `test` for opts' benchmark/scenario, verify it against the reference runs, keep it all."""
    from harness import rundirs
    from harness.plan import resolve
    from harness.runner import execute

    plan = resolve(replace(opts, requested=replace(opts.requested, mode="performance"),
                           audit_config=audit_config(test, opts.benchmark), test05=test == "TEST05"))
    folder = plan.folder
    ref_perf = _latest_complete(folder / "performance")
    ref_acc = folder / "accuracy" / "mlperf_log_accuracy.json"
    if test == "TEST01" and not ref_acc.is_file():
        raise DataError(f"no accuracy run in {folder}: run `appliance run --mode accuracy` for this scenario "
                        f"first (TEST01 compares against its responses)")
    claimed = rundirs.claim(folder, test, bare_first=True, echo=echo)
    staging, final = claimed.staging, claimed.final
    test_run = staging / "performance" / "run_1"
    try:
        outcome = execute(replace(plan, opts=replace(plan.opts, output_dir=test_run)), echo=echo)
        perf = verify_performance(ref_perf / "mlperf_log_detail.txt", test_run / "mlperf_log_detail.txt",
                                  no_faster_only=test == "TEST04")
        shown = lambda v: v.text().replace(str(staging), str(final))  # noqa: E731 - name paths as kept
        atomic_write_text(staging / "verify_performance.txt", shown(perf))
        verdicts = {"performance": perf.passed}
        if test == "TEST01":
            acc = verify_accuracy(ref_acc, test_run / "mlperf_log_accuracy.json")
            atomic_write_text(staging / "verify_accuracy.txt", shown(acc))
            (staging / "accuracy").mkdir()
            shutil.copy2(test_run / "mlperf_log_accuracy.json", staging / "accuracy" / "mlperf_log_accuracy.json")
            verdicts["accuracy"] = acc.passed
    except ApplianceError as exc:  # Ctrl-C, a failed card, a full disk: keep what the test run logged
        kept = claimed.abandon(f"{test} stopped: {exc}", keep=any(staging.rglob("mlperf_log_detail.txt")))
        if kept is None:
            raise
        raise type(exc)(str(exc).replace(str(staging), str(kept))) from None  # name the folder as kept
    except BaseException:
        claimed.abandon("failed", keep=False)
        raise
    claimed.commit()
    return replace(outcome, path=final / "performance" / "run_1"), final, verdicts
