"""compose/slurm/runtime.sh's podman line against the podman installed here (issue 44): an empty image made with
buildah (no network), so podman parses the whole line runtime.sh builds, sets the container up and fails only when it
starts it (no `appliance` in an empty image; on this machine the sandbox refuses runc's rlimits even sooner): an error
from the OCI runtime means podman took every flag. apptainer and enroot are not installed here: their lines are
untested."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parents[1] / "compose" / "slurm" / "runtime.sh"
IMAGE = "localhost/appliance-flag-check:empty"
# what `appliance topology detect --format docker` prints for a node (hw/topology/formats.py), and its NVIDIA GPUs
DOCKER_FLAGS = "--cpuset-cpus=0-1 --cpuset-mems=0 --shm-size=16g --ulimit=memlock=-1 --cap-add=SYS_NICE"
GPUS = '--gpus="device=0,1"'


def bash(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f". {RUNTIME}; {script}"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RESULTS": str(tmp_path), "DATA": str(tmp_path), **env})


def test_docker_gpus_become_cdi_devices_for_podman(tmp_path):
    done = bash(f"podman_flags '{DOCKER_FLAGS} {GPUS} --device=/dev/accel0'", tmp_path)
    cdi = ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert done.stdout.split() == [*DOCKER_FLAGS.split(), *cdi, "--device=/dev/accel0"]


def _why_not() -> str | None:
    if shutil.which("podman") is None or shutil.which("buildah") is None:
        return "podman and buildah not installed"
    if not Path("/usr/libexec/podman/catatonit").exists():
        return "podman's --init needs catatonit (apt-get install catatonit)"
    return None


@pytest.fixture(scope="module")
def empty_image() -> Iterator[str]:
    if (why := _why_not()) is not None:
        pytest.skip(why)
    work = subprocess.run(["buildah", "from", "scratch"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run(["buildah", "commit", "-q", work, IMAGE], capture_output=True, check=True)
    finally:
        subprocess.run(["buildah", "rm", work], capture_output=True, check=True)
    yield IMAGE
    subprocess.run(["podman", "rmi", IMAGE], capture_output=True, check=True)


def podman_errors(tmp_path: Path, image: str, flags: str) -> list[str]:
    done = bash("appliance run -b resnet50 -s Offline", tmp_path, APPLIANCE_RUNTIME="podman", APPLIANCE_IMAGE=image,
                APPLIANCE_CONTAINER_FLAGS=flags)
    assert done.returncode in (125, 126, 127), done.stderr  # podman's own failure, not the function's
    return [line for line in done.stderr.splitlines() if line.startswith("Error:")]


def test_podman_takes_every_flag_of_the_line(empty_image, tmp_path):
    errors = podman_errors(tmp_path, empty_image, DOCKER_FLAGS)
    assert errors and "OCI" in errors[-1], errors  # set up, then refused at the start: every flag taken


def test_gpus_reach_podman_as_cdi_devices(empty_image, tmp_path):
    errors = podman_errors(tmp_path, empty_image, f"{DOCKER_FLAGS} {GPUS}")
    assert errors[-1] == "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0, nvidia.com/gpu=1" \
        or "OCI" in errors[-1], errors  # no NVIDIA CDI spec on this machine: podman names the devices it looked for


def test_the_check_sees_a_flag_podman_refuses(empty_image, tmp_path):
    errors = podman_errors(tmp_path, empty_image, "--cpuset-cpu=0-1")
    assert errors[-1] == "Error: unknown flag: --cpuset-cpu", errors  # after `podman image inspect`'s
