"""simulated card: a profile's batch latency, no inference. Labelled simulated wherever it appears.

A profile (YAML in harness/run/cards/profiles/, package data) gives one real card's Offline samples/s and batch size per
benchmark. Without a `pipeline` section the card is synchronous: it holds every batch for
batch / samples_per_second seconds, measured against a deadline so sleep jitter does not add up, and
returns zero-filled outputs. With one it models a pipelined accelerator (`PipelinedSimulatedCard`):
DMA in, compute on one of `activations` activations, DMA out, as overlapping stages, several batches
in flight, so the harness drives it as it would drive the real card. A profile's `failure` section
makes chosen cards raise after N batches, to test what the harness does with a failing card.

Two options model a GPU rather than a fixed-batch accelerator: `cards_per_device: N` puts N consecutive
cards on one device that runs one batch at a time for all of them (N sessions on one GPU share its
throughput: tune must time them together, issue 36), and a benchmark's `fixed_ms` makes a batch of n take
fixed_ms + n / samples_per_second (latency grows with the batch, so only small batches meet a Server bound).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np

from harness.core import inbound
from harness.core.errors import ApplianceError
from harness.data import benchmarks
from harness.records import fields
from harness.records.fields import bound
from harness.run.cards.backends import Planned
from harness.run.cards.base import CardInfo, PageableHostBuffers, ZeroOutputs
from harness.run.cards.spec import BackendSpec, own

PROFILE_DIR: Traversable = resources.files("harness.run.cards") / "profiles"  # package data, also in a wheel


@dataclass(frozen=True)
class Pipeline:
    """A pipelined card's stages: one DMA-in engine, `activations` compute units, one DMA-out engine.

    A batch's compute takes `activations * batch / samples_per_second` on its activation, so all of them
    together keep the profile's rate; DMA takes its per-sample time for each sample of the batch."""

    activations: int = field(metadata=bound(lo=1, hi=1024))
    dma_in_us_per_sample: float = field(default=0.0, metadata=bound(lo=0, hi=1e6))
    dma_out_us_per_sample: float = field(default=0.0, metadata=bound(lo=0, hi=1e6))

    @property
    def depth(self) -> int:
        """Batches the card accepts in flight: one per activation and one more moving in over DMA."""
        return self.activations + 1


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
    pipeline: Pipeline | None = None
    cards_per_device: int = 1   # consecutive cards that share one device's throughput
    fixed_ms: float | None = None  # a batch of n takes fixed_ms + n / samples_per_second; None: batch_seconds

    @property
    def batch_seconds(self) -> float:
        return self.batch / self.samples_per_second

    def seconds(self, n: int) -> float:
        """How long the card holds a batch of n samples."""
        return self.batch_seconds if self.fixed_ms is None else self.fixed_ms / 1000 + n / self.samples_per_second

    def describe(self) -> dict[str, object]:
        return {"profile": self.name, "profile_file": self.path, "model": self.model,
                "samples_per_second": self.samples_per_second, "batch": self.batch,
                "batch_latency_us": round(self.batch_seconds * 1e6, 1),
                **({"fail_cards": list(self.fail_cards), "fail_after_batches": self.fail_after_batches}
                   if self.fail_cards else {}),
                **({"activations": self.pipeline.activations, "batches_in_flight": self.pipeline.depth,
                    "dma_in_us_per_sample": self.pipeline.dma_in_us_per_sample,
                    "dma_out_us_per_sample": self.pipeline.dma_out_us_per_sample} if self.pipeline else {}),
                **({"cards_per_device": self.cards_per_device} if self.cards_per_device > 1 else {}),
                **({"fixed_ms": self.fixed_ms} if self.fixed_ms is not None else {})}


@dataclass(frozen=True)
class _Entry:
    """One benchmark of a profile: a rate a card can have (a batch of 1 in at most 10 s, at most 10^9/s)."""

    samples_per_second: float = field(metadata=bound(lo=0.1, hi=1e9))
    batch: int = field(metadata=bound(lo=1, hi=65536))
    fixed_ms: float | None = field(default=None, metadata=bound(lo=0, hi=60_000))


@dataclass(frozen=True)
class _Failure:
    cards: tuple[int, ...] = field(default=(), metadata=bound(lo=0, hi=1023, items=1024))
    after_batches: int = field(default=1, metadata=bound(lo=1, hi=2**31))  # 0 would fail the warm-up, before any run


@dataclass(frozen=True)
class _ProfileFile:
    """A profile YAML as its README (profiles/README.md) describes it, read field by field."""

    name: str = field(metadata=bound(text=128))
    model: str = field(metadata=bound(text=256))
    benchmarks: dict[str, _Entry] = field(metadata=bound(items=64))
    input_dtype: str = field(default="uint8", metadata=bound(one_of=("uint8", "float32")))
    failure: _Failure | None = None
    pipeline: Pipeline | None = None
    cards_per_device: int = field(default=1, metadata=bound(lo=1, hi=1024))


def profile_names() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in PROFILE_DIR.iterdir() if p.name.endswith(".yaml"))


def load_profile(name: str, benchmark: str) -> Profile:
    """`name` is a packaged profile (harness/run/cards/profiles/, without .yaml) or a path to a profile YAML."""
    path: Traversable = Path(name) if name.endswith((".yaml", ".yml")) else PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ApplianceError(f"no simulated card profile {name!r}; choose one of: {', '.join(profile_names())} "
                             f"or give a .yaml path")
    try:
        data = fields.parse(_ProfileFile, inbound.read_yaml(str(path), inbound.TEXT), f"simulated card profile {path}")
    except inbound.Refused as exc:
        raise ApplianceError(f"bad simulated card profile {path}: {exc}".splitlines()[0]) from None
    except OSError as exc:
        raise ApplianceError(f"bad simulated card profile {path}: {exc.strerror or exc}") from None
    unknown = [key for key in data.benchmarks if key not in benchmarks.NAMES]
    if unknown:  # keyed by the catalogue's names: a renamed benchmark must not leave a dead entry behind
        raise ApplianceError(f"profile {path} models {', '.join(unknown)}, not a benchmark of the catalogue; "
                             f"its benchmarks are keyed by: {', '.join(benchmarks.NAMES)}")
    entry = data.benchmarks.get(benchmark)
    if entry is None:
        raise ApplianceError(f"profile {path} has no entry for {benchmark}; it models {', '.join(data.benchmarks)}")
    if data.pipeline is not None and (data.cards_per_device > 1 or entry.fixed_ms is not None):
        raise ApplianceError(f"bad simulated card profile {path}: cards_per_device and fixed_ms do not go with a "
                             f"pipeline")
    failure = data.failure or _Failure()
    return Profile(data.name, data.model, str(path), entry.samples_per_second, entry.batch, data.input_dtype,
                   failure.cards, failure.after_batches, data.pipeline, data.cards_per_device, entry.fixed_ms)


class SimulatedCardFailure(RuntimeError):
    """The fault a failing profile injects."""


class _Device:
    """One simulated device its cards share: it runs one batch at a time, in the order they are handed over."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free_at = 0.0


_DEVICES: dict[tuple[str, int], _Device] = {}  # (profile file, device index) -> the device its cards share
_DEVICES_LOCK = threading.Lock()


def _device(profile: Profile, index: int) -> _Device:
    with _DEVICES_LOCK:
        return _DEVICES.setdefault((profile.path, index // profile.cards_per_device), _Device())


class SimulatedCard(PageableHostBuffers):
    """A modelled card: fixed latency per batch (a smaller batch takes as long, unless the profile's
    `fixed_ms` makes it grow with n), zero outputs; on a device of its own or shared (`cards_per_device`)."""

    def __init__(self, index: int, profile: Profile, output_shapes: tuple[tuple[tuple[int, ...], str], ...],
                 cpus: tuple[int, ...]) -> None:
        self.profile = profile
        self.input_dtype = profile.input_dtype
        self.batches = 0
        self._device = _device(profile, index) if profile.cards_per_device > 1 else _Device()
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
        # the device is busy until free_at; a batch handed over late starts late, one handed over early waits
        with self._device.lock:
            done = self._device.free_at = max(time.perf_counter(), self._device.free_at) + self.profile.seconds(n)
        while (left := done - time.perf_counter()) > 0:
            time.sleep(left)
        return self._zeros(n)

    def close(self) -> None:
        pass


class PipelinedSimulatedCard(PageableHostBuffers):
    """A modelled pipelined accelerator (an `AsyncCard`): each batch moves in over one DMA engine, computes
    on the first free of `activations` activations (a smaller batch takes as long), moves out over one
    DMA engine; the stages of different batches overlap. Up to `depth` batches in flight, finished in
    submission order, zero outputs. A timer thread, started on the card thread (so on the card's CPUs),
    plays the card's interrupt: it calls the ready callback when each batch is due."""

    def __init__(self, index: int, profile: Profile, output_shapes: tuple[tuple[tuple[int, ...], str], ...],
                 cpus: tuple[int, ...], clock: Callable[[], float] = time.perf_counter) -> None:
        assert profile.pipeline is not None
        self.profile = profile
        self.stages = profile.pipeline
        self.depth = self.stages.depth
        self.input_dtype = profile.input_dtype
        self.batches = 0
        self.max_in_flight = 0
        self._clock = clock
        self._compute_s = self.stages.activations * profile.batch_seconds
        self._in_free = self._out_free = 0.0
        self._activations = [0.0] * self.stages.activations  # when each activation is free
        self._flight: deque[tuple[float, int]] = deque()  # (due, n), submission order
        self._zeros = ZeroOutputs(output_shapes)
        self._fails = index in profile.fail_cards
        self._ready: Callable[[], None] = lambda: None
        self._due: deque[float] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._timer = threading.Thread(target=self._interrupts, daemon=True)
        self._timer.start()
        self.info = CardInfo(index=index, backend="simulated", device=f"{profile.name} (simulated)", cpus=cpus,
                             emulated=True, simulated=True,
                             details={"simulated": True, **profile.describe(),
                                      "note": "modelled pipelined latency, no inference; zero-filled outputs"})

    def set_ready_callback(self, ready: Callable[[], None]) -> None:
        self._ready = ready

    def submit(self, batch: np.ndarray | None, n: int) -> None:
        if self._fails and self.batches >= self.profile.fail_after_batches:
            raise SimulatedCardFailure(f"injected failure after {self.batches} batches "
                                       f"(profile {self.profile.name})")
        if len(self._flight) >= self.depth:
            raise RuntimeError(f"submit with {len(self._flight)} batches in flight; the card takes {self.depth}")
        self.batches += 1
        now = self._clock()
        in_end = self._in_free = max(now, self._in_free) + n * self.stages.dma_in_us_per_sample / 1e6
        k = min(range(len(self._activations)), key=self._activations.__getitem__)
        c_end = self._activations[k] = max(in_end, self._activations[k]) + self._compute_s
        due = self._out_free = max(c_end, self._out_free) + n * self.stages.dma_out_us_per_sample / 1e6
        self._flight.append((due, n))
        self.max_in_flight = max(self.max_in_flight, len(self._flight))
        with self._cv:
            self._due.append(due)
            self._cv.notify()

    def poll(self) -> list[np.ndarray] | None:
        if not self._flight or self._flight[0][0] > self._clock():
            return None
        return self._zeros(self._flight.popleft()[1])

    def wait(self) -> list[np.ndarray]:
        due, n = self._flight.popleft()
        while (left := due - self._clock()) > 0:
            time.sleep(left)
        return self._zeros(n)

    def _interrupts(self) -> None:
        """The card's interrupt line: the ready callback as each batch falls due (they fall due in order)."""
        while True:
            with self._cv:
                while not self._due and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                due = self._due.popleft()
            while (left := due - self._clock()) > 0:
                time.sleep(left)
            self._ready()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()


def settings(planned: Planned) -> Profile:
    """The simulated record's `settings`: its cards' profile, loaded by the plan from `--cards simulate:PROFILE:N`."""
    if not isinstance(planned.profile, Profile):
        raise ApplianceError("--backend simulated needs --cards simulate:PROFILE:N (e.g. simulate:cloud-ai-100:4)")
    return planned.profile


def from_spec(spec: BackendSpec[Profile], index: int, cpus: tuple[int, ...]) -> SimulatedCard | PipelinedSimulatedCard:
    """The simulated backend's cards (its record's `card`): pipelined where the profile says so."""
    profile = own(spec, Profile)
    if profile.pipeline is not None:
        return PipelinedSimulatedCard(index, profile, spec.output_specs, cpus)
    return SimulatedCard(index, profile, spec.output_specs, cpus)
