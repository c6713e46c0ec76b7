"""Card layouts as a tuned choice: `appliance tune --cards auto,emulate:2` times every candidate on each
layout (real onnxruntime sessions on the session's tiny model), the choice per scenario names its layout,
`run --tuned` / `--backend auto` place the cards by it unless --cards is given, and a layout this machine
cannot place is refused in one line before anything is timed or written."""

from __future__ import annotations

import json

import pytest
from helpers import appliance


def _manifest(results, scenario="Offline"):
    """The newest run's manifest (runs of different card counts go to different system folders)."""
    runs = sorted(results.glob(f"*/resnet50/{scenario}/performance/run_*/manifest.json"),
                  key=lambda p: p.stat().st_mtime)
    return json.loads(runs[-1].read_text())


@pytest.mark.slow
def test_tune_times_each_layout_and_run_places_the_cards_by_the_choice(data_dir, tmp_path, capsys):
    record_path = tmp_path / "t" / "resnet50.json"
    tune = ("tune", "--data-dir", data_dir, "-s", "Offline", "-s", "Server", "--backends", "onnxruntime",
            "--batch-sizes", 1, "--precisions", "fp32", "-o", record_path)
    assert appliance(*tune, "--cards", "auto,emulate:2,auto", "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads(record_path.read_text()) and record["format"] == 4
    assert record["layouts"] == ["auto", "emulate:2"]  # each layout once, in the order given
    rows = record["measured"]
    assert [m["layout"] for m in rows] == ["auto", "emulate:2"] and rows[1]["cards"] == 2
    assert all(m["samples_per_second"] > 0 and m["server_qps"] is not None for m in rows)
    offline = record["chosen"]["Offline"]
    assert offline["cards"] == max(rows, key=lambda m: m["samples_per_second"])["layout"]
    server = record["chosen"]["Server"]
    assert server["cards"] in ("auto", "emulate:2") and f"--cards {server['cards']}" in server["why"]
    conf = (record_path.parent / record["user_conf"]).read_text()
    assert f"per card, --cards {offline['cards']} (" in conf

    # one layout only: the record's choice is 2 cards, and `run --tuned` places 2 cards (it used --cards auto)
    assert appliance(*tune, "--cards", "emulate:2", "-q") == 0
    printed = capsys.readouterr().out
    assert "--cards emulate:2, batch 1" in printed and printed.splitlines()[1].endswith("emulate:2 (2)")
    results = tmp_path / "r"
    run = ("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 300, "--count", 16, "-q")
    assert appliance(*run, "--tuned", record_path) == 0
    manifest = _manifest(results)
    assert len(manifest["cards"]) == 2 and manifest["card_map"]["spec"] == "emulate:2"
    choice = manifest["backend_choice"]
    assert choice["cards"] == "emulate:2" and "--cards emulate:2 from the record" in choice["why"]
    # an explicit --cards wins over the record, and the manifest says so
    assert appliance(*run, "--tuned", record_path, "--cards", "emulate:1") == 0
    manifest = _manifest(results)
    assert len(manifest["cards"]) == 1 and manifest["card_map"]["spec"] == "emulate:1"
    assert "--cards emulate:1 given (the record's: emulate:2)" in manifest["backend_choice"]["why"]
    # --backend given with --tuned: the layout of that backend's best row
    assert appliance(*run, "--tuned", record_path, "--backend", "onnxruntime") == 0
    assert _manifest(results)["card_map"]["spec"] == "emulate:2"
    # no record: auto, and the manifest says which layout ran
    assert appliance(*run, "--backend", "onnxruntime") == 0
    manifest = _manifest(results)
    assert manifest["card_map"]["spec"] == "auto" and manifest["backend_choice"]["cards"] == "auto"


@pytest.mark.parametrize(("layouts", "message"), [
    ("auto,emulate:0", "--cards 'emulate:0': N, the number of cards, must be at least 1"),
    ("emulate:1,emulate:64", "64 cards but only"),
    ("emulate:1,emulate:4096", "4096 cards; at most 256"),
])
def test_a_layout_that_cannot_be_placed_is_refused_before_anything_is_timed(data_dir, tmp_path, capsys, layouts,
                                                                          message):
    out = tmp_path / "t" / "rec.json"
    out.parent.mkdir()
    assert appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime", "--batch-sizes", 1,
                     "--precisions", "fp32", "--cards", layouts, "-o", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not any(out.parent.iterdir())
