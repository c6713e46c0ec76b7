"""tools/ use harness only through declared public names: every name a tool imports from a harness module, and
every attribute it reads off a harness module it imports, is in that module's `__all__`. A rename inside harness
that a tool still uses fails here, not in a benchmark run on a borrowed machine. (That each `__all__` names only
what its module defines is ruff's F822.)"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _source(module: str) -> Path | None:
    """The file of a harness module (a package's __init__.py), None when there is no such module."""
    base = REPO / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def declared(module: str) -> tuple[str, ...] | None:
    """The module's `__all__` (a literal list or tuple of strings), None when it declares none."""
    path = _source(module)
    assert path is not None, module
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert isinstance(node.value, ast.List | ast.Tuple), f"{path}: __all__ is not a literal"
            return tuple(ast.literal_eval(node.value))
    return None


def uses(tool: Path) -> Iterator[tuple[int, str, str]]:
    """(line, harness module, name) for each name `tool` takes from a harness module: `from M import N` (N not
    a submodule of M), and `A.name` where A is a harness module it imported (`from M import sub`, `import M as A`)."""
    tree = ast.parse(tool.read_text())
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "harness":
            for a in node.names:
                if _source(f"{node.module}.{a.name}") is not None:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    yield node.lineno, node.module, a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "harness":
                    assert a.asname, f"{tool.name}:{node.lineno}: import {a.name} as <name>, so its uses are read"
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            yield node.lineno, aliases[node.value.id], node.attr


def undeclared() -> list[str]:
    out = []
    for tool in sorted((REPO / "tools").glob("*.py")):
        for line, module, name in uses(tool):
            public = declared(module)
            if public is None:
                out.append(f"tools/{tool.name}:{line}: {module} declares no __all__ (uses {name})")
            elif name not in public:
                out.append(f"tools/{tool.name}:{line}: {module}.{name} is not in its __all__")
    return sorted(set(out))


def test_tools_import_only_declared_names() -> None:
    problems = undeclared()
    assert not problems, "\n".join(problems)

