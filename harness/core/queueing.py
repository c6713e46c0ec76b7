"""What a card's own latency allows in Server: an ideal queue over the cards, no host time.

Server's figure is the highest Poisson load whose p99 latency stays within the bound. How much of a
card's throughput that can be depends first on the card itself: a card that takes most of the bound
per batch, or few cards with few batches in flight, leave little room to queue, whatever the harness
does. This model is that limit: Poisson arrivals (as LoadGen issues them) cut into batches as the
harness cuts them (full, or partial once the oldest sample has waited the batching deadline), each
sent at once to the server (an activation, an infer request) free first, where it takes `service_s`
whatever its size. `appliance tune` chooses Server's configuration by it; tools/bench_scaling.py and
tools/bench_cpu_server.py print it beside the measured Server ratio.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
from numba import njit

SAMPLES = 200_000  # arrivals per evaluation: p99 of the last 180,000 (the first tenth is the queue filling)


@njit(cache=True)
def _latencies(arrivals: np.ndarray, batch: int, deadline: float, service: float, servers: int) -> np.ndarray:
    free = np.zeros(servers)  # when each server is free
    latency = np.empty(arrivals.size)
    n, i = arrivals.size, 0
    while i < n:
        k = 1
        while k < batch and i + k < n and arrivals[i + k] <= arrivals[i] + deadline:
            k += 1
        ready = arrivals[i + k - 1] if k == batch or i + k == n else arrivals[i] + deadline
        j = np.argmin(free)
        free[j] = max(ready, free[j]) + service
        latency[i:i + k] = free[j] - arrivals[i:i + k]
        i += k
    return latency


@cache
def _unit_arrivals(seed: int) -> np.ndarray:
    """Poisson arrival times at rate 1; at rate q they are these / q (drawn once, not per evaluation)."""
    return np.cumsum(np.random.default_rng(seed).exponential(1.0, SAMPLES))  # only ever read


def p99_ms(batch: int, service_s: float, servers: int, qps: float, deadline_s: float, seed: int = 0) -> float:
    """p99 latency (ms) of the ideal queue at `qps`."""
    latency = _latencies(_unit_arrivals(seed) / qps, batch, deadline_s, service_s, servers)
    return float(np.percentile(latency[SAMPLES // 10:], 99) * 1000)


def server_load(batch: int, service_s: float, servers: int, bound_ms: float,
                deadline_s: Callable[[float], float]) -> float:
    """The highest load, as a fraction (to 1/256) of the capacity servers x batch / service_s, at which the
    ideal queue keeps p99 within `bound_ms`; `deadline_s(qps)`: the harness's batching deadline at that rate."""
    capacity = servers * batch / service_s
    lo, hi = 0.0, 1.0
    for _ in range(8):
        mid = (lo + hi) / 2
        qps = mid * capacity
        lo, hi = (mid, hi) if p99_ms(batch, service_s, servers, qps, deadline_s(qps)) <= bound_ms else (lo, mid)
    return lo
