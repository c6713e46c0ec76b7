"""Inference sessions `appliance tune` keeps loaded from one candidate to the next where only the batch size differs.

Why: each tune candidate is a card set made anew (a session per card: the model read, its graph optimised, on a GPU
its weights uploaded), and on a GPU a session per candidate did not fit a 15-minute loan (issue 43). A card made
while `BackendSpec.sessions` holds a `KeptSessions` takes the session a card of the same slot, model, backend and
options left there (`take`), and leaves its own there when it closes (`keep`) instead of ending it; everything that
depends on the batch (the IO-binding card's buckets and buffers, its warm-up) is made again by the card.

What is kept is the card's to say (`OnnxRuntimeCard.keepable`): a session whose input has a dynamic batch
dimension, never one with CUDA graphs captured (the graphs and the buffers they replay belong to the card that
captured them), never a TensorRT engine (built for one batch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["Kept", "KeptSessions"]


@dataclass
class Kept:
    """A session left by a card that closed, what the next card of its slot needs to use it (`state`, of the card
    class's own type; None: nothing), and how to end it (`release`) if none does."""

    session: ort.InferenceSession
    state: object = None
    release: Callable[[], None] = lambda: None


class KeptSessions:
    """Sessions held between card sets, one per key (a card slot's model, backend, options and CPUs). `made` counts
    the sessions created while it was in use (`made_one`), `reused` those taken instead."""

    def __init__(self) -> None:
        self._held: dict[Hashable, Kept] = {}
        self._lock = threading.Lock()  # each card's thread takes and keeps its own
        self.made = 0
        self.reused = 0

    def take(self, key: Hashable) -> Kept | None:
        """The session kept under `key`, now the caller's; None if there is none."""
        with self._lock:
            kept = self._held.pop(key, None)
            self.reused += kept is not None
            return kept

    def made_one(self) -> None:
        with self._lock:
            self.made += 1

    def keep(self, key: Hashable, kept: Kept) -> None:
        """Hold `kept` for the next card of `key` (one a late card already left there is ended)."""
        with self._lock:
            old = self._held.pop(key, None)
            self._held[key] = kept
        if old is not None:
            old.release()

    def close(self) -> None:
        """End every session still held (tune: when the next candidate differs in more than its batch size)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for kept in held:
            kept.release()
