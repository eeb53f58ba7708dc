"""Canny cases shared by the host-run kernel tests and the GPU ones: cv2.Canny of a batch as
the contract has it (on cv2's gray), cv2's own thresholds, and images that make hysteresis work
hard."""

from __future__ import annotations

import math

import cv2
import numpy as np

from .media import gray_frame


def cv2_limits(low: float, high: float, norm: str) -> tuple[int, int]:
    """cv2.Canny's own thresholds of ``low`` and ``high``: swapped if out of order, for l2 each
    clamped to 32767 and squared where positive, then floored."""
    low, high = min(low, high), max(low, high)
    if norm == "l2":
        low, high = (min(t, 32767) ** 2 if t > 0 else t for t in (low, high))
    return math.floor(low), math.floor(high)


def cv2_canny(frames: np.ndarray, low: float, high: float, norm: str) -> np.ndarray:
    """cv2.Canny of each frame's cv2 gray."""
    return np.stack(
        [
            cv2.Canny(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), low, high, L2gradient=norm == "l2")
            for f in frames
        ]
    )


def spiral(size: int, weak: int = 40, step: int = 4) -> np.ndarray:
    """A gray frame: one square spiral of 1-pixel lines of luma ``weak`` on black, ``step``
    pixels between arms, from near the top-left corner inwards, with a white 3 x 3 block on its
    innermost turn; so its edges are weak all the way round but for the block's."""
    y = np.zeros((size, size), np.uint8)
    top, left, bottom, right = 1, 1, size - 2, size - 2
    while True:
        inner = top, left
        y[top, left : right + 1] = weak
        y[top : bottom + 1, right] = weak
        y[bottom, left : right + 1] = weak
        top, left, bottom, right = top + step, left + step, bottom - step, right - step
        if top > bottom or left > right:
            break
        y[top : bottom + step + 1, left - step] = weak  # up the left side, then in
        y[top, left - step : left] = weak
    y[inner[0] : inner[0] + 3, inner[1] : inner[1] + 3] = 255
    return gray_frame(y)


def checkerboard(height: int, width: int, cell: int, dark: int = 0, light: int = 255):
    """A gray frame of ``dark`` and ``light`` ``cell`` x ``cell`` squares."""
    rows, cols = np.indices((height, width))
    return gray_frame(np.where((rows // cell + cols // cell) % 2, light, dark))


def fed_lattice(height: int, width: int, step: int = 4, weak: int = 40) -> np.ndarray:
    """A gray frame: a lattice of 1-pixel lines of luma ``weak`` every ``step`` pixels each
    way over black, with a white 3 x 3 block on it in the middle: one web of weak edges over
    the whole frame, fed by that block's strong ones."""
    y = np.zeros((height, width), np.uint8)
    y[::step, :] = weak
    y[:, ::step] = weak
    # Between two rows of the lattice, over one of its columns.
    row, col = height // 2 // step * step + 1, width // 2 // step * step
    y[row : row + 3, col : col + 3] = 255
    return gray_frame(y)


def noise(height: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)


def faint_noise(height: int, width: int, seed: int) -> np.ndarray:
    """Gray levels of 100 and 101 at random: magnitudes of a few units everywhere, which the
    frame's border pixels compare with the 0 outside it at thresholds of 0."""
    rng = np.random.default_rng(seed)
    return gray_frame(100 + rng.integers(0, 2, (height, width)))


ADVERSARIAL = {
    "spiral": lambda: spiral(160),
    "checkerboard-1": lambda: checkerboard(96, 128, 1),  # equal magnitudes: nothing is a peak
    "checkerboard-3": lambda: checkerboard(96, 128, 3),
    "fed-lattice": lambda: fed_lattice(100, 130),
    "noise": lambda: noise(96, 128, seed=3),
    "faint-noise": lambda: faint_noise(96, 128, seed=4),
}
# Thresholds for them: weak edges between low and high, a wide band, and everything.
ADVERSARIAL_THRESHOLDS = [(60, 400), (10, 1000), (0, 0)]
