"""The buffers a run allocates: how many, how big, who makes them and how long they live, stated once.

Host buffers are made here and nowhere else (`aligned_empty`: 256-byte aligned, C-contiguous, pages untouched
until the thread that fills them first writes them, so the kernel puts them in that thread's NUMA node):

- Replica (`replica`): the samples LoadGen loaded, [loaded samples, *sample shape] uint8 as stored, contiguous
  in index order. One per NUMA node (default), per card or shared (`--replicate`,
  harness.run.qsl.plan_replicas); made and filled by `SampleLibrary.load` on a thread pinned to the replica's
  CPUs, replaced at the next load, dropped at the unload. A card that copies its batches from the replica
  itself (`ReplicaReader`, the GPU IO-binding card) page-locks each one loaded (`replica_loaded`).
- Staging (`card_staging`): per card, `staging_count(depth)` buffers [batch, *sample shape] of the card's
  input dtype (none for a card that reads no input), made once by the card's thread as soon as it knows the
  card's depth (harness.run.sut.worker.card_thread), handed to the card (`register_host_buffers`: the GPU card
  page-locks them) and alive as long as the card. The depth rule is `staging_count`. Warm-up and
  `time_under_load` stage into one more per card (`staging_buffer`), dropped when they return.
- Outputs: the card's, not allocated here; the harness holds those of `outputs_held(depth)` batches per card
  at most (the card's in flight and the one being encoded). An OpenVINO card also copies each batch in flight
  into a full-size one of its own (`Backend.padded_copies`).

`card_bytes` sums them for a card, and harness.run.plan refuses a batch size whose buffers the memory cannot
hold before any is made (`check_buffer_memory`); the manifest's `sample_buffers` says the same rule
(`STAGING_RULE`).

Device buffers live in GPU memory and belong to the card that binds them: the GPU IO-binding card
(harness.run.cards.gpu_iobinding) makes one input and one set of outputs per batch-size bucket
(harness.hw.gpu_plan.bucket_sizes) when it loads and frees them when it closes; they are not counted here.
"""

from __future__ import annotations

import numpy as np

ALIGN = 256  # bytes: every host buffer's first byte

# The depth rule. A card holds up to `depth` staged batches in flight (its infer requests / activations; 1 for a
# synchronous card). Its feeder stages the next batch meanwhile, so the card never waits for staging: depth + 1
# buffers go round between feeder and card. One more is the card thread's own, for a batch dispatched straight to
# an idle card (staged there, one thread wake-up instead of two): it is the last, index `OWN`.
OWN = -1  # the card thread's own staging buffer: the last of a card's, never handed to the feeder


def staging_count(depth: int) -> int:
    """Staging buffers per card: `depth` on the card, one being staged by the feeder, the card thread's own."""
    return feeder_count(depth) + 1


def feeder_count(depth: int) -> int:
    """Staging buffers that go round between a card's feeder and its card thread (the first of them)."""
    return depth + 1


def outputs_held(depth: int) -> int:
    """Batches of a card's outputs the harness holds at most: `depth` in flight and the one being encoded."""
    return depth + 1


STAGING_RULE = (f"per card: batches in flight + {staging_count(0)} preallocated batch-contiguous buffers, "
                f"{ALIGN}-byte aligned; a GPU IO-binding card copies from its page-locked "
                f"replica itself and stages only where it cannot (its io_binding.input_path)")


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype | type | str, align: int = ALIGN) -> np.ndarray:
    """An uninitialised C-contiguous array whose first byte is `align`-aligned (pages untouched)."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes].view(dt).reshape(shape)


def replica(samples: int, sample_shape: tuple[int, ...]) -> np.ndarray:
    """A replica for `samples` loaded samples, uint8 as stored; call on the thread that fills it (first touch)."""
    return aligned_empty((samples, *sample_shape), np.uint8)


def staging_buffer(batch: int, sample_shape: tuple[int, ...], dtype: str | None) -> np.ndarray | None:
    """One batch-contiguous staging buffer (None: the card reads no input)."""
    if dtype is None:
        return None
    return aligned_empty((batch, *sample_shape), dtype)


def card_staging(depth: int, batch: int, sample_shape: tuple[int, ...], dtype: str | None) -> list[np.ndarray | None]:
    """A card's staging buffers (`staging_count(depth)` of them, the last its card thread's own: `OWN`)."""
    return [staging_buffer(batch, sample_shape, dtype) for _ in range(staging_count(depth))]


def card_bytes(batch: int, sample_in: int, sample_out: int, depth: int, padded_copies: bool) -> int:
    """Host memory one card's buffers take for `batch`, given a sample's input bytes as staged (0: the card reads
    none) and its output bytes: the staging buffers, the padded copies of a backend that makes them, the outputs
    held. The backend's own working memory comes on top."""
    padded = depth if padded_copies else 0
    return batch * (sample_in * (staging_count(depth) + padded) + sample_out * outputs_held(depth))
