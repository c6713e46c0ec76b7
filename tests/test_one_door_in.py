"""One door in (issue 35): no module but harness/core/inbound.py opens, reads or parses a file itself.

The checker walks every module's syntax tree and flags reads: builtin `open` in a read mode, `os.open`
without a write flag, `.open()` / `.read_text()` / `.read_bytes()` on a path, `json.load`, yaml's loaders,
numpy's loaders, `onnx.load`, `shutil.copy*` (a copy reads its source), `ET.parse`, `pickle.load`. Writes
are not its business (the writer's test keeps them to their module). A few exceptions are listed with
their reason; a new one needs a reason too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import dotted_name

HARNESS = Path(__file__).resolve().parent.parent / "harness"
DOOR = "harness/core/inbound.py"

# (module, the call as the checker names it) -> why it may read a file itself
ALLOWED: dict[tuple[str, str], str] = {
    ("harness/run/cards/openvino_process.py", "pickle.load"):
        "the control pipe to the worker process this appliance started, not a file",
}

_PARSERS = {
    "json.load", "yaml.load", "yaml.safe_load", "yaml.full_load", "yaml.unsafe_load", "yaml.load_all",
    "yaml.safe_load_all", "yaml.compose", "yaml.parse", "np.load", "numpy.load", "np.fromfile", "np.loadtxt",
    "np.genfromtxt", "np.memmap", "onnx.load", "onnx.load_model", "pickle.load", "ET.parse", "ElementTree.parse",
    "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "configparser.read", "tomllib.load",
    "cv2.imread", "Image.open", "io.open", "codecs.open",
}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _mode(call: ast.Call, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _reads(mode: ast.expr | None) -> bool:
    """A mode that reads only: absent, or a constant without w / a / x / +. An unknown mode counts as a read."""
    if mode is None:
        return True
    if isinstance(mode, ast.IfExp):
        return _reads(mode.body) or _reads(mode.orelse)
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return not set(mode.value) & set("wax+")
    return True


def _flag_names(node: ast.expr) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | \
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def raw_reads(source: str) -> list[tuple[int, str]]:
    """(line, call) of every direct file read in `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = dotted_name(node.func)
        if name.startswith("inbound."):
            continue  # the door itself
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name == "open" and _reads(_mode(node, 1)):
            found.append((node.lineno, "open"))
        elif name == "os.open":
            flags = node.args[1] if len(node.args) > 1 else None
            if flags is None or not _flag_names(flags) & _WRITE_FLAGS:
                found.append((node.lineno, "os.open"))
        elif name in _PARSERS or name.endswith((".yaml.safe_load", ".json.load")):
            found.append((node.lineno, name))
        elif method in ("read_text", "read_bytes"):
            found.append((node.lineno, f".{method}"))
        elif method == "open" and name != "os.open":
            first = _mode(node, 0)
            # a path's .open(): its mode is a constant or absent; urllib's opener.open(request) is not a file
            if first is None or (isinstance(first, ast.Constant) and _reads(first)):
                found.append((node.lineno, ".open"))
    return sorted(found)


def violations() -> list[str]:
    bad = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS.parent).as_posix()
        if rel == DOOR:
            continue
        for line, call in raw_reads(path.read_text()):
            if (rel, call) not in ALLOWED:
                bad.append(f"{rel}:{line}: {call}")
    return bad


def test_no_module_reads_a_file_but_the_door() -> None:
    assert violations() == [], "read these through harness.core.inbound:\n" + "\n".join(violations())


def test_every_exception_is_still_needed() -> None:
    used = set()
    for module, call in ALLOWED:
        if call in {c for _, c in raw_reads((HARNESS.parent / module).read_text())}:
            used.add((module, call))
    assert used == set(ALLOWED)


def test_the_checker_flags_a_raw_read_added_anywhere() -> None:
    snippet = """
import json, yaml, numpy as np, shutil, os
from pathlib import Path
a = open(p)
b = open(p, "rb")
c = Path(p).read_text()
d = p.read_bytes()
e = json.load(f)
f = yaml.safe_load(text)
g = np.load(p, mmap_mode="r")
with p.open() as h: pass
shutil.copy2(src, dst)
fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
"""
    calls = [call for _, call in raw_reads(snippet)]
    assert calls == ["open", "open", ".read_text", ".read_bytes", "json.load", "yaml.safe_load", "np.load",
                     ".open", "shutil.copy2", "os.open"]


def test_the_checker_leaves_writes_alone() -> None:
    snippet = """
import os
with open(p, "w") as f: pass
with open(p, "ab") as f: pass
with open(p, mode="r+b") as f: pass
with p.open("x") as f: pass
fd = os.open(p, os.O_CREAT | os.O_RDWR)
resp = opener.open(urllib.request.Request(url))
"""
    assert raw_reads(snippet) == []
