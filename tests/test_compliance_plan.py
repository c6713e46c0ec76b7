"""A compliance test resolves its run plan once: the machine is detected once for the reference runs and
the test run together, not once per run; each run still checks the files it loads against prepare's record."""

from __future__ import annotations

import pytest
from helpers import appliance

import harness.data.integrity
import harness.hw.topology


@pytest.mark.slow
def test_compliance_resolves_the_plan_once(data_dir, tmp_path, monkeypatch):
    common = ("--data-dir", data_dir, "--results", tmp_path, "--system", "sut", "--backend", "null",
              "--duration-ms", 300, "-q")
    assert appliance("run", *common) == 0  # the submission's performance run it is checked beside
    calls = {"detect": 0, "verify_loaded": 0}

    def counted(name, real):
        def spy(*args, **kw):
            calls[name] += 1
            return real(*args, **kw)
        return spy

    monkeypatch.setattr(harness.hw.topology, "detect", counted("detect", harness.hw.topology.detect))
    monkeypatch.setattr(harness.data.integrity, "verify_loaded",
                        counted("verify_loaded", harness.data.integrity.verify_loaded))
    assert appliance("run", *common, "--mode", "TEST04") == 0
    assert calls == {"detect": 1, "verify_loaded": 4}, calls  # the plan's check, then one per run
    folder = tmp_path / "sut" / "resnet50" / "Offline" / "TEST04"
    for run in ("reference/run_1", "performance/run_1", "reference/run_2"):
        assert (folder / run / "mlperf_log_detail.txt").is_file(), run
    assert (folder / "performance" / "run_1" / "audit.config").is_file()
    assert not (folder / "reference" / "run_1" / "audit.config").exists()
