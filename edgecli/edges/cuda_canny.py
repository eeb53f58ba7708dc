"""Canny edges on the GPU: ``canny.cu``'s four kernels, launched on one stream.

:func:`launch_canny` gives ``cv2.Canny(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), low, high,
L2gradient=...)`` of a batch of BGR frames, byte for byte, with hysteresis by union-find on the
device: a fixed number of launches a batch, no host round trip, whatever the image.
:func:`edgecli.edges.kernels.load_canny` compiles and loads the kernels (:class:`CannyKernels`).

CuPy is not imported here: tests/cuda_host.py stands host builds of the kernels in for CuPy's,
so these launches run on the CPU, arguments and all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .variants import (
    CANNY_KERNELS,
    CANNY_LOCAL_THREADS,
    CANNY_MERGE_THREADS,
    CANNY_PIXEL_THREADS,
    CANNY_TILE,
)

# The work buffer a launch needs: a union-find label (uint32) a pixel.
LABEL_BYTES = 4
# Labels are indices within a frame and keep their top bit for a mark (canny.cu).
MAX_FRAME_PIXELS = 2**31 - 1
# Frames are the grid's second dimension.
MAX_FRAMES = 65535
# Blocks a frame for the per-pixel passes, which stride past that.
PIXEL_BLOCKS = 1024
# The largest magnitude of 8-bit luma under each norm: Sobel's gradients are at most 1020 in
# absolute value. A threshold at or above it marks nothing, one below 0 everything, so limits
# clamped to [-1, largest] compare exactly as the given ones (and fit the kernels' int32).
LARGEST_MAGNITUDE = {"l1": 2 * 1020, "l2": 2 * 1020**2}


@dataclass(frozen=True)
class CannyKernels:
    """``canny.cu``'s kernels for one norm, in launch order (``CANNY_KERNELS``), on ``device``;
    each called as a ``cupy.RawKernel`` is."""

    local: Any
    merge: Any
    flag: Any
    output: Any
    norm: str
    device: int = 0

    @classmethod
    def from_functions(cls, functions, norm: str, device: int = 0) -> CannyKernels:
        """The kernels from ``functions`` by name (``CANNY_KERNELS``)."""
        local, merge, flag, output = (functions[name] for name in CANNY_KERNELS)
        return cls(local, merge, flag, output, norm, device)


def _check_array(array, name: str, dtype, shape: tuple[int, ...], device: int) -> None:
    if array.dtype != dtype or array.shape != shape:
        raise ValueError(
            f"{name} must be {np.dtype(dtype).name} shaped {shape}, got {array.dtype} {array.shape}"
        )
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    on = getattr(getattr(array, "device", None), "id", device)  # a CuPy array's device
    if on != device:
        raise ValueError(f"{name} is on CUDA device {on}, the kernels on {device}")


def kernel_limits(limits: tuple[int, int], norm: str) -> tuple[int, int]:
    """``(low, high)`` as the kernels take them: each clamped to [-1, the norm's largest
    magnitude], which compares every magnitude as the value given does."""
    largest = LARGEST_MAGNITUDE[norm]
    return tuple(min(max(int(limit), -1), largest) for limit in limits)


def launch_canny(
    kernels: CannyKernels,
    frames_dev,
    edges_dev,
    labels_dev,
    limits: tuple[int, int],
    stream,
) -> None:
    """Enqueue Canny edges of ``frames_dev`` (N, H, W, 3) uint8 BGR into ``edges_dev``
    (N, H, W) uint8 (0 or 255) on ``stream``, with ``labels_dev`` (N, H, W) uint32 as work
    space (its contents on entry do not matter). Asynchronous: nothing here waits.

    ``limits``: ``(low, high)`` as the comparisons use them (``Options.canny_limits``: a pixel
    is a candidate when its magnitude is > low, strong when > high), low <= high.
    """
    if frames_dev.ndim != 4 or frames_dev.shape[3] != 3:
        raise ValueError(
            f"frames_dev must be uint8 shaped (N, H, W, 3), got {frames_dev.dtype} "
            f"{frames_dev.shape}"
        )
    n_frames, height, width = frames_dev.shape[:3]
    shape = (n_frames, height, width)
    _check_array(frames_dev, "frames_dev", np.uint8, (*shape, 3), kernels.device)
    _check_array(edges_dev, "edges_dev", np.uint8, shape, kernels.device)
    _check_array(labels_dev, "labels_dev", np.uint32, shape, kernels.device)
    low, high = limits
    if low > high:
        raise ValueError(f"Canny limits must have low <= high, got {limits}")
    if height * width > MAX_FRAME_PIXELS:
        raise ValueError(
            f"frames of {height}x{width} have more than {MAX_FRAME_PIXELS} pixels, more than "
            "canny.cu's labels index"
        )
    if n_frames > MAX_FRAMES:
        raise ValueError(
            f"{n_frames} frames in one launch, more than {MAX_FRAMES}; launch fewer at a time"
        )
    if min(shape) == 0:
        return
    low, high = kernel_limits((low, high), kernels.norm)
    tiles_x = -(-width // CANNY_TILE)
    tiles = (tiles_x * -(-height // CANNY_TILE), n_frames)
    pixels = height * width
    pixel_grid = (min(-(-pixels // CANNY_PIXEL_THREADS), PIXEL_BLOCKS), n_frames)
    h, w = np.int32(height), np.int32(width)
    # One stream, in order: each pass reads what the one before wrote.
    kernels.local(
        tiles,
        (CANNY_LOCAL_THREADS,),
        (frames_dev, edges_dev, labels_dev, h, w, np.int32(tiles_x), np.int32(low),
         np.int32(high)),
        stream=stream,
    )  # fmt: skip
    kernels.merge(
        tiles, (CANNY_MERGE_THREADS,), (edges_dev, labels_dev, h, w, np.int32(tiles_x)),
        stream=stream,
    )  # fmt: skip
    kernels.flag(
        pixel_grid, (CANNY_PIXEL_THREADS,), (edges_dev, labels_dev, np.int32(pixels)),
        stream=stream,
    )  # fmt: skip
    kernels.output(
        pixel_grid, (CANNY_PIXEL_THREADS,), (edges_dev, labels_dev, np.int32(pixels)),
        stream=stream,
    )  # fmt: skip
