"""Issue 41, fields inside documents beyond the manifest: simulated profiles, tuned records, hwloc XML, val_map
lines and RAPL files each read field by field (kinds, finite numbers, ranges), one line naming the file and the
field; and the messages of that area that were not true (advice to prepare int4, "--user-conf" for the tuned
record's file, "no tuned record" for a broken one). Each case is one the trial ran on ba66a6a."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import appliance, linked_copy

from harness.data import benchmarks
from harness.records import layout, model_record, tuned
from harness.records.benchmark_record import Benchmark

RUN = ("run", "--duration-ms", 300, "-q")


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    (line,) = err.splitlines()
    assert line.startswith("appliance: error: ") and "internal error" not in line, err
    return line


def _profile(tmp_path: Path, entry: str, extra: str = "") -> Path:
    path = tmp_path / "card.yaml"
    path.write_text(f"version: 1\nname: t\nmodel: test card\n{extra}benchmarks:\n  resnet50: {{{entry}}}\n")
    return path


@pytest.mark.parametrize(("entry", "extra", "said"), [
    ("samples_per_second: .nan, batch: 8", "", "benchmarks.resnet50.samples_per_second is nan, not a finite"),
    ("samples_per_second: 1000, batch: 8, fixed_ms: .nan", "", "benchmarks.resnet50.fixed_ms is nan, not a finite"),
    ("samples_per_second: 1.0e-300, batch: 8", "", "benchmarks.resnet50.samples_per_second is 1e-300, outside"),
    ("samples_per_second: .inf, batch: 8", "", "benchmarks.resnet50.samples_per_second is inf, not a finite"),
    ("samples_per_second: 1000, batch: 99999999999999999999", "",
     "benchmarks.resnet50.batch is 99999999999999999999, outside 1..65536"),
    ("samples_per_second: 1000, batch: 8", "failure: {cards: [0], after_batches: -1}\n",
     "failure.after_batches is -1, outside 1.."),
    ("samples_per_second: 1000, batch: 8", "failure: {cards: [0], after_batches: 0}\n",
     "failure.after_batches is 0, outside 1.."),
    ("samples_per_second: 1000, batch: 8", "pipeline: {activations: x}\n", "pipeline.activations is 'x', not an"),
])
def test_a_simulated_profile_field_out_of_kind_or_range_is_one_line(data_dir: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str], entry: str,
                                                                    extra: str, said: str) -> None:
    """`.nan` gave "246522.00 samples/s VALID", fixed_ms `.nan` 218,344 VALID from a 1,000/s card, 1e-300 an
    OverflowError and after_batches -1 `internal error: SimulatedCardFailure`."""
    profile = _profile(tmp_path, entry, extra)
    assert appliance(*RUN, "--cards", f"simulate:{profile}:1", "--data-dir", data_dir,
                     "--results", tmp_path / "r") == 2
    line = _one_line(capsys)
    assert f"simulated card profile {profile}: {said}" in line, line
    assert not (tmp_path / "r").exists()


HWLOC = """<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000001">
    <object type="Package" os_index="0" cpuset="0x00000003" nodeset="0x00000001">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x00000001"/>
      <object type="Core" os_index="0" cpuset="0x00000001" nodeset="0x00000001">
        <object type="PU" os_index="0" cpuset="0x00000001" nodeset="0x00000001"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" nodeset="0x00000001">
        <object type="PU" os_index="{pu}" cpuset="0x00000002" nodeset="0x00000001"/>
      </object>
    </object>
  </object>
</topology>
"""


@pytest.mark.parametrize("pu", ["-1", "x", "99999999999999999999", "١"])
def test_an_hwloc_pu_of_no_cpu_id_is_refused_not_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         pu: str) -> None:
    """os_index="-1" was silently dropped: a map of CPU 0 only, exit 0."""
    xml = tmp_path / "host.xml"
    xml.write_text(HWLOC.format(pu=pu))
    assert appliance("topology", "detect", "--hwloc-xml", xml) == 2
    assert f"PU os_index '{pu}' is not an id of 0..8191" in _one_line(capsys)


def test_an_hwloc_xml_with_good_ids_still_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = tmp_path / "host.xml"
    xml.write_text(HWLOC.format(pu="1"))
    assert appliance("topology", "detect", "--hwloc-xml", xml, "--format", "json") == 0
    assert "0-1" in capsys.readouterr().out


@pytest.mark.parametrize("label", ["99999999999999999999", "1001"])
def test_a_val_map_label_beyond_the_classes_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        label: str) -> None:
    """99999999999999999999 was `OverflowError: Python int too large to convert to C long`."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "val_map.txt").write_text(f"ILSVRC2012_val_00000001.JPEG {label}\n")
    assert appliance("prepare", "--data-dir", tmp_path / "data", "--source", src, "-q") == 2
    assert f"val_map.txt:1: label {label} is not an ImageNet class (0..1000)" in _one_line(capsys)
    assert not (tmp_path / "data").exists()


def test_a_rapl_range_of_minus_one_is_no_counter(data_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`max_energy_range_uj` -1 was `ZeroDivisionError` after the run (the counter modulo range + 1)."""
    zone = tmp_path / "root/sys/class/powercap/intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("-1\n")
    (zone / "energy_uj").write_text("5\n")
    monkeypatch.setenv("APPLIANCE_POWERCAP_ROOT", str(tmp_path / "root"))
    assert appliance(*RUN, "--backend", "null", "--data-dir", data_dir, "--results", tmp_path / "r") == 0
    (manifest,) = (tmp_path / "r").rglob("manifest.json")
    assert json.loads(manifest.read_text())["energy"]["available"] is False


def _tuned_record(data: Path, **choice: object) -> Path:
    """A tuned record as `appliance tune` writes one (its own writer), for the data dir's fp32 model."""
    bench: Benchmark = benchmarks.get("resnet50")
    model = model_record.read(layout.Layout(data, bench).record_for("fp32"))
    pick = tuned.Choice(**{"precision": "fp32", "backend": "onnxruntime", "batch_size": 2, "requests": 1,
                           "why": "test", "cards": "auto", **choice})
    row = tuned.Measured("fp32", "onnxruntime", 2, 1, 10.0, 100.0, 200.0, 300.0)
    record = tuned.TunedRecord("resnet50", ["auto"], "2026-01-01T00:00:00+00:00", {}, "test", "resnet50.user.conf",
                               {"fp32": tuned.Precision(model.sha256, True, "the FP32 reference model")}, [row],
                               {"Offline": pick}, {"fp32": {"Offline": pick}})
    path = layout.Layout(data, bench).tuned
    tuned.write(path, record)
    (path.parent / "resnet50.user.conf").write_text("resnet50.Offline.target_qps = 10\n")
    return path


def test_a_tuned_record_naming_int4_is_not_advice_to_prepare_it(data_dir: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """It advised `appliance prepare --precision int4`, which the CLI refuses."""
    data = linked_copy(data_dir, tmp_path / "data")
    path = _tuned_record(data)
    record = json.loads(path.read_text())
    record["chosen"]["Offline"]["precision"] = "int4"
    path.write_text(json.dumps(record))
    assert appliance(*RUN, "--backend", "auto", "--data-dir", data, "--results", tmp_path / "r") == 2
    line = _one_line(capsys)
    assert "chosen.Offline.precision is 'int4', not one of fp32, int8, fp16, bf16" in line, line
    assert "--precision int4" not in line and "rerun `appliance tune`" in line


@pytest.mark.parametrize(("field", "value"), [("batch_size", "8"), ("samples_per_second", float("nan")),
                                              ("requests", 10**30), ("cards", [1])])
def test_a_tuned_record_field_of_another_kind_is_one_line(data_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str], field: str,
                                                          value: object) -> None:
    data = linked_copy(data_dir, tmp_path / "data")
    path = _tuned_record(data)
    record = json.loads(path.read_text())
    record["measured"][0][field] = value
    path.write_text(json.dumps(record))
    assert appliance(*RUN, "--backend", "auto", "--data-dir", data, "--results", tmp_path / "r") == 2
    assert f"is a malformed tune record: measured[0].{field} is " in _one_line(capsys)


def test_the_tuned_records_user_conf_is_named_as_the_records(data_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """It said "cannot read --user-conf" when no --user-conf was given: the file came from the record."""
    data = linked_copy(data_dir, tmp_path / "data")
    path = _tuned_record(data)
    conf = path.parent / "resnet50.user.conf"
    conf.unlink()
    conf.mkdir()
    assert appliance(*RUN, "--backend", "auto", "--data-dir", data, "--results", tmp_path / "r") == 2
    line = _one_line(capsys)
    assert "the tuned record's user.conf" in line and "--user-conf" not in line, line
    assert line.endswith("rerun `appliance tune`")


@pytest.mark.parametrize("broken", ["dangling link", "folder"])
def test_backend_auto_with_a_broken_record_says_so(data_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], broken: str) -> None:
    """It said "no tuned record at ..., so onnxruntime" and ran."""
    data = linked_copy(data_dir, tmp_path / "data")
    path = layout.Layout(data, benchmarks.get("resnet50")).tuned
    path.parent.mkdir(exist_ok=True)
    if broken == "folder":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "gone.json")
    assert appliance(*RUN, "--backend", "auto", "--data-dir", data, "--results", tmp_path / "r") == 2
    line = _one_line(capsys)
    assert f"tuned record {path}" in line and "no tuned record" not in line, line
    assert not (tmp_path / "r").exists()


def test_a_written_tuned_record_reads_back(data_dir: Path, tmp_path: Path) -> None:
    data = linked_copy(data_dir, tmp_path / "data")
    path = _tuned_record(data, max_wait_us=500, server_qps=12.5)
    record = tuned.read(path)
    assert record.chosen["Offline"].max_wait_us == 500 and record.measured[0].samples_per_second == 10.0
    assert dataclasses.asdict(record) == dataclasses.asdict(tuned.read(path))


@pytest.mark.parametrize(("edit", "said"), [
    (("index: 0", "index: -5"), "index must be a whole number 0..1023"),
    (("index: 0", "index: 99999999999999999999"), "index must be a whole number 0..1023"),
    (("numa_node: 0", "numa_node: .nan"), "numa_node must be a whole number"),
    (("vendor: emulated", "vendor: [1]"), "vendor must be a string"),
])
def test_a_card_map_field_of_another_kind_is_one_line_before_the_run(data_dir: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     edit: tuple[str, str], said: str) -> None:
    """An index of -5 or 10^20 ran the whole benchmark and failed only when its manifest was written."""
    card_map = tmp_path / "map.yaml"
    assert appliance("topology", "detect", "--format", "yaml", "-o", card_map) == 0
    text = card_map.read_text()
    assert edit[0] in text
    card_map.write_text(text.replace(edit[0], edit[1], 1))
    capsys.readouterr()
    assert appliance(*RUN, "--backend", "null", "--cards", card_map, "--data-dir", data_dir,
                     "--results", tmp_path / "r") == 2
    line = _one_line(capsys)
    assert f"{card_map}: bad card entry" in line and said in line, line
    assert not (tmp_path / "r").exists()
