"""appliance report: a ResNet50 run in all four scenarios, rendered and looked at in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess

import matplotlib.image as mpimg
import pytest
from helpers import appliance

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def four_scenarios(data_dir, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    for scenario in ("Offline", "Server", "SingleStream", "MultiStream"):
        qps = ["--target-qps", 300] if scenario == "Server" else []
        assert appliance("run", "-s", scenario, "--data-dir", data_dir, "--results", results, "--backend", "null",
                         "--duration-ms", 600, "-q", *qps) == 0
    return results


@pytest.mark.slow
def test_report_files(four_scenarios, tmp_path):
    out = tmp_path / "report.html"
    assert appliance("report", four_scenarios, "-o", out) == 0
    page = out.read_text()
    for scenario in ("Offline", "Server", "SingleStream", "MultiStream"):
        assert f"<h3>resnet50 {scenario}</h3>" in page  # a table and a latency plot per scenario
    assert "synthetic" in page.split("<h2>Summary")[0]  # said on the first screen
    assert "Energy: not measured" in page
    for scenario in ("offline", "server", "singlestream", "multistream"):  # one latency plot per scenario
        assert (tmp_path / f"report-latency-resnet50-{scenario}.png").stat().st_size > 1000
    assert "no scaling curve for resnet50 on none (null)" in page  # one card count only: said, not drawn
    assert "data:image/png;base64," in page


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (ci/test installs it as root)")
@pytest.mark.slow
def test_report_renders_in_headless_chromium(four_scenarios, tmp_path):
    out = tmp_path / "report.html"
    assert appliance("report", four_scenarios, "-o", out) == 0
    profile = tmp_path / "profile"
    shot = tmp_path / "shot.png"
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}"]
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1280,1400", out.as_uri()], check=True,
                   capture_output=True, timeout=120)
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] > 500 and pixels.std() > 0.05, "screenshot is blank"
    dom = subprocess.run([*base, "--dump-dom", out.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    assert "MultiStream" in dom and "Read this first" in dom and "<table>" in dom


@pytest.mark.slow
def test_energy_appears_in_the_report_on_a_machine_with_rapl(data_dir, tmp_path, monkeypatch):
    """A RAPL fixture whose counter climbs during a real run: watts and samples/J reach the report."""
    import threading

    zone = tmp_path / "root/sys/class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    (zone / "energy_uj").write_text("0\n")
    monkeypatch.setenv("APPLIANCE_POWERCAP_ROOT", str(tmp_path / "root"))
    stop = threading.Event()

    def climb() -> None:  # about 50 W
        uj = 0
        while not stop.wait(0.02):
            uj += 1_000_000
            tmp = zone / "energy_uj.tmp"
            tmp.write_text(f"{uj}\n")
            tmp.replace(zone / "energy_uj")  # whole values only, as sysfs gives them

    t = threading.Thread(target=climb)
    t.start()
    try:
        assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--backend", "null",
                         "--duration-ms", 600, "-q") == 0
    finally:
        stop.set()
        t.join()
    assert appliance("report", tmp_path / "r", "-o", tmp_path / "report.html") == 0
    page = (tmp_path / "report.html").read_text()
    assert "J/sample (RAPL, " in page and " W)" in page and "Energy: not measured" not in page
    assert "Energy: measured inside the system (RAPL counters, NVML), not MLPerf Power" in page


@pytest.mark.slow
def test_per_card_throughput_and_scaling_with_several_card_counts(data_dir, tmp_path):
    results = tmp_path / "r"
    for n in (1, 2):
        assert appliance("run", "--data-dir", data_dir, "--results", results, "--cards", f"simulate:cloud-ai-100:{n}",
                         "--duration-ms", 500, "-q") == 0
    assert appliance("report", results, "-o", tmp_path / "report.html") == 0
    page = (tmp_path / "report.html").read_text()
    assert 'alt="per-card"' in page and 'alt="scaling-resnet50-0"' in page
    assert (tmp_path / "report-per-card.png").is_file()
