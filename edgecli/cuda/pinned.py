"""Page-locked host memory, which the GPU copies from and to without staging. Imports CuPy."""

from __future__ import annotations

import cupy as cp
import numpy as np


def empty_pinned(nbytes: int) -> np.ndarray:
    """``nbytes`` of page-locked host memory as a uint8 array (what ``cupyx.empty_pinned``
    gives, without importing cupyx, which brings cupyx.scipy and more: start-up time)."""
    memory = cp.cuda.alloc_pinned_memory(nbytes)
    return np.frombuffer(memory, np.uint8, nbytes)
