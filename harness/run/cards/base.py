"""The card interfaces shared by every backend; the harness knows nothing else about the hardware.

Two shapes of card, one contract for the harness:

- `Card`: synchronous, `infer(batch, n) -> outputs`; one batch at a time (onnxruntime, null, the
  tests' fake cards). The harness drives it through `Synchronous`, an `AsyncCard` of depth 1.
- `AsyncCard`: a card that holds up to `depth` batches in flight (a Cloud AI 100's activations,
  OpenVINO infer requests, the pipelined simulated card), driven by `submit` / `poll` / `wait` with a
  ready callback. Its full contract (what may block, which thread calls what) is on the class.

Threading contract: a card is used by exactly one worker thread, the one that created it, so a
backend may keep per-thread state and inherits that thread's CPU affinity for its own threads. The
exceptions: the ready callback an `AsyncCard` calls from wherever its batches finish, and a
`ReplicaReader`'s `replica_loaded`, called on the samples' loading thread while no batch is in flight.

Input contract: `input_dtype` says what the harness stages for the card. "float32": the benchmark's
mean-subtracted float32 tensor (an FP32 model); "uint8": the offline-preprocessed sample bytes as
they are (a quantized accelerator; staging is a plain copy); None: the card reads no input (null).
A `ReplicaReader` (the GPU IO-binding card) may instead copy its batches from the loaded replica itself: while
it says so for the replica loaded now, the harness hands it each batch as rows of that replica
(`harness.run.qsl.ReplicaRows`, `infer_rows`) and stages nothing for it.

Host buffers: every card is handed the staging buffers the harness made for it (`register_host_buffers`, once,
before its first batch; harness.run.buffers says how many and how big). A card that copies from host memory by
DMA page-locks them there (the GPU IO-binding card); every other card inherits the no-op of
`PageableHostBuffers`, and a card that wraps another (`Synchronous`) hands them on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from harness.run.qsl import ReplicaRows


@dataclass(frozen=True)
class CardInfo:
    """What a card is, for logs, summaries and the manifest."""

    index: int
    backend: str            # "onnxruntime", "null", "simulated", ...
    device: str             # "cpu-emulated", "cuda:0", "cloud-ai-100 (simulated)", ...
    cpus: tuple[int, ...]   # host CPUs the card's threads may run on
    emulated: bool          # True when no accelerator is behind it (CPU-emulated, null or simulated)
    details: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False  # True for a modelled card (a profile's latency, no inference at all)

    def label(self) -> str:
        kind = "SIMULATED " + self.device if self.simulated else "CPU-emulated" if self.emulated else self.device
        return f"card {self.index} ({kind}, {self.backend}, {len(self.cpus)} CPUs)"


class ZeroOutputs:
    """Zero-filled outputs of the benchmark's shapes, one cached set per batch size (null, simulated)."""

    def __init__(self, output_shapes: tuple[tuple[tuple[int, ...], str], ...]) -> None:
        self.output_shapes = output_shapes
        self._cache: dict[int, list[np.ndarray]] = {}

    def __call__(self, n: int) -> list[np.ndarray]:
        out = self._cache.get(n)
        if out is None:
            out = self._cache[n] = [np.zeros((n, *shape), dtype=dtype) for shape, dtype in self.output_shapes]
        return out


class PageableHostBuffers:
    """The card contract's default `register_host_buffers`, for a card that reads the staging buffers as ordinary
    (pageable) host memory, or reads none: nothing to do. Every card but the GPU IO-binding one inherits it."""

    def register_host_buffers(self, buffers: list[np.ndarray]) -> None:
        """Nothing to page-lock: this card's copies from host memory are the CPU's own."""


class Card(Protocol):
    @property
    def info(self) -> CardInfo: ...

    @property
    def input_dtype(self) -> str | None: ...

    def register_host_buffers(self, buffers: list[np.ndarray]) -> None:
        """The staging buffers the harness made for this card (its `input_dtype`; none when it reads no input), on
        the card's thread, once, before its first batch; they live as long as the card. A card that copies from
        host memory by DMA page-locks them here (and lets go in `close`); most inherit `PageableHostBuffers`."""
        ...

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        """Run one batch of `n` samples ([n, C, H, W] of `input_dtype`, or None when the card reads no
        input); return the model's outputs in the benchmark's order, first dimension n."""
        ...

    def close(self) -> None: ...


Outputs = list[np.ndarray]


@runtime_checkable
class ReplicaReader(Card, Protocol):
    """A synchronous card that can copy a batch from the loaded sample replica itself (one copy per run of
    consecutive rows, a DMA from the replica it page-locked) instead of reading a staging buffer.

    `replica_loaded` is called on the loading thread (LoadGen's load callback), never with a batch in flight,
    each time the replica this card reads is loaded (None: every sample unloaded). True: hand this card its
    batches as rows of that replica (`infer_rows`) until the next call; False: stage them as for any card
    (`infer`), and the card says why in its manifest details. It must not raise."""

    def replica_loaded(self, replica: np.ndarray | None, node: int | None) -> bool: ...

    def infer_rows(self, rows: ReplicaRows) -> list[np.ndarray]:
        """`infer` of the batch whose samples are `rows` of the replica last accepted by `replica_loaded`."""
        ...


@runtime_checkable
class AsyncCard(Protocol):
    """A card with up to `depth` batches in flight, driven by submit / poll / wait.

    Threads. `submit`, `poll`, `wait` and `close` are called only by the card's own thread (the one
    that created it, pinned to the card's CPUs): the card needs no lock for its own state, and the
    harness completes every batch (encoding, host NMS, QuerySamplesComplete) on the card's CPUs. The
    one exception is the callback given to `set_ready_callback`, which the card calls from any thread
    (its runtime's, a timer's) once a batch has finished.

    Blocking. `submit` never waits for an earlier batch to finish: the harness never has more than
    `depth` batches in flight, so a submit always finds a free slot (it may take the time to hand the
    batch over: a DMA, or a whole synchronous inference in `Synchronous`). `poll` never blocks. `wait`
    blocks until the oldest batch in flight finishes; the harness calls it only with a batch in flight
    (warm-up, to drain the card when the run stops, and in Server on a card of depth 1 with nothing
    else to do: one thread wake-up fewer than waiting for the ready callback). The ready callback is
    cheap, never blocks and is thread-safe (the harness's puts a wake-up on the card thread's queue).

    Order. Batches finish in the order they were submitted: `poll` and `wait` return the outputs of the
    oldest batch in flight, first dimension `n` as submitted. A card that runs batches side by side
    returns them in submission order all the same (it waits for the oldest).

    Ready. After a batch finishes, the card calls the ready callback once, after `poll` would return it.
    A card whose batch has finished before `submit` returns (a synchronous one) need not call it: the
    harness polls after every submit. Spurious calls are harmless.

    Buffers. The card may read the staged input `batch` until its outputs are returned by `poll` /
    `wait`; the harness does not write that staging buffer before then. The outputs returned belong to
    the harness until its next `poll` / `wait` / `submit` on this card (the harness encodes them first).

    Errors. `submit`, `poll` and `wait` raise the card's error; the harness then marks the card failed,
    re-dispatches every batch it held and calls only `close` on it.
    """

    @property
    def info(self) -> CardInfo: ...

    @property
    def input_dtype(self) -> str | None: ...

    @property
    def depth(self) -> int: ...

    def set_ready_callback(self, ready: Callable[[], None]) -> None: ...

    def register_host_buffers(self, buffers: list[np.ndarray]) -> None:
        """As `Card.register_host_buffers` (once, on the card's thread, before the first `submit`)."""
        ...

    def submit(self, batch: np.ndarray | None, n: int) -> None: ...

    def poll(self) -> Outputs | None: ...

    def wait(self) -> Outputs: ...

    def close(self) -> None: ...


class Synchronous:
    """A synchronous `Card` as an `AsyncCard` of depth 1: `submit` runs the whole batch, `poll` hands
    the outputs over. Nothing changes in meaning for the card: one batch at a time, on its own thread."""

    depth = 1

    def __init__(self, card: Card) -> None:
        self.card = card
        self.info = card.info
        self.input_dtype = card.input_dtype
        self._done: Outputs | None = None

    def set_ready_callback(self, ready: Callable[[], None]) -> None:
        pass  # every batch has finished when submit returns

    def register_host_buffers(self, buffers: list[np.ndarray]) -> None:
        self.card.register_host_buffers(buffers)  # the card it drives is the one that reads them

    def submit(self, batch: np.ndarray | None, n: int) -> None:
        self._done = self.card.infer(batch, n)

    def poll(self) -> Outputs | None:
        done, self._done = self._done, None
        return done

    def wait(self) -> Outputs:
        done = self.poll()
        if done is None:
            raise RuntimeError("wait() with no batch in flight")
        return done

    def close(self) -> None:
        self.card.close()


class FromReplica(Synchronous):
    """A `ReplicaReader` through `Synchronous`, which also takes a batch as rows of the replica (`submit_rows`)."""

    def __init__(self, card: ReplicaReader) -> None:
        super().__init__(card)
        self.reader = card

    def submit_rows(self, rows: ReplicaRows) -> None:
        self._done = self.reader.infer_rows(rows)


def as_async(card: Card | AsyncCard) -> AsyncCard:
    """The card as the harness drives it: an `AsyncCard` as it is, a synchronous `Card` through `Synchronous`
    (`FromReplica` for a `ReplicaReader`)."""
    if isinstance(card, AsyncCard):
        return card
    return FromReplica(card) if isinstance(card, ReplicaReader) else Synchronous(card)
