"""One door in: every file the appliance did not just write is opened, read and parsed here.

A user's file, another tool's tree or a sysfs root can name anything: a FIFO (an open that never returns),
/dev/zero behind a link (a read that never ends), a link out of the folder the user named, a YAML alias bomb
(a 527-byte file that expands to gigabytes), `null` where a record belongs. So every read here
- opens regular files only, and judges the descriptor it reads from: the name is resolved, its last
  component opened with O_NOFOLLOW | O_NONBLOCK (a link or FIFO swapped in after the check is refused, never
  a blocked open), and that descriptor's fstat decides (type, size, hard links). A stat before the open only
  spares a device the open (opening some devices acts); it decides nothing,
- refuses a file with other hard links where it is to be published (`sole`): a hard link is the same file
  as one elsewhere, which no link check can see,
- hands a library that opens files by name (onnx, onnxruntime, numpy's memory map) the descriptor it
  checked (`held`), not the name, which could name another file by then,
- checks the size against the limit of its kind before reading, and stops reading past it (a file that
  grows, or a proc/sysfs file that says it is empty),
- resolves links and refuses them where they leave `within`, the folder the user named,
- parses JSON and YAML strictly (YAML without anchors or aliases; deep nesting and bad text are one line),
  and says in one line when the top-level value is of the wrong kind.

A refusal is `Refused` (a DataError: one line naming the file); a missing or unreadable file stays the
OSError the OS raised (FileNotFoundError, IsADirectoryError, PermissionError), for callers that say what a
missing file means.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

from harness.core.errors import DataError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# Size limits per kind of file, checked before reading and while reading.
TEXT = 1 * MiB          # user.conf, accuracy.txt, a label list, system overrides
RECORD = 16 * MiB       # the appliance's JSON records: model, tuned, manifests, card maps
SYSFS = 4 * MiB         # a sysfs or proc file: a page or a few (cpuinfo on 8192 CPUs: ~4 MB)
LOG = 50 * MiB          # any file of a submission tree (the official checker's FILE_SIZE_LIMIT_MB)
ANNOTATIONS = 1 * GiB   # a dataset's annotation JSON (COCO train: ~450 MB)
ACCURACY_LOG = 2 * GiB  # LoadGen's mlperf_log_accuracy.json of a full accuracy run
ARRAY = 64 * GiB        # a prepared shard or model file (memory-mapped, or read by onnx / onnxruntime)

_PAGE = 64 * KiB
_NOT_REGULAR = "not a regular file"


class Refused(DataError):
    """A file the appliance will not read: not a regular file, too large, a link out, unparseable, wrong kind.
    `reason` is the message without the file's name, for a problem line that names the file its own way."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"{label} {reason}")
        self.reason = reason


def json_kind(data: object) -> str:
    """What a parsed JSON / YAML value is, in JSON's words: `null`, an array, a string, a number, ..."""
    if data is None:
        return "null"
    return {bool: "a boolean", list: "an array", str: "a string", dict: "an object"}.get(type(data), "a number")


def size_words(n: int) -> str:
    """A limit in words: 1 MB, 50 MB, 2 GB."""
    return f"{n // GiB} GB" if n >= GiB and n % GiB == 0 else f"{n // MiB} MB" if n >= MiB else f"{n} bytes"


def _file_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _label(path: str | os.PathLike[str], what: str | None) -> str:
    return f"{what} {path}" if what else str(path)


def check_within(path: str | os.PathLike[str], within: str | os.PathLike[str], what: str | None = None) -> Path:
    """`path` with its links resolved, or Refused when that leaves the folder `within` (itself resolved)."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(within))
    if not real.is_relative_to(root):
        raise Refused(_label(path, what), f"links outside {within} (to {real}); copy the file into the folder "
                      f"instead of linking to it")
    return real


def _refuse_type(path: str | os.PathLike[str], st: os.stat_result, what: str | None) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not stat.S_ISREG(st.st_mode):
        raise Refused(_label(path, what), f"is {_file_type(st.st_mode)}, {_NOT_REGULAR}")


def _refuse_size(path: str | os.PathLike[str], size: int, limit: int, what: str | None) -> None:
    if size > limit:
        raise Refused(_label(path, what), f"is {size} bytes, more than the {size_words(limit)} such a file may "
                      f"hold; not the file expected")


def inside(root: str | os.PathLike[str], name: str, what: str) -> Path:
    """The file a document names (`name`, relative to `root`, the folder the document belongs to), resolved;
    Refused (naming `what`, the document) when it is absolute or it or its links lead out of `root`."""
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise Refused(what, f"names {name!r}, outside {root}; it may name only files inside that folder")
    real = Path(os.path.realpath(Path(root) / name))
    if not real.is_relative_to(os.path.realpath(root)):
        raise Refused(what, f"names {name!r}, which links outside {root} (to {real}); copy the file into the "
                      f"folder instead of linking to it")
    return real


def _open_fd(path: str | os.PathLike[str], limit: int, within: str | os.PathLike[str] | None,
             what: str | None, sole: bool = False) -> int:
    """A read-only descriptor of a regular file of at most `limit` bytes (by its size); never blocks. `sole`:
    refused when the file has other hard links."""
    real = check_within(path, within, what) if within is not None else Path(os.path.realpath(path))
    _refuse_type(path, os.stat(path), what)  # spares a device the open; the descriptor's fstat below decides
    try:  # the resolved name, its last component not followed: a link swapped in since is ELOOP, not followed
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (swapped in since the stat)
            raise Refused(_label(path, what), f"is a socket, {_NOT_REGULAR}") from None
        if exc.errno == errno.ELOOP:
            raise Refused(_label(path, what), "was replaced by a link while it was opened; not the file "
                          "checked") from None
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        st = os.fstat(fd)  # the file opened, whatever was swapped in since the stat
        _refuse_type(path, st, what)
        _refuse_size(path, st.st_size, limit, what)
        if sole and st.st_nlink > 1:
            raise Refused(_label(path, what), f"has {st.st_nlink - 1} other hard link(s): the same file as one "
                          f"elsewhere, which is not published; copy it (cp, not ln) if it is this run's")
        if within is not None:  # the file opened, not the name checked: a link swapped in between is caught
            check_within(_opened(fd, path), within, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _opened(fd: int, path: str | os.PathLike[str]) -> str:
    """The path of the file `fd` holds open (Linux /proc), else the name it was opened by."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return str(path)


@contextlib.contextmanager
def held(path: str | os.PathLike[str], limit: int, *, within: str | os.PathLike[str] | None = None,
         what: str | None = None) -> Iterator[str]:
    """A name for the file checked as `open_bounded` checks it, held open while the caller's library opens it:
    /proc/self/fd/N opens the descriptor's file, so a FIFO or link put in its place after the check is never
    what the library reads (the path itself where /proc is absent)."""
    fd = _open_fd(path, limit, within, what)
    try:
        proc = f"/proc/self/fd/{fd}"
        yield proc if os.path.exists(proc) else str(path)
    finally:
        os.close(fd)


class _Capped(io.RawIOBase):
    """A descriptor read up to `limit` bytes: one more is Refused, whatever the file's size said."""

    def __init__(self, fd: int, limit: int, label: str) -> None:
        self._fd, self._left, self._limit, self._label = fd, limit, limit, label

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._left + 1)
        if want == 0:
            return 0
        data = os.read(self._fd, want)
        if len(data) > self._left:
            raise Refused(self._label, f"grew past the {size_words(self._limit)} such a file may hold while "
                          f"it was read; not the file expected")
        view[:len(data)] = data
        self._left -= len(data)
        return len(data)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


@contextlib.contextmanager
def open_bounded(path: str | os.PathLike[str], limit: int, *, within: str | os.PathLike[str] | None = None,
                 what: str | None = None, sole: bool = False) -> Iterator[IO[bytes]]:
    """A binary reader of a regular file that stops at `limit` bytes (Refused past it), read in pages; `sole`:
    a file with other hard links is refused."""
    raw = _Capped(_open_fd(path, limit, within, what, sole), limit, _label(path, what))
    with io.BufferedReader(raw, buffer_size=_PAGE) as f:
        yield f


def read_bytes(path: str | os.PathLike[str], limit: int, *, within: str | os.PathLike[str] | None = None,
               what: str | None = None) -> bytes:
    """All of a regular file of at most `limit` bytes."""
    chunks: list[bytes] = []
    with open_bounded(path, limit, within=within, what=what) as f:
        while chunk := f.read(_PAGE):
            chunks.append(chunk)
    return b"".join(chunks)


def decode(raw: bytes, label: str) -> str:
    """UTF-8 text without a leading byte-order mark (Windows editors write one; LoadGen would read it as part
    of the first key), or Refused."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Refused(label, f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def read_text(path: str | os.PathLike[str], limit: int = TEXT, *, within: str | os.PathLike[str] | None = None,
              what: str | None = None, errors: str = "strict") -> str:
    """A regular file's UTF-8 text (a BOM dropped); `errors="replace"` for logs read leniently."""
    raw = read_bytes(path, limit, within=within, what=what)
    if errors == "strict":
        return decode(raw, _label(path, what))
    return raw.decode("utf-8", errors=errors).removeprefix("\ufeff")


def parse_json(text: str | bytes, label: str) -> object:
    """JSON text parsed, or Refused in one line (bad syntax, nesting too deep for the parser)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0][:160] if str(exc) else "nested too deep"
        raise Refused(label, f"is not valid JSON ({first})") from None


def read_json(path: str | os.PathLike[str], limit: int = RECORD, *, within: str | os.PathLike[str] | None = None,
              what: str | None = None) -> object:
    """A regular file's JSON value."""
    return parse_json(read_text(path, limit, within=within, what=what), _label(path, what))


def expect_object(data: object, label: str, field: str | None = None) -> dict[str, Any]:
    """`data` as a JSON object (a YAML mapping), or Refused naming the file, the field and what it holds."""
    if not isinstance(data, dict):
        where = f"{label}: {field}" if field else label
        raise Refused(where, f"holds {json_kind(data)}, not a JSON object")
    return data


def read_json_object(path: str | os.PathLike[str], limit: int = RECORD, *,
                     within: str | os.PathLike[str] | None = None, what: str | None = None) -> dict[str, Any]:
    """A regular file's JSON object; `null`, an array or a number is one line naming the file."""
    return expect_object(read_json(path, limit, within=within, what=what), _label(path, what))


class _NoAliasLoader(yaml.SafeLoader):
    """yaml's safe loader without anchors and aliases: an alias bomb is refused at its first anchor, before
    anything is expanded. No file the appliance reads needs them."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not accepted",
                                              event.start_mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str, label: str) -> object:
    """YAML text parsed safely and without aliases, or Refused in one line."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f", line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise Refused(label, f"is not valid YAML ({exc.problem or exc.context}{at})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = " ".join(str(exc).split())[:200] if str(exc) else "nested too deep"
        raise Refused(label, f"is not valid YAML ({first})") from None


def read_yaml(path: str | os.PathLike[str], limit: int = TEXT, *, within: str | os.PathLike[str] | None = None,
              what: str | None = None) -> object:
    """A regular file's YAML value, read without aliases."""
    return parse_yaml(read_text(path, limit, within=within, what=what), _label(path, what))


def load_npy(path: str | os.PathLike[str], *, mmap: bool, limit: int = ARRAY,
             within: str | os.PathLike[str] | None = None, what: str | None = None) -> np.ndarray[Any, Any]:
    """A .npy array (never pickled objects): memory-mapped, or read whole when small. A damaged header or a
    file shorter than its header says is Refused."""
    try:
        if mmap:
            with held(path, limit, within=within, what=what) as name:  # the mapping outlives the descriptor
                return np.load(name, mmap_mode="r", allow_pickle=False)  # type: ignore[no-any-return]
        return np.load(io.BytesIO(read_bytes(path, limit, within=within, what=what)),  # type: ignore[no-any-return]
                       allow_pickle=False)
    except EOFError as exc:  # numpy's, which click would take for a Ctrl-D: a short file, named as such
        raise Refused(_label(path, what), f"is truncated ({exc}: {file_size(path)} bytes)") from None
    except ValueError as exc:
        raise Refused(_label(path, what), f"is not a readable .npy array ({str(exc)[:160]})") from None


def copy_to(src: str | os.PathLike[str], out: IO[bytes], limit: int, *,
            within: str | os.PathLike[str] | None = None, what: str | None = None, sole: bool = False) -> None:
    """`src`'s bytes into `out` (a file the caller opened for writing), page by page: a link out of `within`,
    a device, a file past `limit` or (`sole`) one with other hard links is refused before a byte is copied."""
    with open_bounded(src, limit, within=within, what=what, sole=sole) as f:
        while chunk := f.read(_PAGE):
            out.write(chunk)


def load_onnx(path: str | os.PathLike[str], limit: int = ARRAY, *, what: str | None = None) -> Any:
    """An ONNX model file, read through this door (onnx imported here only when a model is read)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    with held(path, limit, what=what) as name:  # the file checked, whatever is put at its name meanwhile
        model = onnx.load(name, load_external_data=False)
    if any(uses_external_data(t) for t in model.graph.initializer):  # weights in files beside it, by name
        load_external_data_for_model(model, os.path.dirname(os.path.realpath(path)))
    return model


def image_pixels(data: bytes) -> int | None:
    """Width x height from an image's header, read before any pixel is decoded (a small PNG can claim 30,000
    x 30,000 pixels: 2.7 GB to decode); None for a format Pillow (matplotlib's dependency) does not know."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # Pillow's own bomb check warns on stderr; the caller judges the size
    try:
        with Image.open(io.BytesIO(data)) as im:
            return int(im.size[0]) * int(im.size[1])
    except (OSError, ValueError, SyntaxError):
        return None


def is_digits(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits: str.isdigit() and int() also take '٣' (an
    Arabic-Indic three) and '³', which no file or option of the appliance means."""
    return text.isascii() and text.isdigit()


def what_is(path: str | os.PathLike[str]) -> str | None:
    """What is at `path` (links followed), in words: "a folder", "a regular file", "a FIFO (named pipe)", "a
    character device", "a link to nothing"...; None when nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a link to nothing" if os.path.islink(path) else None
    return "a regular file" if stat.S_ISREG(mode) else _file_type(mode)


def absent(path: str | os.PathLike[str], words: str = "does not exist") -> str:
    """Why a file expected at `path` is not a regular file there, in words that are true: `words` (e.g. "does
    not exist", "is missing") when nothing is there, else what is there ("is a FIFO (named pipe), not a
    regular file")."""
    kind = what_is(path)
    return words if kind is None else f"is {kind}, not a regular file"


def file_size(path: str | os.PathLike[str]) -> int | None:
    """The size a path's file claims (links followed), or None if it cannot be stat'ed."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def open_folder(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """A folder held open by its descriptor (its last component not followed if a link): what a command works
    in is then reached through it, whatever becomes of the path (a run's folder moved or replaced by a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_DIRECTORY already refused it: the door's rule, kept here too
        os.close(fd)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    return fd
