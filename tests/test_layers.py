"""The package's shape: no import circle anywhere in harness/, the layer contracts of pyproject.toml hold and
catch an upward import, and docs/developing.md lists every module of the tree once."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. every import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle() -> None:
    assert cycles(grimp.build_graph("harness")) == []


def test_the_cycle_finder_finds_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "circle"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circle import b\n")
    (pkg / "b.py").write_text("def f():\n    from circle import a\n")  # a lazy import is a circle too
    (pkg / "c.py").write_text("from circle import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(grimp.build_graph("circle")) == [["circle.a", "circle.b"]]


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed in this environment")
def test_layers_hold_and_an_upward_import_breaks_them(tmp_path: Path) -> None:
    assert _lint(ROOT).returncode == 0
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    errors = copy / "harness" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _upward() -> None:\n    from harness.run import runner  # noqa\n")
    broken = _lint(copy)
    assert broken.returncode == 1, broken.stdout
    assert "harness.core is not allowed to import harness.run" in broken.stdout
    prepare_from_run = copy / "harness" / "run" / "keep_warm.py"
    errors.write_text(errors.read_text().replace("from harness.run import runner", "pass"))
    prepare_from_run.write_text(prepare_from_run.read_text() + "\nfrom harness.prepare import steps  # noqa\n")
    broken = _lint(copy)
    assert broken.returncode == 1 and "harness.run is not allowed to import harness.prepare" in broken.stdout


def listed_modules(text: str) -> list[str]:
    """The module files docs/developing.md's package listing names, as paths relative to the repository."""
    block = text.split("One line per module, every module once:", 1)[1].split("```")[1]
    names: list[str] = []
    package = ""
    for line in block.splitlines():
        head = re.match(r"^(harness/(?:[\w/]+/)?)\s", line + " ")
        if head:
            package = head.group(1)
            continue
        entry = re.match(r"^  ([\w/]+\.(?:py|cpp|h))(?: / \.pyi)?\s", line + " ")
        if entry:
            names.append(package + entry.group(1))
            if line.split()[1:2] == ["/"]:
                names.append(package + entry.group(1).rsplit(".", 1)[0] + ".pyi")
    return names


def test_developing_md_lists_every_module_once() -> None:
    listed = listed_modules((ROOT / "docs" / "developing.md").read_text())
    tree = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "harness").rglob("*")
                  if p.suffix in (".py", ".cpp", ".h", ".pyi") and "__pycache__" not in p.parts
                  and not (p.name == "__init__.py" and p.read_text().startswith('"""') and p.parent.name in {
                      "core", "hw", "records", "data", "prepare", "run", "tune", "audit", "report", "cli"})
                  and p.name != "_build_info.py")
    doubles = sorted({n for n in listed if listed.count(n) > 1})
    assert doubles == []
    assert sorted(set(listed) - set(tree)) == [], "listed but not in the tree"
    assert sorted(set(tree) - set(listed)) == [], "in the tree but not listed"


def test_the_listing_check_sees_a_missing_module() -> None:
    text = (ROOT / "docs" / "developing.md").read_text()
    assert "harness/run/plan.py" in listed_modules(text)
    assert "harness/run/plan.py" not in listed_modules(text.replace("  plan.py ", "  planned.py "))


def private_reaches(source: str) -> list[str]:
    """Where a module uses another harness module's private name (`from harness.x import _y`, `x._y` with x a
    harness module it imported): such a name needs a public function (harness's native `_copy` / `_intake` /
    `_build_info` are modules, not names, and are allowed)."""
    tree = ast.parse(source)
    found, modules = [], set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("harness"):
            for a in n.names:
                if a.name.startswith("_") and not a.name.startswith("__") and n.module != "harness":
                    found.append(f"{n.lineno}: from {n.module} import {a.name}")
                modules.add(a.asname or a.name)
        elif isinstance(n, ast.Import):
            modules.update(a.asname for a in n.names if a.name.startswith("harness") and a.asname)
    for n in ast.walk(tree):
        if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
                and n.attr.startswith("_") and not n.attr.startswith("__")):
            found.append(f"{n.lineno}: {n.value.id}.{n.attr}")
    return found


def test_no_module_reaches_into_another_ones_private_names() -> None:
    found = [f"{p.relative_to(ROOT)}:{hit}" for p in sorted((ROOT / "harness").rglob("*.py"))
             for hit in private_reaches(p.read_text())]
    assert found == []


def test_the_private_reach_check_sees_both_spellings() -> None:
    assert private_reaches("from harness.audit.submission import tree\nx = tree._latest([])\n") == ["2: tree._latest"]
    assert private_reaches("from harness.audit.submission.tree import _manifest\n") == [
        "1: from harness.audit.submission.tree import _manifest"]
    assert private_reaches("from harness import _copy\nfrom harness.audit.submission import tree\n"
                           "x = tree.latest_run([])\n") == []
