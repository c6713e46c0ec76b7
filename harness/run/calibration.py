"""How fast this run's card set really is, measured right before the test, and how long the test will take.

The warm-up times one batch per card, each card alone: summed, that nominal rate misses what the cards
share (cores, the intake thread, LoadGen's own issue and completion work) and overestimated 16
simulated cards 7x and two CPU-emulated cards on two cores 2x. So Offline and Server runs also time
short LoadGen Offline tests through the same SUT (its real intake / dispatch / completion path, every
card at once) and take the rate LoadGen measured: that is the rate the test itself will see.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import mlperf_loadgen as lg

from harness.core.errors import ApplianceError
from harness.core.fsutil import tmp_prefix
from harness.core.leftovers import PROBES
from harness.core.outbound import scratch_dir
from harness.records import detail_log
from harness.run.loadgen_settings import Calibration

if TYPE_CHECKING:
    from harness.run.sut import SystemUnderTest

PROBE_MIN_S = 1.0          # the probes' length, at the least ...
PROBE_MAX_S = 4.0          # ... and at the most (a tenth of the run in between)
FIRST_PROBE_S = 0.1        # the first probe at the nominal rate: short, since that rate may be 10x too high
PROBE_BATCHES_PER_CARD = 3  # at least this many full batches per card in the second probe
MARGINAL_CAP = 1.3         # the probes' marginal rate counts for at most this much over their combined rate
# A probe's samples at the most, whatever the rate says: a null card's nominal rate at a large batch is
# 1e10 samples/s, and LoadGen allocated for 1e9 samples until it failed (std::bad_alloc). 4 M samples are
# about 0.6 GB of LoadGen's records (loadgen_settings.SAMPLE_BYTES) and seconds at any real rate.
PROBE_MAX_SAMPLES = 4_000_000


def calibrate(sut: SystemUnderTest, scenario: str, duration_ms: int | None, timed: bool) -> Calibration | None:
    """Warm every card up; for performance runs time it: per-card warm-up timings for the latencies,
    and for Offline / Server the card set's rate from two short LoadGen probes (see the module doc)."""
    timings = sut.warm_up(timed)
    if not timed:
        return None
    per_batch = [t_b for _, t_b in timings]
    nominal = sum(sut.batch_size / t for t in per_batch)
    rate, how = nominal, "warm-up timing, cards one at a time"
    if scenario in ("Offline", "Server"):
        with sut.probing():
            rate = probe_rate(sut, nominal, probe_seconds(duration_ms))
        how = "LoadGen Offline probe through the run's own SUT, all cards at once"
    return Calibration(samples_per_second=rate,
                       single_latency_ms=1000 * min(t_1 for t_1, _ in timings),
                       multistream_latency_ms=1000 * min(per_batch) * math.ceil(8 / sut.batch_size),
                       method=how)


def probe_seconds(duration_ms: int | None) -> float:
    """The probes' total length: a tenth of the run, within [PROBE_MIN_S, PROBE_MAX_S] (a full-length
    run: PROBE_MAX_S); a busy machine changes speed by the second, so shorter probes missed by 30%."""
    if duration_ms is None:
        return PROBE_MAX_S
    return min(PROBE_MAX_S, max(PROBE_MIN_S, duration_ms / 10_000))


def probe_rate(sut: SystemUnderTest, nominal: float, seconds: float) -> float:
    """Samples/s of the card set: a first probe sized from the nominal rate (one batch per card at the
    least), then, unless that one already lasted `seconds`, one sized from its rate to make up the rest;
    returns the rate over both probes (their samples over their times, as LoadGen measured them)."""
    per_batch = sut.batch_size * len(sut.workers)
    n1 = max(per_batch, min(PROBE_MAX_SAMPLES, round(nominal * FIRST_PROBE_S)))
    r1 = _probe(sut, n1)
    if n1 / r1 >= seconds:
        return r1  # slow cards: one batch each already took long enough
    n2 = max(PROBE_BATCHES_PER_CARD * per_batch, min(PROBE_MAX_SAMPLES, round(r1 * (seconds - n1 / r1))))
    r2 = _probe(sut, n2)
    combined = (n1 + n2) / (n1 / r1 + n2 / r2)
    # A probe's time includes a fixed start (first batches through an idle pipeline), which makes a fast
    # card set look slower in a short probe than in the run: an Offline run sized from that rate finished
    # under min_duration (INVALID; a null card, CI). The difference of the two probes removes the fixed
    # part; the larger estimate is the safe one (a run longer than asked, not one too short), capped so a
    # stall in the first probe cannot inflate it.
    dt = n2 / r2 - n1 / r1
    marginal = (n2 - n1) / dt if n2 > n1 and dt > 0 else combined
    return min(max(combined, marginal), MARGINAL_CAP * combined)


def _probe(sut: SystemUnderTest, samples: int) -> float:
    """One LoadGen Offline test of exactly `samples` samples, logged to a temporary folder that is then
    removed; its working directory is that folder too, so no ./audit.config of the caller applies."""
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.offline_expected_qps = 1.0  # with min_duration 0, min_query_count alone sets the sample count
    settings.min_duration_ms = 0
    settings.min_query_count = samples
    qsl = sut.qsl
    settings.performance_sample_count_override = qsl.performance_sample_count
    log_out = lg.LogOutputSettings()
    log_settings = lg.LogSettings()
    log_settings.enable_trace = False
    lg_qsl = lg.ConstructQSL(qsl.total_sample_count, qsl.performance_sample_count,
                             qsl.load, qsl.unload)
    try:
        with scratch_dir(tmp_prefix(PROBES)) as tmp, contextlib.chdir(tmp):
            log_out.outdir = str(tmp)
            log_out.copy_summary_to_stdout = False
            log_settings.log_output = log_out
            lg.StartTestWithLogSettings(sut.handle, lg_qsl, settings, log_settings)
            detail = detail_log.values(tmp / "mlperf_log_detail.txt")
    finally:
        lg.DestroyQSL(lg_qsl)
    rate = float(detail.get("result_samples_per_second") or 0.0)
    if rate <= 0:
        raise ApplianceError(f"the calibration probe of {samples} samples logged no rate: "
                             f"{'; '.join(detail['_errors']) or 'LoadGen ended early'}")
    return rate


def estimate_seconds(settings: lg.TestSettings, scenario: str, rate: float | None) -> float:
    """How long LoadGen will run with these settings: Offline issues max(min_query_count, 1.1 x
    min_duration x target_qps) samples (LoadGen's own rule), done at `rate` (the calibrated samples/s;
    the target when None); the others run for min_duration or until min_query_count queries are done,
    whichever is later, at the speeds the settings expect."""
    duration = float(settings.min_duration_ms) / 1000
    count = float(settings.min_query_count)
    if scenario == "Offline":
        qps = float(settings.offline_expected_qps)
        return max(count, 1.1 * duration * qps) / (rate or qps)
    if scenario == "Server":
        return max(duration, count / float(settings.server_target_qps))
    latency_ns = float(settings.single_stream_expected_latency_ns if scenario == "SingleStream"
                       else settings.multi_stream_expected_latency_ns)
    return max(duration, count * latency_ns / 1e9)


def describe_estimate(seconds: float, min_duration_ms: int, rate: float | None) -> str:
    """One line printed before LoadGen starts."""
    at = f" at the calibrated {rate:,.1f} samples/s" if rate else ""
    if min_duration_ms >= 600_000:
        return f"full-length run: {min_duration_ms / 1000:.0f} s minimum, about {math.ceil(seconds / 60)} min{at}"
    return f"LoadGen will run about {seconds:.1f} s{at} (--duration-ms {min_duration_ms})"
