"""A baseline JPEG's BGR frame from its decoded planes, bit for bit as ``cv2.imdecode`` gives it.

``cv2.imdecode(data, cv2.IMREAD_COLOR)`` decodes through the libjpeg-turbo that OpenCV bundles
(3.1.2 in opencv-python-headless 5.0.0.93) with the library's defaults: the ISLOW integer IDCT,
``do_fancy_upsampling = TRUE`` (so never the merged upsampler: jdmaster.c's
``use_merged_upsample`` refuses it whenever fancy upsampling is on), then YCbCr->RGB through
fixed-point tables. After the IDCT everything is exact integer arithmetic, reproduced here
from the Y, Cb and Cr planes at their native sampling - what nvJPEG's ``NVJPEG_OUTPUT_YUV``
and TurboJPEG's ``tjDecompressToYUVPlanes`` hand over:

* chroma upsampling, per libjpeg-turbo's jdsample.c (``_jinit_upsampler``):
  4:2:2 (h2v1) and 4:2:0 (h2v2) use the fancy triangle filter when the chroma plane is more
  than 2 samples wide, box replication otherwise; 4:4:0 (h1v2) always uses the fancy filter;
  other integral ratios (4:1:1, 4:4:1) use box replication (``int_upsample``). Samples past an
  edge repeat the edge sample (the first and last columns' special cases in jdsample.c, the
  context rows of jdmainct.c at the top and bottom). The SIMD versions OpenCV runs give the
  same bits as the C code (libjpeg-turbo's bit-exact regression tests use one checksum for
  both).
* YCbCr->RGB, per jdcolor.c's ``build_ycc_rgb_table`` and jdcolext.c's
  ``ycc_rgb_convert_internal``, range-limited to 0..255.

Gray JPEGs: B = G = R = Y. EXIF orientation, which imdecode applies after decoding, is
``apply_exif_orientation``.

Which files those are is :func:`edgecli.decode.jpeg_header.parse_header`'s answer, from the
file's header.
"""

from __future__ import annotations

import numpy as np

# (horizontal, vertical) factor of Y's sampling over the chroma planes', by subsampling name.
CHROMA_FACTORS = {"444": (1, 1), "422": (2, 1), "420": (2, 2), "440": (1, 2)}
CHROMA_FACTORS |= {"411": (4, 1), "441": (1, 4)}
SUBSAMPLINGS = (*CHROMA_FACTORS, "gray")

SCALEBITS = 16
ONE_HALF = 1 << (SCALEBITS - 1)


def _fix(x: float) -> int:
    """jdcolor.c's FIX(x): x in 16.16 fixed point, rounded."""
    return int(x * (1 << SCALEBITS) + 0.5)


_X = np.arange(256, dtype=np.int64) - 128  # Cb or Cr minus CENTERJSAMPLE
CR_R_TAB = ((_fix(1.40200) * _X + ONE_HALF) >> SCALEBITS).astype(np.int32)
CB_B_TAB = ((_fix(1.77200) * _X + ONE_HALF) >> SCALEBITS).astype(np.int32)
CR_G_TAB = (-_fix(0.71414) * _X).astype(np.int32)
CB_G_TAB = (-_fix(0.34414) * _X + ONE_HALF).astype(np.int32)  # ONE_HALF folded in, as there


def chroma_shape(subsampling: str, width: int, height: int) -> tuple[int, int]:
    """(rows, columns) of a chroma plane: libjpeg's downsampled_height/width (rounded up)."""
    fx, fy = CHROMA_FACTORS[subsampling]
    return -(-height // fy), -(-width // fx)


def planes_to_bgr(
    y: np.ndarray,
    cb: np.ndarray | None,
    cr: np.ndarray | None,
    subsampling: str,
    width: int,
    height: int,
) -> np.ndarray:
    """The H x W x 3 uint8 BGR frame libjpeg-turbo makes from these decoded planes.

    ``y`` is height x width; ``cb`` and ``cr`` are ``chroma_shape(subsampling, width, height)``
    (None for ``"gray"``). ``subsampling`` is one of ``SUBSAMPLINGS``.
    """
    if subsampling not in SUBSAMPLINGS:
        raise ValueError(f"subsampling must be one of {', '.join(SUBSAMPLINGS)}: {subsampling!r}")
    _check_plane("y", y, (height, width))
    if subsampling == "gray":
        return np.repeat(y[..., np.newaxis], 3, axis=-1)
    shape = chroma_shape(subsampling, width, height)
    _check_plane("cb", cb, shape)
    _check_plane("cr", cr, shape)
    cb = _upsample(cb, subsampling)[:height, :width]
    cr = _upsample(cr, subsampling)[:height, :width]
    return _ycc_to_bgr(y, cb, cr)


def apply_exif_orientation(frame: np.ndarray, orientation: int) -> np.ndarray:
    """``frame`` turned as cv2.imdecode turns a decoded JPEG with this EXIF orientation (1..8;
    anything else leaves it as it is)."""
    if orientation in (5, 6, 7, 8):
        frame = frame.swapaxes(0, 1)  # transpose, then the flip of orientation - 4
        orientation -= 4
    if orientation == 2:
        frame = frame[:, ::-1]
    elif orientation == 3:
        frame = frame[::-1, ::-1]
    elif orientation == 4:
        frame = frame[::-1]
    return np.ascontiguousarray(frame)


def _check_plane(name: str, plane, shape: tuple[int, int]) -> None:
    if not isinstance(plane, np.ndarray) or plane.dtype != np.uint8 or plane.shape != shape:
        got = getattr(plane, "shape", None), getattr(plane, "dtype", type(plane).__name__)
        raise ValueError(f"{name} must be a uint8 array of shape {shape}: got {got}")


def _upsample(plane: np.ndarray, subsampling: str) -> np.ndarray:
    """A chroma plane at Y's sampling (rounded up to whole factors), per jdsample.c."""
    fx, fy = CHROMA_FACTORS[subsampling]
    p = plane.astype(np.int32)
    wide = plane.shape[1] > 2  # jdsample.c: "do_fancy && compptr->downsampled_width > 2"
    if (fx, fy) == (1, 1):
        return p
    if (fx, fy) == (2, 1) and wide:
        return _fancy_columns(p, (1, 2), 2)
    if (fx, fy) == (1, 2):
        return _fancy_rows(p)
    if (fx, fy) == (2, 2) and wide:
        # h2v2_fancy_upsample: each output row's column sums 3 * nearer row + further row,
        # then 3/4 * nearer sum + 1/4 * further sum, with bias 8 (even columns) and 7 (odd).
        above, below = _neighbours(p, axis=0)
        rows = np.empty((2 * p.shape[0], p.shape[1]), np.int32)
        rows[0::2] = 3 * p + above
        rows[1::2] = 3 * p + below
        return _fancy_columns(rows, (8, 7), 4)
    return np.repeat(np.repeat(p, fy, axis=0), fx, axis=1)  # h2v1/h2v2/int_upsample's box


def _neighbours(p: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The previous and next sample along ``axis``, the edge sample repeated past each edge."""
    first = np.take(p, [0], axis=axis)
    last = np.take(p, [-1], axis=axis)
    n = p.shape[axis]
    previous = np.concatenate([first, np.take(p, range(n - 1), axis=axis)], axis=axis)
    following = np.concatenate([np.take(p, range(1, n), axis=axis), last], axis=axis)
    return previous, following


def _fancy_columns(p: np.ndarray, bias: tuple[int, int], shift: int) -> np.ndarray:
    """Two output columns per input column: (3 * nearer + further + bias) >> shift, the
    further sample being the left one for the even output column, the right one for the odd."""
    left, right = _neighbours(p, axis=1)
    out = np.empty((p.shape[0], 2 * p.shape[1]), np.int32)
    out[:, 0::2] = (3 * p + left + bias[0]) >> shift
    out[:, 1::2] = (3 * p + right + bias[1]) >> shift
    return out


def _fancy_rows(p: np.ndarray) -> np.ndarray:
    """h1v2_fancy_upsample: two output rows per input row, (3 * nearer + further + 1) >> 2 with
    the row above, then (3 * nearer + further + 2) >> 2 with the row below."""
    above, below = _neighbours(p, axis=0)
    out = np.empty((2 * p.shape[0], p.shape[1]), np.int32)
    out[0::2] = (3 * p + above + 1) >> 2
    out[1::2] = (3 * p + below + 2) >> 2
    return out


def _ycc_to_bgr(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    """jdcolext.c's ycc_rgb_convert_internal, written out as B, G, R."""
    y = y.astype(np.int32)
    out = np.empty((*y.shape, 3), np.uint8)
    out[..., 2] = np.clip(y + CR_R_TAB[cr], 0, 255)
    out[..., 1] = np.clip(y + ((CB_G_TAB[cb] + CR_G_TAB[cr]) >> SCALEBITS), 0, 255)
    out[..., 0] = np.clip(y + CB_B_TAB[cb], 0, 255)
    return out
