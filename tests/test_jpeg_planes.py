"""edgecli.jpeg_planes against cv2.imdecode: a JPEG's decoded planes give imdecode's BGR exactly."""

from __future__ import annotations

import io
import os

import cv2
import numpy as np
import pytest
from PIL import Image

from edgecli.jpeg_planes import SUBSAMPLINGS, apply_exif_orientation, chroma_shape, planes_to_bgr
from tests import turbojpeg
from tests.media import photo

# (height, width): single pixels and lines, chroma planes 1 and 2 samples wide (box
# upsampling in libjpeg-turbo) and 3 wide (fancy), partial and whole MCUs, odd sizes, 1080p.
SIZES = [(1, 1), (1, 17), (17, 1), (3, 4), (6, 5), (15, 15), (16, 16), (17, 31), (142, 250)]
CV2_SAMPLINGS = ["444", "422", "420", "440", "411"]


@pytest.fixture(scope="module")
def planes_of():
    """turbojpeg.decode_planes, or a skip saying how to get libturbojpeg (a failure under CI,
    so a CI run cannot pass without these tests)."""
    if turbojpeg.load() is None:
        reason = "libturbojpeg not found (Debian: apt-get install libturbojpeg0; make test does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return turbojpeg.decode_planes


def frame(kind: str, height: int, width: int) -> np.ndarray:
    if kind == "photo":
        return photo(height, width, seed=height + width)
    rng = np.random.default_rng(height * 7919 + width)
    return rng.integers(0, 256, (height, width, 3), np.uint8)


def cv2_jpeg(image: np.ndarray, quality: int, sampling: str = "444", *extra: int) -> bytes:
    flag = getattr(cv2, f"IMWRITE_JPEG_SAMPLING_FACTOR_{sampling}")
    params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, flag, *extra]
    ok, buf = cv2.imencode(".jpg", image, params)
    assert ok
    return buf.tobytes()


def pil_jpeg(image: np.ndarray, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image[..., ::-1])).save(out, "JPEG", **options)
    return out.getvalue()


def imdecode(data: bytes, flags: int = cv2.IMREAD_COLOR) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), flags)


def assert_exact(planes_of, data: bytes, subsampling: str) -> None:
    planes, found, width, height = planes_of(data)
    assert found == subsampling
    if found == "gray":
        planes += [None, None]
    got, want = planes_to_bgr(*planes, found, width, height), imdecode(data)
    assert got.shape == want.shape and np.array_equal(got, want), differences(got, want)


def differences(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    diff = np.abs(got.astype(int) - want).max(axis=-1)
    return f"max difference {diff.max()}, {np.count_nonzero(diff)} of {diff.size} pixels differ"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[1]}x{s[0]}")
@pytest.mark.parametrize("sampling", CV2_SAMPLINGS)
def test_cv2_jpegs_exact(planes_of, sampling, size):
    """cv2's JPEGs of each sampling, photo and noise, q50/90/100: planes give imdecode's BGR."""
    for kind in ("photo", "noise"):
        image = frame(kind, *size)
        for quality in (50, 90, 100):
            assert_exact(planes_of, cv2_jpeg(image, quality, sampling), sampling)


@pytest.mark.parametrize("sampling", CV2_SAMPLINGS)
def test_1080p_exact(planes_of, sampling):
    """1918 x 1080 JPEGs of each sampling (photo q90, noise q100): planes give imdecode's BGR."""
    for kind, quality in (("photo", 90), ("noise", 100)):
        assert_exact(planes_of, cv2_jpeg(frame(kind, 1080, 1918), quality, sampling), sampling)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[1]}x{s[0]}")
def test_gray_jpegs_exact(planes_of, size):
    """Gray JPEGs: imdecode's BGR is Y in all three channels."""
    for quality in (50, 100):
        data = cv2_jpeg(frame("photo", *size)[..., 1], quality)
        assert_exact(planes_of, data, "gray")


@pytest.mark.parametrize("size", [(15, 15), (17, 31), (142, 250)], ids=lambda s: f"{s[1]}x{s[0]}")
def test_pil_jpegs_exact(planes_of, size):
    """Pillow-written JPEGs (its own encoder settings and quantization tables) are exact too."""
    image = frame("photo", *size)
    flat = [2] * 64
    for subsampling, name in ((0, "444"), (1, "422"), (2, "420")):
        assert_exact(planes_of, pil_jpeg(image, quality=75, subsampling=subsampling), name)
        assert_exact(planes_of, pil_jpeg(image, subsampling=subsampling, qtables=[flat]), name)


@pytest.mark.parametrize("sampling", ["422", "420", "440"])
def test_encoder_options_exact(planes_of, sampling):
    """Progressive, restart-interval and Huffman-optimized JPEGs decode to the same exact BGR."""
    image = frame("photo", 45, 71)
    for extra in (
        (cv2.IMWRITE_JPEG_PROGRESSIVE, 1),
        (cv2.IMWRITE_JPEG_RST_INTERVAL, 2),
        (cv2.IMWRITE_JPEG_OPTIMIZE, 1),
    ):
        assert_exact(planes_of, cv2_jpeg(image, 85, sampling, *extra), sampling)


def test_rgb_coded_jpeg_is_its_planes(planes_of):
    """A JPEG coded in RGB (no YCbCr transform) is its three planes as they are, B G R."""
    data = pil_jpeg(frame("photo", 17, 31), keep_rgb=True)
    planes, _, _, _ = planes_of(data)
    assert np.array_equal(np.dstack(planes[::-1]), imdecode(data))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_as_imdecode(planes_of, orientation):
    """imdecode turns a JPEG by its EXIF orientation; apply_exif_orientation turns it the same."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = pil_jpeg(frame("photo", 17, 30), subsampling=2, exif=exif.tobytes())
    planes, subsampling, width, height = planes_of(data)
    upright = planes_to_bgr(*planes, subsampling, width, height)
    assert np.array_equal(upright, imdecode(data, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION))
    assert np.array_equal(apply_exif_orientation(upright, orientation), imdecode(data))


def test_bad_planes_rejected():
    """Planes of the wrong shape or type, or an unknown subsampling, raise ValueError naming it."""
    y = np.zeros((15, 15), np.uint8)
    c = np.zeros(chroma_shape("420", 15, 15), np.uint8)
    assert c.shape == (8, 8) and "gray" in SUBSAMPLINGS
    with pytest.raises(ValueError, match=r"cb must be a uint8 array of shape \(8, 8\)"):
        planes_to_bgr(y, c[:7], c, "420", 15, 15)
    with pytest.raises(ValueError, match="cr must be a uint8 array"):
        planes_to_bgr(y, c, c.astype(np.int16), "420", 15, 15)
    with pytest.raises(ValueError, match=r"y must be a uint8 array of shape \(15, 16\)"):
        planes_to_bgr(y, c, c, "420", 16, 15)
    with pytest.raises(ValueError, match="subsampling must be one of"):
        planes_to_bgr(y, c, c, "410", 15, 15)
