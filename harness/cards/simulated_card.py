"""simulated card: a profile's batch latency, no inference. Labelled simulated wherever it appears.

A profile (YAML in harness/cards/profiles/, package data) gives one real card's Offline samples/s and batch size per
benchmark; the card holds every batch for batch / samples_per_second seconds, measured against a
deadline so sleep jitter does not add up, and returns zero-filled outputs. A profile's `failure`
section makes chosen cards raise after N batches, to test what the harness does with a failing card.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import yaml

from harness.cards.base import CardInfo, ZeroOutputs
from harness.errors import ApplianceError

PROFILE_DIR: Traversable = resources.files("harness.cards") / "profiles"  # package data, also in a wheel


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    path: str                   # where it was read from: a packaged profile or the user's file
    samples_per_second: float   # one card, Offline, at `batch`
    batch: int
    input_dtype: str
    fail_cards: tuple[int, ...] = ()
    fail_after_batches: int = 0

    @property
    def batch_seconds(self) -> float:
        return self.batch / self.samples_per_second

    def describe(self) -> dict[str, object]:
        return {"profile": self.name, "profile_file": self.path, "model": self.model,
                "samples_per_second": self.samples_per_second, "batch": self.batch,
                "batch_latency_us": round(self.batch_seconds * 1e6, 1),
                **({"fail_cards": list(self.fail_cards), "fail_after_batches": self.fail_after_batches}
                   if self.fail_cards else {})}


def profile_names() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in PROFILE_DIR.iterdir() if p.name.endswith(".yaml"))


def load_profile(name: str, benchmark: str) -> Profile:
    """`name` is a packaged profile (harness/cards/profiles/, without .yaml) or a path to a profile YAML."""
    path: Traversable = Path(name) if name.endswith((".yaml", ".yml")) else PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ApplianceError(f"no simulated card profile {name!r}; choose one of: {', '.join(profile_names())} "
                             f"or give a .yaml path")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        entry = data["benchmarks"].get(benchmark)
        if entry is None:
            raise ApplianceError(f"profile {path} has no entry for {benchmark}; it models "
                                 f"{', '.join(data['benchmarks'])}")
        failure = data.get("failure") or {}
        profile = Profile(str(data["name"]), str(data["model"]), str(path), float(entry["samples_per_second"]),
                          int(entry["batch"]), str(data.get("input_dtype", "uint8")),
                          tuple(int(c) for c in failure.get("cards", ())), int(failure.get("after_batches", 0)))
    except ApplianceError:
        raise
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ApplianceError(f"bad simulated card profile {path}: {exc}".splitlines()[0]) from None
    if profile.samples_per_second <= 0 or profile.batch < 1 or profile.input_dtype not in ("uint8", "float32"):
        raise ApplianceError(f"bad simulated card profile {path}: samples_per_second > 0, batch >= 1 and "
                             f"input_dtype uint8|float32 are required")
    return profile


class SimulatedCardFailure(RuntimeError):
    """The fault a failing profile injects."""


class SimulatedCard:
    """A modelled card: fixed latency per batch (a smaller batch takes as long), zero outputs."""

    def __init__(self, index: int, profile: Profile, output_shapes: tuple[tuple[tuple[int, ...], str], ...],
                 cpus: tuple[int, ...]) -> None:
        self.profile = profile
        self.input_dtype = profile.input_dtype
        self.batches = 0
        self._free_at = 0.0
        self._zeros = ZeroOutputs(output_shapes)
        self._fails = index in profile.fail_cards
        self.info = CardInfo(index=index, backend="simulated", device=f"{profile.name} (simulated)", cpus=cpus,
                             emulated=True, simulated=True,
                             details={"simulated": True, **profile.describe(),
                                      "note": "modelled latency, no inference; zero-filled outputs"})

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        if self._fails and self.batches >= self.profile.fail_after_batches:
            raise SimulatedCardFailure(f"injected failure after {self.batches} batches "
                                       f"(profile {self.profile.name})")
        self.batches += 1
        now = time.perf_counter()
        # the card is busy until _free_at; a batch handed over late starts late, one handed over early waits
        done = max(now, self._free_at) + self.profile.batch_seconds
        self._free_at = done
        while (left := done - time.perf_counter()) > 0:
            time.sleep(left)
        return self._zeros(n)

    def close(self) -> None:
        pass
