"""Bad input: one line saying what is wrong and what to do, a non-zero exit, nothing lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import onnx
import pytest
from helpers import appliance, appliance_subprocess
from onnx import TensorProto, helper


def test_missing_prepared_data_names_the_prepare_command(tmp_path, capsys):
    assert appliance("run", "--data-dir", tmp_path / "empty", "--results", tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert f"appliance prepare --benchmark resnet50 --data-dir {tmp_path / 'empty'}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not list((tmp_path / "r").rglob("run_*"))


def test_truncated_model_is_refused(tmp_path, data_dir, capsys):
    record_model = next((data_dir / "models").glob("*.onnx"))
    broken = tmp_path / "model.onnx"
    broken.write_bytes(record_model.read_bytes()[:100_000])
    assert appliance("prepare", "--data-dir", tmp_path / "d", "--model", broken, "--samples", 2) == 2
    err = capsys.readouterr().err
    assert "not a valid ONNX model" in err and "Traceback" not in err
    assert not (tmp_path / "d" / "models" / "resnet50.json").exists()


def test_model_with_wrong_signature_is_refused(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / "other.onnx"
    onnx.save(model, path)
    assert appliance("prepare", "--data-dir", tmp_path / "d", "--model", path) == 2
    captured = capsys.readouterr()
    assert "WARNING" in captured.err and "unverified model" in captured.err  # loud, for an unknown digest
    assert "needs input 'input_tensor:0'" in captured.err


def test_official_name_with_wrong_digest_is_an_error(tmp_path, capsys):
    fake = tmp_path / "resnet50_v1.onnx"
    fake.write_bytes(b"not the official file")
    assert appliance("prepare", "--data-dir", tmp_path / "d", "--model", fake) == 2
    assert "does not match the official resnet50_v1.onnx" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "words"), [
    (("run", "--benchmark", "bert"), ["resnet50"]),
    (("run", "--scenario", "Batch"), ["Offline", "Server", "SingleStream", "MultiStream"]),
    (("prepare", "--benchmark", "nope"), ["resnet50"]),
])
def test_unknown_choices_are_listed(args, words, capsys):
    assert appliance(*args) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "Traceback" not in err


def test_unwritable_results_folder(tmp_path, data_dir, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    assert appliance("run", "--data-dir", data_dir, "--results", blocker / "results", "-q") == 2
    err = capsys.readouterr().err
    assert "results folder" in err and "not writable" in err and "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path):
    proc = appliance_subprocess("--debug", "run", "--data-dir", tmp_path / "none")
    assert proc.returncode == 2 and "Traceback" in proc.stderr


@pytest.mark.slow
def test_ctrl_c_keeps_logs_and_marks_run_incomplete(tmp_path, data_dir):
    """SIGINT mid-run: exit 130, one line, LoadGen's logs so far kept in run_1.incomplete."""
    results = tmp_path / "results"
    child = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--data-dir", str(data_dir),
                              "--results", str(results), "--duration-ms", "60000", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(results.rglob(".run_1.staging-*/mlperf_log_detail.txt")):
        time.sleep(0.2)
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    (incomplete,) = list(results.rglob("run_1.incomplete"))
    assert (incomplete / "INCOMPLETE.txt").read_text().startswith("interrupted")
    assert (incomplete / "mlperf_log_detail.txt").stat().st_size > 0
    assert not list(results.rglob("run_1")) and not list(results.rglob(".run_*staging*"))
