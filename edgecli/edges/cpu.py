"""The CPU backend's compute: the edge contract in the cheapest exact OpenCV and NumPy ops.

:mod:`edgecli.edges.reference` is the readable spec; this module computes the same bits faster:

- Luma: ``cv2.cvtColor(BGR2GRAY)`` where it is verified to give the contract's formula for every one
  of the 2^24 colours (one pass in SIMD, where the formula in NumPy makes several passes and
  temporaries), else :func:`edgecli.edges.reference.luma`. OpenCV 5 uses the same 15-bit fixed
  point, but that is a property of a build, not a promise, so each build is checked once and the
  verdict cached (:func:`cvtcolor_luma_is_exact`).
- Gradients: ``cv2.Sobel`` to int16, as the reference.
- l1: ``|Gx| + |Gy|`` <= 2040 in place in int16, then ``cv2.compare`` makes the 0/255 map.
- Canny: :func:`edgecli.edges.canny.canny` (cv2.Canny where verified exact) on that luma.
- l2: ``Gx^2 + Gy^2`` <= 2 * 1020^2 = 2,080,800 and ``T^2`` <= 2040^2 = 4,161,600 are
  integers below 2^24, so float32 holds every square, sum and the threshold exactly: the
  comparison is the integer one, with no int32 temporaries.
"""

from __future__ import annotations

import functools
import threading

import cv2
import numpy as np

from ..options.params import Options
from ..output.cache import cache_dir, cached_verdict, opencv_build_key
from . import reference
from .canny import canny

CACHE_FILE = "luma-check.json"
# Colours checked a step: 2^20 (3 MB of pixels, 4 MB a uint32 temporary) stay in the CPU's
# caches and are reused, where all 2^24 at once would fault in 300 MB of fresh pages, which
# costs more than the check itself.
CHECK_STEP = 1 << 20


def colours(first: int, count: int) -> np.ndarray:
    """BGR pixels of the colours numbered ``first`` to ``first + count - 1`` (B the low byte,
    R the high one), as a 4096-pixel-wide image."""
    codes = np.arange(first, first + count, dtype="<u4")  # little-endian bytes: B, G, R, 0
    return np.ascontiguousarray(codes.view(np.uint8).reshape(-1, 4096, 4)[:, :, :3])


def check_cvtcolor_luma() -> bool:
    """Whether cvtColor(BGR2GRAY) equals the contract's luma on each of the 2^24 colours,
    both on 4096-pixel rows (its vector code) and alone on a row (its scalar code, which does
    the pixels at the end of a row that a vector does not fill)."""
    for first in range(0, 1 << 24, CHECK_STEP):
        image = colours(first, CHECK_STEP)
        formula = reference.luma(image)
        if not np.array_equal(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), formula):
            return False
        # One-pixel rows: every other pixel, rows 6 bytes apart (never merged into one row).
        pixels, expected = image.reshape(-1, 1, 3), formula.reshape(-1, 1)
        for start in (0, 1):
            alone = cv2.cvtColor(pixels[start::2], cv2.COLOR_BGR2GRAY)
            if not np.array_equal(alone.reshape(-1, 1), expected[start::2]):
                return False
    return True


_check_lock = threading.Lock()


@functools.cache
def cvtcolor_luma_is_exact() -> bool:
    """The verdict of :func:`check_cvtcolor_luma` for this OpenCV build and CPU: from the
    cache file where it holds one, else checked now (once, however many threads ask) and
    cached. Where the cache cannot be written, each process checks once."""
    with _check_lock:
        return cached_verdict(cache_dir() / CACHE_FILE, opencv_build_key(), check_cvtcolor_luma)


def luma(frame_bgr: np.ndarray) -> np.ndarray:
    """The contract's luma of one (H, W, 3) uint8 BGR frame."""
    if cvtcolor_luma_is_exact():
        return cv2.cvtColor(np.ascontiguousarray(frame_bgr), cv2.COLOR_BGR2GRAY)
    return reference.luma(frame_bgr)


def detect_frame(frame_bgr: np.ndarray, options: Options) -> np.ndarray:
    """Edge map of one (H, W, 3) uint8 BGR frame: (H, W) uint8 of 0/255, as the reference."""
    if options.operator == "canny":
        return canny(luma(frame_bgr), options)
    gx, gy = reference.sobel(luma(frame_bgr), options.border)
    t = options.effective_threshold
    if options.norm == "l1":
        np.abs(gx, out=gx)  # |G| <= 1020: no int16 overflow
        np.abs(gy, out=gy)
        cv2.add(gx, gy, dst=gx)  # <= 2040: cv2.add saturates at 32767, never reached
        return above(gx, t)
    squares = cv2.multiply(gx, gx, dtype=cv2.CV_32F)  # int16 in, float32 out, in one pass
    cv2.add(squares, cv2.multiply(gy, gy, dtype=cv2.CV_32F), dst=squares)
    return above(squares, float(t * t))


def above(magnitude: np.ndarray, limit: int | float) -> np.ndarray:
    """255 where ``magnitude`` > ``limit``, else 0, as uint8. (OpenCV's Python binding takes
    an array of at most 4 values in one column for a cv::Scalar, not an image: cv2.compare
    refuses a 1x1 one and compares a 4x1 one wrongly, so NumPy does those.)"""
    if magnitude.size <= 4:
        return (magnitude > limit).view(np.uint8) * np.uint8(255)
    return cv2.compare(magnitude, limit, cv2.CMP_GT)


def detect_batch(frames_bgr: np.ndarray, options: Options) -> np.ndarray:
    """Edge maps of (N, H, W, 3) uint8 BGR frames: (N, H, W) uint8 of 0/255."""
    frames_bgr = reference.check_frames(frames_bgr)
    if len(frames_bgr) == 1:  # the pipeline's case: one frame a call, no copy
        return detect_frame(frames_bgr[0], options)[np.newaxis]
    edges = np.empty(frames_bgr.shape[:3], dtype=np.uint8)
    for i, frame in enumerate(frames_bgr):
        edges[i] = detect_frame(frame, options)
    return edges
