"""Properties of the one door in (harness.core.inbound) over random files, links, sizes and names: what is
read is the file's content when it is a regular file within its limit and its folder, else one Refused line;
never more than the limit in memory, never a blocked open, each example in a bounded time."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import inbound

FAST = settings(max_examples=25, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"), min_size=1,
                max_size=40).filter(lambda n: n not in (".", "..") and len(n.encode()) < 200)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=4), max_leaves=20)


@FAST
@given(content=st.binary(max_size=4096), limit=st.integers(0, 5000), name=NAMES)
def test_a_regular_file_is_read_whole_within_its_limit_else_refused(content: bytes, limit: int, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(content)
        if len(content) <= limit:
            assert inbound.read_bytes(path, limit) == content
        else:
            with pytest.raises(inbound.Refused, match="bytes, more than the"):
                inbound.read_bytes(path, limit)


@FAST
@given(hops=st.lists(st.booleans(), min_size=1, max_size=5), inside_target=st.booleans())
def test_a_chain_of_links_is_read_only_when_it_ends_within_the_folder(hops: list[bool], inside_target: bool) -> None:
    """Each hop of the chain is a link placed inside (True) or outside the folder; only where the chain ends
    counts, as the user's folder is what is published or read."""
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = Path(tmp) / "root", Path(tmp) / "out"
        root.mkdir()
        outside.mkdir()
        target = (root if inside_target else outside) / "target.txt"
        target.write_text("x")
        current = target
        for i, inside in enumerate(hops):
            link = (root if inside else outside) / f"link{i}"
            link.symlink_to(current)
            current = link
        first = root / "start"
        first.symlink_to(current)
        if inside_target:
            assert inbound.read_text(first, within=root) == "x"
        else:
            with pytest.raises(inbound.Refused, match=f"links outside {root}"):
                inbound.read_text(first, within=root)


@FAST
@given(value=JSON)
def test_json_and_yaml_read_back_what_was_written(value: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jpath, ypath = Path(tmp) / "v.json", Path(tmp) / "v.yaml"
        jpath.write_text(json.dumps(value))
        ypath.write_text(yaml.safe_dump(value))
        assert inbound.read_json(jpath) == value
        assert inbound.read_yaml(ypath) == value
        if not isinstance(value, dict):
            with pytest.raises(inbound.Refused, match=f"holds {inbound.json_kind(value)}, not a JSON object"):
                inbound.read_json_object(jpath)


@FAST
@given(depth=st.integers(1, 12), width=st.integers(2, 9))
def test_any_yaml_alias_is_refused_before_it_expands(depth: int, width: int) -> None:
    """An alias bomb of any depth and width (width**depth strings once expanded) is refused at its first
    anchor, in the time of reading a few lines."""
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    with pytest.raises(inbound.Refused, match="anchors and aliases"):
        inbound.parse_yaml("\n".join(lines), "bomb.yaml")


@pytest.mark.parametrize("make", ["fifo", "socket", "device", "folder"])
def test_what_is_not_a_regular_file_is_refused_without_blocking(make: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    if make == "fifo":
        os.mkfifo(path)  # an open for reading would wait for a writer for ever
    elif make == "socket":
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif make == "device":
        path.symlink_to("/dev/zero")  # a read that never ends
    else:
        path.mkdir()
    with pytest.raises(IsADirectoryError if make == "folder" else inbound.Refused):
        inbound.read_bytes(path, 1 << 20)


def test_a_file_that_grows_past_its_stated_size_is_cut_at_the_limit() -> None:
    """procfs says 0 bytes for /proc/self/maps, which is kilobytes: the read, not the size, holds the limit."""
    assert os.stat("/proc/self/maps").st_size == 0
    with pytest.raises(inbound.Refused, match="grew past the 64 bytes"):
        inbound.read_bytes("/proc/self/maps", 64)


@FAST
@given(text=st.text(max_size=50))
def test_a_bom_is_dropped_and_only_ascii_digits_are_numbers(text: str) -> None:
    assert inbound.decode(("\ufeff" + text).encode(), "f") == text
    assert inbound.is_digits(text) == (text != "" and all("0" <= c <= "9" for c in text))
