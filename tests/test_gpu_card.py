"""A GPU card runs on its GPU or is refused in one line, with nothing written.

`ortgpu` tests need onnxruntime-gpu installed (GPU or not; ci/test runs them in a second venv made from
requirements-gpu.lock without the CUDA wheels, where they reproduce the issue's silent CPU fallback);
`gpu` tests need a real NVIDIA GPU and are skipped without one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import onnxruntime as ort
import pytest
from helpers import appliance

from harness.core.errors import ApplianceError, DataError
from harness.hw import gpu
from harness.run.cards.backends import RECORDS
from harness.run.cards.spec import BackendSpec

HAS_ORT_GPU = "CUDAExecutionProvider" in ort.get_available_providers()
_needs_ort_gpu = pytest.mark.skipif(not HAS_ORT_GPU,
                                    reason="needs onnxruntime-gpu (ci/test runs these in its GPU venv)")


def ortgpu(test):
    """Marked for ci/test's GPU venv (`pytest -m ortgpu`), skipped without onnxruntime-gpu."""
    return pytest.mark.ortgpu(_needs_ort_gpu(test))


HAS_GPU = HAS_ORT_GPU and not isinstance(gpu.read_nvml(), str) and bool(shutil.which("nvidia-smi"))
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU with its driver")


def _refused(capsys, results, *args):
    """The command fails with one line on stderr and writes no results tree."""
    rc = appliance(*args, "--results", results)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert rc != 0 and len(lines) == 1, (rc, captured.err)
    assert not results.exists(), list(results.rglob("*"))
    return lines[0]


@pytest.mark.ortgpu  # runs in both venvs: the CPU onnxruntime lacks the provider, onnxruntime-gpu lacks TensorRT
def test_tensorrt_without_tensorrt_is_one_line_and_writes_nothing(data_dir, tmp_path, capsys):
    line = _refused(capsys, tmp_path / "r", "run", "--data-dir", data_dir, "--backend", "onnxruntime-tensorrt",
                    "--duration-ms", 100)
    assert "TensorrtExecutionProvider" in line
    assert ("TensorRT is not installed" in line or "lacks" in line or "library is missing" in line) and not HAS_GPU


@ortgpu
@pytest.mark.skipif(HAS_GPU, reason="reproduces the fallback on a machine without a GPU")
def test_the_silent_cpu_fallback_is_one_line_and_writes_nothing(data_dir, tmp_path, capsys):
    """The issue's reproduction: onnxruntime-gpu, no GPU (CUDA libraries absent, or no driver)."""
    line = _refused(capsys, tmp_path / "r", "run", "--data-dir", data_dir, "--backend", "onnxruntime-cuda",
                    "--duration-ms", 1000, "--count", 16)
    assert "cannot load its CUDAExecutionProvider" in line
    assert "libcublasLt.so.13" in line or "libcuda.so.1" in line  # which one: are the CUDA wheels installed?
    assert "driver" in line


@ortgpu
@pytest.mark.skipif(HAS_GPU, reason="a machine without a GPU")
def test_tune_on_a_gpu_backend_without_gpu_is_one_line(data_dir, tmp_path, capsys):
    rc = appliance("tune", "--data-dir", data_dir, "--backends", "onnxruntime-cuda", "--batch-sizes", "8",
                   "-o", tmp_path / "t.json")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "CUDAExecutionProvider" in err[0], err
    assert not (tmp_path / "t.json").exists()


@ortgpu
@pytest.mark.skipif(HAS_GPU, reason="a machine without a GPU")
def test_card_refuses_rather_than_run_on_the_cpu(data_dir):
    """Made directly (no plan, no library check), the card's session itself refuses the CPU fallback, and
    says it is the provider, not the model, that failed."""
    from harness.run.cards.onnxruntime_card import OnnxRuntimeCard

    model = next((data_dir / "models").glob("resnet50-*.onnx"))
    spec = BackendSpec(RECORDS["onnxruntime-cuda"], model, "input_tensor:0", ("ArgMax:0",), (), None)
    with pytest.raises(ApplianceError) as info:
        OnnxRuntimeCard(spec, 0, (0,))
    assert not isinstance(info.value, DataError)
    assert "card 0 (cuda:0)" in str(info.value) and "\n" not in str(info.value)


@ortgpu
@pytest.mark.skipif(HAS_GPU, reason="a machine without a GPU")
def test_missing_cuda_libraries_are_named_in_a_fresh_process(tmp_path):
    """preload_dlls and the provider's dlopen are process-wide: a fresh interpreter sees them as a user does."""
    code = ("from harness.run.cards.backends import RECORDS\n"
            "from harness.run.cards.onnxruntime_card import check_gpu_libraries\n"
            "check_gpu_libraries(RECORDS['onnxruntime-cuda'])\nprint('loaded')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "cannot load its CUDAExecutionProvider" in done.stderr


@needs_gpu
@pytest.mark.gpu
def test_gpu_run_is_on_the_gpu_and_names_it(data_dir, tmp_path, capsys):
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path, "--backend", "onnxruntime-cuda",
                   "--cards", "cuda:0", "--duration-ms", 500, "-q")
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads(next(tmp_path.rglob("manifest.json")).read_text())
    card = manifest["cards"][0]
    assert card["providers_in_session"][0] == "CUDAExecutionProvider" and card["emulated"] is False
    assert card["gpu"]["uuid"].startswith("GPU-") and card["gpu"]["name"] and card["cudnn"] != "not loaded"
    assert manifest["host"]["nvidia"]["driver"]


@needs_gpu
@pytest.mark.gpu
def test_batch_that_does_not_fit_is_one_line(data_dir, tmp_path, capsys):
    line = _refused(capsys, tmp_path / "r", "run", "--data-dir", data_dir, "--backend", "onnxruntime-cuda",
                    "--cards", "cuda:0", "--batch-size", 16384, "--duration-ms", 100)
    assert "does not fit in the GPU's memory" in line and "cuda:0" in line


@needs_gpu
@pytest.mark.gpu
def test_cuda_ordinal_beyond_the_visible_gpus(data_dir, tmp_path, capsys):
    visible = len(gpu.visible([g.pci for g in gpu.read_nvml().gpus], {}, None))  # type: ignore[union-attr]
    line = _refused(capsys, tmp_path / "r", "run", "--data-dir", data_dir, "--backend", "onnxruntime-cuda",
                    "--cards", f"cuda:{visible}", "--duration-ms", 100)
    assert f"there is no cuda:{visible}" in line
