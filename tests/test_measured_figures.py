"""What a run measures beside LoadGen, as the summary and the report say it: joules per sample per card (NVML,
RAPL) and the host NMS share (harness.run.completion_meter, harness.report.measured)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.scenarios import Mode, Scenario
from harness.hw.energy import EnergyMeter
from harness.hw.gpu import GpuRef
from harness.hw.gpu_energy import GpuEnergyMeter
from harness.report.measured import energy_text, nms_text
from harness.report.summary import summary_table
from harness.run.completion_meter import CompletionMeter, share
from harness.run.runner import RunOutcome

A, B = GpuRef(0, "0000:17:00.0", "H100"), GpuRef(1, "0000:65:00.0", "H100")


class CounterBoards(GpuEnergyMeter):
    """The meter with its two boards' counters (mJ) given by the test instead of read from NVML."""

    def __init__(self, readings: list[dict[str, int]], samples: list[list[int]]) -> None:
        super().__init__((A, A, B), lambda: samples.pop(0))
        self.readings = readings

    def _read(self) -> dict[str, int]:
        self.names = {A.pci: "H100", B.pci: "H100"}
        return self.readings.pop(0)


def gpu_result() -> dict:
    meter = CounterBoards([{A.pci: 1_000_000, B.pci: 7_000}, {A.pci: 1_200_000, B.pci: 32_000}],
                          [[10, 10, 10], [310, 110, 110]])
    meter.start()
    meter.stop()
    return meter.result()


def test_gpu_joules_per_sample_per_card_in_the_words_of_the_summary_and_report():
    energy = {"available": False, "note": "no RAPL", "gpu": gpu_result()}
    # GPU A: 200 J over 300 + 100 samples; GPU B: 25 J over 100
    assert [c["joules_per_sample"] for c in energy["gpu"]["cards"]] == [0.5, 0.5, 0.25]
    assert energy_text(energy).startswith("GPU 0.25-0.5 J/sample per card (NVML, 2 GPUs, ")
    assert energy_text(energy, each_card=True).endswith(": card 0 0.5, card 1 0.5, card 2 0.25")


def test_one_gpu_gives_one_figure_and_the_host_its_own(tmp_path: Path):
    zone = tmp_path / "sys/class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    (zone / "energy_uj").write_text("0\n")
    host = EnergyMeter(tmp_path)
    host.start()
    (zone / "energy_uj").write_text("40000000\n")  # 40 J
    host.stop()
    energy = host.result(samples=400)
    gpu = gpu_result()
    gpu["cards"] = gpu["cards"][:2]  # the cards of GPU A only
    gpu["gpus"] = gpu["gpus"][:1]
    text = energy_text({**energy, "gpu": gpu}, each_card=True)
    assert text.startswith("GPU 0.5 J/sample per card (NVML, 1 GPU, ") and "card 0" not in text
    assert text.endswith("; host 0.1 J/sample (RAPL, " + f"{energy['average_watts']:.0f} W)")


def test_nothing_measured_says_nothing():
    assert energy_text({"available": False, "note": "x", "gpu": {"available": False, "note": "no GPU cards"}}) is None
    assert energy_text(None) is None and nms_text(None) is None


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["available", "gpu", "cards", "gpus", "joules_per_sample",
                                                "average_watts", "samples_per_joule", "ms_per_sample",
                                                "busiest_done_thread", "cores_busy", "local_cpus", "keeps_up"]),
                               inner, max_size=6), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_others_manifests_never_end_in_an_error(value):
    for text in (energy_text(value), energy_text(value, each_card=True), nms_text(value)):
        assert text is None or isinstance(text, str)


def test_host_nms_share_per_card_and_per_gpu():
    ms = 1_000_000
    got = share([(0, 0), (0, 0), (5, 0)], [(1000, 1500 * ms), (500, 250 * ms), (105, 80 * ms)], 2.0,
                [(0, 1), (2, 3), (8,)], (A, A, B))
    assert [c["ms_per_sample"] for c in got["cards"]] == [1.5, 0.5, 0.8]
    assert [c["done_thread_busy"] for c in got["cards"]] == [0.75, 0.125, 0.04]
    assert got["samples"] == 1600 and got["busiest_done_thread"] == 0.75 and got["keeps_up"] is True
    assert got["gpus"] == [{"gpu": A.pci, "cards": 2, "cores_busy": 0.875, "local_cpus": 4},
                           {"gpu": B.pci, "cards": 1, "cores_busy": 0.04, "local_cpus": 1}]
    assert nms_text(got) == ("host NMS 1.144 ms an image; busiest done thread 75.0% busy; 0.875 cores per GPU at "
                             "most (of 4 local)")
    busy = share([(0, 0)], [(100, 1900 * ms)], 2.0, [(0,)])
    assert busy["keeps_up"] is False and nms_text(busy).endswith("0.950 cores in all: the host holds the cards back")


def test_meter_reads_before_and_after():
    readings = [[(3, 10)], [(13, 10 + 20_000_000)]]
    meter = CompletionMeter(lambda: readings.pop(0), [(0,)])
    assert meter.result() is None  # not started
    meter.start()
    meter.stop()
    got = meter.result()
    assert got is not None and got["samples"] == 10 and got["cards"][0]["ms_per_sample"] == 2.0


def _outcome(energy: dict | None, host_nms: dict | None) -> RunOutcome:
    return RunOutcome("yolo-99", Scenario.OFFLINE, Mode.PERFORMANCE, Path("/r/run_1"), None, None, False, True, (),
                      (), energy, host_nms)


def test_summary_has_an_energy_column_and_an_nms_line_only_when_measured():
    plain = summary_table([_outcome(None, None)])
    assert "energy" not in plain.splitlines()[0] and "host NMS" not in plain and "not MLPerf Power" not in plain
    host = share([(0, 0)], [(100, 50_000_000)], 1.0, [(0,)])
    text = summary_table([_outcome({"available": False, "gpu": gpu_result()}, host), _outcome(None, None)])
    head, _, row, other = text.splitlines()[:4]
    assert head.split()[5] == "energy" and "GPU 0.25-0.5 J/sample per card" in row and other.split()[5] == "-"
    assert "note: energy: measured inside the system (RAPL counters, NVML), not MLPerf Power" in text
    assert "yolo-99 Offline: host NMS 0.500 ms an image; busiest done thread 5.0% busy" in text
