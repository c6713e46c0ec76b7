"""Issue 43, finding 2: no native log line of a harmless kind reaches the terminal from any command that starts an
onnxruntime session (run, tune, prepare, tools/gpu_baseline.py), and a real one still does. A fake native library
(a sitecustomize that, at every session's creation, writes onnxruntime-format lines to fd 2 with libc's write, as
onnxruntime's and cuDNN's C++ code does) stands in for the GPU's cuDNN frontend and plugin-EP lookup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import native_lines
from harness.data import benchmarks
from harness.records.layout import Layout, read_model_record

REPO = Path(__file__).resolve().parents[1]
CUDNN_VARIABLES = ("CUDNN_LOGLEVEL_DBG", "CUDNN_FRONTEND_LOG_INFO")  # cuDNN 9's and its frontend's own logging
NOISE = (b"\x1b[1;31m2026-11-27 02:16:47.990357456 [E:onnxruntime:, cudnn_fe_call.cc:39 operator()] [cudnn_frontend] "
         b"Error: No execution plans support the graph.\x1b[m\n",
         b"\x1b[0;93m2026-11-27 02:13:53.611035741 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:856 operator()] "
         b"No registered plugin EP device found for 'CUDAExecutionProvider' with device_id=0\x1b[m\n")
REAL = b"2026-11-27 02:16:48.000000001 [E:onnxruntime:Default, cuda_call.cc:148 CudaCall] CUDA failure 700: fake\n"
FAKE = f'''
import ctypes, os
import onnxruntime
_write = ctypes.CDLL(None).write
_init = onnxruntime.InferenceSession.__init__
def _noisy(self, *args, **kwargs):
    for line in {(*NOISE, REAL)!r}:
        _write(2, line, len(line))
    with open(os.environ["FAKE_NATIVE_SEEN"], "a") as seen:  # what the library would read at load
        seen.write(os.environ.get("CUDNN_LOGLEVEL_DBG", "unset") + os.environ.get("CUDNN_FRONTEND_LOG_INFO", "unset")
                   + "\\n")
    _init(self, *args, **kwargs)
onnxruntime.InferenceSession.__init__ = _noisy
'''


@pytest.fixture(scope="module")
def fake_env(tmp_path_factory):
    site = tmp_path_factory.mktemp("fake-native")
    (site / "sitecustomize.py").write_text(FAKE)
    seen = site / "seen.txt"
    env = {k: v for k, v in os.environ.items() if k not in CUDNN_VARIABLES}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{REPO}", FAKE_NATIVE_SEEN=str(seen))
    return env, seen


def _terminal(args: list[str], env: dict[str, str]) -> bytes:
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout + done.stderr


def _check(terminal: bytes, log: Path, seen: Path) -> None:
    assert b"cudnn_frontend" not in terminal and b"No registered plugin EP" not in terminal
    assert b"CUDA failure 700: fake" in terminal  # a real error is still shown
    kept = log.read_bytes()
    assert b"No execution plans support the graph" in kept and b"No registered plugin EP" in kept
    assert seen.read_text().splitlines()[-1] == "00"  # cuDNN's and the frontend's own logging off at the source


def test_prepare_routes_native_lines(fake_env, data_dir, tmp_path):
    """prepare's golden reference pass (a session) on a few samples, the session's model adopted (--model)."""
    env, seen = fake_env
    model = read_model_record(Layout(data_dir, benchmarks.get("resnet50")), "fp32").path
    data = tmp_path / "data"
    out = _terminal(["-m", "harness.cli", "prepare", "--data-dir", str(data), "--samples", "4", "--model",
                     str(model), "-q"], env)
    _check(out, data / "native-prepare.log", seen)


def test_tune_routes_native_lines(fake_env, data_dir, tmp_path):
    env, seen = fake_env
    out = _terminal(["-m", "harness.cli", "tune", "--data-dir", str(data_dir), "--backends", "onnxruntime",
                     "--batch-sizes", "1", "-s", "Offline", "--precisions", "fp32", "-o", str(tmp_path / "t.json"),
                     "-q"], env)
    _check(out, tmp_path / "native-tune.log", seen)


def test_run_routes_native_lines(fake_env, data_dir, tmp_path):
    env, seen = fake_env
    out = _terminal(["-m", "harness.cli", "run", "--data-dir", str(data_dir), "--results", str(tmp_path / "r"),
                     "--backend", "onnxruntime", "--mode", "accuracy", "-q"], env)
    (log,) = (tmp_path / "r").rglob("native.log")
    _check(out, log, seen)


def test_gpu_baseline_routes_native_lines(fake_env, data_dir):
    env, seen = fake_env
    log = data_dir / "native-gpu_baseline.log"
    log.unlink(missing_ok=True)
    out = _terminal([str(REPO / "tools" / "gpu_baseline.py"), "--data-dir", str(data_dir), "--device", "cpu",
                     "--batch", "2", "--seconds", "0.3"], env)
    _check(out, log, seen)
    log.unlink()


def test_the_variables_quieted_are_the_ones_the_fake_library_reads():
    assert tuple(native_lines.QUIET_ENV) == CUDNN_VARIABLES and set(native_lines.QUIET_ENV.values()) == {"0"}
