"""The edge contract (docs/contract.md) on the CPU reference backend."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import edgecli
from edgecli.edges import cpu, reference
from edgecli.edges.reference import detect_batch, detect_frame, luma
from edgecli.options.params import BORDERS, NORMS, Options

from .media import EDGE_OPTIONS, cv2_layouts, gray_frame, option_id, photo
from .oracle import plain_edges, plain_luma


def test_luma_formula_on_every_color():
    """Luma is (9798 R + 19235 G + 3735 B + 16384) >> 15 for all 2^24 colours."""
    every = np.arange(1 << 24, dtype=np.uint32)
    bgr = np.stack([every & 255, (every >> 8) & 255, every >> 16], axis=-1).astype(np.uint8)
    np.testing.assert_array_equal(luma(bgr), plain_luma(bgr).astype(np.uint8))


def test_luma_matches_opencv5_cvtcolor():
    """OpenCV 5's BGR2GRAY uses the same fixed-point rule, on every colour."""
    if int(cv2.__version__.split(".")[0]) < 5:
        pytest.skip(f"OpenCV {cv2.__version__}: only OpenCV 5 promises this rounding")
    every = np.arange(1 << 24, dtype=np.uint32)
    bgr = np.stack([every & 255, (every >> 8) & 255, every >> 16], axis=-1).astype(np.uint8)
    bgr = bgr.reshape(4096, 4096, 3)
    np.testing.assert_array_equal(luma(bgr), cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY))


def test_luma_of_gray_is_the_gray_value():
    """A gray pixel (v, v, v) has luma v: the three weights sum to 2^15."""
    v = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(luma(gray_frame(v)), v)


@pytest.mark.parametrize("options", EDGE_OPTIONS, ids=option_id)
def test_flat_field(options):
    """A flat field has no edges inside; only 'constant' sees a step at the frame edge."""
    v = 50
    edges = detect_frame(gray_frame(np.full((5, 7), v)), Options(**options))
    t, inner = options["threshold"], edges[1:-1, 1:-1]
    assert not inner.any()
    if options["border"] != "constant":
        assert not edges.any()
        return
    # Outside is 0: a side pixel sees Gx (or Gy) = 4v; a corner sees Gx = Gy = 3v.
    side = 4 * v if options["norm"] == "l1" else (4 * v) ** 2
    corner = 6 * v if options["norm"] == "l1" else 2 * (3 * v) ** 2
    limit = t if options["norm"] == "l1" else t * t
    assert (edges[0, 1:-1] == (255 if side > limit else 0)).all()
    assert (edges[1:-1, -1] == (255 if side > limit else 0)).all()
    assert edges[0, 0] == edges[-1, -1] == (255 if corner > limit else 0)


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("threshold", [0, 1019, 1020])
def test_vertical_step_edge(norm, border, threshold):
    """A 0 -> 255 step between columns 3 and 4 marks exactly those columns (|Gx| = 1020)."""
    values = np.zeros((6, 8), np.uint8)
    values[:, 4:] = 255
    edges = detect_frame(gray_frame(values), Options(norm=norm, border=border, threshold=threshold))
    inner = edges[1:-1, 1:-1]  # away from the frame edge, the border mode cannot matter
    expected = np.zeros_like(inner)
    if threshold < 1020:
        expected[:, 2:4] = 255  # columns 3 and 4 of the frame
    np.testing.assert_array_equal(inner, expected)


def test_horizontal_step_edge_is_the_transpose():
    """Sobel on a horizontal edge gives the transposed result of a vertical one."""
    values = np.zeros((9, 6), np.uint8)
    values[5:, :] = 200
    frame = gray_frame(values)
    for border in BORDERS:
        options = Options(border=border)
        transposed = detect_frame(np.ascontiguousarray(frame.transpose(1, 0, 2)), options)
        np.testing.assert_array_equal(detect_frame(frame, options), transposed.T)


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("norm", NORMS)
def test_single_pixel_has_no_edge(norm, border):
    """A 1x1 frame is symmetric about itself under every border: both gradients are 0."""
    edges = detect_frame(gray_frame([[255]]), Options(norm=norm, border=border, threshold=0))
    np.testing.assert_array_equal(edges, [[0]])


@pytest.mark.parametrize(
    "border, expected",
    [
        # right - left: 0, 10, 10, 0, 50, 60-60 = 0  (the last pixel repeats itself)
        ("replicate", [[0, 255, 255, 0, 255, 255]]),
        # right - left: 0-0, 10, 10, 0, 50, 10-10 = 0  (the ends mirror their neighbour)
        ("reflect101", [[0, 255, 255, 0, 255, 0]]),
    ],
)
def test_one_row_step(border, expected):
    """On a 1xN row the rows above and below repeat it, so Gx = 4 * (right - left), Gy = 0."""
    row = np.array([[0, 0, 10, 10, 10, 60]], np.uint8)
    edges = detect_frame(gray_frame(row), Options(border=border, threshold=39))
    np.testing.assert_array_equal(edges, expected)
    column = detect_frame(gray_frame(row.T), Options(border=border, threshold=39))
    np.testing.assert_array_equal(column, np.transpose(expected))


@pytest.mark.parametrize("threshold, expected", [(59, [[255, 0, 255]]), (60, [[0, 0, 0]])])
def test_one_row_constant_border(threshold, expected):
    """With a zero border the rows above and below a 1xN row are 0: Gx = 2*(right - left)
    (only the centre row weighs in) and Gy = 0 - 0."""
    row = np.array([[30, 30, 30]], np.uint8)  # Gx: 2*(30-0)=60, 0, 2*(0-30)=-60
    edges = detect_frame(gray_frame(row), Options(border="constant", threshold=threshold))
    np.testing.assert_array_equal(edges, expected)


@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (3, 1), (4, 1), (1, 4), (5, 1)])
def test_tiny_columns_match_the_plain_implementation(shape):
    """Frames of at most 4 pixels in a column (which OpenCV's binding can take for a scalar):
    both implementations equal the plain oracle at every threshold around the gradient."""
    frame = np.zeros((*shape, 3), np.uint8)
    frame.flat[0] = 5  # luma 1 at the first pixel: |G| = 4 beside it
    for threshold in (3, 4):
        for implementation in (reference, cpu):
            got = implementation.detect_frame(frame, Options(threshold=threshold))
            np.testing.assert_array_equal(got, plain_edges(frame, threshold, "l1", "replicate"))


def test_magnitude_is_not_clamped():
    """l1 magnitudes above 255 still compare against T (the course code clamped at 255)."""
    values = np.zeros((5, 5), np.uint8)
    values[:, 3:] = 255
    edges = detect_frame(gray_frame(values), Options(threshold=1000))
    assert edges[2, 2] == 255 and edges[2, 0] == 0


frame_shapes = st.tuples(st.integers(1, 14), st.integers(1, 14))


@settings(max_examples=150, deadline=None)
@given(
    frame=frame_shapes.flatmap(lambda hw: arrays(np.uint8, (*hw, 3))),
    threshold=st.integers(0, 2100),
    norm=st.sampled_from(NORMS),
    border=st.sampled_from(BORDERS),
)
@pytest.mark.parametrize("implementation", [reference, cpu], ids=["reference", "cpu"])
def test_reference_matches_plain_implementation(implementation, frame, threshold, norm, border):
    """Random frames, shapes and options: the reference and the CPU backend's fast path
    equal the plain oracle."""
    options = Options(threshold=threshold, norm=norm, border=border)
    got = implementation.detect_frame(frame, options)
    np.testing.assert_array_equal(got, plain_edges(frame, threshold, norm, border))


@pytest.mark.parametrize("implementation", [reference, cpu], ids=["reference", "cpu"])
@pytest.mark.parametrize("options", EDGE_OPTIONS, ids=option_id)
@pytest.mark.parametrize("shape", [(237, 321), (1, 97), (83, 1), (1, 1), (481, 641)])
def test_real_photographs_match_plain_implementation(implementation, shape, options):
    """Photographic content at odd sizes: the reference, the CPU backend's fast path and the
    oracle agree on every pixel."""
    frame = photo(*shape, seed=shape[0])
    np.testing.assert_array_equal(
        implementation.detect_frame(frame, Options(**options)), plain_edges(frame, **options)
    )


def test_batch_equals_frames(rng):
    """A batch gives each frame's own result."""
    frames = rng.integers(0, 256, (3, 17, 31, 3), dtype=np.uint8)
    frames[1] = photo(17, 31)
    batch = detect_batch(frames, Options())
    for frame, edges in zip(frames, batch, strict=True):
        np.testing.assert_array_equal(edges, detect_frame(frame, Options()))


def test_detect_edges_api_shapes(rng):
    """detect_edges returns (H, W) for a frame and (N, H, W) for a batch, as 0/255 uint8."""
    frame = photo(40, 50)
    single = edgecli.detect_edges(frame, backend="cpu", threshold=60)
    batch = edgecli.detect_edges(np.stack([frame, frame]), backend="cpu", threshold=60)
    assert single.shape == (40, 50) and single.dtype == np.uint8
    assert set(np.unique(single)) <= {0, 255} and single.any()
    np.testing.assert_array_equal(batch[1], single)
    as_list = edgecli.detect_edges([frame, frame], backend="cpu", threshold=60)
    assert as_list.shape == (2, 40, 50)
    np.testing.assert_array_equal(single, plain_edges(frame, 60, "l1", "replicate"))


@pytest.mark.parametrize("layout", ["gray", "bgra", "bgra batch"])
@pytest.mark.parametrize("options", EDGE_OPTIONS, ids=option_id)
def test_detect_edges_takes_gray_and_bgra_as_cv2_converts_them(layout, options):
    """A gray (H, W) or BGRA (H, W, 4) frame, or a BGRA batch, gives the edges of its
    cv2.cvtColor conversion to BGR (gray replicated, alpha dropped), in the same layout."""
    given, bgr = cv2_layouts()[layout]
    edges = edgecli.detect_edges(given, backend="cpu", **options)
    np.testing.assert_array_equal(edges, edgecli.detect_edges(bgr, backend="cpu", **options))
    assert edges.shape == bgr.shape[:-1]


def test_a_gray_frame_s_luma_is_its_gray():
    """The contract's luma of a gray replicated into B, G and R is that gray, for all 256."""
    gray = np.arange(256, dtype=np.uint8).reshape(16, 16)
    np.testing.assert_array_equal(luma(cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)), gray)


TAKEN = (
    "expected 8-bit frames shaped (H, W) gray, (H, W, 3) BGR or (H, W, 4) BGRA, or a batch of "
    "BGR or BGRA ones (N, H, W, 3|4); got "
)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((4, 4, 2), np.uint8), TAKEN + "dtype uint8 and shape (4, 4, 2)"),
        (np.zeros((2, 4, 5), np.uint8), TAKEN + "dtype uint8 and shape (2, 4, 5)"),  # gray batch
        (np.zeros((3, 4, 4, 1), np.uint8), TAKEN + "dtype uint8 and shape (3, 4, 4, 1)"),
        (np.zeros((1, 2, 4, 4, 3), np.uint8), TAKEN + "dtype uint8 and shape (1, 2, 4, 4, 3)"),
        (np.zeros(4, np.uint8), TAKEN + "dtype uint8 and shape (4,)"),
        (np.zeros((4, 4, 3), np.float32), TAKEN + "dtype float32 and shape (4, 4, 3)"),
        (np.zeros((4, 4), np.uint16), TAKEN + "dtype uint16 and shape (4, 4)"),
        ([], TAKEN + "dtype float64 and shape (0,)"),
        (np.zeros((0, 4, 3), np.uint8), "frames must be at least 1x1, got shape (0, 4, 3)"),
        (np.zeros((4, 0), np.uint8), "frames must be at least 1x1, got shape (4, 0)"),
        ([np.zeros((4, 4, 3), np.uint8), np.zeros((5, 4, 3), np.uint8)],
         "frames of a batch must all have one shape"),
    ],
)  # fmt: skip
def test_detect_edges_refuses_other_arrays_naming_the_shapes_taken(bad, message):
    """Any other array is refused with edgecli's FrameArrayError (a ValueError too), saying
    the shapes it takes and the dtype and shape it got."""
    with pytest.raises(edgecli.FrameArrayError) as caught:
        edgecli.detect_edges(bad, backend="cpu")
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)
