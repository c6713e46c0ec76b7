"""The node facts a fleet compares (harness/hw/node_facts.py): the NVIDIA GPUs' clocks from nvidia-smi, read from
text in the format of NVIDIA's `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` (one line per GPU, the
fields in the order asked, "[N/A]" / "[Not Supported]" where a GPU lacks one). No GPU on the test machine: the
text is written here in that documented format, not captured from a driver."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.hw import node_facts
from harness.report import fleet

H100 = "00000000:{bus:02X}:00.0, 1755, 2619, 1980\n"


def test_eight_alike_gpus_are_one_fact():
    text = "".join(H100.format(bus=b) for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB))
    assert node_facts.parse_clocks(text) == "8 x applications 1755/2619 MHz (graphics/memory), max SM 1980 MHz"


def test_a_gpu_with_lowered_application_clocks_is_named_apart():
    text = "".join(H100.format(bus=b) for b in (0x18, 0x2A, 0x3A)) + "00000000:5D:00.0, 1410, 2619, 1980\n"
    assert node_facts.parse_clocks(text) == ("1 x applications 1410/2619 MHz (graphics/memory), max SM 1980 MHz, "
                                             "3 x applications 1755/2619 MHz (graphics/memory), max SM 1980 MHz")


def test_unsupported_clocks_and_stray_lines():
    text = "00000000:01:00.0, [N/A], [Not Supported], 2100\nNo devices were found\n\n"
    assert node_facts.parse_clocks(text) == "1 x applications n/a/n/a MHz (graphics/memory), max SM 2100 MHz"
    assert node_facts.parse_clocks("No devices were found\n").startswith("unknown (")


def test_no_nvidia_smi_no_fact_and_a_failing_one_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert node_facts.gpu_clocks() is None
    assert "gpu_clocks" not in node_facts.facts((0,))
    smi = tmp_path / "nvidia-smi"  # what nvidia-smi prints where the driver is not loaded, and its exit status 9
    smi.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                   "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n")
    os.chmod(smi, 0o755)
    got = node_facts.gpu_clocks()
    assert got is not None and got.startswith("unknown (nvidia-smi exit 9: NVIDIA-SMI has failed") and "\n" not in got
    assert node_facts.facts((0,))["gpu_clocks"] == got


def test_the_fleet_report_reads_the_clocks_fact():
    manifest = {"host": {"node": {"gpu_clocks": "8 x applications 1410/2619 MHz (graphics/memory), max SM 1980 MHz"}}}
    assert fleet.facts(manifest)["GPU clocks (nvidia-smi)"].startswith("8 x applications 1410/2619")
    assert "GPU clocks (nvidia-smi)" not in fleet.facts({"host": {"node": {}}})
