"""Issue 41, the descriptor read from: each break as the trial ran it (or its equivalent, named).

The door judges the file it holds open, not the name it was given: a FIFO or a link put at a name after the
check is never read, a hard link to a file elsewhere is never published, and a name inside a document (a
val_map line, a tuned record's user.conf, a submitter folder, a sysfs copy's sys/) leads nowhere outside the
folder that document belongs to. Commands that could hang or read without bound run in a child under a
memory limit and a timeout, so a regression fails the test, never the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from submission_fixtures import make_tree
from sysfs_fixtures import Machine, write_machine
from test_inbound_breaks import _limited, _one_error_line
from test_submission_tree import shared_runs

from harness.core import inbound
from harness.data.datasets import imagenet

SECRET = "not for publication\n"


@pytest.fixture(scope="module")
def runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("descriptor-runs") / "r"
    shutil.copytree(shared_runs(data_dir, tmp_path_factory), root, symlinks=True)
    return root


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line (the seeded model's unverified-model warning may come before it)."""
    lines = [x for x in proc.stderr.strip().splitlines() if not x.startswith("WARNING: model ")]
    assert len(lines) == 1 and lines[0].startswith("appliance: error: "), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    return lines[0]


def _model(data_dir: Path) -> Path:
    return next((data_dir / "models").glob("resnet50*.onnx"))


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    return secret


def _nothing_published(tmp_path: Path, secret: Path) -> None:
    copies = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink() and p != secret
              and not os.path.samefile(p, secret) and SECRET.strip() in p.read_text(errors="replace")]
    assert copies == []


def test_build_refuses_a_hard_link_to_a_secret_and_copies_nothing(runs: Path, tmp_path: Path) -> None:
    """`accuracy_golden.txt` a hard link to a secret outside: `submission build` copied it into the tree."""
    secret = _secret(tmp_path)
    local = tmp_path / "r"
    shutil.copytree(runs, local, symlinks=True)
    golden = local / "box" / "resnet50" / "Offline" / "accuracy" / "accuracy_golden.txt"
    golden.unlink(missing_ok=True)
    os.link(secret, golden)
    out = tmp_path / "sub"
    proc = _limited("submission", "build", "--submitter", "Org", "--system", "s", local, "-o", out)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc)
    assert "accuracy_golden.txt has 1 other hard link(s)" in line and "cp, not ln" in line, line
    assert not out.exists()
    _nothing_published(tmp_path, secret)


def test_check_reports_a_submitter_folder_linking_out(tmp_path: Path) -> None:
    """`closed/Org` a link to a folder outside: checked as if inside, never "links leaving the tree"."""
    sub = make_tree(tmp_path / "t", "v6.1")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(sub, elsewhere)
    sub.symlink_to(elsewhere, target_is_directory=True)
    proc = _limited("submission", "check", tmp_path / "t")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"links leaving the tree: closed/{sub.name} -> {elsewhere}" in proc.stdout, proc.stdout


def _source_with(tmp_path: Path, lines: list[str]) -> Path:
    src = tmp_path / "src"
    imagenet.make_synthetic(src, 3, seed=5)
    with (src / imagenet.VAL_MAP).open("a") as f:
        f.writelines(f"{line}\n" for line in lines)
    return src


def _prepare(data_dir: Path, tmp_path: Path, src: Path) -> subprocess.CompletedProcess[str]:
    return _limited("prepare", "--data-dir", tmp_path / "data", "--source", src, "--model",
                    _model(data_dir), "-q", timeout=120)


@pytest.mark.parametrize("name", ["../outside.JPEG", "ABSOLUTE", "linked.JPEG"])
def test_prepare_reads_no_image_outside_the_source(name: str, data_dir: Path, tmp_path: Path) -> None:
    """val_map lines `../outside.JPEG`, an absolute path, or a link out: read from outside `--source`."""
    outside = tmp_path / "outside.JPEG"
    src0 = tmp_path / "other"
    imagenet.make_synthetic(src0, 1, seed=9)
    shutil.copy(next(src0.glob("**/*.JPEG")), outside)
    entry = str(outside) if name == "ABSOLUTE" else name
    src = _source_with(tmp_path, [f"{entry} 7"])
    if name == "linked.JPEG":
        (src / name).symlink_to(outside)
    proc = _prepare(data_dir, tmp_path, src)
    assert proc.returncode == 2, proc.stderr
    line = _error_line(proc)
    assert f"{src / imagenet.VAL_MAP} names {entry!r}" in line and "outside" in line, line
    assert not (tmp_path / "data" / "preprocessed").exists() or \
        not any((tmp_path / "data" / "preprocessed").iterdir())


def _png_header_bomb(path: Path, side: int = 30_000) -> None:
    """A valid grayscale PNG of side x side zero pixels, compressed row by row to under 1 MB (the trial's
    868 kB PNG of 30,000 x 30,000)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + (zlib.crc32(kind + data) & 0xFFFFFFFF).to_bytes(4, "big")

    z, row, parts = zlib.compressobj(9), b"\0" * (side + 1), []
    for _ in range(side):
        parts.append(z.compress(row))
    parts.append(z.flush())
    ihdr = side.to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts))
                     + chunk(b"IEND", b""))


def test_prepare_checks_an_images_size_before_decoding_it(data_dir: Path, tmp_path: Path) -> None:
    """An 868 kB PNG of 30,000 x 30,000 in `prepare --source`: cv2 OutOfMemoryError (2.7 GB asked for)."""
    src = _source_with(tmp_path, ["huge.png 3"])
    _png_header_bomb(src / "huge.png")
    assert (src / "huge.png").stat().st_size < 1_000_000
    proc = _prepare(data_dir, tmp_path, src)
    assert proc.returncode == 2, proc.stderr
    line = _error_line(proc)
    assert "huge.png claims 900,000,000 pixels" in line and "OutOfMemory" not in line, line


def test_a_tuned_records_user_conf_linking_out_is_refused_unread(data_dir: Path, tmp_path: Path) -> None:
    """A tuned record's `user.conf` linking out: followed, and its content echoed in the error."""
    secret = tmp_path / "secret.conf"
    secret.write_text("not-for-publication = 1\n")
    folder = tmp_path / "tuned"
    folder.mkdir()
    (folder / "t.user.conf").symlink_to(secret)
    choice = {"precision": "fp32", "backend": "null", "batch_size": 8, "requests": 1, "why": "test",
              "cards": "auto"}
    (folder / "tuned.json").write_text(json.dumps({
        "format": 4, "benchmark": "resnet50", "layouts": ["auto"], "created_utc": "", "host": {}, "method": "",
        "user_conf": "t.user.conf", "precisions": {}, "measured": [], "chosen": {"Offline": choice},
        "by_precision": {"fp32": {"Offline": choice}}}))
    proc = _limited("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--tuned", folder / "tuned.json",
                    "--duration-ms", 300, "-q")
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc)
    assert "user_conf" in line and "links outside" in line and "not-for-publication" not in line, line
    assert not (tmp_path / "r").exists()


def test_a_sysfs_root_whose_sys_links_to_the_live_one_is_refused(tmp_path: Path) -> None:
    """`--sysfs-root` whose `sys` links to `/sys`: mapped the live machine, exit 0."""
    root = tmp_path / "copy"
    root.mkdir()
    (root / "sys").symlink_to("/sys")
    proc = _limited("topology", "detect", "--sysfs-root", root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc)
    assert f"sysfs root {root}: its sys/" in line and "links outside" in line, line
    assert proc.stdout == ""


def test_a_sysfs_file_linking_out_of_its_root_is_not_read(tmp_path: Path) -> None:
    """A captured root whose CPU list links to the live machine's: read as the copy's before."""
    root = write_machine(tmp_path / "copy", Machine(sockets=1, cores_per_socket=2))
    online = root / "sys" / "devices" / "system" / "cpu" / "online"
    online.unlink()
    online.symlink_to("/sys/devices/system/cpu/online")
    from harness.core.sysfs import Sysfs

    fs = Sysfs(root)
    assert fs.text("sys/devices/system/cpu/online") is None
    assert "links outside" in fs.why[online]


SWAP = """
import os, sys
from harness.core import inbound
model, fifo = sys.argv[1], sys.argv[2]
ino = os.stat(model).st_ino
real_fstat = os.fstat

def fstat(fd):  # the file is checked on its descriptor; then a FIFO is put at its name
    st = real_fstat(fd)
    if st.st_ino == ino and os.path.exists(model) and not os.path.samefile(model, fifo):
        os.replace(fifo, model)
    return st

os.fstat = fstat
m = inbound.load_onnx(model)
print(len(m.graph.node))
"""


def test_a_model_swapped_for_a_fifo_after_the_check_is_not_opened(data_dir: Path, tmp_path: Path) -> None:
    """The model swapped for a FIFO between the regular-file check and the open (by name): the run hung. The
    equivalent here: the swap made at the check's fstat; the load must read the file checked, at once."""
    model = tmp_path / "m.onnx"
    shutil.copy(_model(data_dir), model)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-c", SWAP, str(model), str(fifo)], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 10
    assert os.path.exists(model) and not model.is_file()  # the FIFO is there now, never opened


def test_a_link_put_at_a_name_after_it_was_resolved_is_refused(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The last component is opened without following links: a link swapped in after the name was resolved
    (and checked within its folder) is refused, not followed out."""
    inside, secret = tmp_path / "in" / "conf.txt", _secret(tmp_path)
    inside.parent.mkdir()
    inside.write_text("x\n")
    real_realpath = os.path.realpath

    def realpath(path: object, **kw: object) -> str:
        out = real_realpath(path, **kw)  # type: ignore[call-overload]
        if str(path) == str(inside) and not inside.is_symlink():
            inside.unlink()
            inside.symlink_to(secret)
        return out  # type: ignore[no-any-return]

    monkeypatch.setattr(os.path, "realpath", realpath)
    with pytest.raises(inbound.Refused, match="was replaced by a link while it was opened"):
        inbound.read_text(inside)


def test_submission_build_reads_a_sparse_accuracy_log_in_pages(runs: Path, tmp_path: Path) -> None:
    """`submission build` read a 1.9 GB sparse accuracy log whole (MemoryError under the trial's limit)."""
    local = tmp_path / "r"
    shutil.copytree(runs, local, symlinks=True)
    log = local / "box" / "resnet50" / "Offline" / "accuracy" / "mlperf_log_accuracy.json"
    with log.open("r+b") as f:
        f.truncate(1_900_000_000)
    acc = log.parent / "accuracy.txt"  # its hash line is the old log's: dropped, the build writes the new one
    acc.write_text("".join(x for x in acc.read_text().splitlines(keepends=True) if not x.startswith("hash=")))
    proc = _limited("submission", "build", "--submitter", "Org", "--system", "s", local, "-o", tmp_path / "sub",
                    timeout=240)
    assert "MemoryError" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    kept = next((tmp_path / "sub").rglob("Offline/accuracy/mlperf_log_accuracy.json"))
    assert kept.stat().st_size == 2 * 4096 + len(b"\n\n...\n\n")


def _fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def test_a_fifo_as_val_map_is_called_a_fifo(tmp_path: Path) -> None:
    """A FIFO or device was reported as "does not exist" / "not found" / "missing"."""
    src = tmp_path / "src"
    src.mkdir()
    _fifo(src / "val_map.txt")
    proc = _limited("prepare", "--data-dir", tmp_path / "data", "--source", src, "-q", timeout=60)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc)
    assert "val_map.txt is a FIFO (named pipe), not a regular file" in line and "not found" not in line, line


def test_a_fifo_as_model_is_called_a_fifo(tmp_path: Path) -> None:
    proc = _limited("prepare", "--data-dir", tmp_path / "data", "--model", _fifo(tmp_path / "m.onnx"), "-q")
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc)
    assert "m.onnx is a FIFO (named pipe), not a regular file" in line and "does not exist" not in line, line


def test_check_calls_a_fifo_accuracy_txt_a_fifo(tmp_path: Path) -> None:
    sub = make_tree(tmp_path / "t", "v6.1")
    acc = _fifo(next(sub.rglob("accuracy/accuracy.txt")))
    proc = _limited("submission", "check", tmp_path / "t")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{acc.relative_to(tmp_path / 't')}: is a FIFO (named pipe), not a regular file" in proc.stdout, \
        proc.stdout


@pytest.mark.parametrize("command", ["run", "prepare"])
def test_data_dir_dev_null_is_called_a_device(command: str, tmp_path: Path) -> None:
    """`--data-dir /dev/null` "is damaged ... rerun prepare --data-dir /dev/null"."""
    proc = _limited(command, "--data-dir", "/dev/null", *(["--results", tmp_path / "r"] if command == "run" else []))
    assert proc.returncode == 2, proc.stderr
    assert "/dev/null is a character device, not a folder" in proc.stderr, proc.stderr
    assert "damaged" not in proc.stderr and "rerun" not in proc.stderr
    assert not (tmp_path / "r").exists()
