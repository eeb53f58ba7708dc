"""``-t auto`` and ``-t P%``: one threshold for the whole run, chosen from a sample of its
frames, so a sequence does not flicker.

The sample is ``AUTO_SAMPLE`` frames spread evenly over the run's frames in run order (the
``k``-th of ``n`` is frame ``(2k + 1) * n // (2 * AUTO_SAMPLE)``), decoded by the CPU decoders
whatever ``--decode`` says, so both backends, every decoder and every shard of a run choose
the same number. Each pixel's gradient magnitude ``m`` is an integer in 0..2040: ``|Gx| + |Gy|``
for ``--norm l1``, ``ceil(sqrt(Gx^2 + Gy^2))`` for ``l2`` (a pixel is an edge at threshold T
exactly when ``m > T`` under either norm), counted into one histogram of every sampled pixel.

- ``auto``: Otsu's threshold of that histogram: the T that maximises the between-class
  variance of ``{m <= T}`` and ``{m > T}``, ``(S * n0 - N * s0)^2 / (n0 * (N - n0))`` (``N``
  pixels, ``S`` the sum of their magnitudes, ``n0`` and ``s0`` the same below T), compared
  as exact fractions; the smallest such T on a tie. A histogram with one value has no split:
  T is that value (no edges).
- ``P%``: the smallest T that marks at most P percent of the sampled pixels as edges.

Under ``--operator canny`` the magnitudes are Canny's (replicate border, the norm's), and
``auto`` picks ``(T // 2, T)``, T Otsu's threshold as above: HIGH is where Otsu splits the
gradients, LOW half of it (the ratio of 1:2 Canny's paper and OpenCV's tutorial use). ``P%``
has no Canny meaning (its share of edges depends on the suppression and the hysteresis).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from ..edges import reference
from ..edges.cpu import luma
from ..inputs.sampling import sample_frames
from ..options.params import MAX_L1_MAGNITUDE, parse_rule, threshold_text

AUTO_SAMPLE = 8  # frames the threshold is chosen from


def magnitudes(frame_bgr: np.ndarray, norm: str, border: str) -> np.ndarray:
    """Each pixel's gradient magnitude as an integer (see the module docstring)."""
    gx, gy = reference.sobel(luma(frame_bgr), border)
    gx, gy = gx.astype(np.int32), gy.astype(np.int32)
    if norm == "l1":
        return np.abs(gx) + np.abs(gy)
    squares = gx * gx + gy * gy  # <= 2 * 1020^2: exact in int32 and in float64
    root = np.floor(np.sqrt(squares.astype(np.float64))).astype(np.int32)
    root -= root * root > squares  # floor(sqrt), whatever the float rounding did
    root += (root + 1) * (root + 1) <= squares
    return root + (root * root < squares)  # ceil(sqrt)


def histogram(frames, norm: str, border: str) -> np.ndarray:
    """Pixels per magnitude 0..2040 over ``frames`` (BGR arrays), as int64."""
    counts = np.zeros(MAX_L1_MAGNITUDE + 1, dtype=np.int64)
    for frame in frames:
        counts += np.bincount(magnitudes(frame, norm, border).ravel(), minlength=counts.size)
    return counts


def otsu(counts: np.ndarray) -> int:
    """Otsu's threshold of a magnitude histogram (see the module docstring)."""
    values = np.arange(counts.size, dtype=np.int64)
    below = np.cumsum(counts).tolist()  # n0(T): pixels with m <= T
    below_sum = np.cumsum(counts * values).tolist()  # s0(T)
    total, total_sum = below[-1], below_sum[-1]
    best, best_score = None, Fraction(-1)
    for t, (n0, s0) in enumerate(zip(below, below_sum, strict=True)):
        if n0 == 0 or n0 == total:
            continue
        score = Fraction((total_sum * n0 - total * s0) ** 2, n0 * (total - n0))
        if score > best_score:
            best, best_score = t, score
    if best is None:  # one magnitude only (or no pixels): nothing above it is an edge
        nonzero = np.flatnonzero(counts)
        return int(nonzero[-1]) if nonzero.size else 0
    return best


def density(counts: np.ndarray, percent: Fraction) -> int:
    """The smallest T marking at most ``percent`` percent of the pixels as edges (m > T)."""
    total = int(counts.sum())
    above = (total - np.cumsum(counts)).tolist()  # pixels with m > T, for each T
    for t, edges in enumerate(above):
        if edges * 100 * percent.denominator <= percent.numerator * total:
            return t
    return MAX_L1_MAGNITUDE


def edge_share(counts: np.ndarray, threshold: int) -> float:
    """The share of the histogram's pixels that are edges at ``threshold``, 0..1."""
    total = int(counts.sum())
    t = min(threshold, MAX_L1_MAGNITUDE)
    return float(counts[t + 1 :].sum()) / total if total else 0.0


def choose(counts: np.ndarray, rule: tuple[str, Fraction | None]) -> int:
    method, percent = rule
    return otsu(counts) if method == "otsu" else density(counts, percent)


def resolve(options, sources: list, notify=None, frames: list | None = None):
    """``options`` with a ``-t auto`` or ``-t P%`` threshold replaced by the number it picks
    from the run's ``sources`` (unchanged for a number); ``notify`` is told which, and why.
    ``frames``: the sample, where the caller has decoded it already."""
    rule = parse_rule(options.threshold)
    if rule is None:
        return options
    if frames is None:
        frames = sample_frames(sources, AUTO_SAMPLE, options.max_pixels)
    counts = histogram([frame.pixels for frame in frames], options.norm, options.border)
    chosen = choose(counts, rule)
    sampled = f"from {len(frames)} frame(s) spread over the input"
    if options.operator == "canny":
        chosen = canny_pair(chosen)
        if notify is not None:
            share = 100 * edge_share(counts, chosen[1])
            notify(
                f"-t {options.threshold}: canny thresholds {threshold_text(chosen)} (Otsu's as "
                f"high, half of it as low, {sampled}; {share:.2f}% of their pixels are above "
                "high)"
            )
    elif notify is not None:
        how = "Otsu" if rule[0] == "otsu" else f"at most {options.threshold} edge pixels"
        share = 100 * edge_share(counts, chosen)
        notify(
            f"-t {options.threshold}: threshold {chosen} ({how}, {sampled}; {share:.2f}% of "
            "their pixels are edges)"
        )
    return replace(options, threshold=chosen, threshold_rule=str(options.threshold).lower())


def canny_pair(high: int) -> tuple[int, int]:
    """Canny's (low, high) for a high threshold chosen by a rule: low is half of it."""
    return high // 2, high
