"""Types of the native batch assembly (harness/_copy.cpp)."""

from typing_extensions import Buffer

def gather(src: Buffer, slot_of: Buffer, indices: Buffer, dst: Buffer, /) -> None:
    """Copy row slot_of[i] of src for each i in indices into consecutive rows of dst, the GIL released."""
