"""An execution provider's options for a card, built in one place (`build`): the card's own settings under the
options `appliance tune` measured and chose (issue 36: onnxruntime's CUDA provider was 21% faster on an H100 with
`prefer_nhwc=1` than with its defaults).

A set of tuned options is written as text, `prefer_nhwc=1 cudnn_conv_algo_search=HEURISTIC` ("" the provider's
defaults), so the tuned record, the CLI, the run's options and the manifest carry the same words.
"""

from __future__ import annotations

from harness.core.errors import ApplianceError
from harness.records.layout import TF32

__all__ = ["CUDA", "GPU_GRID", "SEARCHES", "TF32", "TUNABLE", "build", "canonical", "numerics", "parse"]

CUDA = "CUDAExecutionProvider"
SEARCHES = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")  # cuDNN's convolution algorithm search
# the options tune may set, per provider, with the values each takes (onnxruntime-gpu 1.31 has them all)
TUNABLE: dict[str, dict[str, tuple[str, ...]]] = {
    CUDA: {"prefer_nhwc": ("0", "1"), "cudnn_conv_algo_search": SEARCHES, "fuse_conv_bias": ("0", "1"),
           "cudnn_conv_use_max_workspace": ("0", "1")},
}
GPU_GRID = ("prefer_nhwc=0", "prefer_nhwc=1")  # what tune times on a GPU backend unless --provider-options is given


def parse(text: str) -> dict[str, str]:
    """`key=value key=value` as a dict; one line for a key or value no provider takes from tune."""
    known = {k: v for options in TUNABLE.values() for k, v in options.items()}
    out: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep or key not in known or value.upper() not in {v.upper() for v in known[key]}:
            choices = "; ".join(f"{k}={'|'.join(v)}" for k, v in known.items())
            raise ApplianceError(f"provider option {word!r}: give key=value, one of {choices}")
        out[key] = value.upper() if key == "cudnn_conv_algo_search" else value
    return out


def canonical(text: str) -> str:
    """The same options always written the same way (sorted), "" for none."""
    return " ".join(f"{k}={v}" for k, v in sorted(parse(text).items()))


def numerics(provider: str, precision: str) -> dict[str, str]:
    """The options that decide how a provider rounds, set by the model's precision and never by tune's options: on
    the CUDA provider `use_tf32` (onnxruntime's default 1 lets cuDNN / cuBLAS round FP32 inputs to TF32 on Ampere
    and later), 1 only for the tf32 precision, whose accuracy its prepare measured; FP32 otherwise stays FP32."""
    return {"use_tf32": "1" if precision == TF32 else "0"} if provider == CUDA else {}


def build(provider: str, tuned: str = "", precision: str = "fp32", **card: str) -> dict[str, str]:
    """The provider options a card's session is made with (less the device id): the card's own (`card`: cuDNN
    search, CUDA graph, stream), the tuned ones, which win, then the precision's `numerics`, which nothing
    overrides. A provider tune does not tune takes no tuned options (one line)."""
    options = parse(tuned)
    if options and provider not in TUNABLE:
        raise ApplianceError(f"provider options {tuned!r} are for {', '.join(TUNABLE)}, not {provider}")
    return {**card, **options, **numerics(provider, precision)}
