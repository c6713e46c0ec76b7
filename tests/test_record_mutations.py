"""Issue 41's mutation property: every record type of a real run (its manifest, performance and accuracy; its
detail log; a tuned record from tune's own writer; a packaged simulated profile; an hwloc XML), every field
replaced by a wrong kind, NaN / inf, a huge number, string or list, a negative, or removed. Its reader then
either refuses it in one line (DataError / ApplianceError) or gives a record every value of which is of its
kind and finite: never an internal error, never a VALID or a figure from a bad value. `report` and
`submission check` run on a few mutated runs through the CLI: never an internal error.

Each example takes milliseconds (the CLI ones about a second); the whole file well under a minute once the
session's shared runs exist.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_record_values import HWLOC, _tuned_record
from test_submission_tree import shared_runs

from harness.core.errors import ApplianceError, DataError
from harness.hw.topology.hwloc_xml import read_hwloc_xml
from harness.records import detail_log, tuned
from harness.records import manifest as run_manifest
from harness.run.cards import simulated_card

MANY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
FEW = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
DELETE = object()
BAD = st.sampled_from([DELETE, None, True, False, "x", "", "9" * 5000, -1, 0, 10**30, -(10**30), 1e-300, 1e308,
                       float("nan"), float("inf"), float("-inf"), [], [[1]], [1, 2], {}, {"a": 1},
                       list(range(20_000)), "x" * 100_000])
OFFLINE = Path("box/resnet50/Offline")


def _paths(doc: object, at: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place in a JSON document (lists: their first two entries)."""
    out = [at] if at else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            out += _paths(v, (*at, i))
    return out


def _mutated(doc: object, at: tuple[object, ...], value: object) -> object:
    doc = copy.deepcopy(doc)
    parent = doc
    for step in at[:-1]:
        parent = parent[step]  # type: ignore[index]
    if value is DELETE:
        del parent[at[-1]]  # type: ignore[attr-defined]
    else:
        parent[at[-1]] = value  # type: ignore[index]
    return doc


def _finite(value: object) -> bool:
    """Every number inside is finite (what a record may hold after its reader took it)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


@pytest.fixture(scope="module")
def runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_runs(data_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def manifests(runs: Path) -> list[dict[str, object]]:
    return [json.loads((runs / OFFLINE / run / "manifest.json").read_text()) for run in ("performance/run_1",
                                                                                         "accuracy")]


@MANY
@given(data=st.data(), bad=BAD)
def test_a_mutated_manifest_is_refused_in_one_line_or_read_whole(manifests: list[dict[str, object]],
                                                                 data: st.DataObject, bad: object) -> None:
    original = data.draw(st.sampled_from(manifests))
    at = data.draw(st.sampled_from(_paths(original)))
    try:
        record = run_manifest.parse(_mutated(original, at, bad), "m/manifest.json")
    except DataError as exc:
        assert str(exc).startswith("m/manifest.json") and "\n" not in str(exc)
        return
    body = record.to_json()
    assert _finite(body)
    json.dumps(body, allow_nan=False)
    assert len(record.cards) <= run_manifest.MAX_CARDS and all(len(c.cpus) <= run_manifest.MAX_CPUS
                                                                 for c in record.cards)
    score = record.result.score()
    assert score is None or 0 <= score[1] <= 100


@pytest.fixture(scope="module")
def detail_text(runs: Path) -> str:
    return (runs / OFFLINE / "performance" / "run_1" / "mlperf_log_detail.txt").read_text()


@MANY
@given(data=st.data(), bad=BAD.filter(lambda v: v is not DELETE))
def test_a_mutated_detail_value_is_refused_or_gives_no_verdict_from_it(detail_text: str, tmp_path_factory,
                                                                       data: st.DataObject, bad: object) -> None:
    keys = re.findall(r'"key": "([^"]+)"', detail_text)
    key = data.draw(st.sampled_from(keys))
    raw = json.dumps(bad)  # NaN / Infinity as Python's json writes them: a log LoadGen never wrote
    text = re.sub(rf'("key": "{re.escape(key)}", "value": ).*?(, "time_ms")', lambda m: m.group(1) + raw + m.group(2),
                  detail_text)
    path = tmp_path_factory.mktemp("detail") / "mlperf_log_detail.txt"
    path.write_text(text)
    try:
        values = detail_log.values(path)
    except DataError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    perf = detail_log.perf_result(values, "Offline")
    assert perf.metric is None or math.isfinite(perf.metric)
    if key == "result_validity" or key.endswith("_met"):  # a verdict comes only from LoadGen's own values
        assert not perf.valid or bad in ("VALID", True)


@pytest.fixture(scope="module")
def tuned_json(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    from helpers import linked_copy

    data = linked_copy(data_dir, tmp_path_factory.mktemp("tuned") / "data")
    path = _tuned_record(data, max_wait_us=500, server_qps=12.5, confirmed_qps=10.0)
    return path, json.loads(path.read_text())


@MANY
@given(data=st.data(), bad=BAD)
def test_a_mutated_tuned_record_is_refused_or_read_whole(tuned_json: tuple[Path, dict[str, object]],
                                                         data: st.DataObject, bad: object) -> None:
    path, original = tuned_json
    at = data.draw(st.sampled_from(_paths(original)))
    mutated = path.parent / "mutated.json"
    mutated.write_text(json.dumps(_mutated(original, at, bad)))
    try:
        record = tuned.read(mutated)
    except DataError as exc:
        assert "\n" not in str(exc) and "appliance tune" in str(exc)
        return
    assert _finite(json.loads(json.dumps(record.to_json())))
    assert all(m.batch_size >= 1 and m.samples_per_second >= 0 for m in record.measured)


@MANY
@given(data=st.data(), bad=BAD.filter(lambda v: not (isinstance(v, str | list) and len(v) > 1000)))
def test_a_mutated_simulated_profile_is_refused_or_models_a_card(tmp_path_factory, data: st.DataObject,
                                                                  bad: object) -> None:
    original = yaml.safe_load((simulated_card.PROFILE_DIR / "cloud-ai-100-pipelined.yaml").read_text())
    at = data.draw(st.sampled_from(_paths(original)))
    path = tmp_path_factory.mktemp("profile") / "card.yaml"
    path.write_text(yaml.safe_dump(_mutated(original, at, bad)))
    try:
        profile = simulated_card.load_profile(str(path), "resnet50")
    except ApplianceError as exc:
        assert "\n" not in str(exc)
        return
    seconds = profile.seconds(profile.batch)
    assert math.isfinite(profile.samples_per_second) and 0 < seconds <= 65536 / 0.1 + 60


@MANY
@given(attribute=st.sampled_from(["os_index", "cpuset", "nodeset"]),
       kind=st.sampled_from(["PU", "Core", "NUMANode", "Package"]),
       value=st.sampled_from(["-1", "", "x", "0x", "0xffffffff,0xffffffff", "99999999999999999999", "1.5", "١",
                              " 1", "0xf...f", "0x1,,", "1e3"]))
def test_a_mutated_hwloc_xml_is_refused_or_keeps_every_pu(tmp_path_factory, attribute: str, kind: str,
                                                          value: str) -> None:
    root = ET.fromstring(HWLOC.format(pu="1"))
    for obj in root.iter("object"):
        if obj.get("type") == kind:
            obj.set(attribute, value)
            break
    path = tmp_path_factory.mktemp("xml") / "host.xml"
    path.write_bytes(ET.tostring(root))
    try:
        topo = read_hwloc_xml(path)
    except ApplianceError as exc:
        assert "\n" not in str(exc)
        return
    pus = [o for o in root.iter("object") if o.get("type") == "PU"]
    assert len(topo.online) == len(pus) and all(0 <= c <= 8191 for c in topo.online)  # none dropped


def _cli_report_and_check(tmp: Path, runs: Path, capsys: pytest.CaptureFixture[str], file: str,
                          change: tuple[tuple[object, ...], object] | None, key_raw: tuple[str, str] | None) -> None:
    from helpers import appliance

    results = tmp / "r"
    shutil.copytree(runs / OFFLINE, results / OFFLINE)
    target = results / OFFLINE / file
    if change is not None:
        target.write_text(json.dumps(_mutated(json.loads(target.read_text()), *change)))
    if key_raw is not None:
        key, raw = key_raw
        target.write_text(re.sub(rf'("key": "{re.escape(key)}", "value": ).*?(, "time_ms")',
                                 lambda m: m.group(1) + raw + m.group(2), target.read_text()))
    appliance("report", results, "-o", tmp / "rep.html")
    assert "internal error" not in capsys.readouterr().err
    appliance("submission", "check", results)  # a results folder is not a tree: each problem a line
    assert "internal error" not in capsys.readouterr().err


@FEW
@given(data=st.data(), bad=BAD)
def test_report_and_check_of_a_mutated_manifest_never_fail_inside(runs: Path, manifests: list[dict[str, object]],
                                                                  tmp_path_factory, capsys, data: st.DataObject,
                                                                  bad: object) -> None:
    at = data.draw(st.sampled_from(_paths(manifests[0])))
    _cli_report_and_check(tmp_path_factory.mktemp("cli"), runs, capsys, "performance/run_1/manifest.json",
                          (at, bad), None)


@FEW
@given(data=st.data(), bad=BAD.filter(lambda v: v is not DELETE))
def test_report_and_check_of_a_mutated_detail_log_never_fail_inside(runs: Path, detail_text: str, tmp_path_factory,
                                                                    capsys, data: st.DataObject, bad: object) -> None:
    key = data.draw(st.sampled_from(re.findall(r'"key": "([^"]+)"', detail_text)))
    _cli_report_and_check(tmp_path_factory.mktemp("cli"), runs, capsys, "performance/run_1/mlperf_log_detail.txt",
                          None, (key, json.dumps(bad)))
