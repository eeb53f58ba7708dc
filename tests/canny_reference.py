"""A second, deliberately plain Canny, for the tests only: the steps of issue 42, which
docs/contract.md gives as cv2.Canny's.

It shares no code with edgecli and calls no OpenCV: np.pad for the replicate border, the Sobel
sums as shifted slices in int64, the threshold arithmetic in Python numbers, each pixel's
direction sector as a code that picks its two neighbours by offset, and the hysteresis as a
flood fill from every strong pixel, one pixel at a time.
"""

from __future__ import annotations

import math

import numpy as np

TG22 = 13573  # round(tan(22.5 degrees) * 2^15)


def limits(low: float, high: float, l2: bool) -> tuple[int, int]:
    """Step 2: the thresholds as cv2.Canny takes them (any real numbers) made the integers the
    magnitudes are compared with."""
    if low > high:
        low, high = high, low
    if l2:
        low, high = min(32767.0, low), min(32767.0, high)
        low = low * low if low > 0 else low
        high = high * high if high > 0 else high
    return math.floor(low), math.floor(high)


def gradients(gray: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 1: 3x3 Sobel, border replicate, as int64."""
    h, w = gray.shape
    p = np.pad(gray.astype(np.int64), 1, mode="edge")

    def at(dy: int, dx: int) -> np.ndarray:
        return p[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    dx = (at(-1, 1) + 2 * at(0, 1) + at(1, 1)) - (at(-1, -1) + 2 * at(0, -1) + at(1, -1))
    dy = (at(1, -1) + 2 * at(1, 0) + at(1, 1)) - (at(-1, -1) + 2 * at(-1, 0) + at(-1, 1))
    return dx, dy


# Each sector's two neighbours as (row, column) offsets, and whether the second comparison is
# >= (the first is always >): horizontal, vertical, and the diagonals for sign(dx ^ dy) = +1
# and -1 (up[j - s], down[j + s]).
SECTORS = {
    0: ((0, -1), (0, 1), True),
    1: ((-1, 0), (1, 0), True),
    2: ((-1, -1), (1, 1), False),
    3: ((-1, 1), (1, -1), False),
}


def sector(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Each pixel's direction code (a key of SECTORS), by canny.cpp's integer tangents."""
    x, y = np.abs(dx), np.abs(dy) * (1 << 15)
    code = np.where((dx < 0) != (dy < 0), 3, 2)
    code = np.where(y > x * TG22 + x * (1 << 16), 1, code)
    return np.where(y < x * TG22, 0, code)


def candidates(dx: np.ndarray, dy: np.ndarray, m: np.ndarray, low: int) -> np.ndarray:
    """Step 4: ``m > low`` and a maximum along its sector; 0 outside the image."""
    h, w = m.shape
    padded = np.pad(m, 1, mode="constant")
    rows, cols = np.indices((h, w)) + 1
    codes = sector(dx, dy)
    keep = np.zeros((h, w), dtype=bool)
    for code, ((ay, ax), (by, bx), second_ge) in SECTORS.items():
        a = padded[rows + ay, cols + ax]
        b = padded[rows + by, cols + bx]
        passes = (m > a) & ((m >= b) if second_ge else (m > b))
        keep |= (codes == code) & passes
    return keep & (m > low)


def flood(candidate: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Step 6: the candidates reached from a strong pixel through 8-connected candidates."""
    h, w = candidate.shape
    stride = w + 2
    open_ = bytearray(np.pad(candidate, 1).astype(np.uint8).tobytes())
    reached = bytearray(len(open_))
    stack = [(i + 1) * stride + j + 1 for i, j in zip(*np.nonzero(strong), strict=True)]
    for k in stack:
        open_[k], reached[k] = 0, 1
    steps = (-stride - 1, -stride, -stride + 1, -1, 1, stride - 1, stride, stride + 1)
    while stack:
        k = stack.pop()
        for step in steps:
            n = k + step
            if open_[n]:
                open_[n], reached[n] = 0, 1
                stack.append(n)
    grid = np.frombuffer(bytes(reached), dtype=np.uint8).reshape(h + 2, w + 2)
    return grid[1:-1, 1:-1].astype(bool)


def canny(gray: np.ndarray, low: float, high: float, l2: bool = False) -> np.ndarray:
    """cv2.Canny(gray, low, high, apertureSize=3, L2gradient=l2), step by step: uint8 0/255."""
    low_limit, high_limit = limits(low, high, l2)
    dx, dy = gradients(gray)
    m = dx * dx + dy * dy if l2 else np.abs(dx) + np.abs(dy)
    candidate = candidates(dx, dy, m, low_limit)
    edges = flood(candidate, candidate & (m > high_limit))
    return np.where(edges, 255, 0).astype(np.uint8)


def luma(bgr: np.ndarray) -> np.ndarray:
    """The contract's luma (BT.601, 15-bit fixed point) in int64, as uint8."""
    b, g, r = (bgr[..., c].astype(np.int64) for c in range(3))
    return ((9798 * r + 19235 * g + 3735 * b + 16384) >> 15).astype(np.uint8)


def canny_bgr(bgr: np.ndarray, low: float, high: float, l2: bool = False) -> np.ndarray:
    """The Canny contract on a BGR frame: :func:`canny` of its luma."""
    return canny(luma(bgr), low, high, l2)
