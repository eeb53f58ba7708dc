"""Canny on the CPU: ``cv2.Canny`` where it is verified to compute the steps below, else
those steps in NumPy. Either way the bytes are those of
``cv2.Canny(luma, low, high, apertureSize=3, L2gradient=...)`` (docs/contract.md):

1. ``dx``, ``dy``: 3x3 Sobel of the luma to int16, border replicate.
2. ``low``, ``high``: :func:`edgecli.options.params.canny_limits`.
3. ``m``: ``|dx| + |dy|`` (l1) or ``dx^2 + dy^2`` (l2) in int32; 0 outside the image.
4. Non-maximum suppression of the candidates ``m > low``, in the gradient's direction sector
   (integer tangents: ``TG22``): horizontal ``m > left and m >= right``, vertical ``m > up
   and m >= down``, diagonal ``m > up[j - s] and m > down[j + s]``, ``s`` the sign of
   ``dx ^ dy``.
5. Strong: a candidate with ``m > high``.
6. Edge (255): every candidate 8-connected to a strong one, through candidates.

cv2.Canny takes other code paths by build and by thread count (Intel IPP's when OpenCV runs
single-threaded, horizontal slices in parallel otherwise), so each OpenCV build and CPU is
checked once against the steps in NumPy on both, and the verdict cached
(:func:`cv2_canny_is_exact`).
"""

from __future__ import annotations

import functools
import math
import threading

import cv2
import numpy as np

from ..options.params import canny_limits
from ..output.cache import cache_dir, cached_verdict, opencv_build_key

CACHE_FILE = "canny-check.json"
# tan(22.5 degrees) in 15-bit fixed point, as canny.cpp rounds it.
CANNY_SHIFT = 15
TG22 = 13573


def sobel_replicate(gray: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 1: (dx, dy) of a uint8 image, int16, border replicate."""
    dx = cv2.Sobel(gray, cv2.CV_16S, 1, 0, ksize=3, borderType=cv2.BORDER_REPLICATE)
    dy = cv2.Sobel(gray, cv2.CV_16S, 0, 1, ksize=3, borderType=cv2.BORDER_REPLICATE)
    return dx, dy


def magnitude(dx: np.ndarray, dy: np.ndarray, l2: bool) -> np.ndarray:
    """Step 3, with a frame of zeros around it (the pixels outside the image), int32."""
    h, w = dx.shape
    dx, dy = dx.astype(np.int32), dy.astype(np.int32)
    m = np.zeros((h + 2, w + 2), dtype=np.int32)
    inner = m[1:-1, 1:-1]
    if l2:
        np.multiply(dx, dx, out=inner)
        inner += dy * dy
    else:
        np.abs(dx, out=inner)
        inner += np.abs(dy)
    return m


def suppressed(dx: np.ndarray, dy: np.ndarray, m: np.ndarray, low: int) -> np.ndarray:
    """Step 4: the candidates that survive non-maximum suppression, as a bool image.
    ``m`` is the magnitude framed by zeros (:func:`magnitude`)."""
    h, w = dx.shape
    centre = m[1:-1, 1:-1]
    x = np.abs(dx.astype(np.int32))
    y = np.abs(dy.astype(np.int32)) << CANNY_SHIFT
    tg22x = x * TG22
    horizontal = y < tg22x
    vertical = ~horizontal & (y > tg22x + (x << (CANNY_SHIFT + 1)))
    diagonal = ~horizontal & ~vertical

    def shifted(di: int, dj: int) -> np.ndarray:
        return m[1 + di : 1 + di + h, 1 + dj : 1 + dj + w]

    # s = -1 where dx and dy differ in sign: the up-right and down-left neighbours.
    opposite = (dx ^ dy) < 0
    up_diag = np.where(opposite, shifted(-1, 1), shifted(-1, -1))
    down_diag = np.where(opposite, shifted(1, -1), shifted(1, 1))
    keep = horizontal & (centre > shifted(0, -1)) & (centre >= shifted(0, 1))
    keep |= vertical & (centre > shifted(-1, 0)) & (centre >= shifted(1, 0))
    keep |= diagonal & (centre > up_diag) & (centre > down_diag)
    keep &= centre > low
    return keep


def hysteresis(candidates: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Step 6: 255 on each 8-connected component of ``candidates`` that holds a ``strong``
    pixel, 0 elsewhere. Components do not depend on a traversal order, so this equals
    canny.cpp's stack-driven tracing."""
    count, labels = cv2.connectedComponents(candidates.view(np.uint8), connectivity=8,
                                            ltype=cv2.CV_32S)  # fmt: skip
    kept = np.zeros(count, dtype=np.uint8)
    kept[labels[strong]] = 255
    kept[0] = 0  # the background: pixels that are not candidates
    return kept[labels]


def canny_numpy(gray: np.ndarray, low: int, high: int, l2: bool) -> np.ndarray:
    """Steps 1 and 3-6 on a uint8 image, with the limits of step 2: uint8 0/255."""
    dx, dy = sobel_replicate(gray)
    m = magnitude(dx, dy, l2)
    candidates = suppressed(dx, dy, m, low)
    strong = candidates & (m[1:-1, 1:-1] > high)
    return hysteresis(candidates, strong)


def check_images() -> list[np.ndarray]:
    """Images that take each of cv2.Canny's paths: the smallest shapes (which its IPP code
    refuses), rows and columns, sizes split into uneven slices between threads, smooth and
    noisy content with many ties (plateaus, where the >= of the suppression decides)."""
    rng = np.random.default_rng(20261205)
    noise = rng.integers(0, 256, (97, 131), dtype=np.uint8)
    smooth = cv2.GaussianBlur(rng.integers(0, 256, (241, 323), dtype=np.uint8), (0, 0), 3)
    steps = (np.add.outer(np.arange(75) // 5, np.arange(190) // 7) * 17 % 256).astype(np.uint8)
    images = [noise[:1, :1], noise[:1, :40], noise[:40, :1], noise[:2, :2], noise[:3, :5],
              noise[:4, :4], noise, smooth, steps, steps.T.copy()]  # fmt: skip
    large = cv2.resize(smooth, (517, 383), interpolation=cv2.INTER_LINEAR)
    large[::97] = rng.integers(0, 256, large[::97].shape, dtype=np.uint8)
    return images + [large]


# (low, high) pairs the check runs, as cv2.Canny takes them: equal, swapped, fractional
# (floored, or squared then floored under l2), zero, and past every magnitude.
CHECK_THRESHOLDS = ((0, 0), (20, 60), (60, 20), (37.5, 37.5), (10.7, 90.3), (300, 900),
                    (5000, 5000))  # fmt: skip


def check_cv2_canny() -> bool:
    """Whether cv2.Canny equals :func:`canny_numpy` on :func:`check_images`, both norms and
    :data:`CHECK_THRESHOLDS`, single-threaded (its IPP path) and on OpenCV's threads."""
    threads = cv2.getNumThreads()
    cases = [(image, canny_limits(low, high, l2), l2) for image in check_images()
             for l2 in (False, True) for low, high in CHECK_THRESHOLDS]  # fmt: skip
    expected = [canny_numpy(image, *limits, l2) for image, limits, l2 in cases]
    try:
        for count in sorted({1, 3, threads}):
            cv2.setNumThreads(count)
            for (image, limits, l2), edges in zip(cases, expected, strict=True):
                thresholds = cv2_thresholds(*limits, l2)
                actual = cv2.Canny(image, *thresholds, apertureSize=3, L2gradient=l2)
                if not np.array_equal(actual, edges):
                    return False
    finally:
        cv2.setNumThreads(threads)
    return True


_check_lock = threading.Lock()


@functools.cache
def cv2_canny_is_exact() -> bool:
    """The verdict of :func:`check_cv2_canny` for this OpenCV build and CPU: from the cache
    file where it holds one, else checked now and cached. The check sets OpenCV's thread
    count for a while: the CPU backend asks for the verdict when it is made, before a run's
    threads start."""
    with _check_lock:
        return cached_verdict(cache_dir() / CACHE_FILE, opencv_build_key(), check_cv2_canny)


def canny(gray: np.ndarray, options) -> np.ndarray:
    """Canny edges of a uint8 image under ``options`` (operator canny, thresholds numbers):
    uint8 0/255, the bytes of cv2.Canny."""
    low, high = options.canny_limits
    l2 = options.norm == "l2"
    if cv2_canny_is_exact():
        thresholds = cv2_thresholds(low, high, l2)
        return cv2.Canny(gray, *thresholds, apertureSize=3, L2gradient=l2)
    return canny_numpy(gray, low, high, l2)


def cv2_thresholds(low: int, high: int, l2: bool) -> tuple[float, float]:
    """Thresholds that make cv2.Canny compare with the limits ``low`` and ``high`` on every
    code path: the limits themselves under l1; under l2 the roots of ``low + 0.5`` and
    ``high + 0.5``, whose squares lie half-way between a limit and the next integer, so that
    neither double nor single precision (IPP takes float thresholds) rounds them past an
    integer for any magnitude 8-bit luma has (at most 2 * 1020^2): no rounding of a fractional
    threshold is left for a code path to do its own way."""
    if not l2:
        return float(low), float(high)
    return math.sqrt(low + 0.5), math.sqrt(high + 0.5)
