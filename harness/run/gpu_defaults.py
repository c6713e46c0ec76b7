"""A GPU card's batch and precision when no tuned record says (docs/run.md, "GPU cards without a tuned record").

The first H100 run showed what the CPU's defaults cost on a GPU: batch 8 at the model's precision ran ResNet50 at
1,778 samples/s (fp32) where the same GPU does 8,236 (fp16, batch 512), and the GPU image's default command is
exactly that run. The rule:

- precision: fp16 where an fp16 model is prepared and meets the benchmark's accuracy rule
  (`model_record.eligibility`), else fp32;
- Offline: the largest power of two up to the benchmark's `gpu_batch` whose working memory fits: every tensor the
  graph computes, per sample, with no reuse (`stats.activation_bytes`, an upper bound), times the batch, within
  half of the GPU's memory shared among its cards (NVML's total; without NVML the `gpu_batch` as it is, and a
  batch that does not fit is refused at load in one line);
- Server: a sixteenth of that (on an H100, ResNet50 at fp16 batch 128 took 16 ms, past its 15 ms bound; 32 takes
  about a quarter of it, which leaves the queue room);
- MultiStream: 8 (a query's samples); SingleStream: 1;
- CUDA provider options: `prefer_nhwc=1`, which tune chooses on the H100 for both precisions (onnxruntime's own
  loop, ResNet50 batch 512, IO binding, CUDA graph, EXHAUSTIVE search, 2026-11-27: fp16 8,873 samples/s NCHW,
  10,718 NHWC, +21%; fp32 6,242 and 7,442, +19%); a tuned record's options, or --provider-options, win;
- cards per GPU: one (`--cards auto` on a GPU backend is cuda:all). The H100's figures: one session in
  onnxruntime's own loop 8,873 samples/s (fp16, batch 512, NCHW), the appliance with four cards (sessions) on
  that GPU 7,888: at a batch that fills the GPU more sessions add no throughput, only memory; tune times 1-4.
"""

from __future__ import annotations

from harness.core.scenarios import Scenario
from harness.hw import gpu
from harness.records import model_record
from harness.records.benchmark_record import Benchmark
from harness.records.layout import Layout
from harness.run.cards.provider_options import CUDA

NHWC = "prefer_nhwc=1"  # the CUDA provider's options without a tuned record (see above)
MEMORY_SHARE = 0.5  # of a GPU's memory for one card's working memory, all its cards together


def precision(layout: Layout) -> tuple[str, str]:
    """fp16 where prepared and eligible, else fp32; and why, for the manifest."""
    try:
        record = model_record.read(layout.record_for("fp16"))
    except FileNotFoundError:
        return "fp32", "GPU default: fp32 (no fp16 model prepared)"
    eligible, why = model_record.eligibility(layout.bench, record)
    if eligible:
        return "fp16", f"GPU default: fp16 ({why})"
    return "fp32", f"GPU default: fp32, since fp16 is not eligible ({why})"


def batch(bench: Benchmark, scenario: Scenario, model: model_record.ModelRecord, cards_per_gpu: int,
          gpu_memory_mib: int | None) -> tuple[int, str]:
    """The batch of the rule above for `scenario`, and why."""
    if scenario == Scenario.SINGLE_STREAM:
        return 1, "GPU default for SingleStream: 1"
    if scenario == Scenario.MULTI_STREAM:
        return 8, "GPU default for MultiStream: 8 (a query's samples)"
    offline, why = bench.gpu_batch, f"the benchmark's GPU batch {bench.gpu_batch}"
    if gpu_memory_mib:
        from harness.core import inbound
        from harness.data.models.stats import activation_bytes

        per_sample = activation_bytes(inbound.load_onnx(model.path))
        room = MEMORY_SHARE * (gpu_memory_mib << 20) / max(1, cards_per_gpu)
        while offline > 1 and offline * per_sample > room:
            offline //= 2
        why += (f", capped to {offline} by memory ({per_sample / 2**20:.0f} MiB per sample at most, "
                f"{MEMORY_SHARE:.0%} of {gpu_memory_mib} MiB over {cards_per_gpu} card(s))")
    if scenario == Scenario.SERVER:
        return max(1, offline // 16), f"GPU default for Server: a sixteenth of the Offline batch ({why})"
    return offline, f"GPU default for Offline: {why}"


def gpu_memory_mib(pcis: list[str]) -> int | None:
    """The least memory of the GPUs named, by NVML; None where NVML cannot say."""
    facts = gpu.nvml()
    if isinstance(facts, str):
        return None
    found = [f.memory_mib for pci in pcis if (f := facts.by_pci(pci)) is not None]
    return min(found) if found and len(found) == len(pcis) else None


def provider_options(provider: str | None) -> tuple[str, str]:
    """The provider options of a GPU card without a tuned record or --provider-options, and why ("" on a
    provider that takes none)."""
    if provider != CUDA:
        return "", ""
    return NHWC, f"GPU default: {NHWC} (NHWC convolutions: +21% fp16, +19% fp32 on the H100, as tune chooses)"
