"""A backend is a record below the command line (issue 45): `--backend` becomes its record (or `Auto`) once, in the
CLI; `RunOptions.backend` holds it; a tuned record's and a manifest's backend names (data from outside) become records
where they are read, an unknown one a line, never a KeyError; tune asks the records who computes bf16."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from helpers import manifest_json, tuned_record

from harness.core.errors import DataError
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks
from harness.records import manifest as run_manifest
from harness.records.layout import Layout
from harness.run.cards import backends
from harness.run.loadgen_settings import Requested
from harness.run.options import RunOptions
from harness.tune import search

ROOT = Path(__file__).resolve().parent.parent


def _name_lookups() -> list[str]:
    """Where harness/ turns a backend's name into its record with `backends.get(...)`."""
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "harness").rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "backends"]


def test_a_backend_name_becomes_its_record_once_in_the_cli():
    found = _name_lookups()
    assert len(found) == 1 and found[0].startswith("harness/cli/main.py:"), found


def test_run_options_hold_a_record_or_auto():
    from harness.run.options import Auto

    opts = RunOptions("resnet50", Requested(Scenario.OFFLINE, Mode.PERFORMANCE), Path("d"), Path("r"))
    assert opts.backend is backends.RECORDS[backends.DEFAULT] and opts.record is opts.backend
    with pytest.raises(ValueError, match="auto read before"):
        _ = RunOptions("resnet50", opts.requested, Path("d"), Path("r"), backend=Auto.AUTO).record


def test_a_tuned_record_choosing_a_backend_not_here_is_one_line(data_dir, tmp_path):
    from harness.run import tuned_choice
    from harness.run.options import Auto

    choice = {"precision": "fp32", "backend": "mystery", "batch_size": 8, "requests": 1, "cards": "auto",
              "why": "tuned", "provider_options": "", "max_wait_us": None, "server_qps": 900.0}
    path, _ = tuned_record(data_dir, tmp_path, "Offline", choice)
    opts = RunOptions("resnet50", Requested(Scenario.OFFLINE, Mode.PERFORMANCE), data_dir, tmp_path,
                      backend=Auto.AUTO, tuned=path)
    with pytest.raises(DataError) as info:
        tuned_choice.resolve(opts)
    assert str(info.value).startswith(f"{path} chose backend 'mystery', which this appliance does not have")


def test_system_json_reads_the_records_of_the_manifests_backends(tmp_path):
    from harness.audit.submission import system_json

    def built(backend: str) -> dict[str, object]:
        m = run_manifest.parse(manifest_json(backend=backend, cards=[{"index": 0, "backend": backend, "device": "d",
                                                                      "cpus": [0], "emulated": True}]), "m")
        return system_json.build("closed", "Org", "sys", [m], ["Offline"], {}, root=str(tmp_path))

    null = built("null")
    assert "null backend: no inference was done" in str(null["sw_notes"])
    assert null["accelerator_model_name"] == "null card: no inference was done"
    assert "no inference" not in str(built("onnxruntime")["sw_notes"])
    with pytest.raises(DataError) as info:
        built("mystery")
    assert str(info.value).startswith("a run manifest names backend 'mystery', which this appliance does not have")


def test_tune_sweeps_bf16_only_where_a_record_computes_it(tmp_path, monkeypatch):
    layout = Layout(tmp_path, benchmarks.get("resnet50"))
    layout.record_for("bf16").parent.mkdir(parents=True)
    layout.record_for("bf16").write_text("{}")
    monkeypatch.setattr(search.bf16_support, "missing", lambda flags, capabilities: None)  # a CPU with bf16
    monkeypatch.setattr(search.bf16_support, "openvino_capabilities", lambda: [])
    without = {n: b for n, b in backends.RECORDS.items() if not b.computes("bf16")}
    monkeypatch.setattr(backends, "RECORDS", without)
    assert "bf16" not in search.prepared_precisions(tmp_path, "resnet50")  # no record computes it
    # a record computing bf16 that is installed wherever the test runs (no package to import)
    here = dataclasses.replace(without["null"], name="bf16-here", precisions=("fp32", "bf16"))
    monkeypatch.setattr(backends, "RECORDS", {**without, here.name: here})
    assert "bf16" in search.prepared_precisions(tmp_path, "resnet50")
