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

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import inbound
from harness.core.errors import ApplianceError, DataError, Interrupted, stopped_by
from harness.core.outbound import atomic_write_text, copy_file
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks, integrity
from harness.records import detail_log
from harness.records.detail_log import METRICS
from harness.run.loadgen_settings import OFFLINE_TARGET_PER_RATE

if TYPE_CHECKING:
    from harness.run.options import RunOptions
    from harness.run.plan import RunPlan
    from harness.run.runner import RunOutcome

TESTS = ("TEST01", "TEST04", "TEST05")
TEST01_LOG_SEED = 720381539243781796


def audit_config(test: str, benchmark: str) -> str:
    """The audit.config MLCommons ships for `test` (and `benchmark`, for TEST01)."""
    head = "# audit.config written by appliance run --mode " + test + "\n"
    if test == "TEST01":
        target = benchmarks.get(benchmark).test01_sampling_target
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


def _score(detail: dict[str, Any], path: Path) -> tuple[Scenario, float]:
    scenario = detail.get("effective_scenario")
    if scenario not in METRICS:
        raise DataError(f"{path} is not a finished LoadGen detail log (no effective_scenario)")
    value = detail.get(METRICS[scenario][0])
    if value is None:
        raise DataError(f"{path} has no {METRICS[scenario][0]}")
    return Scenario(scenario), float(value)


def _threshold(scenario: Scenario, ref: float) -> float:
    """10%, relaxed to 20% for very short latencies (ns), as the MLCommons scripts do."""
    short = (scenario == Scenario.SINGLE_STREAM and ref <= 200_000) or \
        (scenario == Scenario.MULTI_STREAM and ref <= 1_600_000)
    return 0.20 if short else 0.10


def verify_performance(ref_detail: Path, test_detail: Path, *, no_faster_only: bool) -> Verdict:
    """TEST01/TEST05 (within the threshold) or TEST04 (`no_faster_only`: not faster than the threshold)."""
    ref, test = detail_log.values(ref_detail), detail_log.values(test_detail)
    lines = [f"reference: {ref_detail}", f"test: {test_detail}"]
    for name, d in (("reference", ref), ("test", test)):
        if d.get("result_validity") != "VALID":
            return Verdict(False, (*lines, f"{name} results are INVALID"))
    (r_scen, r_score), (t_scen, t_score) = _score(ref, ref_detail), _score(test, test_detail)
    if r_scen != t_scen:
        return Verdict(False, (*lines, f"scenarios differ: {r_scen} vs {t_scen}"))
    if r_scen == Scenario.SERVER and ref.get("effective_target_latency_ns") != test.get("effective_target_latency_ns"):
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
        ref_records = inbound.read_json(ref_log, inbound.ACCURACY_LOG)
        test_records = inbound.read_json(test_log, inbound.ACCURACY_LOG)
    except (OSError, inbound.Refused) as exc:
        raise DataError(f"cannot read accuracy logs for TEST01 ({exc})") from None
    if not isinstance(ref_records, list) or not isinstance(test_records, list):
        raise DataError(f"cannot read accuracy logs for TEST01 ({ref_log} or {test_log} is not a list of "
                        f"responses)")
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


# Offline compliance runs (both references and the test) ask for 1.25x the submission run's target (or
# of what its measured rate calls for, if more): they last about 1.5 D at that rate, so a machine up to
# 50% faster still fills min_duration, which a shorter run fails (INVALID).
COMPLIANCE_OFFLINE_SLACK = 1.25


def _performance_run(plan: RunPlan, where: Path, echo: Callable[[str], None], audit: str | None = None,
                     test05: bool = False) -> RunOutcome:
    """One performance run of `plan` into `where` (made now), with a compliance test's audit.config or none.
    Its files are checked again first (what it loads is what prepare made; a stat while they are unchanged)."""
    from harness.run.runner import execute

    hint = plan.bench.prepare_hint(plan.opts.data_dir)
    integrity.refuse_mismatches(integrity.verify_loaded(plan.model, plan.data), hint)
    req = replace(plan.opts.requested, mode=Mode.PERFORMANCE)
    return execute(replace(plan, opts=replace(plan.opts, requested=req, output_dir=where, audit_config=audit,
                                              test05=test05)), echo=echo)


def fresh_reference(plan: RunPlan, where: Path, echo: Callable[[str], None] = print) -> Path:
    """A plain performance run of `plan` into `where` (made now); returns its detail log.

    Taken right before the run it is compared with, in the same process, after the same warm-up and
    calibration, so the comparison measures the SUT and not what else the machine did since the
    submission's reference run (on a busy 2-core machine short runs varied 2.5x between runs)."""
    _performance_run(plan, where, echo)
    return where / "mlperf_log_detail.txt"


def same_load(plan: RunPlan, ref_detail: Path, offline_slack: float = 1.0) -> RunPlan:
    """`plan` with a finished run's target QPS (Offline / Server), so the runs compared are asked for
    the same load, not each its own calibration's. Offline takes the larger of its target and what its
    measured rate would have called for, times `offline_slack`: more samples, the same throughput, and
    a machine that turned faster meanwhile still fills min_duration (a shorter run is INVALID)."""
    detail = detail_log.values(ref_detail)
    scenario, target = detail.get("effective_scenario"), detail.get("effective_target_qps")
    if scenario not in (Scenario.OFFLINE, Scenario.SERVER) or not target:
        return plan
    qps = float(target)
    if scenario == Scenario.OFFLINE:
        rate = float(detail.get("result_samples_per_second") or 0.0)
        qps = max(qps, rate * OFFLINE_TARGET_PER_RATE) * offline_slack
    return replace(plan, opts=replace(plan.opts, requested=replace(plan.opts.requested, target_qps=round(qps, 3))))


def verify_bracketed(refs: list[Path], test_detail: Path, *, no_faster_only: bool) -> Verdict:
    """The test run against reference runs taken right before and right after it: it passes when it
    passes against one of them (TEST01: within the threshold of the references' range; TEST04: not
    faster than the fastest), so a machine that slowed down or sped up meanwhile cannot flip it."""
    verdicts = [verify_performance(ref, test_detail, no_faster_only=no_faster_only) for ref in refs]
    lines = [f"compared: the test run against {len(refs)} plain performance runs with the same settings and "
             f"target, right before and right after it (reference/run_1, run_2); it passes against either"]
    for k, v in enumerate(verdicts, 1):
        lines += [f"against reference/run_{k}: {'PASS' if v.passed else 'FAIL'}", *v.lines]
    return Verdict(any(v.passed for v in verdicts), tuple(lines))


def _latest_complete(perf_dir: Path) -> Path:
    from harness.run.runner import latest_run

    run = latest_run(perf_dir)
    if run is None:
        raise DataError(f"no finished performance run in {perf_dir}: run `appliance run --mode performance` "
                        f"for this scenario first (the compliance test compares against it)")
    return run


def kept_runs(kept: Path | None) -> str:
    """What a stopped test left, read from the disk (not from what the inner run that stopped said of its
    own folder): the runs under `kept` that logged anything, by name."""
    if kept is None:
        return "no run had logged anything, so nothing was kept"
    runs = sorted(str(log.parent.relative_to(kept)) for log in kept.rglob("mlperf_log_detail.txt"))
    return f"its runs so far are kept in {kept} ({', '.join(runs)})"


def run_compliance(test: str, opts: RunOptions, echo: Callable[[str], None] = print
                   ) -> tuple[RunOutcome, Path, dict[str, bool]]:
    """Run `test` for opts' benchmark/scenario and verify it: performance against fresh reference runs
    right before and after it (`verify_bracketed`), TEST01's responses against the accuracy run; keep it all.
    The options are resolved once (harness.run.plan): the three runs share the plan, its cards and its checks."""
    from harness.run import rundirs
    from harness.run.plan import resolve

    plan = resolve(opts)
    folder = plan.folder
    submitted = _latest_complete(folder / "performance")
    ref_acc = folder / "accuracy" / "mlperf_log_accuracy.json"
    if test == "TEST01" and not ref_acc.is_file():
        raise DataError(f"no accuracy run in {folder}: run `appliance run --mode accuracy` for this scenario "
                        f"first (TEST01 compares against its responses)")
    claimed = rundirs.claim(folder, test, bare_first=True, echo=echo)
    staging, final = claimed.staging, claimed.final
    test_run = staging / "performance" / "run_1"
    try:
        loaded = same_load(plan, submitted / "mlperf_log_detail.txt", COMPLIANCE_OFFLINE_SLACK)
        echo(f"{test}: a reference run right before the test run (same settings and target)")
        before = fresh_reference(loaded, staging / "reference" / "run_1", echo)
        echo(f"{test}: the test run")
        outcome = _performance_run(loaded, test_run, echo, audit_config(test, opts.benchmark), test == "TEST05")
        echo(f"{test}: a reference run right after the test run (same settings and target)")
        after = fresh_reference(loaded, staging / "reference" / "run_2", echo)
        perf = verify_bracketed([before, after], test_run / "mlperf_log_detail.txt", no_faster_only=test == "TEST04")
        score = _score(detail_log.values(submitted / "mlperf_log_detail.txt"), submitted)[1]
        perf = Verdict(perf.passed, (*perf.lines, f"submission's performance run (not compared): {submitted}, "
                                                  f"score {score}"))

        def shown(v: Verdict) -> str:  # name paths as kept
            return v.text().replace(str(staging), str(final))

        atomic_write_text(staging / "verify_performance.txt", shown(perf))
        verdicts = {"performance": perf.passed}
        if test == "TEST01":
            acc = verify_accuracy(ref_acc, test_run / "mlperf_log_accuracy.json")
            acc = Verdict(acc.passed, ("compared: responses logged in the test run against the accuracy run's",
                                       *acc.lines))
            atomic_write_text(staging / "verify_accuracy.txt", shown(acc))
            copy_file(test_run / "mlperf_log_accuracy.json", staging / "accuracy" / "mlperf_log_accuracy.json",
                      limit=inbound.ACCURACY_LOG)
            verdicts["accuracy"] = acc.passed
    except (Interrupted, KeyboardInterrupt) as stop:  # within or between its runs: what they logged is kept
        kept = claimed.abandon(f"{test} {stopped_by(stop)}", keep=any(staging.rglob("mlperf_log_detail.txt")))
        raise Interrupted(f"{test} {stopped_by(stop)}; {kept_runs(kept)}", stop) from None
    except ApplianceError as exc:  # a failed card, a full disk: keep what the test run logged
        kept = claimed.abandon(f"{test} stopped: {exc}", keep=any(staging.rglob("mlperf_log_detail.txt")))
        if kept is None:
            raise
        exc.args = (str(exc).replace(str(staging), str(kept)),)  # name the folder as kept; the exit code stays
        raise exc from None
    except BaseException:
        claimed.abandon("failed", keep=False)
        raise
    claimed.commit()
    return replace(outcome, path=final / "performance" / "run_1"), final, verdicts
