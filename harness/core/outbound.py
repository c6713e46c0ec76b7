"""The one door out: every file and folder the appliance writes goes through this module.

Why one module: the rules below were fixed writer by writer, and every writer that was missed broke them
again (issue 35). A test (tests/test_one_door_out.py) fails when code elsewhere writes a file directly.

The rules, each checked before anything is written:
- a name the file system takes (`check_name`): no component longer than NAME_MAX less our temporary's
  affixes, no path longer than PATH_MAX;
- never into a run folder, nor into a tree the command reads (`check_target`, `check_new_folder`);
- never over a file the same kind of command did not write (`ours`, given by each command);
- enough free space (`need_space`).
While writing: every file through a temporary and one rename (`atomic_write_*`, `staged_dir`), a new
folder published only where nothing is (`publish_dir`: two writers into one `-o`, one wins), and what a
failed batch wrote removed again (`all_or_nothing`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.core.fsutil import NAME_MAX, tmp_prefix, umask

PATH_MAX = 4096  # bytes in a path, the terminating NUL included (Linux PATH_MAX)
# what `tmp_prefix` and `mkstemp` add to a name: ".", ".<pid up to 7 digits>.", 8 random, ".tmp", ".old"
AFFIXES = 32
FOLDER_ROOM = 512  # what a command adds below a folder it writes into: <system>/<benchmark>/.../run_N/<log>
# what marks a folder as a run's, by what is written there, never by a name a user may give a folder (`run_3`)
# or a file name others use (a web app's manifest.json): LoadGen's logs, our INCOMPLETE.txt, our staging
# folders' names, a manifest.json that is ours (its first key "appliance"). Nothing else is written there.
RUN_FOLDER = re.compile(r"\..*\.staging-\d+")
RUN_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "mlperf_log_accuracy.json", "INCOMPLETE.txt")
OUR_MANIFEST = b'{\n  "appliance": '  # how atomic_write_json begins a run's manifest (sorted keys, indent 2)
SPACE_MARGIN = 1 << 20  # bytes kept free beyond an estimate: the file system's own blocks, a manifest


def public_mode(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Give a file (0666) or folder (0777) from `tempfile`, which makes them 0600 / 0700, the mode an
    ordinary open() or mkdir() would: minus the umask, so results and data stay readable by others."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


_MADE: list[Path] = []  # folders this command made, in the order made
_BATCHES: list[list[Path]] = []  # the files each open `all_or_nothing` block published, innermost last


def make_dirs(path: Path) -> Path:
    """`path.mkdir(parents=True, exist_ok=True)`, remembering the folders it made, so a command that then
    fails or is interrupted removes them again if it left them empty (`remove_made_if_empty`)."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    _MADE.extend(reversed(missing))
    return path


def forget_made() -> None:
    """Start a command: the folders an earlier command of this process made are its own."""
    _MADE.clear()


def remove_made_if_empty() -> None:
    """After a failed or interrupted command: remove the folders it made that it left empty, deepest first
    (a results tree of empty folders is a leftover; one that holds anything stays)."""
    for folder in reversed(_MADE):
        with contextlib.suppress(OSError):
            folder.rmdir()
    _MADE.clear()


def _write_fd(fd: int, data: bytes) -> None:
    """The lowest write: all of `data` to `fd` (the call a test makes fail with ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder (mode as open() gives it);
    on any error (a full disk included) the temporary file is removed and `path` is left as it was."""
    make_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        public_mode(tmp)
        try:
            _write_fd(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if _BATCHES:
        _BATCHES[-1].append(path)


def write_staged(path: Path, data: bytes) -> None:
    """A new file inside a folder this command is staging (published whole by one rename): written in
    place, no temporary of its own; never over an existing file (O_EXCL)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _write_fd(fd, data)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder (mode as open() gives it)."""
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Files written together (a report and its plots): on any error in the block, those it already
    published are removed again, so a full disk never leaves part of the set."""
    _BATCHES.append([])
    try:
        yield
    except BaseException:
        for path in _BATCHES[-1]:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    finally:
        _BATCHES.pop()


def save_array(path: Path, array: np.ndarray) -> None:
    """`np.save` of a fresh file in a folder being staged (no pickles)."""
    np.save(path, array, allow_pickle=False)


def discard_writes(fd: int) -> None:
    """Point `fd` at /dev/null: a stream whose file failed (a full or closed stdout) drops what it still holds
    instead of failing again at exit."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def mapped_array(path: Path, shape: tuple[int, ...]) -> np.memmap:
    """A new uint8 `.npy` file mapped for writing, its blocks allocated at once: a disk too full for it fails
    here with ENOSPC, where writing into a sparse mapping would kill the process with SIGBUS."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=shape)
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    return array


def copy_file(src: Path, dst: Path, *, limit: int = inbound.LOG, within: Path | None = None,
              sole: bool = False) -> None:
    """Copy `src` (contents and times) to a new `dst` in a folder being staged, read through the one door in
    (harness.core.inbound: at most `limit` bytes, a link out of `within`, a device or, with `sole`, a file
    with other hard links refused)."""
    make_dirs(dst.parent)
    with open(dst, "xb") as out:
        inbound.copy_to(src, out, limit, within=within, sole=sole)
    shutil.copystat(src, dst)


def move_into_place(tmp: Path, final: Path) -> None:
    """Publish a file a tool wrote into our temporary folder (a converted model) in one rename."""
    os.replace(tmp, final)


@contextlib.contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """Yield a fresh temporary folder beside `final`; on success it replaces `final` in one rename.

    On any error (Ctrl-C included) the temporary folder is removed and `final` is left as it was.
    """
    tmp = new_staging_dir(final)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = final.with_name(f"{tmp_prefix(final.name)}old.tmp")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def new_staging_dir(final: Path) -> Path:
    """A fresh, empty temporary folder beside `final` (to be published with `publish_dir`)."""
    make_dirs(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix(final.name), suffix=".tmp", dir=final.parent))
    public_mode(tmp, directory=True)
    return tmp


@contextlib.contextmanager
def staged_new_dir(final: Path, said: str) -> Iterator[Path]:
    """`staged_dir` for a folder that must be new: published only where nothing is at `final` yet."""
    tmp = new_staging_dir(final)
    try:
        yield tmp
        publish_dir(tmp, final, said)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_RENAME_NOREPLACE = 1  # linux/fs.h


def _rename_noreplace(src: Path, dst: Path) -> None:
    """rename(2) that fails with EEXIST where `dst` exists (renameat2 RENAME_NOREPLACE); where the C
    library lacks it, a plain rename, which still fails on a folder that holds anything."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
        os.rename(src, dst)
        return
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), _RENAME_NOREPLACE) != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EINVAL):  # a kernel or file system without the flag
            if os.path.lexists(dst):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
            os.rename(src, dst)
            return
        raise OSError(err, os.strerror(err), str(src), None, str(dst))


def publish_dir(tmp: Path, final: Path, said: str) -> None:
    """Rename the finished folder `tmp` to `final` only where nothing is at `final` yet: of two commands
    writing one `-o` at once, the first to finish wins and the other says so in one line."""
    try:
        _rename_noreplace(tmp, final)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        raise ApplianceError(f"{said}: {final} appeared while this command was writing (another command "
                             f"writing the same folder?); it was left as it is and nothing of this command was "
                             f"kept: choose a new folder") from None


def check_name(path: Path, said: str, room: int = 0) -> Path:
    """`path` when the file system takes its name and our temporaries beside it, else one line (`said`:
    how the line names it, e.g. "report -o x.html"). `room`: bytes of path the command adds below it."""
    raw = os.fsencode(path.absolute())
    longest = max((c for c in path.parts), key=lambda c: len(os.fsencode(c)), default="")
    if len(os.fsencode(longest)) > NAME_MAX - AFFIXES:
        raise ApplianceError(f"{said[:80]}...: the name {longest[:40]!r}... is "
                             f"{len(os.fsencode(longest))} bytes; a file or folder name may be at most "
                             f"{NAME_MAX - AFFIXES} bytes here ({NAME_MAX} less the temporary's affixes): "
                             f"choose a shorter name")
    if len(raw) >= PATH_MAX - AFFIXES - room:
        raise ApplianceError(f"{said[:80]}...: the path is {len(raw)} bytes; at most "
                             f"{PATH_MAX - AFFIXES - room - 1} are possible here (the paths below it take the "
                             f"rest of {PATH_MAX}): choose a shorter one")
    return path


def run_folder(folder: Path) -> Path | None:
    """The run folder `folder` is or lies in (by what the appliance and LoadGen write there), if any."""
    for f in (folder, *folder.parents):
        if RUN_FOLDER.fullmatch(f.name) or any((f / name).is_file() for name in RUN_FILES) \
                or head(f / "manifest.json", len(OUR_MANIFEST)) == OUR_MANIFEST:
            return f
    return None


DIVISIONS = ("closed", "open", "network")  # a submission tree's top folders (the official checker's divisions)


def submission_tree(folder: Path) -> Path | None:
    """The submission tree `folder` is or lies in, if any: one holding `<division>/<submitter>/` with `systems/`
    and `results/`, as `submission build` and every published round lay it out (its files go out for publication:
    a run or a data dir written there would be published with them)."""
    for f in (folder, *folder.parents):
        if f.name in DIVISIONS and f.is_dir():
            submitters = itertools.islice((c for c in f.iterdir() if c.is_dir()), 1000)
            if any((c / "systems").is_dir() and (c / "results").is_dir() for c in submitters):
                return f.parent
    return None


def _inside(path: Path, tree: Path) -> bool:
    """Whether `path` is `tree` or lies below it, links resolved."""
    path, tree = path.resolve(), tree.resolve()
    return path == tree or tree in path.parents


def _refuse_places(path: Path, said: str, what: str, example: str, reads: Iterable[Path]) -> None:
    """One line when `path` would go into a run folder or into a tree this command reads."""
    for folder in (path.parent.absolute(), path.parent.resolve()):
        run = run_folder(folder)
        if run is not None:
            raise ApplianceError(f"{said}: {path.name} would go into the run folder {run}, which holds a run's "
                                 f"logs; write {what} outside it, e.g. {example}")
        tree = submission_tree(folder)
        if tree is not None:
            raise ApplianceError(f"{said}: {path.name} would go into the submission tree {tree}, whose files are "
                                 f"published; write {what} outside it, e.g. {example}")
    for tree in reads:
        if _inside(path, tree):
            raise ApplianceError(f"{said}: {path} lies in {tree}, which this command reads; write {what} "
                                 f"outside it, e.g. {example}")


def check_target(path: Path, command: str, option: str, ours: Callable[[Path], bool], *, example: str,
                 what: str, reads: Iterable[Path] = (), given: Path | None = None) -> Path:
    """Refuse, in one line and before anything is written, a file target that would go into a run folder
    or a tree the command reads, or replace a file `command` did not write (`ours` tells; only a regular
    file, never a link, can be ours). `given`: the path the user named, where `path` is one beside it."""
    said = f"{command} {option} {given or path}"
    check_name(path, said)
    _refuse_places(path, said, what, f"{option} {example}", reads)
    if (path.exists() or path.is_symlink()) and not (path.is_file() and not path.is_symlink() and ours(path)):
        raise ApplianceError(f"{said}: {path} exists and was not written by appliance {command}; choose a new "
                             f"file ({command} never replaces another file)")
    return path


def check_new_folder(path: Path, command: str, option: str, *, example: str, what: str,
                     reads: Iterable[Path] = ()) -> Path:
    """Refuse a folder target that exists, would go into a run folder or lies in a tree the command reads."""
    said = f"{command} {option} {path}"
    check_name(path, said)
    if os.path.lexists(path):
        raise ApplianceError(f"{said}: {path} already exists; {what} goes into a new folder (never overwritten): "
                             f"choose another, e.g. {option} {example}")
    _refuse_places(path, said, what, f"{option} {example}", reads)
    return path


def head(path: Path, size: int = 4096) -> bytes:
    """The first `size` bytes of our own earlier output, to recognise it (a regular file; else b"")."""
    if path.is_symlink():
        return b""
    try:
        with inbound.open_bounded(path, inbound.ARRAY) as f:
            return f.read(size)
    except (OSError, inbound.Refused):
        return b""


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged writer may still use in the file system of `folder` (or of its nearest
    existing parent)."""
    probe = folder.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    if st.f_flag & os.ST_RDONLY:  # a read-only file system is that fault, not a lack of space
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(probe))
    return st.f_bavail * st.f_frsize


def need_space(folder: Path, size: int, what: str, hint: str) -> None:
    """Refuse, before writing, where `folder`'s file system lacks `size` bytes (and a margin) for `what`."""
    free = free_bytes(folder)
    if free < size + SPACE_MARGIN:
        raise ApplianceError(f"only {free / 1e6:.1f} MB free in {folder}; {what} needs about "
                             f"{(size + SPACE_MARGIN) / 1e6:.1f} MB: {hint}")


def inside_results(path: Path, results: Path, option: str) -> Path:
    """`path` when it stays in `results` once links are resolved (a system folder that links elsewhere
    would put a run outside --results), else one line."""
    if not _inside(path, results):
        raise ApplianceError(f"{path} leads outside {option} {results} (to {path.resolve()}, through a link); "
                             f"remove the link or choose another {option} folder")
    return path


def ensure_writable_dir(path: Path, what: str) -> Path:
    """Create `path` if needed and prove it is writable (its name one the file system takes, not inside
    a run folder), or say so in one line."""
    check_name(path, f"{what} {path}", room=FOLDER_ROOM)
    run = run_folder(path.absolute()) or run_folder(path.resolve())
    if run is not None:
        raise ApplianceError(f"{what} {path} lies in the run folder {run}, which holds a run's logs; choose a "
                             f"folder outside it")
    tree = submission_tree(path.absolute()) or submission_tree(path.resolve())
    if tree is not None:
        raise ApplianceError(f"{what} {path} lies in the submission tree {tree}, whose files are published; choose a "
                             f"folder outside it")
    try:
        make_dirs(path)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise ApplianceError(f"{what} {path} is not writable ({exc.strerror}); "
                             f"choose another with the option or fix its permissions") from None
    return path


@contextlib.contextmanager
def scratch_dir(prefix: str, beside: Path | None = None) -> Iterator[Path]:
    """A temporary folder (in `beside`, else the system's temporary folder) for a tool's own files: a
    LoadGen probe, a model being converted; removed with all it holds when the block ends."""
    with tempfile.TemporaryDirectory(dir=beside, prefix=prefix, suffix=".tmp") as tmp:
        yield Path(tmp)


def save_onnx(model: Any, path: Path) -> None:
    """An ONNX model into a scratch folder (then `move_into_place`)."""
    import onnx

    onnx.save(model, str(path))


def npy_bytes(array: np.ndarray) -> bytes:
    """The bytes of a `.npy` file of `array` (no pickles), for `atomic_write_bytes`."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def unnamed_file() -> IO[bytes]:
    """An unnamed temporary file (gone once closed, nothing left on disk) to capture native output in."""
    return tempfile.TemporaryFile()
