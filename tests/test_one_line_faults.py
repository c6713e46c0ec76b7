"""Faults that were internal errors or tracebacks, now one line and nothing left behind (issue 26 items 6,
10, 11): damaged prepared data, writers on a read-only or a full file system, refused runs' folders."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import appliance, linked_copy

RUN = ["run", "--backend", "null", "-q", "--duration-ms", "300"]


def _damage(data_dir: Path, tmp_path: Path, text: str) -> Path:
    """A linked copy of the data dir whose prepared manifest holds `text` (a new file: the original stays)."""
    local = linked_copy(data_dir, tmp_path / "data")
    manifest = local / "preprocessed" / "resnet50" / "manifest.json"
    manifest.unlink()
    manifest.write_text(text)
    return local


@pytest.mark.parametrize(("text", "why"), [
    ("null", "holds null, not a JSON object"),
    ("[]", "holds an array, not a JSON object"),
    ('{"format": 1, "shards": [1]}', "an entry of the wrong JSON kind"),
    ('{"format": 1}', "'shards' is missing"),
])
def test_a_damaged_prepared_manifest_is_one_line(text: str, why: str, data_dir: Path, tmp_path: Path,
                                                 capsys) -> None:
    """It was `internal error: AttributeError: 'NoneType' object has no attribute 'get'`."""
    local = _damage(data_dir, tmp_path, text)
    assert appliance(*RUN, "--data-dir", local, "--results", tmp_path / "results") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"appliance: error: prepared data in {local / 'preprocessed' / 'resnet50'} is damaged")
    assert why in line and line.endswith(f"rerun `appliance prepare --benchmark resnet50 --data-dir {local}`"), line
    assert not (tmp_path / "results").exists()  # refused before anything was made


def test_a_prepared_manifest_naming_a_file_outside_its_folder_is_refused(data_dir: Path, tmp_path: Path,
                                                                         capsys) -> None:
    """A tampered manifest's shard name is a path out of the folder: refused, never loaded (it was np.load of
    any .npy the path reached)."""
    outside = tmp_path / "elsewhere.npy"
    local = linked_copy(data_dir, tmp_path / "data")
    manifest = local / "preprocessed" / "resnet50" / "manifest.json"
    data = json.loads(manifest.read_text())
    first = manifest.parent / data["shards"][0]["file"]
    outside.write_bytes(first.read_bytes())  # the same bytes: only the name is wrong
    data["shards"][0]["file"] = "../../../elsewhere.npy"
    manifest.unlink()
    manifest.write_text(json.dumps(data))
    assert appliance(*RUN, "--data-dir", local, "--results", tmp_path / "results") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is damaged (file '../../../elsewhere.npy' is not a plain file name of the folder)" in line, line
    assert not (tmp_path / "results").exists()


def test_prepare_mends_a_damaged_prepared_manifest(data_dir: Path, tmp_path: Path, capsys) -> None:
    """What the line says to do works: prepare preprocesses the damaged folder again (it stopped on the
    same internal error)."""
    local = _damage(data_dir, tmp_path, "null")
    assert appliance("prepare", "--data-dir", local, "--samples", 48, "-q") == 0
    assert "holds null, not a JSON object); preprocessing it again" in capsys.readouterr().out
    assert json.loads((local / "preprocessed" / "resnet50" / "manifest.json").read_text())["count"] == 48


@pytest.fixture
def mount(tmp_path: Path):
    """A tmpfs of `size`, read-only if asked: root only (the test is skipped elsewhere)."""
    mounted = []

    def make(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture(scope="module")
def offline_runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Offline performance and accuracy run of the null backend, each in a process of its own."""
    from helpers import appliance_subprocess

    root = tmp_path_factory.mktemp("offline-runs")
    for mode in ("performance", "accuracy"):
        done = appliance_subprocess(*RUN, "--mode", mode, "--data-dir", data_dir, "--results", root, "--system", "box")
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize(("options", "fault"), [
    ("ro,size=1m", "cannot write the tree in {disk}: the file system is read-only (EROFS)"),
    ("size=64k", "only 0.1 MB free in {disk}; the tree {disk}/sub needs about")])  # refused before writing (issue 35)
def test_submission_build_on_a_read_only_or_full_disk(options: str, fault: str, mount, offline_runs: Path,
                                                      capsys) -> None:
    """It was `internal error: OSError: [Errno 30] / [Errno 28]`, naming a temporary."""
    disk = mount("disk", options)
    assert appliance("submission", "build", "--submitter", "Org", "--system", "e1", offline_runs,
                     "-o", disk / "sub") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("appliance: error: " + fault.format(disk=disk)), line
    assert list(disk.iterdir()) == []


def test_a_run_refused_for_disk_space_leaves_no_folders(mount, data_dir: Path) -> None:
    """Item 10: the refusal made <results>/<system>/…/performance first and left it, empty."""
    disk = mount("disk", "size=2m")
    assert appliance(*RUN, "--data-dir", data_dir, "--results", disk / "results") == 2
    assert list(disk.iterdir()) == []


def test_an_empty_source_is_refused_before_the_model_is_built(tmp_path: Path, capsys) -> None:
    """Item 11: an empty --source folder was found only after the model build (129 s); now at once, and the
    data folder is not made."""
    (tmp_path / "src").mkdir()
    assert appliance("prepare", "--data-dir", tmp_path / "data", "--source", tmp_path / "src", "-q") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"appliance: error: {tmp_path / 'src' / 'val_map.txt'} not found: an ImageNet folder holds "
                    f"the JPEG files and val_map.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_report_names_manifests_that_are_there_but_null(offline_runs: Path, tmp_path: Path, capsys) -> None:
    """Item 11: `report` said `no finished runs (manifest.json + mlperf_log_detail.txt)`, as if missing."""
    import shutil

    runs = shutil.copytree(offline_runs, tmp_path / "runs")
    for manifest in runs.rglob("manifest.json"):
        manifest.write_text("null\n")
    assert appliance("report", runs, "-o", tmp_path / "r.html") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"appliance: error: no finished runs under {runs}: ")
    assert "box/resnet50/Offline/performance/run_1/manifest.json: holds null, not a JSON object" in line, line


def test_check_names_a_detail_log_with_no_seeds(offline_runs: Path, tmp_path: Path, capsys) -> None:
    """Item 11: a `null` detail log made `submission check` blame the RNG seeds (as if of another round)."""
    tree = tmp_path / "tree"
    assert appliance("submission", "build", "--submitter", "Org", "--system", "e1", offline_runs, "-o", tree) == 0
    (log,) = tree.rglob("performance/run_1/mlperf_log_detail.txt")
    log.write_text("null\n")
    capsys.readouterr()
    assert appliance("submission", "check", tree) != 0
    out = capsys.readouterr().out
    assert f"cannot tell the round: 1 performance log(s) and none names its seeds: {log.relative_to(tree)}: no RNG " \
           f"seeds in it" in out, out
    assert "those of no round" not in out


def test_reproduce_into_a_read_only_folder_is_refused_before_any_rerun(mount, offline_runs: Path, data_dir: Path,
                                                                       capsys) -> None:
    """It was `internal error: OSError: [Errno 30] Read-only file system` naming a temporary."""
    disk = mount("disk", "ro,size=1m")
    assert appliance("reproduce", offline_runs, "--data-dir", data_dir, "-o", disk / "audit") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"appliance: error: the report's folder {disk} is not writable (Read-only file system); "
                    f"choose another with the option or fix its permissions")
