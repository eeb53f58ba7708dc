"""YUV 4:2:0 -> BGR exactly as ``cv2.VideoCapture.read()`` converts it (CPU reference for NVDEC).

Decoding by the codec standards is exact, so NVDEC's Y/U/V planes equal FFmpeg's; what separates
a GPU-decoded frame from the contract's frame is only the conversion that OpenCV's FFmpeg backend
applies: ``sws_scale_frame`` from the decoder's frame to BGR24, with the frame's colour tags.
This module says which streams that conversion is a function of (Y, U, V) per pixel for
(:func:`conversion_for`), computes it (:class:`Conversion`, :func:`yuv420_to_bgr`), and checks
once per OpenCV build and CPU that cv2 still converts that way (:func:`verified`).

What cv2 does (opencv-python 5.1.0 with its bundled libswscale 10.1, x86-64 with AVX-512;
measured):

- For 8-bit yuv420p with an **even** height, swscale takes its unscaled special converter: each
  pixel's BGR depends only on its own Y and its 2x2 block's U and V (chroma sample
  ``(row // 2, col // 2)``, so an odd width's last column uses the last chroma column). For an
  **odd** height (only raw formats such as ``.y4m`` can have one) the scaled path runs instead
  and interpolates chroma between rows; :func:`yuv420_to_bgr` refuses such frames.
- The converter is swscale's x86 SIMD ``yuv2rgb`` in 16-bit fixed point (``pmulhw``: ``>> 16``
  with floor), with the six coefficients of :meth:`Conversion.coefficients`::

      y = ((8*Y - y_offset) * y_coeff) >> 16
      B = clip(y + (((8*U - 1024) * u2b) >> 16))
      G = clip(y + (((8*U - 1024) * u2g) >> 16) + (((8*V - 1024) * v2g) >> 16))
      R = clip(y + (((8*V - 1024) * v2r) >> 16))            clip to 0..255

  It equals cv2's conversion for all 2**24 inputs for the BT.601 (matrix unspecified, 5 or 6),
  BT.709 (1), FCC (4), SMPTE 240M (7) and BT.2020 non-constant-luminance (9) matrices, each in
  limited and full range. No 16-bit saturation occurs. For full range swscale scales the
  coefficients by 224/255 with C's division, which truncates toward zero (FCC and SMPTE 240M
  full range depend on it). swscale's plain-C path rounds otherwise, hence :func:`verified`.
- The colour primaries and transfer characteristics matter too: swscale maps a wide gamut
  (primaries 8 film, 9 BT.2020, 10 SMPTE 428, 11 DCI-P3, 12 Display P3, 22 EBU 3213) to its
  output's and tone-maps HDR transfers (16 PQ, 18 HLG), changing nearly every pixel by up to
  about 190 levels; cv2 fails to read the log transfers (9, 10) and the matrices 8 (YCgCo), 10
  (BT.2020 constant luminance), 11 to 14. Every other code point of H.273 leaves the closed form
  exact. :func:`conversion_for` admits the ones named in ``PRIMARIES``, ``TRANSFERS`` and
  ``MATRICES`` and names the reason for the rest; reserved codes and matrix 0 (GBR on a YUV
  stream) are not admitted.
- **10-bit** (yuv420p10le: HEVC Main10, VP9 profile 2) is not per pixel: swscale has no
  unscaled converter to BGR24 for it and runs the scaled path, which filters chroma vertically
  (one chroma sample reaches 7 output rows, and the bottom rows of a flat frame come out
  different from the rest) and uses luma at more than 8 bits. No function of a pixel's Y and
  its block's U and V reproduces it, and its arithmetic is not BT.601/BT.709's either: even with
  flat chroma, exact arithmetic on the 10-bit values, rounded, is off by -1 to 2. On real clips
  the closest per-pixel conversion written (that arithmetic, nearest chroma) differs from cv2's
  frame on 93% of the pixels, on 23% (HEVC Main10, 640x360) and 31% (VP9 profile 2, 320x180)
  by more than 1, by up to 20 and 15 levels; interpolating chroma linearly between rows brings
  the largest difference to 15 and 6, not the share. So 10-bit streams, whatever NVDEC's P016
  planes, are not exact on the GPU; reproducing them would mean reproducing swscale's scaled
  path (its vertical chroma filter, edge rows included), row by row.
- Checking: one 4096x4096 frame holds every (Y, U, V) once. edgecli writes it, with the tags of
  the conversion, as a raw I420 frame in a Matroska file (:func:`write_matroska`; no encoder
  needed) and reads it back through cv2; then small frames carry every other tag value that
  :func:`conversion_for` maps to that conversion. The 2**24 frame makes the check too slow to
  repeat every run, so the verdicts are cached per OpenCV version, build and CPU feature set
  under ``$XDG_CACHE_HOME/edgecli/``.
"""

from __future__ import annotations

import hashlib
import platform
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..output.cache import cache_dir, cached_verdict, opencv_build_key
from .streams import Colour

TABLE_SHAPE = (256, 256, 256, 3)

# swscale's inverse matrices (ff_yuv2rgb_coeffs: crv, cbu, cgu, cgv in 1/65536).
_SWS_COEFFS = {
    "bt601": (104597, 132201, 25675, 53279),
    "bt709": (117489, 138438, 13975, 34925),
    "fcc": (104448, 132798, 24759, 53109),
    "smpte240m": (117579, 136230, 16907, 35559),
    "bt2020": (110013, 140363, 12277, 42626),
}

# H.273 code points (None: not given) that leave cv2's conversion the closed form, by what
# swscale makes of them. matrix_coefficients -> the coefficients swscale converts with:
MATRICES = {
    None: "bt601",
    1: "bt709",
    2: "bt601",
    4: "fcc",
    5: "bt601",
    6: "bt601",
    7: "smpte240m",
    9: "bt2020",
}
# colour_primaries and transfer_characteristics that swscale leaves alone:
PRIMARIES = frozenset({None, 1, 2, 4, 5, 6, 7})
TRANSFERS = frozenset({None, 1, 2, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 17})

# FFmpeg's names of the code points that are not admitted, for the reasons.
_MATRIX_NAMES = {
    0: "gbr",
    8: "ycgco",
    10: "bt2020c",
    11: "smpte2085",
    12: "chroma-derived-nc",
    13: "chroma-derived-c",
    14: "ictcp",
}
_PRIMARIES_NAMES = {
    8: "film",
    9: "bt2020",
    10: "smpte428",
    11: "smpte431",
    12: "smpte432",
    22: "ebu3213",
}
_TRANSFER_NAMES = {9: "log100", 10: "log316", 16: "smpte2084", 18: "arib-std-b67"}

# The tag the measuring frame carries for each matrix (small frames carry the others).
_MATRIX_TAG = {"bt601": 6, "bt709": 1, "fcc": 4, "smpte240m": 7, "bt2020": 9}


def _c_div(a: int, b: int) -> int:
    """a / b rounded toward zero, as C's integer division (swscale's)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _round16(f: int) -> int:  # swscale's roundToInt16 (values here never reach its clip)
    return (f + (1 << 15)) >> 16


@dataclass(frozen=True)
class Conversion:
    """One of swscale's yuv420p -> BGR24 conversions: its ``matrix`` (a key of the swscale
    coefficients: "bt601", "bt709", "fcc", "smpte240m", "bt2020") and range."""

    matrix: str = "bt601"
    full_range: bool = False

    def __post_init__(self):
        if self.matrix not in _SWS_COEFFS:
            raise ValueError(f"matrix {self.matrix!r}: expected one of {', '.join(_SWS_COEFFS)}")

    @property
    def name(self) -> str:
        return f"{self.matrix}-{'full' if self.full_range else 'limited'}"

    def coefficients(self) -> tuple[int, int, int, int, int, int]:
        """(y_coeff, y_offset, v2r, v2g, u2g, u2b) of the closed form (module notes), as
        swscale's ``sws_setColorspaceDetails`` computes them for its x86 converter."""
        crv, cbu, cgu, cgv = _SWS_COEFFS[self.matrix]
        cgu, cgv = -cgu, -cgv
        if self.full_range:
            cy, oy = 1 << 16, 0
            crv, cbu, cgu, cgv = (_c_div(c * 224, 255) for c in (crv, cbu, cgu, cgv))
        else:
            cy, oy = _c_div(255 << 16, 219), 16 << 16
        y_coeff, v2r, v2g, u2g, u2b = (_round16(c << 13) for c in (cy, crv, cgv, cgu, cbu))
        return y_coeff, _round16(oy << 3), v2r, v2g, u2g, u2b


# Every conversion this module reproduces: each matrix in limited and full range.
CONVERSIONS = tuple(Conversion(m, r) for m in _SWS_COEFFS for r in (False, True))


def conversion_for(colour: Colour) -> Conversion | str:
    """The conversion cv2 applies to 8-bit 4:2:0 frames of a stream whose resolved colour is
    ``colour``, or why it is none of them (a reason such as "primaries 9 (bt2020)")."""
    for kind, code, admitted, names in (
        ("matrix", colour.matrix, MATRICES, _MATRIX_NAMES),
        ("primaries", colour.primaries, PRIMARIES, _PRIMARIES_NAMES),
        ("transfer", colour.transfer, TRANSFERS, _TRANSFER_NAMES),
    ):
        if code not in admitted:
            return f"{kind} {code} ({names.get(code, 'reserved')})"
    return Conversion(MATRICES[colour.matrix], bool(colour.full_range))


def _closed_form(y: np.ndarray, u: np.ndarray, v: np.ndarray, conversion: Conversion):
    """The closed form on broadcastable integer arrays of Y, U and V: BGR, (..., 3) uint8."""
    y_coeff, y_offset, v2r, v2g, u2g, u2b = conversion.coefficients()
    luma = ((8 * y.astype(np.int32) - y_offset) * y_coeff) >> 16
    cu = 8 * u.astype(np.int32) - 1024
    cv = 8 * v.astype(np.int32) - 1024
    b = luma + ((cu * u2b) >> 16)
    g = luma + ((cu * u2g) >> 16) + ((cv * v2g) >> 16)
    r = luma + ((cv * v2r) >> 16)
    bgr = np.broadcast_arrays(b, g, r)
    return np.stack([np.clip(c, 0, 255).astype(np.uint8) for c in bgr], axis=-1)


def closed_form_table(matrix: str = "bt601", *, full_range: bool = False) -> np.ndarray:
    """The closed form for ``matrix`` and range as a (256, 256, 256, 3) table [Y, U, V]."""
    levels = np.arange(256, dtype=np.uint8)
    y, u, v = levels[:, None, None], levels[None, :, None], levels[None, None]
    return _closed_form(y, u, v, Conversion(matrix, full_range))


def yuv420_to_bgr(
    y: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    conversion: Conversion | np.ndarray = Conversion(),
) -> np.ndarray:
    """BGR (H, W, 3) uint8 from yuv420p planes, as cv2.VideoCapture.read() converts them with
    ``conversion``, or by a (256, 256, 256, 3) table [Y, U, V] such as :func:`closed_form_table`.

    ``y`` is (H, W); ``u`` and ``v`` are (ceil(H/2), ceil(W/2)). H must be even: for odd heights
    swscale interpolates chroma and no per-pixel conversion reproduces it (see the module notes).
    """
    table = None if isinstance(conversion, Conversion) else conversion
    if table is not None and (table.shape != TABLE_SHAPE or table.dtype != np.uint8):
        raise ValueError(f"table: expected uint8 {TABLE_SHAPE}, got {table.dtype} {table.shape}")
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
    if table is None:
        return _closed_form(y, u_full, v_full, conversion)
    index = (y.astype(np.int32) << 16) | (u_full.astype(np.int32) << 8) | v_full
    return table.reshape(-1, 3)[index]


def nv12_to_bgr(
    y: np.ndarray, uv: np.ndarray, conversion: Conversion | np.ndarray = Conversion()
) -> np.ndarray:
    """As :func:`yuv420_to_bgr`, from NV12 (NVDEC's layout): ``uv`` is (H/2, 2*ceil(W/2)), U, V."""
    if uv.ndim != 2 or uv.shape[1] % 2:
        raise ValueError(f"uv: expected a 2-D plane of interleaved U, V pairs, got {uv.shape}")
    return yuv420_to_bgr(y, uv[:, 0::2], uv[:, 1::2], conversion)


# --- Checking cv2 ------------------------------------------------------------------------------


def _ebml(element_id: int, payload: bytes | int | str) -> bytes:
    """One EBML element: its ID, its size as an 8-byte vint, its payload."""
    if isinstance(payload, int):
        payload = payload.to_bytes(max(1, (payload.bit_length() + 7) // 8), "big")
    elif isinstance(payload, str):
        payload = payload.encode("ascii")
    return _ebml_head(element_id, len(payload)) + payload


def _ebml_head(element_id: int, size: int) -> bytes:
    """An element's ID and its size as an 8-byte vint (the length marker, then 56 bits)."""
    id_bytes = element_id.to_bytes((element_id.bit_length() + 7) // 8, "big")
    return id_bytes + ((1 << 56) | size).to_bytes(8, "big")


def write_matroska(path: Path, y: np.ndarray, u: np.ndarray, v: np.ndarray, colour: Colour):
    """Write one yuv420p frame as a Matroska file of uncompressed video (``V_UNCOMPRESSED``,
    FourCC I420) whose Colour element carries ``colour``'s code points; None leaves one out.
    FFmpeg's demuxer hands them to the frame, so cv2 converts the frame as it would a stream
    tagged so."""
    height, width = y.shape
    frame = b"".join(np.ascontiguousarray(p, dtype=np.uint8).tobytes() for p in (y, u, v))
    full_range = {None: None, False: 1, True: 2}[colour.full_range]  # Range: 1 broadcast, 2 full
    # MatrixCoefficients, Range, TransferCharacteristics, Primaries: H.273's code points.
    tags = zip(
        (0x55B1, 0x55B9, 0x55BA, 0x55BB),
        (colour.matrix, full_range, colour.transfer, colour.primaries),
        strict=True,
    )
    colour_element = b"".join(_ebml(i, value) for i, value in tags if value is not None)
    video = _ebml(0xB0, width) + _ebml(0xBA, height) + _ebml(0x2EB524, "I420")  # ColourSpace
    if colour_element:
        video += _ebml(0x55B0, colour_element)
    # TrackEntry: TrackNumber 1, TrackUID 1, TrackType 1 (video), CodecID, Video.
    track = _ebml(0xD7, 1) + _ebml(0x73C5, 1) + _ebml(0x83, 1) + _ebml(0x86, "V_UNCOMPRESSED")
    track += _ebml(0xE0, video)
    header = _ebml(0x1A45DFA3, _ebml(0x4282, "matroska") + _ebml(0x4287, 4) + _ebml(0x4285, 2))
    info = _ebml(0x1549A966, _ebml(0x2AD7B1, 1_000_000))  # TimestampScale: 1 ms
    tracks = _ebml(0x1654AE6B, _ebml(0xAE, track))
    # A SimpleBlock: track 1 (vint 0x81), time 0, keyframe flag; then the planes.
    block = _ebml_head(0xA3, 4 + len(frame)) + b"\x81\x00\x00\x80"
    cluster_head = _ebml(0xE7, 0)  # the cluster's Timestamp
    cluster_size = len(cluster_head) + len(block) + len(frame)
    segment_size = len(info) + len(tracks) + len(_ebml_head(0x1F43B675, 0)) + cluster_size
    with open(path, "wb") as f:
        f.write(header + _ebml_head(0x18538067, segment_size) + info + tracks)
        f.write(_ebml_head(0x1F43B675, cluster_size) + cluster_head + block)
        f.write(frame)


def read_first_frame(path: Path) -> np.ndarray:
    """The first frame cv2.VideoCapture (FFmpeg backend) reads from ``path``."""
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        ok, frame = capture.read()
    finally:
        capture.release()
    if not ok:
        raise RuntimeError(f"{path}: cv2.VideoCapture (FFmpeg backend) could not read it")
    return frame


# The measuring frame: chroma is 2048x2048 and each (U, V) pair fills an 8x8 patch of it (U the
# patch row, V the patch column), i.e. a 16x16 luma tile whose pixels carry Y = 0..255 in raster
# order. So every (Y, U, V) occurs exactly once in 4096x4096 pixels.
_SIDE = 4096


def _tags(conversion: Conversion) -> Colour:
    return Colour(_MATRIX_TAG[conversion.matrix], conversion.full_range)


def measure_table(conversion: Conversion = Conversion()) -> np.ndarray:
    """table[Y, U, V] -> (B, G, R) as cv2.VideoCapture converts a yuv420p frame tagged with
    ``conversion``'s matrix and range."""
    tile = np.arange(256, dtype=np.uint8).reshape(16, 16)
    y = np.tile(tile, (_SIDE // 16, _SIDE // 16))
    ramp = np.repeat(np.arange(256, dtype=np.uint8), 8)
    u = np.broadcast_to(ramp[:, np.newaxis], (_SIDE // 2, _SIDE // 2))
    v = np.broadcast_to(ramp[np.newaxis, :], (_SIDE // 2, _SIDE // 2))
    with tempfile.TemporaryDirectory(prefix="edgecli-yuv-") as tmp:
        path = Path(tmp) / "every-yuv.mkv"
        write_matroska(path, y, u, v, _tags(conversion))
        frame = read_first_frame(path)
    if frame.shape != (_SIDE, _SIDE, 3):
        raise RuntimeError(f"cv2 read the measuring frame as {frame.shape}, not {_SIDE}x{_SIDE}")
    # frame[16*U + Y//16, 16*V + Y%16] -> table[Y//16, Y%16, U, V]
    table = frame.reshape(256, 16, 256, 16, 3).transpose(1, 3, 0, 2, 4)
    return np.ascontiguousarray(table).reshape(TABLE_SHAPE)


def _tag_variants(conversion: Conversion) -> list[Colour]:
    """Every other tag value :func:`conversion_for` maps to ``conversion``, one a Colour."""
    base = _tags(conversion)
    ranges = [True] if conversion.full_range else [None, False]
    matrices = [m for m, name in MATRICES.items() if name == conversion.matrix]
    return [
        *(Colour(m, base.full_range) for m in matrices if m != base.matrix),
        *(Colour(base.matrix, r) for r in ranges if r != base.full_range),
        *(Colour(base.matrix, base.full_range, primaries=p) for p in PRIMARIES if p is not None),
        *(Colour(base.matrix, base.full_range, transfer=t) for t in TRANSFERS if t is not None),
    ]


def check(conversion: Conversion) -> bool:
    """Whether cv2 converts as ``conversion``'s closed form: all 2**24 (Y, U, V) under its
    matrix and range tags, and a small random frame under each other tag value
    :func:`conversion_for` admits for it (an odd width included)."""
    expected = closed_form_table(conversion.matrix, full_range=conversion.full_range)
    if not np.array_equal(measure_table(conversion), expected):
        return False
    rng = np.random.default_rng(38)
    y = rng.integers(0, 256, (34, 63), dtype=np.uint8)
    u, v = rng.integers(0, 256, (2, 17, 32), dtype=np.uint8)
    expected = yuv420_to_bgr(y, u, v, conversion)
    with tempfile.TemporaryDirectory(prefix="edgecli-yuv-") as tmp:
        path = Path(tmp) / "tagged.mkv"
        for colour in _tag_variants(conversion):
            write_matroska(path, y, u, v, colour)
            if not np.array_equal(read_first_frame(path), expected):
                return False
    return True


def cache_path() -> Path:
    """Where the verdicts of :func:`check` for this OpenCV build on this CPU are cached. The
    name also covers what the check covers (the coefficients and the admitted tags), so a
    check that changes is made again."""
    covered = repr((_SWS_COEFFS, sorted(MATRICES.items(), key=repr), sorted(PRIMARIES, key=repr)))
    covered += repr(sorted(TRANSFERS, key=repr))
    key = "\n".join([opencv_build_key(), platform.machine(), covered])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"yuv420-verdicts-cv{cv2.__version__}-{digest}.json"


_lock = threading.Lock()
_verdicts: dict[Conversion, bool] = {}


def verified(conversion: Conversion) -> bool:
    """Whether cv2 converts as ``conversion``'s closed form on this OpenCV build and CPU (the
    verdict of :func:`check`): from this process's memory, else from the cache file, else
    checked now (about half a second) and cached. Threads that ask at once wait for one check. Never
    raises: where the check cannot run, the answer is False, for this process only."""
    with _lock:
        if conversion not in _verdicts:
            _verdicts[conversion] = _cached_verdict(conversion)
        return _verdicts[conversion]


def _cached_verdict(conversion: Conversion) -> bool:
    try:
        return cached_verdict(cache_path(), conversion.name, lambda: check(conversion))
    except Exception:  # cv2 or the temporary folder failing is no verdict: not exact, not cached
        return False
