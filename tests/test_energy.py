"""RAPL energy sampling from sysfs fixtures: present, wrapped counter, and absent."""

from __future__ import annotations

from pathlib import Path

from harness.hw.energy import EnergyMeter


def _zone(root: Path, name: str, zone: str, energy: int, max_uj: int = 262143328850) -> Path:
    z = root / "sys/class/powercap" / zone
    z.mkdir(parents=True)
    (z / "name").write_text(name + "\n")
    (z / "energy_uj").write_text(f"{energy}\n")
    (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return z


def test_two_packages_summed_and_subzones_ignored(tmp_path):
    a = _zone(tmp_path, "package-0", "intel-rapl:0", 1_000_000)
    b = _zone(tmp_path, "package-1", "intel-rapl:1", 5_000_000)
    _zone(tmp_path, "core", "intel-rapl:0:0", 0)
    meter = EnergyMeter(tmp_path)
    assert [d.name for d in meter.domains] == ["package-0", "package-1"]
    meter.start()
    (a / "energy_uj").write_text("31000000\n")  # +30 J
    (b / "energy_uj").write_text("25000000\n")  # +20 J
    meter.stop()
    r = meter.result(samples=1000)
    assert r["available"] and r["joules"] == 50.0
    assert r["samples_per_joule"] == 20.0 and r["average_watts"] > 0
    assert "not MLPerf Power" in r["note"]


def test_counter_wrap(tmp_path):
    z = _zone(tmp_path, "package-0", "intel-rapl:0", 999_000_000, max_uj=999_999_999)
    meter = EnergyMeter(tmp_path)
    meter.start()
    (z / "energy_uj").write_text("1000000\n")  # wrapped: 1 J to the top + 1 J after
    meter.stop()
    assert meter.result(samples=2)["joules"] == 2.0


def test_absent_rapl_says_so(tmp_path):
    meter = EnergyMeter(tmp_path)
    meter.start()
    meter.stop()
    r = meter.result(samples=10)
    assert r["available"] is False and "not measured" in r["note"]


def test_unreadable_counter_ends_the_measurement_not_the_run(tmp_path):
    z = _zone(tmp_path, "package-0", "intel-rapl:0", 5)
    meter = EnergyMeter(tmp_path)
    meter.start()
    (z / "energy_uj").write_text("")  # a counter that cannot be parsed any more
    meter.stop()
    assert meter.result(samples=10)["available"] is False
