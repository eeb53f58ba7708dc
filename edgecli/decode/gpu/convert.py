"""``decode.cu``'s conversions, launched on CuPy streams.

Decoders hand over planes in device memory (nvJPEG: Y, Cb, Cr at their native sampling;
NVDEC: NV12, or P016 for deeper streams); these kernels turn them into the contract's BGR
frames, bit for bit as the CPU decoders do, straight into the device buffer the edge kernel
reads.

CuPy is imported only to load the kernels (:func:`module`): tests/cuda_host.py stands host
builds of the kernels in for it, so these launches run on the CPU, arguments and all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import cupy

DECODE_FILE = "decode.cu"
BLOCK = (32, 8, 1)

KERNELS = ("jpeg_planes_to_bgr", "nv12_to_bgr", "p016_to_bgr")

# Clockwise turns the conversion applies as it writes (cv2.rotate's ROTATE_90_CLOCKWISE,
# ROTATE_180 and ROTATE_90_COUNTERCLOCKWISE).
ROTATIONS = (0, 90, 180, 270)


def module(device: int) -> dict:
    """decode.cu's kernels on ``device``, by name (:func:`edgecli.cuda.build.kernels_on`)."""
    from ...cuda.build import kernels_on  # imports CuPy, which tests/cuda_host.py does without

    return kernels_on(device, DECODE_FILE, KERNELS)


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
    *,
    coefficients: tuple[int, ...],
    rotation: int,
    depth: int = 8,
) -> None:
    """Enqueue the BGR frame ``out`` from a decoded frame's planes (device pointers and pitches
    in bytes): NV12 for ``depth`` 8, P016 (16-bit samples, the value in the high bits) for 9 to
    16. ``coefficients`` are swscale's (y_coeff, y_offset, v2r, v2g, u2g, u2b) for the stream's
    matrix and range; ``rotation`` (0, 90, 180 or 270) turns the frame clockwise, so ``out`` is
    (H, W, 3) for 0 and 180 and (W, H, 3) for 90 and 270. NV12 frames come out as
    cv2.VideoCapture converts them; P016 frames are the same matrix in higher precision, rounded
    once, which is not cv2's conversion of deeper streams."""
    if len(coefficients) != 6:
        raise ValueError(
            f"coefficients: expected (y_coeff, y_offset, v2r, v2g, u2g, u2b), got {coefficients}"
        )
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation must be one of {ROTATIONS}, got {rotation!r}")
    if not 8 <= depth <= 16:
        raise ValueError(f"depth must be 8 (NV12) or 9 to 16 (P016), got {depth!r}")
    out_h, out_w = out.shape[:2]
    height, width = (out_w, out_h) if rotation in (90, 270) else (out_h, out_w)
    function = module(device)["nv12_to_bgr" if depth == 8 else "p016_to_bgr"]
    args = (
        np.uint64(y_ptr), np.int32(y_pitch), np.uint64(uv_ptr), np.int32(uv_pitch), out,
        np.int32(height), np.int32(width), *(np.int32(c) for c in coefficients),
        np.int32(rotation),
    )  # fmt: skip
    function(_grid(out_w, out_h), BLOCK, args, stream=stream)
