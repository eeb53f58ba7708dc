"""canny.cu's real kernels, built for the CPU (tests/cuda_host.py) and launched through
edgecli.edges.cuda_canny.launch_canny as the CUDA backend launches them, against
``cv2.Canny(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), low, high, L2gradient=...)``.

Every case runs under three orders of each block's threads (forward, reverse, shuffled): the
union-find joins components in a different order under each, and the bytes must not change.
Each launch writes into a poisoned output, and the labels' work space is poisoned too, twice
over with different values, so a pixel left unwritten, or a label read before it was written,
fails."""

from __future__ import annotations

import numpy as np
import pytest

from edgecli.edges.cuda_canny import CannyKernels, launch_canny
from edgecli.edges.variants import CANNY_KERNELS
from edgecli.options.params import NORMS
from tests import cuda_host

from .canny_cases import ADVERSARIAL, ADVERSARIAL_THRESHOLDS, adversarial, cv2_canny
from .canny_images import ADVERSARIAL_LIMITS, as_bgr, faint_noise, lattice, noise, spiral
from .canny_reference import limits as cv2_limits
from .media import photo

ORDERS = ("forward", "reverse", 20261205)
POISONS = ((0xA5, 0), (0x5A, 0xFFFFFFFF))  # (output, labels): no pixel equals both outputs
# Pairs of cv2 thresholds: 0 to 5000, equal, swapped, around the l1 magnitude's 2040 and the
# l2 clamp at 32767.
THRESHOLDS = [
    (0, 0), (0, 1), (1, 0), (20, 60), (60, 20), (50, 150), (100, 100), (255, 256),
    (0, 2040), (2040, 2041), (1000, 5000), (5000, 1000), (5000, 5000),
]  # fmt: skip
# 1 x 1 up to several 32 x 32 tiles, sizes on and off tile multiples.
SHAPES = [
    (1, 1), (1, 2), (2, 1), (2, 2), (3, 3), (1, 77), (77, 1), (31, 33), (33, 31), (32, 32),
    (33, 65), (64, 96), (65, 97),
]  # fmt: skip


@pytest.fixture(scope="session")
def host_canny(tmp_path_factory) -> dict[str, CannyKernels]:
    """canny.cu built for the host, each norm, by norm (kept between sessions beside pytest's
    temporary folders; a skip saying why where there is no C++ compiler)."""
    kernels = {}
    for norm in NORMS:
        driver = cuda_host.SOURCES / f"canny_{norm}.cpp"
        functions = cuda_host.for_tests(tmp_path_factory, "canny", CANNY_KERNELS, driver)
        kernels[norm] = CannyKernels.from_functions(functions, norm)
    return kernels


def host_canny_of(kernels: CannyKernels, frames: np.ndarray, limits, order) -> np.ndarray:
    """launch_canny's edges of ``frames`` (N, H, W, 3) with the threads in ``order``, the same
    from each poisoning of the output and the labels."""
    for kernel in (kernels.local, kernels.merge, kernels.flag, kernels.output):
        kernel.order = order
    results = []
    for edge_poison, label_poison in POISONS:
        edges = np.full(frames.shape[:3], edge_poison, np.uint8)
        labels = np.full(frames.shape[:3], label_poison, np.uint32)
        launch_canny(kernels, frames, edges, labels, limits, None)
        results.append(edges)
    assert np.array_equal(results[0], results[1]), "pixels left unwritten or labels misread"
    return results[0]


def assert_as_cv2(kernels: CannyKernels, frames: np.ndarray, low, high) -> np.ndarray:
    """The kernels' edges of ``frames`` under every order equal cv2.Canny's; returns them."""
    want = cv2_canny(frames, low, high, kernels.norm)
    limits = cv2_limits(low, high, kernels.norm == "l2")
    for order in ORDERS:
        got = host_canny_of(kernels, frames, limits, order)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            first = tuple(int(i) for i in bad[0])
            raise AssertionError(
                f"{kernels.norm} thresholds {low},{high} order {order}: {len(bad)} of "
                f"{want.size} pixels differ; first at {first}: got {got[first]}, "
                f"want {want[first]}"
            )
    return want


# ---- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("seed", range(3))
def test_photos_as_cv2(host_canny, norm, seed):
    """A whole sample frame gives cv2.Canny's edges, each norm, at the usual thresholds."""
    frame = photo(237, 321, seed=seed)[None]
    for low, high in [(50, 150), (100, 200), (20, 60)]:
        assert assert_as_cv2(host_canny[norm], frame, low, high).any()


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{h}x{w}" for h, w in SHAPES])
def test_odd_shapes_as_cv2(host_canny, norm, shape):
    """Frames of one pixel, one row, one column, and sizes on and off the 32 x 32 tiles give
    cv2.Canny's edges, the frame's border rows and columns included."""
    gray = [noise(*shape, seed=5), faint_noise(*shape, seed=6)]
    frames = np.stack([photo(*shape, seed=4), *(as_bgr(g) for g in gray)])
    for low, high in [(20, 60), (0, 0)]:
        assert_as_cv2(host_canny[norm], frames, low, high)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("thresholds", THRESHOLDS, ids=str)
def test_thresholds_as_cv2(host_canny, norm, thresholds):
    """Every pair of thresholds from 0 to 5000, swapped pairs included, gives cv2.Canny's
    edges."""
    frames = np.stack([photo(64, 96, seed=1), as_bgr(noise(64, 96, seed=6))])
    assert_as_cv2(host_canny[norm], frames, *thresholds)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("image", ADVERSARIAL)
def test_adversarial_images_as_cv2(host_canny, norm, image):
    """A spiral and a lattice of weak edges fed by one strong block, checkerboards and noise
    give cv2.Canny's edges."""
    frame = adversarial(image)
    for low, high in ADVERSARIAL_THRESHOLDS:
        assert_as_cv2(host_canny[norm], frame, low, high)


@pytest.mark.parametrize(
    ("norm", "frame", "thresholds"),
    [
        ("l1", spiral(160, 160), ADVERSARIAL_LIMITS),
        ("l2", spiral(160, 160), ADVERSARIAL_LIMITS),
        ("l1", lattice(100, 130), ADVERSARIAL_LIMITS),
        ("l2", lattice(100, 130), ADVERSARIAL_LIMITS),
        ("l1", lattice(512, 544), ADVERSARIAL_LIMITS),  # 16 x 17 tiles, one component
    ],
    ids=["spiral-l1", "spiral-l2", "lattice-l1", "lattice-l2", "lattice-512x544"],
)
def test_hysteresis_reaches_every_corner(host_canny, norm, frame, thresholds):
    """Weak edges that only a chain through every tile connects to the strong pixels in the
    middle are edges in every corner of the frame; with a high threshold no pixel passes,
    none are."""
    frames = as_bgr(frame)[None]
    edges = assert_as_cv2(host_canny[norm], frames, *thresholds)[0]
    corners = [edges[:8, :8], edges[:8, -8:], edges[-8:, :8], edges[-8:, -8:]]
    assert all(corner.any() for corner in corners)
    assert not assert_as_cv2(host_canny[norm], frames, thresholds[0], 5000).any()


@pytest.mark.parametrize("norm", NORMS)
def test_a_batch_as_cv2(host_canny, norm):
    """Frames of different content in one launch each get their own cv2.Canny edges."""
    frames = np.stack(
        [photo(45, 70, seed=i) for i in range(3)]
        + [as_bgr(g) for g in (noise(45, 70, seed=7), np.full((45, 70), 77, np.uint8))]
        + [as_bgr(spiral(45, 70))]
    )
    assert_as_cv2(host_canny[norm], frames, 40, 120)


@pytest.mark.parametrize("norm", NORMS)
def test_limits_past_any_magnitude_compare_as_given(host_canny, norm):
    """Limits below 0 or past int32 compare as the values given do: a low of -7 marks what
    cv2's 0 does, a high of 2^40 marks nothing (no value wraps round in the kernels' int32)."""
    frame = photo(64, 96, seed=2)[None]
    kernels = host_canny[norm]
    got = host_canny_of(kernels, frame, (-7, cv2_limits(0, 100, norm == "l2")[1]), "forward")
    assert np.array_equal(got, cv2_canny(frame, 0, 100, norm)) and got.any()
    assert not host_canny_of(kernels, frame, (100, 2**40), "forward").any()


def test_bad_buffers_are_refused(host_canny):
    """A work space or output of the wrong type or shape, frames that are not contiguous, and
    limits out of order are refused, naming them, before anything runs."""
    kernels = host_canny["l1"]
    frames = photo(8, 10)[None]
    edges = np.zeros((1, 8, 10), np.uint8)
    labels = np.zeros((1, 8, 10), np.uint32)
    cases = [
        ((frames, edges, labels.view(np.int32), (1, 2)), "labels_dev must be uint32"),
        ((frames, edges[:, :7], labels, (1, 2)), r"edges_dev must be uint8 shaped \(1, 8, 10\)"),
        ((frames[:, :, ::-1], edges, labels, (1, 2)), "frames_dev must be C-contiguous"),
        ((frames[..., 0], edges, labels, (1, 2)), "frames_dev must be uint8 shaped"),
        ((frames, edges, labels, (3, 2)), r"low <= high, got \(3, 2\)"),
    ]
    for (f, e, lab, limits), message in cases:
        with pytest.raises(ValueError, match=message):
            launch_canny(kernels, f, e, lab, limits, None)
