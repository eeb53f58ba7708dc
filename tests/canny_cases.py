"""The Canny cases the kernel tests share, on the host (test_canny_kernels.py) and on the GPU
(test_gpu_canny.py): cv2.Canny of a batch of BGR frames, as the contract has it, and the
adversarial frames of :mod:`tests.canny_images` at the thresholds that make them work."""

from __future__ import annotations

import cv2
import numpy as np

from tests import canny_images

ADVERSARIAL = {
    "spiral": lambda: canny_images.spiral(160, 160),
    "lattice": lambda: canny_images.lattice(100, 130),
    "checkerboard-1": lambda: canny_images.checkerboard(96, 128, 1),  # ties: no peak at all
    "checkerboard-3": lambda: canny_images.checkerboard(96, 128, 3),
    "noise": lambda: canny_images.noise(96, 128, seed=3),
    "faint-noise": lambda: canny_images.faint_noise(96, 128, seed=4),
}
# Their limits, a wide band between low and high, and every candidate strong.
ADVERSARIAL_THRESHOLDS = [canny_images.ADVERSARIAL_LIMITS, (10, 1000), (0, 0)]


def adversarial(name: str) -> np.ndarray:
    """The adversarial frame ``name`` as a batch of one BGR frame."""
    return canny_images.as_bgr(ADVERSARIAL[name]())[None]


def cv2_canny(frames: np.ndarray, low: float, high: float, norm: str) -> np.ndarray:
    """cv2.Canny of each BGR frame's cv2 gray."""
    return np.stack(
        [
            cv2.Canny(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), low, high, L2gradient=norm == "l2")
            for f in frames
        ]
    )
