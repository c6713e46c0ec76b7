"""The run plan: `--cards` parsed in one place, the machine detected once per run."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import appliance

from harness.core.errors import ApplianceError
from harness.hw import topology
from harness.hw.topology.cards import parse_card_spec


@pytest.mark.parametrize(("text", "kind", "count", "profile"), [
    ("auto", "auto", None, None),
    (" AUTO ", "auto", None, None),
    ("emulate:4", "emulate", 4, None),
    ("simulate:cloud-ai-100:16", "simulate", 16, "cloud-ai-100"),
    ("simulate:/tmp/x/steady.yaml:2", "simulate", 2, "/tmp/x/steady.yaml"),
    ("topologies/g292-z43-16cards.yaml", "map", None, None),
])
def test_card_specs_parse(text: str, kind: str, count: int | None, profile: str | None) -> None:
    spec = parse_card_spec(text)
    assert (spec.kind, spec.count, spec.profile) == (kind, count, profile)
    assert spec.path == (Path(text.strip()) if kind == "map" else None)


@pytest.mark.parametrize("text", ["emulate:x", "simulate:cloud-ai-100", "simulate::2", "many", ""])
def test_bad_card_specs_name_every_accepted_form(text: str) -> None:
    with pytest.raises(ApplianceError) as err:
        parse_card_spec(text)
    assert all(form in str(err.value) for form in ("auto", "emulate:N", "simulate:PROFILE:N", ".yaml"))


@pytest.mark.parametrize(("text", "example"), [("emulate:0", "emulate:1"), ("simulate:cloud-ai-100:0",
                                                                          "simulate:cloud-ai-100:1")])
def test_zero_cards_say_n_must_be_at_least_one(text: str, example: str) -> None:
    """Issue 26 item 11: `emulate:0` was "not understood", as if the form were wrong."""
    with pytest.raises(ApplianceError) as err:
        parse_card_spec(text)
    assert str(err.value) == f"--cards {text!r}: N, the number of cards, must be at least 1, e.g. {example}"


@pytest.mark.parametrize("text", ["simulate:cloud-ai-100:100000", "emulate:257"])
def test_card_counts_are_bounded_before_anything_starts(text: str, data_dir: Path, tmp_path: Path, capsys) -> None:
    """Issue 26 item 6: 100,000 simulated cards ran out of threads after 114 s (a traceback); the count is
    refused with the bound and why, before the plan reads anything, and nothing is made."""
    from helpers import appliance

    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--cards", text, "-q") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"appliance: error: --cards {text!r}: ") and "at most 256 (each card is a worker thread" \
        in line, line
    assert not (tmp_path / "r").exists()


def test_a_run_detects_the_machine_once(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan, system name, card placement and the container checks all read one detection."""
    calls = []
    real = topology.detect

    def counted(*args: object, **kwargs: object) -> topology.Topology:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(topology, "detect", counted)
    monkeypatch.setenv("container", "docker")  # the launch checks run too
    assert appliance("run", "--backend", "null", "--data-dir", data_dir, "--results", tmp_path,
                     "--duration-ms", "300", "-q") == 0
    assert len(calls) == 1
    assert list(tmp_path.glob("*/resnet50/Offline/performance/run_1/manifest.json"))
