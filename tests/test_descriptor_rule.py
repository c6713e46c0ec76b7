"""The descriptor rule (issue 41): a file is judged on the descriptor it is read from, never on its name.

Two checks over the syntax trees, each shown to fail on a snippet that breaks it:
- every `os.open` in the door (harness/core/inbound.py) opens without following a last link (O_NOFOLLOW) and
  without blocking (O_NONBLOCK), and the function that opens it fstat's what it opened;
- no module hands a library that opens files by name (onnxruntime, OpenVINO, onnx, numpy's memory map) a
  name it made itself (`str(path)`, an f-string, `x.path`): a name checked earlier can be a FIFO by the time
  the library opens it. It passes the name `inbound.held` yields, or bytes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import dotted_name

HARNESS = Path(__file__).resolve().parent.parent / "harness"
DOOR = HARNESS / "core" / "inbound.py"
BY_NAME = {"InferenceSession", "read_model", "compile_model", "onnx.load", "onnx.load_model", "np.load",
           "np.memmap", "numpy.load", "cv2.imread"}


def door_opens(source: str) -> list[str]:
    """Problems with the door's opens: an os.open without O_NOFOLLOW or O_NONBLOCK, or in a function that never
    calls os.fstat."""
    problems = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
        opens = [c for c in calls if dotted_name(c.func) == "os.open"]
        for c in opens:
            flags = {n.attr for n in ast.walk(c.args[1]) if isinstance(n, ast.Attribute)} if len(c.args) > 1 \
                else set()
            problems += [f"{fn.name}:{c.lineno}: os.open without {f}" for f in ("O_NOFOLLOW", "O_NONBLOCK")
                         if f not in flags]
        if opens and not any(dotted_name(c.func) == "os.fstat" for c in calls):
            problems.append(f"{fn.name}: opens a file and never fstat's the descriptor")
    return problems


def made_names(source: str) -> list[tuple[int, str]]:
    """(line, call) of every library call that opens by name and is handed a name made on the spot."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = dotted_name(node.func)
        if not (name in BY_NAME or name.rsplit(".", 1)[-1] in BY_NAME):
            continue
        arg = node.args[0]
        made = isinstance(arg, ast.JoinedStr) or (isinstance(arg, ast.Call) and dotted_name(arg.func) == "str") \
            or (isinstance(arg, ast.Attribute) and arg.attr == "path")
        if made:
            found.append((node.lineno, name))
    return found


def test_the_door_opens_without_following_or_blocking_and_fstats() -> None:
    assert door_opens(DOOR.read_text()) == []


def test_no_library_is_handed_a_name_to_open() -> None:
    found = [f"{p.relative_to(HARNESS.parent)}:{line}: {call}" for p in sorted(HARNESS.rglob("*.py"))
             for line, call in made_names(p.read_text())]
    assert found == [], "hand these the name inbound.held yields:\n" + "\n".join(found)


def test_the_checks_fail_on_snippets_that_break_the_rule() -> None:
    follows = "import os\ndef f(p):\n    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n    os.fstat(fd)\n"
    assert door_opens(follows) == ["f:3: os.open without O_NOFOLLOW"]
    unchecked = "import os\ndef f(p):\n    return os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)\n"
    assert door_opens(unchecked) == ["f: opens a file and never fstat's the descriptor"]
    by_name = ("import onnxruntime as ort\ns = ort.InferenceSession(str(model_path), opts)\n"
               "m = core.read_model(f'{d}/m.onnx')\nx = np.load(spec.path, mmap_mode='r')\n")
    assert made_names(by_name) == [(2, "ort.InferenceSession"), (3, "core.read_model"), (4, "np.load")]
    held = "with inbound.held(p, inbound.ARRAY) as name:\n    s = ort.InferenceSession(name, opts)\n"
    assert made_names(held) == []
