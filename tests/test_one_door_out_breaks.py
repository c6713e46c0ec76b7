"""Issue 35, one door out: the writers that replaced what they did not write, wrote into a run folder or
the tree they read, lost a race into one `-o`, failed on a long name, or left part of a report on a
full disk. Each case is refused in one line before anything is written, or leaves nothing of its own."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from helpers import appliance
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import outbound


def _run_folder(root: Path) -> Path:
    """A finished run's folder as LoadGen and the runner leave it (only the files that mark it)."""
    run = root / "box" / "resnet50" / "Offline" / "performance" / "run_1"
    run.mkdir(parents=True)
    (run / "mlperf_log_detail.txt").write_text(':::MLLOG {"key": "loadgen_version"}\n')
    (run / "manifest.json").write_text('{"format": 1}\n')
    return run


def _one_line(capsys: pytest.CaptureFixture[str], *says: str) -> None:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err, err
    assert all(s in err for s in says), err


def test_topology_detect_never_replaces_a_runs_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was exit 0 and LoadGen's log replaced by a card map."""
    run = _run_folder(tmp_path)
    log = run / "mlperf_log_detail.txt"
    before = log.read_bytes()
    assert appliance("topology", "detect", "--format", "yaml", "-o", log) == 2
    _one_line(capsys, "would go into the run folder")
    assert log.read_bytes() == before


def test_topology_detect_replaces_its_own_map_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert appliance("topology", "detect", "-o", notes) == 2
    _one_line(capsys, "was not written by appliance topology detect")
    assert notes.read_text() == "my notes\n"
    for fmt in ("table", "json", "yaml", "numa-config", "docker"):
        out = tmp_path / f"map.{fmt}"
        assert appliance("topology", "detect", "--format", fmt, "-o", out) == 0
        assert appliance("topology", "detect", "--format", fmt, "-o", out) == 0, fmt  # its own: written again


@pytest.mark.parametrize("name", ["notes.json", "run"])
def test_tune_never_replaces_a_users_file_or_a_runs_manifest(name: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """tune -o onto a user's notes.json replaced it without a word; onto a finished run's manifest.json too."""
    if name == "run":
        target = _run_folder(tmp_path) / "manifest.json"
    else:
        target = tmp_path / name
        target.write_text('{"mine": true}\n')
    before = target.read_bytes()
    assert appliance("tune", "--data-dir", tmp_path / "data", "-o", target, "-q") == 2
    _one_line(capsys, "tune -o", "run folder" if name == "run" else "was not written by appliance tune")
    assert target.read_bytes() == before and not target.with_suffix(".user.conf").exists()


def test_tune_recognises_its_own_record(tmp_path: Path) -> None:
    from harness.tune.search import _tuned_record

    record = tmp_path / "t.json"
    record.write_text(json.dumps({"format": 4, "method": "m", "measured": [], "chosen": {}}))
    assert _tuned_record(record)
    record.write_text('{"format": 4}')
    assert not _tuned_record(record)


@pytest.mark.parametrize("where", ["run", "tree"])
def test_reproduce_never_writes_into_a_run_or_the_tree_it_reads(where: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """reproduce -o RUN/audit wrote inside a run folder; the next reproduce re-ran the audit's runs too."""
    tree = tmp_path / "tree"
    run = _run_folder(tree)
    out = run / "audit" if where == "run" else tree / "audit"
    assert appliance("reproduce", tree, "--data-dir", tmp_path / "data", "-o", out) == 2
    _one_line(capsys, "reproduce -o", "run folder" if where == "run" else "which this command reads")
    assert not out.exists() and sorted(p.name for p in run.iterdir()) == ["manifest.json", "mlperf_log_detail.txt"]


@pytest.mark.parametrize("command", [("topology", "detect"), ("tune", "--data-dir", "d"), ("report",)])
def test_a_300_byte_name_is_one_line(command: tuple[str, ...], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """It was `internal error: OSError: [Errno 36] File name too long`."""
    assert appliance(*command, *([tmp_path] if command == ("report",) else []), "-o",
                     tmp_path / ("a" * 300 + ".json")) == 2
    _one_line(capsys, "is 305 bytes", "choose a shorter name")


def test_a_path_beyond_path_max_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path.joinpath(*["d" * 200] * 21) / "map.yaml"
    assert appliance("topology", "detect", "-o", deep) == 2
    _one_line(capsys, "the path is", "choose a shorter one")


def test_publishing_a_folder_never_replaces_one_that_appeared(tmp_path: Path) -> None:
    """Two writers of one -o: the first to finish wins, the second is told in one line, its work removed."""
    out = tmp_path / "sub"
    first, second = outbound.new_staging_dir(out), outbound.new_staging_dir(out)
    (first / "a").write_text("first")
    (second / "b").write_text("second")
    outbound.publish_dir(first, out, "build -o sub")
    with pytest.raises(outbound.ApplianceError, match="appeared while this command was writing"), \
            outbound.staged_new_dir(out, "build -o sub") as work:
        (work / "c").write_text("third")
    with pytest.raises(outbound.ApplianceError):
        outbound.publish_dir(second, out, "build -o sub")
    assert [p.name for p in out.iterdir()] == ["a"] and (second / "b").exists()  # the caller removes its own


def test_a_batch_on_a_full_disk_leaves_none_of_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report on a full disk left two PNGs and no HTML while saying nothing half-written was left."""
    real = outbound._write_fd
    calls = []

    def full_on_third(fd: int, data: bytes) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(outbound, "_write_fd", full_on_third)
    old = tmp_path / "kept.txt"
    old.write_text("before")
    with pytest.raises(OSError), outbound.all_or_nothing():
        outbound.atomic_write_text(tmp_path / "a.png", "a")
        outbound.atomic_write_text(tmp_path / "b.png", "b")
        outbound.atomic_write_text(tmp_path / "report.html", "c")
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]


def test_free_space_is_checked_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(outbound.ApplianceError, match="MB free in"):
        outbound.need_space(tmp_path / "new", outbound.free_bytes(tmp_path) + 1, "this", "free some")
    outbound.need_space(tmp_path / "new", 0, "this", "free some")


def test_a_system_folder_linking_out_of_results_is_refused(tmp_path: Path) -> None:
    """A system folder that is a symlink made `run` write its run outside --results."""
    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    results.mkdir()
    elsewhere.mkdir()
    (results / "box").symlink_to(elsewhere)
    with pytest.raises(outbound.ApplianceError, match="leads outside --results"):
        outbound.inside_results(results / "box" / "resnet50" / "Offline", results.resolve(), "--results")
    outbound.inside_results(results / "other" / "resnet50", results.resolve(), "--results")


_NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=130)


@settings(max_examples=80, deadline=10000, derandomize=True)
@given(name=_NAMES, existing=st.sampled_from(["none", "ours", "theirs", "link", "folder"]))
def test_the_writer_takes_any_name_in_one_line_or_writes_it(name: str, existing: str, tmp_path_factory:
                                                            pytest.TempPathFactory) -> None:
    """Property: any file name and anything already there is refused in one line (ApplianceError), never
    an OSError; a target that passes is written, and a file that was not ours is never replaced."""
    folder = tmp_path_factory.mktemp("w")
    target = folder / name
    if name in (".", "..") or not name.strip("."):
        return  # the folder itself or its parent, not a file name
    try:
        if existing == "ours":
            target.write_text("MARK old")
        elif existing == "theirs":
            target.write_text("theirs")
        elif existing == "link":
            target.symlink_to(folder / "elsewhere")
        elif existing == "folder":
            target.mkdir()
    except OSError:  # a name too long for the file system: the writer must say so, checked below
        pass
    try:
        outbound.check_target(target, "x", "-o", lambda p: p.read_text().startswith("MARK"), example="x.txt",
                              what="it")
    except outbound.ApplianceError as exc:
        assert "\n" not in str(exc)
        return
    assert existing in ("none", "ours")
    outbound.atomic_write_text(target, "MARK new")
    assert target.read_text() == "MARK new" and sorted(p.name for p in folder.iterdir()) == [name]
