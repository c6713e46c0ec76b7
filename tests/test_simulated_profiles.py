"""The simulated-card profiles are keyed by the catalogue's benchmark names: a renamed benchmark fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.data import benchmarks
from harness.run.cards.simulated_card import PROFILE_DIR, load_profile, profile_names


@pytest.mark.parametrize("name", profile_names())
def test_packaged_profile_keys_are_catalogue_names(name: str) -> None:
    path = PROFILE_DIR / f"{name}.yaml"
    data = inbound.expect_object(inbound.read_yaml(str(path), inbound.TEXT), str(path))
    keys = list(data["benchmarks"])
    assert keys, name
    assert set(keys) <= set(benchmarks.NAMES), f"{name}: {sorted(set(keys) - set(benchmarks.NAMES))}"
    for key in keys:  # and every entry loads
        assert load_profile(name, key).samples_per_second > 0


def test_profile_with_a_name_outside_the_catalogue_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("version: 1\nname: old\nmodel: m\nsource: tests\ninput_dtype: uint8\nbenchmarks:\n"
                    "  resnet50: {samples_per_second: 100, batch: 8}\n"
                    "  resnet-50: {samples_per_second: 100, batch: 8}\n")
    with pytest.raises(ApplianceError, match="models resnet-50, not a benchmark of the catalogue") as e:
        load_profile(str(path), "resnet50")
    assert "\n" not in str(e.value)
