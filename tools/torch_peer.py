"""A PyTorch eager peer for tools/gpu_bench.sh: torchvision's ResNet50 architecture, fp16, channels_last, no graph.

The figure the issue compares against (issue 36: 13,832 images/s at batch 256 and 14,180 at 512 on one H100, where
onnxruntime at its best options did 10,718 and the appliance 7,888): the same network as the appliance's seeded
ResNet50 (random weights; speed does not depend on them), the input already on the device as fp16 NCHW in the
channels_last memory format, `torch.inference_mode`, each batch synchronised. A tools script only: torch is never a
dependency of the appliance, and where it is not installed the script says "skipped: torch not installed" (stderr;
stdout: one JSON object, as where it runs) and exits 0, and the table says so.

    python tools/torch_peer.py --batches 256,512 --seconds 5          (on the GPU)
    python tools/torch_peer.py --device cpu --batches 2 --seconds 1    (a rehearsal where torch is installed)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="256,512", help="batch sizes, comma-separated, e.g. 256,512")
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per batch size, e.g. 5")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = ap.parse_args()
    missing = next((m for m in ("torch", "torchvision") if importlib.util.find_spec(m) is None), None)
    if missing is not None:
        print(json.dumps({"peer": "pytorch-eager", "skipped": f"{missing} not installed"}))
        print(f"skipped: {missing} not installed", file=sys.stderr)
        return 0
    import torch
    import torchvision

    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"peer": "pytorch-eager", "skipped": "torch sees no CUDA device"}))
        print("skipped: torch sees no CUDA device", file=sys.stderr)
        return 0
    dtype = torch.float16 if a.device == "cuda" else torch.float32  # fp16 convolutions are a GPU's
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().to(a.device, dtype, memory_format=torch.channels_last)
    out: dict[str, Any] = {"peer": "pytorch-eager", "torch": torch.__version__, "torchvision": torchvision.__version__,
                           "device": a.device, "dtype": str(dtype).removeprefix("torch."),
                           "memory_format": "channels_last", "samples_per_second": {}}
    for batch in (int(b) for b in a.batches.split(",")):
        out["samples_per_second"][str(batch)] = round(_rate(torch, model, batch, dtype, a.device, a.seconds), 1)
    print(json.dumps(out))
    return 0


def _rate(torch: Any, model: Any, batch: int, dtype: Any, device: str, seconds: float) -> float:
    """Images/s of `model` on one batch kept on the device, after a warm-up (cuDNN's algorithm choice)."""
    x = torch.randn(batch, 3, 224, 224, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    if device == "cuda":
        torch.backends.cudnn.benchmark = True
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        _sync(torch, device)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(x)
            _sync(torch, device)
            n += 1
        return n * batch / (time.perf_counter() - start)


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    raise SystemExit(main())
