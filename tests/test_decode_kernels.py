"""decode.cu's real kernels, built for the CPU (tests/cuda_host.py) and launched through
edgecli.decode.gpu.convert as the GPU decoders launch them, against the CPU references: swscale's
closed form (edgecli.decode.yuv) for NVDEC's frames, libjpeg-turbo's (edgecli.decode.jpeg_planes)
for nvJPEG's. Every output buffer is poisoned first, twice over, so an unwritten pixel fails."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from edgecli.decode import yuv
from edgecli.decode.gpu import convert
from edgecli.decode.jpeg_planes import (
    CHROMA_FACTORS,
    apply_exif_orientation,
    chroma_shape,
    planes_to_bgr,
)

from . import cuda_host

MATRICES = [(m, full) for m in ("bt601", "bt709", "bt2020") for full in (False, True)]
# (height, width): H.264's frames have even heights; odd widths share the last chroma column;
# several blocks across (32 wide) and down (8 high).
SIZES = [(2, 1), (2, 2), (2, 3), (4, 33), (10, 1917), (34, 70)]
ROTATE = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
POISONS = (0xA5, 0x5A)  # no pixel equals both, so an unwritten one fails one of the two runs


@pytest.fixture(scope="session")
def host_kernels(tmp_path_factory):
    """decode.cu's kernels built for the host, kept between sessions beside pytest's temporary
    folders (a skip saying why where there is no C++ compiler, as test_deflate.py skips)."""
    if cuda_host.compiler() is None:
        pytest.skip("no C++ compiler ($CXX or c++) to build decode.cu for the host")
    folder = tmp_path_factory.getbasetemp().parent / "cuda-host"
    return cuda_host.load("decode", convert.KERNELS, folder)


@pytest.fixture
def on_the_host(host_kernels, monkeypatch):
    """convert's launches run the host build (device 0 stands for the CPU)."""
    monkeypatch.setattr(convert, "module", lambda device: host_kernels)


on_the_cpu = pytest.mark.usefixtures("on_the_host")


def coefficients(matrix: str, full_range: bool) -> tuple[int, ...]:
    """(y_coeff, y_offset, v2r, v2g, u2g, u2b) by yuv.closed_form_table's arithmetic."""
    crv, cbu, cgu, cgv = yuv._SWS_COEFFS[matrix]
    cgu, cgv = -cgu, -cgv
    if full_range:
        cy, oy = 1 << 16, 0
        crv, cbu, cgu, cgv = ((c * 224) // 255 for c in (crv, cbu, cgu, cgv))
    else:
        cy, oy = (255 << 16) // 219, 16 << 16

    def round16(f: int) -> int:
        return (f + (1 << 15)) >> 16

    y_coeff, u2b, v2r, u2g, v2g = (round16(c << 13) for c in (cy, cbu, crv, cgu, cgv))
    return y_coeff, round16(oy << 3), v2r, v2g, u2g, u2b


@pytest.fixture(scope="module", params=MATRICES, ids=str)
def conversion(request):
    """A matrix and range: its coefficients and closed_form_table."""
    matrix, full_range = request.param
    return coefficients(matrix, full_range), yuv.closed_form_table(matrix, full_range=full_range)


def planes(rng, height: int, width: int, depth: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A frame's NVDEC planes, random, each row 7 samples longer than the frame (random too, so a
    read past a row's end shows): Y (H, W + 7) and interleaved U, V (H/2, 2 * ceil(W/2) + 7);
    uint8 for NV12, uint16 for P016 (``depth``-bit levels in the high bits)."""
    chroma = 2 * (-(-width // 2))
    dtype = np.uint8 if depth == 8 else np.uint16
    y = rng.integers(0, 1 << depth, (height, width + 7), dtype)
    uv = rng.integers(0, 1 << depth, (height // 2, chroma + 7), dtype)
    shift = 0 if depth == 8 else 16 - depth
    return y << shift, uv << shift


def frame_of(y, uv, width: int, coeffs, rotation: int = 0, depth: int = 8) -> np.ndarray:
    """launch_nv12_to_bgr's frame of these planes (``width`` of Y's columns), the same from each
    poisoned buffer and nothing written past its end."""
    height = y.shape[0]
    shape = (width, height, 3) if rotation in (90, 270) else (height, width, 3)
    size = shape[0] * shape[1] * 3
    frames = []
    for poison in POISONS:
        buffer = np.full(size + 64, poison, np.uint8)
        out = buffer[:size].reshape(shape)
        convert.launch_nv12_to_bgr(
            0, y.ctypes.data, y.strides[0], uv.ctypes.data, uv.strides[0], out, None,
            coefficients=coeffs, rotation=rotation, depth=depth,
        )  # fmt: skip
        assert (buffer[size:] == poison).all(), "written past the frame's end"
        frames.append(out)
    assert np.array_equal(frames[0], frames[1]), "pixels left unwritten"
    return frames[0]


def reference(y, uv, width: int, table) -> np.ndarray:
    """yuv.nv12_to_bgr's frame of the planes' first ``width`` columns."""
    return yuv.nv12_to_bgr(y[:, :width], uv[:, : 2 * (-(-width // 2))], table)


@on_the_cpu
@pytest.mark.parametrize("size", SIZES, ids=[f"{h}x{w}" for h, w in SIZES])
def test_nv12_as_closed_form(conversion, size, rng):
    """nv12_to_bgr gives swscale's closed form of each matrix and range, pixel for pixel, over
    pitches longer than the frame, odd widths and one-pixel-wide frames."""
    height, width = size
    coeffs, table = conversion
    y, uv = planes(rng, height, width)
    assert np.array_equal(frame_of(y, uv, width, coeffs), reference(y, uv, width, table))


@on_the_cpu
@pytest.mark.parametrize("rotation", [90, 180, 270])
@pytest.mark.parametrize("size", [(2, 1), (2, 3), (10, 1917), (34, 70)], ids=str)
def test_nv12_turned(rotation, size, rng):
    """With a rotation the frame comes out already turned, as cv2.rotate turns the upright one."""
    height, width = size
    coeffs = coefficients("bt709", False)
    y, uv = planes(rng, height, width)
    upright = reference(y, uv, width, yuv.closed_form_table("bt709"))
    turned = frame_of(y, uv, width, coeffs, rotation)
    assert np.array_equal(turned, cv2.rotate(upright, ROTATE[rotation]))
    assert np.array_equal(turned, np.rot90(upright, -rotation // 90))


def high_precision(y, uv, width: int, coeffs) -> np.ndarray:
    """The P016 conversion's definition: the matrix on the levels scaled to 8 bits (exact in
    float64: dyadic fractions), rounded half up, clipped."""
    y_coeff, y_offset, v2r, v2g, u2g, u2b = coeffs
    cols = np.arange(width) // 2
    luma = (y[:, :width] / 256 - y_offset / 8) * y_coeff
    u = np.repeat(uv[:, 2 * cols] / 256 - 128, 2, axis=0)
    v = np.repeat(uv[:, 2 * cols + 1] / 256 - 128, 2, axis=0)
    bgr = [luma + u * u2b, luma + u * u2g + v * v2g, luma + v * v2r]
    return np.stack([np.clip(np.floor(c / 8192 + 0.5), 0, 255) for c in bgr], -1).astype(np.uint8)


@on_the_cpu
@pytest.mark.parametrize("depth", [10, 12])
@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
@pytest.mark.parametrize("matrix", MATRICES, ids=str)
def test_p016_as_defined(matrix, rotation, depth, rng):
    """p016_to_bgr converts 10- and 12-bit levels with the stream's matrix in full precision,
    rounded once, turned as asked."""
    coeffs = coefficients(*matrix)
    y, uv = planes(rng, 34, 69, depth)
    upright = high_precision(y, uv, 69, coeffs)
    turned = frame_of(y, uv, 69, coeffs, rotation, depth)
    assert np.array_equal(turned, np.rot90(upright, -rotation // 90))


@on_the_cpu
@pytest.mark.parametrize("matrix", MATRICES, ids=str)
def test_p016_near_nv12(matrix, rng):
    """On 8-bit levels the P016 conversion is swscale's matrix and range: never below swscale's
    (which floors three products), at most 3 above (those floors, then one rounding)."""
    coeffs = coefficients(*matrix)
    y, uv = planes(rng, 64, 64)
    wide = frame_of(y.astype(np.uint16) << 8, uv.astype(np.uint16) << 8, 64, coeffs, depth=10)
    difference = wide.astype(int) - frame_of(y, uv, 64, coeffs)
    assert difference.min() == 0 and difference.max() <= 3


def test_untagged_streams_get_bt601_limited():
    """The coefficients the NVDEC decoder passes for an untagged stream are BT.601 limited's."""
    assert convert.BT601_LIMITED == coefficients("bt601", False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"coefficients": (9539, 128, 13075, -6660, -3209), "rotation": 0}, "coefficients"),
        ({"coefficients": convert.BT601_LIMITED, "rotation": 45}, "rotation must be one of"),
        ({"coefficients": convert.BT601_LIMITED, "rotation": 0, "depth": 7}, "depth must be"),
    ],
)
def test_bad_conversions_refused(options, message):
    """A coefficient missing, a rotation that is not a quarter turn, or a depth NVDEC does not
    decode is refused, naming it, before anything runs."""
    out = np.zeros((2, 2, 3), np.uint8)
    with pytest.raises(ValueError, match=message):
        convert.launch_nv12_to_bgr(0, 0, 2, 0, 2, out, None, **options)


JPEG_SIZES = [(1, 1), (1, 17), (17, 1), (3, 4), (6, 5), (15, 15), (17, 31)]


@on_the_cpu
@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("size", JPEG_SIZES, ids=str)
@pytest.mark.parametrize("sampling", ["444", "422", "420", "440", "gray"])
def test_jpeg_planes_as_libjpeg(sampling, size, orientation, rng):
    """jpeg_planes_to_bgr gives libjpeg-turbo's upsampling and colour conversion, turned by the
    EXIF orientation as imdecode turns it, for each frame of a batch."""
    height, width = size
    factors = CHROMA_FACTORS.get(sampling)
    chroma = chroma_shape(sampling, width, height) if factors else (0, 0)
    frame_bytes = height * width + 2 * chroma[0] * chroma[1]
    batch = rng.integers(0, 256, (2, frame_bytes), np.uint8)
    expected = []
    for planes_bytes in batch:
        y = planes_bytes[: height * width].reshape(height, width)
        cb, cr = (None, None)
        if factors:
            cb, cr = planes_bytes[height * width :].reshape(2, *chroma)
        upright = planes_to_bgr(y, cb, cr, sampling, width, height)
        expected.append(apply_exif_orientation(upright, orientation))
    out_h, out_w = expected[0].shape[:2]
    frames = []
    for poison in POISONS:
        out = np.full((2, out_h, out_w, 3), poison, np.uint8)
        convert.launch_jpeg_to_bgr(
            0, batch, frame_bytes, out, height, width, factors, orientation, None
        )
        frames.append(out)
    assert np.array_equal(frames[0], frames[1]), "pixels left unwritten"
    assert np.array_equal(frames[0], np.stack(expected))
