"""decode.cu's real kernels, built for the CPU (tests/cuda_host.py) and launched through
edgecli.decode.gpu.convert as the GPU decoders launch them, against the CPU references: swscale's
closed form (edgecli.decode.yuv) for NVDEC's frames, libjpeg-turbo's (edgecli.decode.jpeg_planes)
for nvJPEG's. Every output buffer is poisoned first, twice over, so an unwritten pixel fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli.decode import nvdec, yuv
from edgecli.decode.gpu import convert
from edgecli.decode.jpeg_planes import (
    CHROMA_FACTORS,
    apply_exif_orientation,
    chroma_shape,
    planes_to_bgr,
)
from tests import cuda_host

from .helpers import DATA

# The clips are made and decoded to planes by imageio-ffmpeg's ffmpeg (a dev extra, so make
# test has it; the GPU host has not, and runs only the gpu-marked tests).
pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from .clips import FFMPEG, decode_planes, probe  # noqa: E402

MATRICES = [(m, full) for m in ("bt601", "bt709", "bt2020") for full in (False, True)]
# (height, width): H.264's frames have even heights; odd widths share the last chroma column;
# several blocks across (32 wide) and down (8 high).
SIZES = [(2, 1), (2, 2), (2, 3), (4, 33), (10, 1917), (34, 70)]
ROTATE = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
BT601 = yuv.Conversion().coefficients()  # an untagged stream's
POISONS = (0xA5, 0x5A)  # no pixel equals both, so an unwritten one fails one of the two runs


@pytest.fixture(scope="session")
def host_kernels(tmp_path_factory):
    """decode.cu's kernels built for the host, kept between sessions beside pytest's temporary
    folders (a skip saying why where there is no C++ compiler, as test_deflate.py skips)."""
    return cuda_host.for_tests(tmp_path_factory, "decode", convert.KERNELS)


@pytest.fixture
def on_the_host(host_kernels, monkeypatch):
    """convert's launches run the host build (device 0 stands for the CPU)."""
    monkeypatch.setattr(convert, "module", lambda device: host_kernels)


on_the_cpu = pytest.mark.usefixtures("on_the_host")


def coefficients(matrix: str, full_range: bool) -> tuple[int, ...]:
    return yuv.Conversion(matrix, full_range).coefficients()


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


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"coefficients": (9539, 128, 13075, -6660, -3209), "rotation": 0}, "coefficients"),
        ({"coefficients": BT601, "rotation": 45}, "rotation must be one of"),
        ({"coefficients": BT601, "rotation": 0, "depth": 7}, "depth must be"),
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


# The clips whose every frame NVDEC would take under --decode gpu (8-bit 4:2:0 in MP4/MOV:
# H.264 untagged, BT.709, full range and turned, HEVC, VP9, AV1), from scripts/make_test_media.py.
PLANNED_CLIPS = [
    "nvdec_1918x1080.mp4", "nvdec_250x142.mp4", "nvdec_66x18.mp4", "nvdec_bt709.mp4",
    "nvdec_full.mp4", "nvdec_bt709_full.mov", "nvdec_1366x768.mp4", "nvdec_rotated.mp4",
    "nvdec_hevc.mp4", "nvdec_vp9.mp4", "nvdec_av1.mp4",
]  # fmt: skip


def cv2_frames(path: Path):
    """cv2.VideoCapture's frames of ``path``, one by one."""
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        while (frame := capture.read()[1]) is not None:
            yield frame
    finally:
        capture.release()


@on_the_cpu
@pytest.mark.parametrize("clip", PLANNED_CLIPS)
def test_each_clips_plan_on_the_kernel_gives_cv2s_frames(clip):
    """FFmpeg's planes of each clip (NVDEC's, by the standards), converted by the kernel as
    edgecli.decode.nvdec plans it from the file alone (conversion and turn), are cv2's frames,
    every one: the GPU path but for NVDEC itself."""
    path = DATA / clip
    plan = nvdec.plan_video(path, lambda *stream: None, exact_only=False)
    assert isinstance(plan, nvdec.NvdecPlan) and plan.depth == 8, plan
    frames = cv2_frames(path)
    planes = decode_planes(path)
    for index, (y, u, v) in enumerate(planes):
        uv = np.empty((u.shape[0], 2 * u.shape[1]), np.uint8)
        uv[:, 0::2], uv[:, 1::2] = u, v
        coeffs = plan.conversion.coefficients()
        got = frame_of(y, uv, y.shape[1], coeffs, plan.rotation)
        assert np.array_equal(got, next(frames)), f"{clip} frame {index}"
    assert next(frames, None) is None and planes


def ten_bit_planes(path: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """FFmpeg's 10-bit planes of ``path`` as NVDEC's P016 gives them: Y, interleaved U and V,
    each level in the high bits of 16."""
    width, height = (probe(path)[k] for k in ("width", "height"))
    command = [FFMPEG, "-v", "error", "-noautorotate", "-i", str(path)]
    command += ["-fps_mode", "passthrough", "-pix_fmt", "yuv420p10le", "-f", "rawvideo", "-"]
    raw = np.frombuffer(subprocess.run(command, capture_output=True, check=True).stdout, "<u2")
    cw, ch = (width + 1) // 2, (height + 1) // 2
    size = width * height + 2 * cw * ch
    out = []
    for frame in raw.reshape(-1, size) << 6:
        y = frame[: width * height].reshape(height, width)
        u = frame[width * height : width * height + cw * ch].reshape(ch, cw)
        v = frame[width * height + cw * ch :].reshape(ch, cw)
        uv = np.empty((ch, 2 * cw), np.uint16)
        uv[:, 0::2], uv[:, 1::2] = u, v
        out.append((y, uv))
    return out


# The largest difference from cv2's frame the 10-bit conversion may show on the Main10 clip
# (docs/gpu-decoding.md; cv2 filters 10-bit chroma across rows, which no per-pixel form does).
TEN_BIT_WORST = 25


@on_the_cpu
def test_ten_bit_frames_are_near_cv2s():
    """--decode gpu's 10-bit frames (HEVC Main10 on NVDEC's P016 planes, by the kernel) have
    cv2's shape and count and differ from cv2's by at most the documented bound."""
    path = DATA / "nvdec_hevc10.mp4"
    plan = nvdec.plan_video(path, lambda *stream: None, exact_only=False)
    assert plan.depth == 10 and plan.inexact == "10-bit"
    frames = list(cv2_frames(path))
    planes = ten_bit_planes(path)
    assert len(planes) == len(frames) == 12
    worst = 0
    for (y, uv), want in zip(planes, frames, strict=True):
        got = frame_of(y, uv, y.shape[1], plan.conversion.coefficients(), 0, depth=10)
        assert got.shape == want.shape
        worst = max(worst, int(np.abs(got.astype(int) - want).max()))
    assert 0 < worst <= TEN_BIT_WORST, worst
