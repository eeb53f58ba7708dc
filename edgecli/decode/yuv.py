"""YUV 4:2:0 -> BGR exactly as ``cv2.VideoCapture.read()`` converts it (CPU reference for NVDEC).

H.264 decoding is exact, so NVDEC's Y/U/V planes equal FFmpeg's; what separates a GPU-decoded
frame from the contract's frame is only the conversion that OpenCV's FFmpeg backend applies:
``sws_scale`` from the decoder's format to BGR24 (``SWS_BICUBIC``, on a context of the coded size).
This module reproduces that conversion bit for bit for the streams where it is a function of
(Y, U, V) per pixel, and says which streams those are.

What cv2 does (OpenCV 5.0.0 with its bundled libswscale 9.5, x86-64; measured):

- For yuv420p with an **even** coded height, swscale takes its unscaled special converter: each
  pixel's BGR depends only on its own Y and its 2x2 block's U and V (chroma sample
  ``(row // 2, col // 2)``, so an odd width's last column uses the last chroma column). Verified
  with random planes at widths 1, 3, 33, 249, 250, 256, 1917, 1918, 1919, 1920, 4095 and on H.264
  clips from 2x2 to 1918x1080. H.264 and HEVC 4:2:0 frames always have even sizes (their crop
  unit is 2) and coded sizes that are multiples of 8 or 16, so this covers every such stream.
- For an **odd** height (only raw formats such as ``.y4m`` can have one) swscale's scaled path
  runs instead: chroma is interpolated vertically, a pixel depends on neighbouring chroma rows,
  and no per-pixel table can reproduce it. :func:`yuv420_to_bgr` refuses such frames.
- The conversion follows the stream's tags: BT.709, BT.2020, SMPTE 240M and FCC matrices and full
  range (``yuvj420p`` or ``color_range=pc``) each give other BGR. Unspecified, ``bt470bg`` and
  ``smpte170m`` give BT.601 limited range, the table this module measures.
- The closed form: swscale's x86 SIMD ``yuv2rgb`` in 16-bit fixed point (``pmulhw``: ``>> 16``
  with floor), coefficients from ``sws_setColorspaceDetails`` (BT.601, limited range)::

      y = ((8*Y - 128) * 9539) >> 16
      B = clip(y + (((8*U - 1024) * 16525) >> 16))
      G = clip(y + (((8*U - 1024) * -3209) >> 16) + (((8*V - 1024) * -6660) >> 16))
      R = clip(y + (((8*V - 1024) * 13075) >> 16))            clip to 0..255

  It equals the measured table for all 2**24 inputs (``closed_form_table()`` vs
  ``measure_table()``; no 16-bit saturation occurs), so a GPU kernel may compute instead of look up
  where a host's measured table equals it. B depends on (Y, U) only and R on (Y, V) only, exactly.
  The same form with swscale's BT.709 / BT.2020 / full-range coefficients matched cv2 on tagged
  H.264 clips too (:func:`closed_form_table`); :func:`reproducible` still admits only what the
  measured table covers.
- Measuring: one 4096x4096 ``.y4m`` frame holds every (Y, U, V) once; writing it and reading it
  back through cv2 takes about 0.3 s on the 2-core machine. The table (48 MiB) is cached per
  OpenCV version, build and CPU feature set under ``$XDG_CACHE_HOME/edgecli/``.
"""

from __future__ import annotations

import hashlib
import io
import platform
import tempfile
from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np

from ..cache import cache_dir, opencv_build_key
from ..errors import OutputError
from ..sinks import write_atomic

TABLE_SHAPE = (256, 256, 256, 3)

# The measuring frame: chroma is 2048x2048 and each (U, V) pair fills an 8x8 patch of it (U the
# patch row, V the patch column), i.e. a 16x16 luma tile whose pixels carry Y = 0..255 in raster
# order. So every (Y, U, V) occurs exactly once in 4096x4096 pixels.
_SIDE = 4096

# Matrices swscale converts with the BT.601 coefficients (its SWS_CS_ITU601 = SMPTE170M = BT470BG,
# and the default for an unspecified matrix); measured on H.264 clips tagged each way.
_BT601_MATRICES = {None, "", "unknown", "unspecified", "bt470bg", "smpte170m"}
_LIMITED_RANGES = {None, "", "unknown", "unspecified", "tv", "limited", "mpeg"}

# swscale's inverse matrices (ff_yuv2rgb_coeffs: crv, cbu, cgu, cgv in 1/65536, limited range).
_SWS_COEFFS = {
    "bt601": (104597, 132201, 25675, 53279),
    "bt709": (117489, 138438, 13975, 34925),
    "bt2020": (110013, 140363, 12277, 42626),
}


def _write_y4m(path: Path, y: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    height, width = y.shape
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F25:1 Ip A1:1 C420jpeg\n".encode())
        f.write(b"FRAME\n")
        for plane in (y, u, v):
            f.write(np.ascontiguousarray(plane).data)


def _read_first_frame(path: Path) -> np.ndarray:
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        ok, frame = capture.read()
    finally:
        capture.release()
    if not ok:
        raise RuntimeError(f"{path}: cv2.VideoCapture (FFmpeg backend) could not read it")
    return frame


def measure_table() -> np.ndarray:
    """table[Y, U, V] -> (B, G, R) as cv2.VideoCapture converts BT.601 limited-range yuv420p."""
    tile = np.arange(256, dtype=np.uint8).reshape(16, 16)
    y = np.tile(tile, (_SIDE // 16, _SIDE // 16))
    ramp = np.repeat(np.arange(256, dtype=np.uint8), 8)
    u = np.broadcast_to(ramp[:, np.newaxis], (_SIDE // 2, _SIDE // 2))
    v = np.broadcast_to(ramp[np.newaxis, :], (_SIDE // 2, _SIDE // 2))
    with tempfile.TemporaryDirectory(prefix="edgecli-yuv-") as tmp:
        path = Path(tmp) / "every-yuv.y4m"
        _write_y4m(path, y, u, v)
        frame = _read_first_frame(path)
    if frame.shape != (_SIDE, _SIDE, 3):
        raise RuntimeError(f"cv2 read the measuring frame as {frame.shape}, not {_SIDE}x{_SIDE}")
    # frame[16*U + Y//16, 16*V + Y%16] -> table[Y//16, Y%16, U, V]
    table = frame.reshape(256, 16, 256, 16, 3).transpose(1, 3, 0, 2, 4)
    return np.ascontiguousarray(table).reshape(TABLE_SHAPE)


def closed_form_table(matrix: str = "bt601", *, full_range: bool = False) -> np.ndarray:
    """swscale's x86 fixed-point yuv2rgb for ``matrix`` and range, as a (256,256,256,3) table."""
    if matrix not in _SWS_COEFFS:
        raise ValueError(f"matrix {matrix!r}: expected one of {', '.join(_SWS_COEFFS)}")
    crv, cbu, cgu, cgv = _SWS_COEFFS[matrix]
    cgu, cgv = -cgu, -cgv
    if full_range:
        cy, oy = 1 << 16, 0
        crv, cbu, cgu, cgv = ((c * 224) // 255 for c in (crv, cbu, cgu, cgv))
    else:
        cy, oy = (255 << 16) // 219, 16 << 16

    def round16(f: int) -> int:  # swscale's roundToInt16 (values here never reach its clip)
        return (f + (1 << 15)) >> 16

    y_coeff, ub, vr, ug, vg = (round16(c << 13) for c in (cy, cbu, crv, cgu, cgv))
    y_offset = round16(oy << 3)
    levels = np.arange(256, dtype=np.int32)
    luma = (((8 * levels - y_offset) * y_coeff) >> 16)[:, None, None]
    chroma = 8 * levels - 1024
    u = chroma[None, :, None]
    v = chroma[None, None, :]
    b = luma + ((u * ub) >> 16)
    g = luma + ((u * ug) >> 16) + ((v * vg) >> 16)
    r = luma + ((v * vr) >> 16)
    bgr = np.broadcast_arrays(b, g, r)
    return np.stack([np.clip(c, 0, 255).astype(np.uint8) for c in bgr], axis=-1)


def cache_path() -> Path:
    """Where the table measured by this OpenCV build on this CPU is cached."""
    key = "\n".join([opencv_build_key(), platform.machine()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"yuv420-bt601-cv{cv2.__version__}-{digest}.npy"


def load_table() -> np.ndarray:
    """The cached table (memory-mapped, read-only), measured and cached first where missing."""
    path = cache_path()
    try:
        table = np.load(path, mmap_mode="r")
        if table.shape == TABLE_SHAPE and table.dtype == np.uint8:
            return table
    except (OSError, ValueError):
        pass  # missing or damaged: measure again
    table = measure_table()
    saved = io.BytesIO()
    np.save(saved, table)
    try:
        # A concurrent reader never sees half a file; the cache is edgecli's folder to make.
        write_atomic(path, saved.getbuffer(), make_folder=True)
    except OutputError:
        pass  # an unwritable cache only costs a measurement next time
    return table


def _check_table(table: np.ndarray) -> None:
    if table.shape != TABLE_SHAPE or table.dtype != np.uint8:
        raise ValueError(f"table: expected uint8 {TABLE_SHAPE}, got {table.dtype} {table.shape}")


def yuv420_to_bgr(y: np.ndarray, u: np.ndarray, v: np.ndarray, table: np.ndarray) -> np.ndarray:
    """BGR (H, W, 3) uint8 from yuv420p planes, as cv2.VideoCapture.read() gives it.

    ``y`` is (H, W); ``u`` and ``v`` are (ceil(H/2), ceil(W/2)). H must be even: for odd heights
    swscale interpolates chroma and no table reproduces it (see the module notes).
    """
    _check_table(table)
    if y.ndim != 2 or y.dtype != np.uint8:
        raise ValueError(f"y: expected a 2-D uint8 plane, got {y.dtype} {y.shape}")
    height, width = y.shape
    if height % 2:
        raise ValueError(
            f"height {height} is odd: cv2 interpolates chroma there, not reproducible per pixel"
        )
    chroma_shape = (height // 2, (width + 1) // 2)
    for name, plane in (("u", u), ("v", v)):
        if plane.shape != chroma_shape or plane.dtype != np.uint8:
            raise ValueError(
                f"{name}: expected uint8 {chroma_shape} for a {width}x{height} frame, "
                f"got {plane.dtype} {plane.shape}"
            )
    # One chroma sample per 2x2 block; an odd width's last column shares the last sample.
    cols = np.arange(width) // 2
    u_full = np.repeat(u[:, cols], 2, axis=0)
    v_full = np.repeat(v[:, cols], 2, axis=0)
    index = (y.astype(np.int32) << 16) | (u_full.astype(np.int32) << 8) | v_full
    return table.reshape(-1, 3)[index]


def nv12_to_bgr(y: np.ndarray, uv: np.ndarray, table: np.ndarray) -> np.ndarray:
    """As :func:`yuv420_to_bgr`, from NV12 (NVDEC's layout): ``uv`` is (H/2, 2*ceil(W/2)), U, V."""
    if uv.ndim != 2 or uv.shape[1] % 2:
        raise ValueError(f"uv: expected a 2-D plane of interleaved U, V pairs, got {uv.shape}")
    return yuv420_to_bgr(y, uv[:, 0::2], uv[:, 1::2], table)


def reproducible(stream: Mapping[str, object]) -> bool:
    """Whether :func:`yuv420_to_bgr` with the measured table gives cv2's frames for a stream.

    ``stream`` holds ffprobe's names: ``pix_fmt``, ``color_range`` and ``color_space`` (absent
    means unspecified), and ``coded_height`` (or ``height``). True for 8-bit yuv420p, limited or
    unspecified range, a BT.601 or unspecified matrix, and an even height; everything else
    (full range, yuvj420p, BT.709/BT.2020/other matrices, 10-bit, 4:2:2, 4:4:4) stays on the CPU.
    """
    if stream.get("pix_fmt") != "yuv420p":
        return False
    if stream.get("color_range") not in _LIMITED_RANGES:
        return False
    if stream.get("color_space") not in _BT601_MATRICES:
        return False
    heights = [stream.get(key) for key in ("coded_height", "height") if stream.get(key) is not None]
    return bool(heights) and all(isinstance(h, int) and h > 0 and h % 2 == 0 for h in heights)
