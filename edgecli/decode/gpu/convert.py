"""``decode.cu``'s conversions, launched on CuPy streams.

Decoders hand over planes in device memory (nvJPEG: Y, Cb, Cr at their native sampling;
NVDEC: NV12); these kernels turn them into the contract's BGR frames, bit for bit as the CPU
decoders do, straight into the device buffer the edge kernel reads.
"""

from __future__ import annotations

import threading
from functools import cache

import cupy
import numpy as np

from ...cuda.build import compute_capability, load_kernels

DECODE_FILE = "decode.cu"
BLOCK = (32, 8, 1)

_lock = threading.Lock()


KERNELS = ("jpeg_planes_to_bgr", "nv12_to_bgr")


@cache
def _module(device: int) -> dict:
    major, minor = compute_capability(device)
    with cupy.cuda.Device(device):
        functions, _ = load_kernels(DECODE_FILE, KERNELS, (), 10 * major + minor)
    return dict(zip(KERNELS, functions, strict=True))


def module(device: int) -> dict:
    """decode.cu's kernels on ``device``, by name: compiled once a machine (the kernel cache),
    loaded once a process, whichever decoder thread asks first."""
    with _lock:
        return _module(device)


def _grid(width: int, height: int, depth: int = 1) -> tuple[int, int, int]:
    return (-(-width // BLOCK[0]), -(-height // BLOCK[1]), depth)


def launch_jpeg_to_bgr(
    device: int,
    planes: cupy.ndarray,
    frame_bytes: int,
    out: cupy.ndarray,
    height: int,
    width: int,
    factors: tuple[int, int] | None,
    orientation: int,
    stream: cupy.cuda.Stream,
) -> None:
    """Enqueue the BGR frames of ``out`` (N, H', W', 3) from the planes of N JPEGs of
    height x width in ``planes`` (frame f at f * frame_bytes: Y, then Cb and Cr), chroma
    sampled by ``factors`` (Y's over the chroma planes'; None for gray), turned by EXIF
    ``orientation``."""
    fx, fy = factors or (0, 0)
    cw = -(-width // fx) if fx else 0
    ch = -(-height // fy) if fy else 0
    n, out_h, out_w = out.shape[:3]
    if n == 0:
        return
    function = module(device)["jpeg_planes_to_bgr"]
    args = (
        planes, np.int64(frame_bytes), out, np.int32(height), np.int32(width), np.int32(cw),
        np.int32(ch), np.int32(fx), np.int32(fy), np.int32(orientation),
    )  # fmt: skip
    function(_grid(out_w, out_h, n), BLOCK, args, stream=stream)


def launch_nv12_to_bgr(
    device: int,
    y_ptr: int,
    y_pitch: int,
    uv_ptr: int,
    uv_pitch: int,
    out: cupy.ndarray,
    stream: cupy.cuda.Stream,
) -> None:
    """Enqueue the BGR frame ``out`` (H, W, 3) from an NV12 frame's planes (device pointers
    and pitches in bytes), as cv2.VideoCapture converts BT.601 limited-range yuv420p."""
    height, width = out.shape[:2]
    function = module(device)["nv12_to_bgr"]
    args = (
        np.uint64(y_ptr), np.int32(y_pitch), np.uint64(uv_ptr), np.int32(uv_pitch), out,
        np.int32(height), np.int32(width),
    )  # fmt: skip
    function(_grid(width, height), BLOCK, args, stream=stream)
