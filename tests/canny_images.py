"""Images that make Canny's hysteresis work hard, for the tests of every backend.

Each generator returns an (H, W) uint8 gray image (``as_bgr`` makes the BGR frame whose
contract luma is that image) and is meant to be run at :data:`ADVERSARIAL_LIMITS`, where
their edges are weak (a candidate, not strong) except where said:

- :func:`spiral`: a one-pixel wall of weak contrast wound as a square spiral over the whole
  frame, one strong pixel at its inner end: every edge pixel is reached from that one, along
  a path about as long as the frame has pixels over the spiral's pitch.
- :func:`checkerboard`: black and white cells over the whole frame: an edge around every
  cell, many components (the crossings are suppressed), a tie of magnitudes at each pixel
  beside a cell edge.
- :func:`noise`: uniform noise, where every pixel is a candidate at low thresholds.
- :func:`lattice`: one-pixel walls of weak contrast every few pixels each way over the whole
  frame, a strong block on them in the middle: one component over the whole frame, reached
  from that block along every wall.
- :func:`faint_noise`: two gray levels a step apart at random: small magnitudes everywhere,
  which the frame's border pixels compare with the 0 outside it at thresholds of 0.
"""

from __future__ import annotations

import numpy as np

# (low, high) for the images below: their weak edges have magnitudes 80 (l1; 6400 under l2)
# and their strong ones above 500, so 40 < weak < 300 < strong under either norm.
ADVERSARIAL_LIMITS = (40, 300)
WEAK = 20  # the weak contrast: 4 * 20 = 80 across a straight wall or cell edge
STRONG = 255


def as_bgr(gray: np.ndarray) -> np.ndarray:
    """The BGR frame whose contract luma is ``gray`` (gray replicated: exact)."""
    return np.ascontiguousarray(np.repeat(gray[..., np.newaxis], 3, axis=-1))


def spiral(height: int, width: int, pitch: int = 4) -> np.ndarray:
    """A square spiral wall (value WEAK on 0) from the frame's margin inwards, turns
    ``pitch`` pixels apart (at least 4, so that the edges of neighbouring turns never touch),
    and one STRONG pixel at its inner end."""
    if pitch < 4:
        raise ValueError(f"pitch must be >= 4, got {pitch}")
    image = np.zeros((height, width), dtype=np.uint8)
    top, left, bottom, right = 1, 1, height - 2, width - 2
    y, x = top, left
    if bottom < top or right < left:  # too small for a wall inside a margin
        image[height // 2, width // 2] = STRONG
        return image
    while True:
        image[y, x : right + 1] = WEAK  # rightwards along the top
        x, top = right, y + pitch
        if top > bottom:
            break
        image[y : bottom + 1, x] = WEAK  # down the right side
        y, right = bottom, x - pitch
        if right < left:
            break
        image[y, left : x + 1] = WEAK  # leftwards along the bottom
        x, bottom = left, y - pitch
        if bottom < top:
            break
        image[top : y + 1, x] = WEAK  # up the left side
        y, left = top, x + pitch
        if left > right:
            break
    image[y, x] = STRONG
    return image


def checkerboard(height: int, width: int, cell: int = 3) -> np.ndarray:
    """Cells of ``cell`` pixels alternating 0 and 255 over the frame."""
    rows = (np.arange(height) // cell)[:, np.newaxis]
    cols = (np.arange(width) // cell)[np.newaxis, :]
    return np.where((rows + cols) % 2 == 0, 0, 255).astype(np.uint8)


def noise(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Uniform noise 0..255."""
    return np.random.default_rng(seed).integers(0, 256, (height, width), dtype=np.uint8)


def lattice(height: int, width: int, pitch: int = 4) -> np.ndarray:
    """Walls along every ``pitch``-th row and column, and a 3 x 3 STRONG block in the middle,
    between two rows of walls and over a column of them. The walls are 2 * WEAK on 0 (160
    across a straight wall): at WEAK the magnitudes where walls cross fall below the low
    limit, and the web falls apart into pieces."""
    image = np.zeros((height, width), dtype=np.uint8)
    image[::pitch, :] = 2 * WEAK
    image[:, ::pitch] = 2 * WEAK
    row, col = height // 2 // pitch * pitch + 1, width // 2 // pitch * pitch
    image[row : row + 3, col : col + 3] = STRONG
    return image


def faint_noise(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Gray levels 100 and 101 at random."""
    rng = np.random.default_rng(seed)
    return (100 + rng.integers(0, 2, (height, width))).astype(np.uint8)
