"""Property tests over the two places where text from outside becomes sizes: user.conf values (as LoadGen
reads them) and the kernel's CPU lists (sysfs, card maps). Every input ends in a one-line ApplianceError /
ValueError or in a valid parse, within a deadline per example; `test_properties_hold_under_the_memory_bound`
runs them all again in a process limited to test_sizes_and_names.ULIMIT_KB of address space."""

from __future__ import annotations

import math
import re
import string
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from sysfs_fixtures import Machine, write_machine
from test_sizes_and_names import _limit

from harness.core.errors import ApplianceError
from harness.core.scenarios import SCENARIOS, Mode, Scenario
from harness.core.sysfs import FIXED_BOUND, CpuBound, parse_cpulist, parse_mask
from harness.data import benchmarks
from harness.hw.topology import detect
from harness.run import loadgen_settings
from harness.run.loadgen_settings import KEY_RULES, check_conf_text, check_load, known_keys

PROPERTY = settings(max_examples=200, deadline=10000, derandomize=True)  # ms per example (a busy 2-core
# machine); derandomized: CI tries the same examples every time, so it cannot pass or fail by the draw
BENCH = benchmarks.get("resnet50")
WORDS = ["nan", "-nan", "inf", "-inf", "Infinity", "1_000", "0x10", "010", "1e5", "-0", "+7", ".5", "5.", "", "1 2",
         "#", "fast", "5#", "5 # note", "\x0c5", "٣", "1e400", "-1e400", "18446744073709551616", "9" * 500]
VALUES = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(WORDS),
    st.text(alphabet=string.printable + "٣\u00a0\u2028", max_size=12),
)
KEYS = st.sampled_from([*sorted(known_keys()), "target_qsp"])
CONF_SCENARIOS = st.sampled_from(["*", *SCENARIOS, "Offlin"])


@cache
def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="size-properties-"))


def _lg_reads(scenario: str, key: str, settings_: object) -> float | None:
    """What LoadGen's TestSettings holds for a few keys after FromConfig (None: not compared)."""
    fields = {"min_query_count": "min_query_count", "min_duration": "min_duration_ms",
              "max_query_count": "max_query_count", "max_duration": "max_duration_ms"}
    if key in fields:
        return float(getattr(settings_, fields[key]))
    if key == "target_qps" and scenario in ("Server", "Offline"):
        return float(getattr(settings_, "server_target_qps" if scenario == "Server" else "offline_expected_qps"))
    return None


@PROPERTY
@given(key=KEYS, value=VALUES, scenario=CONF_SCENARIOS)
def test_user_conf_values_end_in_one_line_or_in_what_loadgen_reads(key: str, value: str, scenario: str) -> None:
    line = f"resnet50.{scenario}.{key} = {value}\n"
    try:
        check_conf_text(line, "user.conf")
    except ApplianceError as exc:
        # one line naming the line at fault (a value holding a newline makes a second line of the file)
        assert "\n" not in str(exc) and re.match(r"user\.conf, line [12] ", str(exc)), exc
        return
    # accepted: LoadGen reads the line without an error, and reads the number the check read
    run_scenario = Scenario.OFFLINE if scenario == "*" else Scenario(scenario)
    conf = _workdir() / "user.conf"
    conf.write_text(line)
    lg_settings = loadgen_settings.test_settings(conf, BENCH, run_scenario, Mode.PERFORMANCE)
    read = _lg_reads(run_scenario, key, lg_settings)
    if read is not None:
        assert math.isclose(read, float(value.strip()), rel_tol=1e-12), (line, read)
    rule = KEY_RULES.get(key)
    if rule is not None:
        assert rule.lo <= float(value.strip()) <= rule.hi
    try:  # and what it schedules is either refused in one line or fits in memory
        check_load(lg_settings, run_scenario, Mode.PERFORMANCE, 1024)
    except ApplianceError as exc:
        assert "\n" not in str(exc)


CPU_ID = st.integers(min_value=0, max_value=2**40)
RANGE = st.tuples(CPU_ID, CPU_ID).map(lambda t: f"{t[0]}-{t[1]}")
CPULIST = st.one_of(
    st.lists(st.one_of(CPU_ID.map(str), RANGE, st.sampled_from(["", " ", "-1", "3-", "-", "0-8191", "8191-8192"])),
             max_size=6).map(",".join),
    st.text(alphabet="0123456789-, \0\n", max_size=30),
    st.text(max_size=20),
)
BOUNDS = st.sampled_from([FIXED_BOUND, CpuBound(255, "kernel_max 255"), CpuBound(0, "kernel_max 0")])


@PROPERTY
@given(text=CPULIST, bound=BOUNDS)
def test_cpu_lists_parse_within_the_bound_or_raise(text: str, bound: CpuBound) -> None:
    try:
        cpus = parse_cpulist(text, bound)
    except ValueError:
        return
    assert all(0 <= c <= bound.max_id for c in cpus) and len(cpus) <= bound.max_id + 1


@PROPERTY
@given(text=st.text(alphabet="0123456789abcdefABCDEFx, \0", max_size=3000), bound=BOUNDS)
def test_cpu_masks_parse_within_the_bound_or_raise(text: str, bound: CpuBound) -> None:
    try:
        cpus = parse_mask(text, bound)
    except ValueError:
        return
    assert all(0 <= c <= bound.max_id for c in cpus)


@cache
def _machine() -> Path:
    return write_machine(_workdir() / "host", Machine(sockets=1, cores_per_socket=4, cores_per_l3=4))


@PROPERTY
@given(text=CPULIST, where=st.sampled_from(["online", "cpu0/cache/index3/shared_cpu_list",
                                            "cpu2/topology/thread_siblings_list"]))
def test_detection_of_any_cpu_list_is_a_topology_or_one_line(text: str, where: str) -> None:
    root = _machine()
    path = root / "sys/devices/system/cpu" / where
    good = path.read_text()
    path.write_text(text)
    try:
        topo = detect(root)
        assert max(topo.online) <= 8191
    except ApplianceError as exc:
        assert "\n" not in str(exc)
    finally:
        path.write_text(good)


def test_properties_hold_under_the_memory_bound() -> None:
    """The same properties, in a process whose address space is limited (`ulimit -v`)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                           "-k", "not memory_bound"], capture_output=True, text=True, preexec_fn=_limit,
                          cwd=Path(__file__).parent.parent, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
