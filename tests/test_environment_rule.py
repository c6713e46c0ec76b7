"""The environment rule (issue 41): no module but harness/core/environment.py reads or writes the environment.

The checker walks every module of harness/ and tools/ and flags `os.environ`, `os.getenv`, `os.putenv`,
`os.unsetenv` and `from os import environ`; click's `envvar=` names must be variables environment.py names;
docs/environment.md's table lists the same variables. Each check is shown to fail on a snippet breaking it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import dotted_name

ROOT = Path(__file__).resolve().parent.parent
READER = ROOT / "harness" / "core" / "environment.py"
_CALLS = {"os.environ", "os.getenv", "os.putenv", "os.unsetenv", "os.environb", "os.getenvb"}


def env_access(source: str) -> list[tuple[int, str]]:
    """(line, what) of every direct use of the process environment in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and dotted_name(node) in _CALLS:
            found.append((node.lineno, dotted_name(node)))
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and \
                {a.name for a in node.names} & {"environ", "getenv", "putenv", "environb"}:
            found.append((node.lineno, "from os import environ"))
    return found


def envvar_names(source: str) -> list[str]:
    """The names given to click options as `envvar=`."""
    return [kw.value.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == "envvar" and isinstance(kw.value, ast.Constant)]


def _modules() -> list[Path]:
    return sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "tools").glob("*.py")])


def test_no_module_but_the_reader_touches_the_environment() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in _modules() if p != READER
             for line, what in env_access(p.read_text())]
    assert found == [], "read these through harness.core.environment:\n" + "\n".join(found)


def test_every_click_envvar_is_a_named_variable() -> None:
    from harness.core.environment import VARIABLES

    names = {n for p in _modules() for n in envvar_names(p.read_text())}
    assert names and names <= set(VARIABLES), names - set(VARIABLES)


def test_the_table_lists_every_variable() -> None:
    from harness.core.environment import VARIABLES

    doc = (ROOT / "docs" / "environment.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Za-z_]+)` \|.*\| ([^|]+) \|$", doc, re.MULTILINE))
    assert set(rows) == set(VARIABLES)
    assert {n: v.strip() for n, v in rows.items()} == {n: v.meaning for n, v in VARIABLES.items()}


def test_the_checks_fail_on_snippets_that_break_the_rule() -> None:
    snippet = ("import os\nfrom os import environ\nn = int(os.environ.get('X') or 0)\nm = os.getenv('Y')\n"
               "os.environ['Z'] = '1'\n")
    assert sorted(env_access(snippet)) == [(2, "from os import environ"), (3, "os.environ"), (4, "os.getenv"),
                                   (5, "os.environ")]
    assert envvar_names("click.option('--x', envvar='APPLIANCE_NOT_NAMED')") == ["APPLIANCE_NOT_NAMED"]
