"""The README and docs/ hold together: every relative link points to a file that exists (and, with a
#fragment, to a heading of that file), every command the README's "Commands" list names has its page in
docs/, the README stays an entry (the two commands first, about 200 lines at most), and the options the
docs' example blocks give each `appliance` command are options that command has."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, ROOT / "BENCHMARKS.md", *DOCS]
COMMAND_DOCS = ("prepare", "run", "tune", "compliance", "reproduce", "submission", "report", "topology", "container")

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        lines.append("" if fenced else _CODE_SPAN.sub("", line))
    return lines


def _code_blocks(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            lines.append(line)
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _raw_headings(page: Path) -> set[str]:
    """Anchors computed from the raw heading lines (code spans' text kept, as GitHub keeps it)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6} (.+)", line)
        if m:
            base = _slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of `page` that points nowhere: 'target (why)'."""
    bad = []
    for line in _prose(page.read_text()):
        for target in _LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in _raw_headings(dest):
                bad.append(f"{target} (no heading #{fragment} in {dest.name})")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "run.md").write_text("# `appliance run`: one test\n\n## Output\n")
    page = tmp_path / "README.md"
    page.write_text("[run](docs/run.md) [out](docs/run.md#output) [top](docs/run.md#appliance-run-one-test)\n"
                    "[gone](docs/gone.md) [no heading](docs/run.md#faults) `[in code](docs/nothere.md)`\n"
                    "[web](https://example.org/x.md)\n```sh\n[fenced](docs/nothere.md)\n```\n")
    assert broken_links(page) == ["docs/gone.md (no such file)", "docs/run.md#faults (no heading #faults in run.md)"]


def _section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"no '## {title}' section"
    return m.group(1)


def test_every_command_in_the_readme_has_its_doc():
    commands = _section(README.read_text(), "Commands")
    items = [line for line in commands.splitlines() if line.startswith("- ")]
    assert items
    linked = set()
    for item in items:
        docs = [t for t in _LINK.findall(item) if t.startswith("docs/")]
        assert docs, f"a Commands entry without its docs/ page: {item}"
        for target in docs:
            assert (ROOT / target.partition("#")[0]).is_file(), target
            linked.add(Path(target.partition("#")[0]).stem)
    assert set(COMMAND_DOCS) <= linked, sorted(set(COMMAND_DOCS) - linked)


def test_the_readme_is_an_entry():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[0] == "The two commands", sections
    two = _section(text, "The two commands")
    assert "docker compose -f compose/appliance.yml up" in two and "ci/test" in two


def test_test_counts_and_times_live_only_in_benchmarks_md():
    """'N passed' and the suite's wall time are figures of the day: BENCHMARKS.md has them, once."""
    day = re.compile(r"\b\d[\d,]* (passed|skipped)\b|\bof \d+ tests\b|`ci/test` took")
    for page in (README, *DOCS):
        hits = [line for line in page.read_text().splitlines() if day.search(line)]
        assert hits == [], page.name
    assert len(re.findall(r"\d+ passed", (ROOT / "BENCHMARKS.md").read_text())) >= 1


def _command(words: list[str]) -> tuple[click.Command, list[str]] | None:
    from harness.cli.main import _register_subcommands, cli

    _register_subcommands()
    cmd: click.Command = cli
    rest = words
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.commands.get(rest[0])
        if sub is None:
            return None
        cmd, rest = sub, rest[1:]
    return cmd, rest


def _options(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_options_in_example_blocks_exist(page):
    """Every `--option` an example line gives `appliance <command>` is an option of that command."""
    from harness.cli.main import cli

    unknown = []
    for line in _code_blocks(page.read_text()):
        line = line.split("#", 1)[0]
        m = re.match(r"\s*(?:\$ )?appliance\s+(.*)", line)
        if not m:
            continue
        words = m.group(1).split()
        if words and words[0] == "--debug":
            words = words[1:]
        found = _command(words)
        if found is None:
            unknown.append(line.strip())
            continue
        cmd, rest = found
        if cmd is cli:
            continue
        known = _options(cmd)
        for word in rest:
            opt = word.split("=", 1)[0]
            if re.fullmatch(r"--[a-z][a-z0-9-]*", opt) and opt not in known:
                unknown.append(f"{line.strip()}: {opt}")
    assert unknown == []
