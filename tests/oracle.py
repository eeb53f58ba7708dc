"""A second, deliberately plain implementation of the edge contract, for the tests only.

It shares no code with edgecli: Python-int luma, np.pad for the border, and the Sobel
sums written out as shifted slices in int64. If edgecli.edges.reference and this disagree,
one of them misreads the edge contract (docs/contract.md).
"""

from __future__ import annotations

import numpy as np

PAD_MODES = {"replicate": "edge", "reflect101": "reflect", "constant": "constant"}


def plain_luma(bgr: np.ndarray) -> np.ndarray:
    b = bgr[..., 0].astype(np.int64)
    g = bgr[..., 1].astype(np.int64)
    r = bgr[..., 2].astype(np.int64)
    return (9798 * r + 19235 * g + 3735 * b + 16384) >> 15


def plain_edges(bgr: np.ndarray, threshold: int, norm: str, border: str) -> np.ndarray:
    """(H, W, 3) uint8 BGR -> (H, W) uint8 0/255, straight from the contract."""
    y = plain_luma(bgr)
    h, w = y.shape
    p = np.pad(y, 1, mode=PAD_MODES[border])  # np.pad 'reflect' on a length-1 axis repeats it

    def at(dy: int, dx: int) -> np.ndarray:  # the neighbour at offset (dy, dx), every pixel
        return p[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    gx = (at(-1, 1) + 2 * at(0, 1) + at(1, 1)) - (at(-1, -1) + 2 * at(0, -1) + at(1, -1))
    gy = (at(1, -1) + 2 * at(1, 0) + at(1, 1)) - (at(-1, -1) + 2 * at(-1, 0) + at(-1, 1))
    if norm == "l1":
        edge = np.abs(gx) + np.abs(gy) > threshold
    else:
        edge = gx * gx + gy * gy > threshold * threshold
    return np.where(edge, 255, 0).astype(np.uint8)
