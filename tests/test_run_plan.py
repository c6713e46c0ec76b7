"""The run plan: `--cards` parsed in one place, the machine detected once per run."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import appliance

from harness import topology
from harness.errors import ApplianceError
from harness.topology.cards import parse_card_spec


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


@pytest.mark.parametrize("text", ["emulate:0", "emulate:x", "simulate:cloud-ai-100", "simulate::2", "many", ""])
def test_bad_card_specs_name_every_accepted_form(text: str) -> None:
    with pytest.raises(ApplianceError) as err:
        parse_card_spec(text)
    assert all(form in str(err.value) for form in ("auto", "emulate:N", "simulate:PROFILE:N", ".yaml"))


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
