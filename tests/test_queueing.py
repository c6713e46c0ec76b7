"""The ideal Server queue (harness.core.queueing) against a plain heap simulation and what queueing theory says."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from harness.core import queueing


def _plain(arrivals: np.ndarray, batch: int, deadline: float, service: float, servers: int) -> np.ndarray:
    """Obviously correct: cut batches (full, or at the oldest sample's deadline), earliest-free server."""
    free = [0.0] * servers
    out = np.empty(arrivals.size)
    i = 0
    while i < arrivals.size:
        members = [i]
        while len(members) < batch and i + len(members) < arrivals.size \
                and arrivals[i + len(members)] <= arrivals[i] + deadline:
            members.append(i + len(members))
        full = len(members) == batch or i + len(members) == arrivals.size
        ready = arrivals[members[-1]] if full else arrivals[i] + deadline
        end = max(ready, heapq.heappop(free)) + service
        heapq.heappush(free, end)
        for m in members:
            out[m] = end - arrivals[m]
        i += len(members)
    return out


@pytest.mark.parametrize(("batch", "deadline", "servers"), [(1, 0.0, 1), (2, 0.001, 3), (8, 0.0005, 16), (4, 1.0, 2)])
def test_kernel_matches_a_plain_simulation(batch, deadline, servers):
    arrivals = np.cumsum(np.random.default_rng(7).exponential(1 / 900.0, 20_000))
    got = queueing._latencies(arrivals, batch, deadline, 0.004, servers)
    assert np.allclose(got, _plain(arrivals, batch, deadline, 0.004, servers), rtol=0, atol=1e-12)


def test_light_load_waits_for_nothing_but_the_card():
    assert 5.0 <= queueing.p99_ms(1, 0.005, 4, qps=10.0, deadline_s=0.0) < 5.5


def no_wait(qps: float) -> float:
    return 0.0


def test_load_limits_follow_the_cards_latency():
    one = queueing.server_load(1, 0.005, 1, 15.0, no_wait)
    many = queueing.server_load(1, 0.005, 32, 15.0, no_wait)
    assert 0.2 < one < many and many > 0.9  # more servers in parallel: more room to queue
    assert queueing.server_load(1, 0.016, 32, 15.0, no_wait) == 0.0  # a batch longer than the bound
    # M/D/1 at load 0.5: mean wait rho S / (2 (1 - rho)) = S / 2; the model's p99 is well above the mean
    assert 5.0 + 2.5 < queueing.p99_ms(1, 0.005, 1, qps=100.0, deadline_s=0.0) < 5.0 * 5


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.8])
def test_single_server_mean_wait_is_pollaczek_khinchine(rho):
    """Batch 1, no deadline, one server: an M/D/1 queue, whose mean wait the Pollaczek-Khinchine formula
    gives in closed form, rho S / (2 (1 - rho)) — a result no code here wrote."""
    service = 0.004
    latency = queueing._latencies(queueing._unit_arrivals(0) / (rho / service), 1, 0.0, service, 1)
    wait = float(latency[queueing.SAMPLES // 10:].mean()) - service
    assert wait == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.05)
