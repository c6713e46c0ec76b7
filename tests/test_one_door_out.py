"""One door out (issue 35): only harness/core/outbound.py writes files. Its rules (never over another's
file, never into a run folder or the tree read, atomic, free space and names checked first, a failed
batch removed) were fixed writer by writer before, and every writer missed broke them again.

The check walks every module's syntax tree for the ways Python and the libraries the appliance uses write
a file: open() / Path.open() / os.fdopen() in a writing mode, os.open() with a writing flag, pathlib's
write_text / write_bytes / mkdir / touch / symlink_to / hardlink_to / rename, os's and shutil's copies,
moves, renames, links and folders, tempfile's files and folders, numpy's save / memmap, json / pickle dump,
onnx.save. (Path.replace is not told from str.replace: os.replace is.) Reads are the other door's
(tests/test_one_door_in.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "harness"
WRITER = "core/outbound.py"

# module -> why it writes on its own; each entry a protocol that is the module's whole purpose
ALLOWED = {
    "run/rundirs.py": "the run folders' claim protocol: a symlink claim, a staging folder and renames that "
                      "fail where another process got there first are the claim itself",
    "run/neighbours.py": "the machine-wide registry of running runs: entries held open and flock-ed while a "
                         "run lives, appended to by its neighbours",
    "data/models/registry.py": "a resumable download: the .part file appended to across attempts, then "
                               "renamed once its digest matches",
    "run/cards/openvino_process.py": "shared memory (/dev/shm) between a card and its worker process, not "
                                     "a file anyone keeps",
    "core/native_lines.py": "the native-log filter process appends each line as it comes, so the lines before "
                            "a crash are kept: a log, in a temporary file the run then moves into its folder",
}

WRITE_MODES = set("wax+")
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
METHODS = {"write_text", "write_bytes", "mkdir", "touch", "symlink_to", "hardlink_to", "rename"}
FUNCTIONS = {
    "os": {"rename", "renames", "replace", "mkdir", "makedirs", "symlink", "link", "truncate", "mkfifo"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "move", "copyfileobj"},
    "tempfile": {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile",
                 "SpooledTemporaryFile"},
    "np": {"save", "savez", "savez_compressed", "savetxt", "memmap", "open_memmap"},
    "json": {"dump"}, "pickle": {"dump"}, "onnx": {"save", "save_model"},
}


def _name(node: ast.expr) -> str:
    """`a.b.c` of an attribute chain, the last two parts (np.lib.format.open_memmap -> format.open_memmap)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode argument of an open()-like call, where it is a literal."""
    arg = next((k.value for k in call.keywords if k.arg == "mode"),
               call.args[position] if len(call.args) > position else None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def raw_writes(source: str) -> list[str]:
    """Each direct write in `source`: 'line N: what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        head, _, last = name.rpartition(".")
        base = head.rpartition(".")[2]
        what = None
        method = isinstance(node.func, ast.Attribute) and last == "open" and name not in ("io.open", "os.open")
        if name in ("open", "io.open", "os.fdopen") or method:
            mode = _mode(node, 0 if method else 1)
            if mode is not None and WRITE_MODES & set(mode):
                what = f"{name}(mode {mode!r})"
        elif name == "os.open":
            flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if flags & WRITE_FLAGS:
                what = f"os.open({', '.join(sorted(flags & WRITE_FLAGS))})"
        elif isinstance(node.func, ast.Attribute) and last in METHODS and base not in FUNCTIONS:
            what = f".{last}()"
        elif last in FUNCTIONS.get(base, ()) or (base in ("format", "numpy") and last in FUNCTIONS["np"]):
            what = name
        if what is not None:
            found.append(f"line {node.lineno}: {what}")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).as_posix() != WRITER)


def test_only_the_writer_module_writes_files() -> None:
    problems = [f"harness/{rel}: {w}" for p in _modules()
                if (rel := p.relative_to(ROOT).as_posix()) not in ALLOWED for w in raw_writes(p.read_text())]
    assert problems == [], "write through harness.core.outbound instead:\n" + "\n".join(problems)


def test_each_allowed_module_still_writes() -> None:
    """An entry whose module no longer writes on its own is removed, so the list stays the exceptions."""
    assert all(raw_writes((ROOT / rel).read_text()) for rel in ALLOWED), ALLOWED


@pytest.mark.parametrize("line", [
    'open(path, "w").write("x")',
    'open(path, mode="ab")',
    'with open(p, "r+b") as f: pass',
    'Path(p).open("w")',
    'os.fdopen(fd, "wb")',
    'os.open(p, os.O_CREAT | os.O_WRONLY)',
    'Path(p).write_text("x")',
    'out.write_bytes(b"x")',
    'folder.mkdir(parents=True)',
    'os.makedirs(p)',
    'shutil.copy2(a, b)',
    'shutil.copytree(a, b)',
    'shutil.move(a, b)',
    'os.replace(a, b)',
    'os.rename(a, b)',
    'p.rename(q)',
    'os.symlink(a, b)',
    'tempfile.mkstemp(dir=d)',
    'tempfile.TemporaryDirectory()',
    'np.save(p, a)',
    'np.lib.format.open_memmap(p, mode="w+")',
    'json.dump(data, f)',
    'pickle.dump(data, f)',
    'onnx.save(model, p)',
    'p.touch()',
])
def test_the_check_finds_a_raw_write(line: str) -> None:
    """The check fails when a raw write is added (each form, as it would appear in a module)."""
    assert raw_writes(f"import os, json, pickle, shutil, tempfile\nimport numpy as np\n{line}\n"), line


@pytest.mark.parametrize("line", [
    'open(path)', 'open(path, "rb")', 'Path(p).open()', 'os.open(p, os.O_RDONLY)', 'text.replace("a", "b")',
    'json.dumps(data)', 'json.loads(s)', 'np.load(p)', 'Path(p).read_text()', 'shutil.rmtree(p)',
    'atomic_write_text(p, "x")', 'outbound.copy_file(a, b)',
])
def test_the_check_leaves_reads_alone(line: str) -> None:
    assert raw_writes(f"{line}\n") == [], line


def test_the_check_fails_the_build_on_a_module_that_writes(tmp_path: Path) -> None:
    """A module added with a raw write is named by the test over the package."""
    module = tmp_path / "bad.py"
    module.write_text('from pathlib import Path\n\n\ndef save(p: Path) -> None:\n    p.write_text("x")\n')
    assert raw_writes(module.read_text()) == ["line 5: .write_text()"]
