"""Launch checks: each missing `docker run` flag is named in one warning line; nothing when all is well."""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import sys

import pytest

from harness.core import syscalls
from harness.run import launch_checks
from harness.run.launch_checks import LaunchFacts, warnings

GOOD = LaunchFacts(in_container=True, allowed_cpus=frozenset(range(16)), wanted_cpus=frozenset(range(16)),
                   allowed_mems=frozenset({0, 1}), wanted_mems=frozenset({0, 1}), mempolicy_errno=0,
                   missing_devices=())


def test_nothing_to_say_when_the_flags_were_given():
    assert warnings(GOOD) == []


def test_nothing_outside_a_container():
    bad = dataclasses.replace(GOOD, in_container=False, allowed_cpus=frozenset({0}), mempolicy_errno=errno.EPERM,
                              missing_devices=("/dev/accel/accel0",))
    assert warnings(bad) == []


def test_restricted_cpuset_names_cpuset_cpus():
    (line,) = warnings(dataclasses.replace(GOOD, allowed_cpus=frozenset({0, 1, 2, 3})))
    assert "CPUs 0-3" in line and "--cpuset-cpus=0-15" in line


def test_restricted_mems_names_cpuset_mems():
    (line,) = warnings(dataclasses.replace(GOOD, allowed_mems=frozenset({0})))
    assert "--cpuset-mems=0-1" in line


def test_unknown_mems_or_card_map_are_not_warned_about():
    assert warnings(dataclasses.replace(GOOD, allowed_mems=None, wanted_cpus=None, wanted_mems=None,
                                        mempolicy_errno=None)) == []


def test_eperm_from_set_mempolicy_names_sys_nice():
    (line,) = warnings(dataclasses.replace(GOOD, mempolicy_errno=errno.EPERM))
    assert "set_mempolicy" in line and "--cap-add=SYS_NICE" in line


def test_missing_device_nodes_name_device_flags():
    (line,) = warnings(dataclasses.replace(GOOD, missing_devices=("/dev/accel/accel0", "/dev/accel/accel1")))
    assert "--device=/dev/accel/accel0 --device=/dev/accel/accel1" in line


def test_everything_missing_gives_one_line_each():
    facts = dataclasses.replace(GOOD, allowed_cpus=frozenset({0}), allowed_mems=frozenset({0}),
                                mempolicy_errno=errno.EPERM, missing_devices=("/dev/accel/accel0",))
    lines = warnings(facts)
    assert len(lines) == 4 and all("\n" not in line for line in lines)


def test_set_mempolicy_probe_returns_an_errno():
    result = launch_checks.try_set_mempolicy()
    if syscalls.number("set_mempolicy") is not None:  # the probe runs: it works, or seccomp / the kernel says no
        assert result in (0, errno.EPERM, errno.ENOSYS), result
    else:
        assert result is None


def test_gather_reads_this_machine():
    facts = launch_checks.gather(mempolicy=lambda: errno.EPERM)
    assert facts.allowed_cpus and facts.mempolicy_errno == errno.EPERM


def test_check_warns_through_the_callback(monkeypatch):
    monkeypatch.setattr(launch_checks, "in_container", lambda: True)
    monkeypatch.setattr(launch_checks, "gather", lambda: dataclasses.replace(GOOD, mempolicy_errno=errno.EPERM))
    seen: list[str] = []
    assert len(launch_checks.check(seen.append)) == 1
    assert seen[0].startswith("appliance: warning: set_mempolicy")


def test_in_container_markers(tmp_path, monkeypatch):
    monkeypatch.delenv("container", raising=False)
    assert not launch_checks.in_container(tmp_path)
    (tmp_path / ".dockerenv").touch()
    assert launch_checks.in_container(tmp_path)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to restrict to 1")
def test_a_real_restricted_affinity_is_noticed():
    """In a child restricted to one CPU, the whole machine's card map wants more: --cpuset-cpus is named."""
    code = ("import dataclasses, os\nfrom harness.run import launch_checks as lc\n"
            "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "facts = dataclasses.replace(lc.gather(mempolicy=lambda: 0), in_container=True)\n"
            "print(*lc.warnings(facts), sep='\\n')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "--cpuset-cpus=" in out, out
