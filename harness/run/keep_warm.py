"""`appliance run --keep-warm`: a spinning process at the lowest priority on each card CPU while LoadGen runs,
so a card's CPUs never sleep between queries.

Why: in Server below full load a card's CPUs idle between queries; an idle vCPU is descheduled by the
hypervisor and an idle core drops into a sleep state, so the next query first waits for the CPU to wake
(measured on the 2-vCPU development VM: OpenVINO alone, batch 1, queries 16 ms apart, p99 7.6 ms
against 4.0 ms back to back). A SCHED_IDLE spinner runs only when nothing else wants its CPU and is
preempted the moment a card's thread wakes there, so the CPU stays awake without taking time from the
run. Costs: the CPUs draw full power (the run's RAPL energy says so), and an SMT sibling's spinner takes
issue slots from the thread beside it. Hence off by default, and `tools/bench_idle_wakeup.py` measures
p50 / p99 from idle with and without it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterable, Iterator

__all__ = ["spinning"]

# pinned to its CPU, lowest scheduling class, then spin until the parent goes (an orphan stops by itself)
_SPIN = ("import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
         "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
         "parent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n")


@contextlib.contextmanager
def spinning(cpus: Iterable[int]) -> Iterator[tuple[int, ...]]:
    """One SCHED_IDLE spinner per CPU in `cpus` for the duration of the block; yields the CPUs kept warm."""
    kept = tuple(sorted(set(cpus)))
    procs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", _SPIN, str(cpu)], stdin=subprocess.DEVNULL)
             for cpu in kept]
    try:
        yield kept
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
