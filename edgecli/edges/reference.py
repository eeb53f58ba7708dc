"""The edge contract (docs/contract.md) on the CPU: the readable spec every
backend must match.

Integer arithmetic throughout, so the result is defined to the bit:

    Y  = (9798*R + 19235*G + 3735*B + 16384) >> 15           (BT.601, 15-bit fixed point)
    Gx = [[-1,0,1],[-2,0,2],[-1,0,1]] * Y,  Gy = Gx^T * Y   (3x3 Sobel, chosen border)
    edge = |Gx| + |Gy| > T            (l1)
    edge = Gx^2 + Gy^2 > T^2          (l2, no square root)
    out  = 255 where edge else 0

Under ``--operator canny`` the edge is cv2.Canny's on the same luma: the steps written out in
:func:`edgecli.edges.canny.canny_numpy`.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..errors import FrameArrayError
from ..options.params import Options
from .canny import canny_numpy

LUMA_R, LUMA_G, LUMA_B = 9798, 19235, 3735
LUMA_SHIFT = 15
LUMA_ROUND = 1 << (LUMA_SHIFT - 1)

# Border names of the contract mapped to OpenCV's. OpenCV, like the contract, treats a
# one-pixel-long axis under reflect101 as replicate (there is no "b" to reflect to).
CV_BORDERS = {
    "replicate": cv2.BORDER_REPLICATE,
    "reflect101": cv2.BORDER_REFLECT_101,
    "constant": cv2.BORDER_CONSTANT,
}


def check_frames(frames: np.ndarray) -> np.ndarray:
    """Return ``frames`` as an (N, H, W, 3) uint8 view, or raise naming what is wrong."""
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise FrameArrayError(
            "expected 8-bit BGR frames shaped (H, W, 3) or (N, H, W, 3), "
            f"got dtype {frames.dtype} and shape {frames.shape}"
        )
    if min(frames.shape[-3:-1], default=0) == 0:
        raise FrameArrayError(f"frames must be at least 1x1, got shape {frames.shape}")
    return frames if frames.ndim == 4 else frames[np.newaxis]


def as_bgr_frames(frames) -> tuple[np.ndarray, bool]:
    """``frames`` as cv2 users hold them, made (N, H, W, 3) uint8 BGR as the contract's step 0
    decodes: a gray frame (H, W) replicated into B, G and R, a BGRA one (H, W, 4) with its
    alpha dropped, a batch (N, H, W, 3 or 4) alike; and whether it was one frame.
    FrameArrayError for anything else, naming its dtype and shape."""
    try:
        array = np.asarray(frames)
    except ValueError:  # a ragged list
        raise FrameArrayError("frames of a batch must all have one shape") from None
    colour = array.ndim in (3, 4) and array.shape[-1] in (3, 4)
    if array.dtype != np.uint8 or not (array.ndim == 2 or colour):
        raise FrameArrayError(
            "expected 8-bit frames shaped (H, W) gray, (H, W, 3) BGR or (H, W, 4) BGRA, or a "
            f"batch of BGR or BGRA ones (N, H, W, 3|4); got dtype {array.dtype} and shape "
            f"{array.shape}"
        )
    if min(array.shape if array.ndim == 2 else array.shape[-3:-1]) == 0:
        raise FrameArrayError(f"frames must be at least 1x1, got shape {array.shape}")
    if array.ndim == 2:
        # Replicated gray is exact: its luma, (9798 + 19235 + 3735) * g + 16384 >> 15, is g.
        array = np.repeat(array[..., np.newaxis], 3, axis=-1)
    elif array.shape[-1] == 4:
        array = np.ascontiguousarray(array[..., :3])
    return check_frames(array), array.ndim == 3


def luma(frames_bgr: np.ndarray) -> np.ndarray:
    """BT.601 luma of 8-bit BGR pixels (any leading shape), as uint8."""
    b, g, r = (frames_bgr[..., c].astype(np.uint32) for c in range(3))
    y = r * LUMA_R
    y += g * LUMA_G
    y += b * LUMA_B
    y += LUMA_ROUND
    y >>= LUMA_SHIFT
    return y.astype(np.uint8)


def sobel(y: np.ndarray, border: str) -> tuple[np.ndarray, np.ndarray]:
    """3x3 Sobel gradients (Gx, Gy) of one uint8 image, as int16 (|G| <= 1020 fits)."""
    # cv2.Sobel on 8-bit input with a 16-bit signed result is exact integer arithmetic.
    cv_border = CV_BORDERS[border]
    gx = cv2.Sobel(y, cv2.CV_16S, 1, 0, ksize=3, borderType=cv_border)
    gy = cv2.Sobel(y, cv2.CV_16S, 0, 1, ksize=3, borderType=cv_border)
    return gx, gy


def threshold_magnitude(gx: np.ndarray, gy: np.ndarray, options: Options) -> np.ndarray:
    """255 where the gradient magnitude exceeds the threshold (strictly), else 0."""
    t = options.effective_threshold
    if options.norm == "l1":
        # |Gx| + |Gy| <= 2040 fits int16; no clamping before the comparison.
        magnitude = np.abs(gx)
        magnitude += np.abs(gy)
        edge = magnitude > t
    else:
        gx32 = gx.astype(np.int32)
        gy32 = gy.astype(np.int32)
        edge = gx32 * gx32 + gy32 * gy32 > t * t
    return edge.view(np.uint8) * np.uint8(255)


def detect_frame(frame_bgr: np.ndarray, options: Options) -> np.ndarray:
    """Edge map of one (H, W, 3) uint8 BGR frame: (H, W) uint8 of 0/255."""
    if options.operator == "canny":
        return canny_numpy(luma(frame_bgr), *options.canny_limits, options.norm == "l2")
    gx, gy = sobel(luma(frame_bgr), options.border)
    return threshold_magnitude(gx, gy, options)


def detect_batch(frames_bgr: np.ndarray, options: Options) -> np.ndarray:
    """Edge maps of (N, H, W, 3) uint8 BGR frames: (N, H, W) uint8 of 0/255."""
    frames_bgr = check_frames(frames_bgr)
    edges = np.empty(frames_bgr.shape[:3], dtype=np.uint8)
    for i, frame in enumerate(frames_bgr):
        edges[i] = detect_frame(frame, options)
    return edges
