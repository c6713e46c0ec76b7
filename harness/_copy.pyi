"""Types of the native batch assembly (harness/_copy.cpp). The C++ takes C-contiguous buffers (slot_of and
indices of 8-byte integers); the harness passes numpy arrays."""

from typing import Any

import numpy as np
from numpy.typing import NDArray

def gather(src: NDArray[Any], slot_of: NDArray[np.int64 | Any], indices: NDArray[np.int64 | Any],
           dst: NDArray[Any], /) -> None:
    """Copy row slot_of[i] of src for each i in indices into consecutive rows of dst, the GIL released."""
