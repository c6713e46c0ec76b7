"""`appliance reproduce` verdicts: FAIL names a changed file, NOT REPRODUCIBLE gives its reasons, the
report is always written and a benchmark not prepared here does not stop the other rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import appliance
from submission_fixtures import make_tree
from test_reproduce import _tree


def _report(out: Path) -> dict:
    return json.loads((out / "reproduce_report.json").read_text())


def test_one_changed_model_byte_fails_naming_the_file(data_dir, tmp_path, capsys):
    tree = _tree(tmp_path, data_dir)
    local = tmp_path / "data"
    shutil.copytree(data_dir, local)
    record_path = local / "models" / "resnet50.json"
    model = local / json.loads(record_path.read_text())["path"]  # records name files relative to the data dir
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    out = tmp_path / "audit"
    assert appliance("reproduce", tree, "--data-dir", local, "-o", out) == 1
    report = _report(out)
    assert report["verdict"] == "FAIL"
    for row in report["rows"]:
        assert row["verdict"] == "FAIL"
        assert any(str(model) in r and "sha256 differs" in r for r in row["reasons"]), row
    assert str(model) in capsys.readouterr().out


def test_real_shaped_tree_is_not_reproducible_with_reasons(data_dir, tmp_path, capsys):
    """A pre-v6.0 published-style tree (no manifests, another CPU, lowercase folders, real weights): its rows
    are NOT REPRODUCIBLE with the reasons named, the user.conf comes from measurements/, and the retinanet
    row (not prepared here) does not stop the resnet50 rows."""
    sub = make_tree(tmp_path / "tree", "v5.1", lowercase=True,
                    benchmarks={"resnet50": ("Offline",), "retinanet": ("Offline",)})
    system_file = sub / "systems" / "sys1.json"
    system = json.loads(system_file.read_text())
    system.update(host_processor_model_name="Imaginary Xeon 9999", accelerators_per_node="8",
                  accelerator_model_name="Example Accelerator X")
    system_file.write_text(json.dumps(system))
    conf = sub / "measurements" / "sys1" / "resnet50" / "offline" / "user.conf"
    conf.write_text("resnet50.Offline.target_qps = 20\n")
    out = tmp_path / "audit"
    rc = appliance("reproduce", tmp_path / "tree", "--data-dir", data_dir, "--duration-ms", 300, "-o", out)
    text = capsys.readouterr().out
    assert rc == 1, text
    report = _report(out)
    rows = {(r["benchmark"], r["kind"]): r for r in report["rows"]}
    assert set(rows) == {("resnet50", "performance"), ("resnet50", "accuracy"), ("retinanet", "performance"),
                         ("retinanet", "accuracy")}
    assert all(r["verdict"] == "NOT REPRODUCIBLE" for r in rows.values()), rows
    perf = rows[("resnet50", "performance")]
    reasons = "\n".join(perf["reasons"])
    assert "CPU: the tree's 'Imaginary Xeon 9999'" in reasons
    assert "accelerators: the tree's 8 x Example Accelerator X" in reasons
    assert "the local model has synthetic (seeded) weights, the tree's run used real ones" in reasons
    assert "re-run shortened: --duration-ms 300, the tree's run had 600000 ms" in reasons
    assert perf["reproduced"] != "-"
    assert perf["user_conf"] == f"{conf} (in measurements/ (pre-v6.0 layout))"
    assert perf["recorded"] == "1234.500 samples/s"
    ret = "\n".join(rows[("retinanet", "performance")]["reasons"])
    assert "benchmark not prepared here" in ret and "appliance prepare" in ret and "retinanet" in ret
    assert report["verdict"] == "NOT REPRODUCIBLE"
    md = (out / "reproduce_report.md").read_text()
    assert f"user.conf: {conf}" in md and "**reason**: CPU: the tree's" in md


def test_a_damaged_run_manifest_is_not_rerun(data_dir, tmp_path, capsys):
    """Issue 26 item 5: a run manifest of `null` (or `[]`) says nothing of the cards, backend and batch the run
    used: the row is NOT REPRODUCIBLE saying so, and nothing is re-run (it re-ran a simulated run on a CPU
    card at its recorded target: 40 minutes)."""
    tree = _tree(tmp_path, data_dir)
    (perf_manifest,) = tree.rglob("performance/run_1/manifest.json")
    perf_manifest.write_text("null\n")
    (acc_manifest,) = tree.rglob("accuracy/manifest.json")
    acc_manifest.write_text("[]\n")
    out = tmp_path / "audit"
    assert appliance("reproduce", tree, "--data-dir", data_dir, "-o", out) == 1
    rows = {r["kind"]: r for r in _report(out)["rows"]}
    assert rows["performance"]["verdict"] == rows["accuracy"]["verdict"] == "NOT REPRODUCIBLE"
    assert rows["performance"]["reasons"] == [
        f"the tree's run manifest is damaged ({perf_manifest}: holds null, not a JSON object): what the run used "
        f"(cards, backend, batch) is unknown, so it is not re-run"]
    assert "holds an array, not a JSON object" in rows["accuracy"]["reasons"][0]
    assert not (out / "runs").exists()
    assert "damaged" in capsys.readouterr().out


def test_a_simulated_run_is_never_rerun_on_this_hosts_cpus(data_dir, tmp_path, capsys):
    """The simulated profile the tree's run used is not on this host: NOT REPRODUCIBLE, no re-run (the cards
    fell back to `auto`: a CPU card at the simulated card's target)."""
    tree = _tree(tmp_path, data_dir)
    (tmp_path / "steady.yaml").unlink()
    out = tmp_path / "audit"
    assert appliance("reproduce", tree, "--data-dir", data_dir, "-o", out) == 1
    for row in _report(out)["rows"]:
        assert row["verdict"] == "NOT REPRODUCIBLE" and row["reproduced"] == "-", row
        assert "a simulated run is re-run only with the same simulated cards, never on this host's CPUs" in \
            row["reasons"][0]
    assert not (out / "runs").exists()


def test_a_backend_this_appliance_does_not_have_is_a_reason_not_a_keyerror(data_dir, tmp_path, capsys):
    """A manifest's backend name is data from outside (issue 45): one this appliance has no record of makes the row
    NOT REPRODUCIBLE, saying so, and nothing is re-run."""
    tree = _tree(tmp_path, data_dir)
    for path in tree.rglob("manifest.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "backend": "mystery"}))
    out = tmp_path / "audit"
    assert appliance("reproduce", tree, "--data-dir", data_dir, "-o", out) == 1
    for row in _report(out)["rows"]:
        assert row["verdict"] == "NOT REPRODUCIBLE", row
        assert row["reasons"][0].startswith("the tree's run used backend 'mystery', which this appliance does not "
                                            "have (onnxruntime, "), row
    assert not (out / "runs").exists()
