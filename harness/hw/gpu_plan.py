"""Several cards per NVIDIA GPU: the `--cards` spelling, the CPU split, and what a GPU card warms and returns.

`--cards cuda:allx4` makes four cards on every visible GPU, `cuda:0x2,1x2` two on cuda:0 and two on cuda:1
(`cuda:all` and `cuda:0,1` stay one card per GPU). Each card is a harness card of its own: its own worker
threads pinned to its share of the GPU's local CPUs, its own onnxruntime session, CUDA stream and device
buffers (harness.run.cards.gpu_iobinding), so one card's copy overlaps another's compute on the same GPU, as
NVIDIA's LWIS harness runs several streams per GPU. The GPU's local cores (the one card the topology plan
placed there) are split between its cards by physical core; where there are fewer cores than cards, the
cards share them and the plan says so.

A GPU card runs a batch of n samples in the smallest of its `bucket_sizes` that holds n (the rows past n
are the last batch's, and their outputs are dropped): Server sends partial batches of every size, and each
bucket is a shape cuDNN searches algorithms for and a CUDA graph is captured for, all at warm-up, never
mid-run. Powers of two up to the run's batch keep that to log2(batch) + 1 shapes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.core.errors import ApplianceError

MAX_PER_GPU = 16  # sessions (streams) per GPU; the tune grid goes to 4
TUNE_PER_GPU = (1, 2, 3, 4)  # `appliance tune` on GPUs: cards per GPU timed
SPELLING = "cuda:all, cuda:0,1, cuda:allxN (N cards per GPU) or cuda:0x2,1x2"

@dataclass(frozen=True)
class CudaSpec:
    """A parsed `cuda:…` spec: the ordinals named (None: all) and the cards per GPU (one entry per named
    GPU, or a single entry for all)."""

    ordinals: tuple[int, ...] | None
    per_gpu: tuple[int, ...] | None  # None: one card per GPU (the spellings without x)


def parse_cuda(text: str) -> CudaSpec | None:
    """`cuda:all`, `cuda:allxN`, `cuda:0,1`, `cuda:0x2,1x2` (case-insensitive); None if `text` is none of
    these; a count outside 1..MAX_PER_GPU or a GPU named twice is refused in one line."""
    lower = text.strip().lower()
    if lower == "cuda:all":
        return CudaSpec(None, None)
    if m := re.fullmatch(r"cuda:allx([0-9]+)", lower):
        return CudaSpec(None, (_count(text, m[1]),))
    if not re.fullmatch(r"cuda:[0-9]+(?:x[0-9]+)?(?:,[0-9]+(?:x[0-9]+)?)*", lower):
        return None
    ordinals, counts = [], []
    for entry in lower[5:].split(","):
        ordinal, _, n = entry.partition("x")
        ordinals.append(int(ordinal))
        counts.append(_count(text, n) if n else 1)
    if len(set(ordinals)) != len(ordinals):
        raise ApplianceError(f"--cards {text!r} names a GPU twice; name each GPU once ({SPELLING})")
    return CudaSpec(tuple(ordinals), tuple(counts) if "x" in lower else None)


def _count(text: str, digits: str) -> int:
    n = int(digits)
    if not 1 <= n <= MAX_PER_GPU:
        raise ApplianceError(f"--cards {text!r}: cards per GPU must be 1 to {MAX_PER_GPU}, not {n} "
                             f"(each is an onnxruntime session with its own CUDA stream)")
    return n


@dataclass(frozen=True)
class GpuSlot:
    """One card on a GPU: which GPU card of the topology plan it splits, its CPUs, and its place on the GPU."""

    gpu_card: int          # index of the GPU's card in the topology plan
    cpus: tuple[int, ...]
    node: int | None
    on_gpu: int            # 0..per_gpu-1
    per_gpu: int
    shared_cpus: bool      # fewer cores than cards on this GPU: the cards share them


def split_gpu_cards(cards: Sequence[tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int | None]],
                    per_gpu: tuple[int, ...]) -> list[GpuSlot]:
    """The cards of `per_gpu` over the GPUs' planned cards, each given as (cpus, its cores as CPU tuples,
    NUMA node): a GPU's cores are cut into `n` contiguous groups of whole cores, one per card (the first
    groups one core larger where they do not divide evenly); with fewer cores than cards, every card gets
    all the GPU's CPUs."""
    counts = per_gpu * len(cards) if len(per_gpu) == 1 else per_gpu
    if len(counts) != len(cards):
        raise ValueError(f"{len(counts)} counts for {len(cards)} GPUs")
    slots: list[GpuSlot] = []
    for g, ((cpus, cores, node), n) in enumerate(zip(cards, counts, strict=True)):
        if len(cores) < n:
            slots += [GpuSlot(g, cpus, node, k, n, True) for k in range(n)]
            continue
        base, extra = divmod(len(cores), n)
        start = 0
        for k in range(n):
            size = base + (1 if k < extra else 0)
            group = cores[start:start + size]
            start += size
            slots.append(GpuSlot(g, tuple(sorted(c for core in group for c in core)), node, k, n, False))
    return slots


def bucket_sizes(batch: int) -> tuple[int, ...]:
    """The batch sizes a GPU card runs (and warms): powers of two below `batch`, then `batch`."""
    if batch < 1:
        raise ValueError(f"batch {batch}")
    sizes, b = [], 1
    while b < batch:
        sizes.append(b)
        b *= 2
    return (*sizes, batch)


def run_buckets(scenario: str, batch: int) -> tuple[int, ...]:
    """The buckets a run's cards warm: Server and MultiStream send partial batches of every size (all of
    `bucket_sizes`); Offline sends full batches and at most one partial one at the end, which runs padded in
    the full bucket, plus 1, for the single-sample latency warm-up and `tune` measure (SingleStream's
    estimate, which a padded batch would overstate); SingleStream sends one sample."""
    if scenario in ("Server", "MultiStream"):
        return bucket_sizes(batch)
    return tuple(sorted({1, batch}))


def bucket_for(n: int, sizes: tuple[int, ...]) -> int:
    """The smallest bucket holding `n` samples."""
    for size in sizes:
        if size >= n:
            return size
    raise ValueError(f"a batch of {n} is larger than the card's largest bucket {sizes[-1]}")


def tune_layouts(layout: str, gpu_backend: bool) -> tuple[str, ...]:
    """The `--cards` layouts `appliance tune` times for one asked for: on a GPU backend, `auto` is every GPU
    with 1 to 4 cards each (`cuda:allx1` … `cuda:allx4`); any other layout as given."""
    if gpu_backend and layout.strip().lower() == "auto":
        return tuple(f"cuda:allx{n}" for n in TUNE_PER_GPU)
    return (layout,)
