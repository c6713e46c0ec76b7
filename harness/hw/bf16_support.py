"""Whether this CPU computes bf16: the CPU flags of the instructions OpenVINO's bf16 kernels use (AVX512_BF16 on
AMD Zen 4 and Intel Cooper Lake, AMX-BF16 on Sapphire Rapids and later) and OpenVINO's CPU plugin offering BF16;
and that a compiled model really computes in it. Preparing a bf16 model is harness.prepare.bf16."""

from __future__ import annotations

from typing import Any

from harness.core.errors import ApplianceError
from harness.hw import system

PRECISION = "bf16"



HINT = "bf16"               # OpenVINO's INFERENCE_PRECISION_HINT for it



CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of the instructions OpenVINO's bf16 kernels use



def missing(flags: set[str] | frozenset[str], capabilities: list[str] | tuple[str, ...]) -> str | None:
    """Why this CPU cannot run bf16 (None: it can): neither bf16 CPU flag, or OpenVINO's CPU plugin not
    offering BF16 among its OPTIMIZATION_CAPABILITIES."""
    if not set(CPU_FLAGS) & set(flags):
        return (f"the CPU has neither {' nor '.join(CPU_FLAGS)} (bf16 needs AMD Zen 4 or later, or Intel "
                f"Cooper Lake / Sapphire Rapids or later)")
    if "BF16" not in capabilities:
        return (f"OpenVINO's CPU plugin does not offer BF16 on this CPU (its capabilities: "
                f"{', '.join(capabilities) or 'none'})")
    return None



def openvino_capabilities() -> list[str]:
    try:
        import openvino as ov
    except ImportError:
        raise ApplianceError("bf16 needs the openvino package (pip install openvino, the version in "
                             "requirements.lock)") from None
    caps: list[str] = list(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    return caps



def require(what: str) -> None:
    """ApplianceError (one line, naming the missing CPU flag) unless this CPU can compute bf16."""
    why = missing(system.cpu_flags(), openvino_capabilities())
    if why is not None:
        raise ApplianceError(f"{what}: {why}; on {system.cpu_model()} use fp32 or int8")



def check_compiled(compiled: Any) -> None:
    """RuntimeError unless the compiled model computes in bf16 (what OpenVINO says it compiled for)."""
    got = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
    if "bf16" not in got and "bfloat16" not in got:
        raise RuntimeError(f"OpenVINO compiled the model for {got}, not bf16")
