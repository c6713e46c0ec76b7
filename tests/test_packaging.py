"""The wheel carries what the CLI advertises: installed non-editable, away from the checkout, it runs
16 simulated cards (packaged profiles) and shows a paper server's map (packaged maps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sysfs_fixtures import PAPER_SYSTEMS, build

from harness.cli.main import main
from harness.run.cards.simulated_card import load_profile, profile_names

REPO = Path(__file__).resolve().parents[1]


def _git_head() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


@pytest.mark.slow
def test_wheel_install_runs_simulated_cards_and_shows_paper_maps(data_dir: Path, tmp_path: Path) -> None:
    wheels, site, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
                   check=True, timeout=900, cwd=tmp_path)
    (wheel,) = wheels.glob("mlperf_appliance-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)
    # only the installed copy of the package may be importable: PYTHONPATH=site, cwd outside the checkout
    env = {**os.environ, "PYTHONPATH": str(site)}

    def appliance(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                              env=env, cwd=elsewhere, timeout=600)

    where = subprocess.run([sys.executable, "-c", "import harness; print(harness.__file__)"], capture_output=True,
                           text=True, env=env, cwd=elsewhere, check=True).stdout.strip()
    assert Path(where).is_relative_to(site), where

    shown = appliance("topology", "show", "g292-z43-16cards", "--format", "numa-config")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "0-7:64-127,192-255&8-15:0-63,128-191\n"

    run = appliance("run", "--cards", "simulate:cloud-ai-100:16", "--duration-ms", "2000", "--data-dir",
                    str(data_dir), "--results", "results", "--json", "-q")
    assert run.returncode == 0, run.stderr
    (out,) = json.loads(run.stdout)
    assert out["scenario"] == "Offline" and out["perf"]["valid"], out
    folder = Path(out["path"])
    assert folder.is_relative_to(elsewhere / "results") and "SIMULATED" in folder.parts[-5]
    assert (folder / "SIMULATED.txt").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["synthetic"]["cards"] == "SIMULATED (cloud-ai-100)"
    assert manifest["cards"][0]["profile_file"].startswith(str(site))
    head = _git_head()
    assert manifest["appliance"]["commit_from"] == "build"
    if head is not None:  # the commit baked into the wheel by setup.py
        assert manifest["appliance"]["commit"] == head


@pytest.mark.parametrize("name", sorted(PAPER_SYSTEMS))
def test_shipped_paper_maps_show_what_detect_gives(name: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "detect", "--sysfs-root", str(build(name, tmp_path)), "--format", "json"]) == 0
    detected = json.loads(capsys.readouterr().out)
    assert main(["topology", "show", name, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == detected


def test_show_refuses_an_unknown_map_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "show", "no-such-server"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "g292-z43-16cards" in err and "no card map 'no-such-server'" in err


def test_packaged_profiles_are_listed() -> None:
    assert {"cloud-ai-100", "cloud-ai-100-failing", "rehearsal-200"} <= set(profile_names())
    assert load_profile("cloud-ai-100", "resnet50").samples_per_second > 0
