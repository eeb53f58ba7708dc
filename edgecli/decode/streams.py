"""What a video file's stream is, as far as it decides whether NVDEC and the conversion kernel
give exactly cv2.VideoCapture's frames: its codec and sampling, its colour as FFmpeg resolves it
for the frames cv2 converts, and the turn cv2 gives each frame. Read from the container and the
codec's configuration, without decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import av1, h264, hevc, vp9
from .byte_source import MALFORMED, Unreadable


@dataclass(frozen=True)
class Colour:
    """A colour description by ITU-T H.273 code points; None where it is not given."""

    matrix: int | None = None  # matrix_coefficients
    full_range: bool | None = None  # video_full_range_flag
    primaries: int | None = None  # colour_primaries
    transfer: int | None = None  # transfer_characteristics


@dataclass(frozen=True)
class VideoStream:
    """The stream cv2 decodes from a file: ``codec`` by FFmpeg's name ("h264", "hevc", "vp9",
    "av1", ...), in ``container`` ("mp4": MP4/MOV/M4V; "matroska": MKV/WebM); its ``chroma``
    sampling ("4:2:0", "4:2:2", "4:4:4", "4:0:0"), luma bit ``depth`` and whether it is
    ``progressive``; its ``colour`` as FFmpeg resolves it for the frames cv2 converts (the
    codec's rules for what overrides the container already applied; None where nothing says);
    and ``rotation``, the clockwise turn cv2 gives each frame (0, 90, 180 or 270)."""

    codec: str
    container: str
    chroma: str
    depth: int
    progressive: bool
    colour: Colour
    rotation: int = 0


# ---------------------------------------------------------------------------------------------
# A stream from its codec's configuration and first frame


_CHROMA = {0: "4:0:0", 1: "4:2:0", 2: "4:2:2", 3: "4:4:4"}  # chroma_format_idc
_SUBSAMPLING = {(1, 1): "4:2:0", (1, 0): "4:2:2", (0, 0): "4:4:4"}  # (x, y) halved
_UNSPECIFIED = 2  # the H.273 code point "unspecified" of primaries, transfer and matrix


def _code(value: int | None) -> int | None:
    return None if value == _UNSPECIFIED else value


def from_codec(
    codec: str,
    config: bytes | None,
    first_frame: bytes | None,
    container_colour: Colour,
    container: str,
    rotation: int,
) -> VideoStream | str:
    """The stream of a ``codec`` (FFmpeg's name) whose configuration record is ``config``
    (avcC, hvcC, vpcC or av1C; Matroska's CodecPrivate) and whose first sample is
    ``first_frame`` (NAL units after their sizes; a VP9 frame or superframe; an AV1 temporal
    unit), in a container that says ``container_colour`` and turns it by ``rotation``; or why
    it cannot be described ("unreadable HEVC SPS", "codec mpeg4", ...).

    The colour is what FFmpeg's decoder leaves on the frames cv2 converts, per codec:

    - h264: the SPS's VUI where it says (its video_signal_type the range, its
      colour_description the matrix, primaries and transfer), else the container's.
    - hevc: the SPS's VUI always: where it is silent the decoder sets limited range and
      unspecified colour, whatever the container says.
    - vp9: the keyframe's color_space and color_range always (its CS_UNKNOWN is unspecified);
      the bitstream has no primaries or transfer, so the container's stand.
    - av1: the sequence header's color_range always; its colour description where it has
      one, else the container's matrix, primaries and transfer.
    """
    reader = _READERS.get(codec)
    if reader is None:
        return f"codec {codec}"
    try:
        described = reader(config, first_frame, container_colour)
    except Unreadable as exc:
        return str(exc)
    except MALFORMED as exc:  # a case the readers' checks missed
        return f"unreadable {codec} configuration ({type(exc).__name__})"
    if isinstance(described, str):
        return described
    chroma, depth, progressive, colour = described
    return VideoStream(codec, container, chroma, depth, progressive, colour, rotation)


_Described = tuple[str, int, bool, Colour] | str


def _h264(config: bytes | None, first_frame: bytes | None, outer: Colour) -> _Described:
    sps = h264.first_sps(config, first_frame)
    if sps is None:
        return "no SPS"
    if sps.bit_depth_luma != sps.bit_depth_chroma:
        return f"{sps.bit_depth_luma}-bit luma, {sps.bit_depth_chroma}-bit chroma"
    full_range = sps.full_range if sps.full_range is not None else outer.full_range
    if sps.matrix is None:
        colour = Colour(outer.matrix, full_range, outer.primaries, outer.transfer)
    else:
        colour = Colour(_code(sps.matrix), full_range, _code(sps.primaries), _code(sps.transfer))
    chroma = _CHROMA[sps.chroma_format_idc]
    return chroma, sps.bit_depth_luma, sps.frame_mbs_only, colour


def _hevc(config: bytes | None, first_frame: bytes | None, outer: Colour) -> _Described:
    sps = hevc.first_sps(config, first_frame)
    if sps is None:
        return "no SPS"
    if sps.bit_depth_luma != sps.bit_depth_chroma:
        return f"{sps.bit_depth_luma}-bit luma, {sps.bit_depth_chroma}-bit chroma"
    colour = Colour(
        _code(sps.matrix), bool(sps.full_range), _code(sps.primaries), _code(sps.transfer)
    )
    chroma = _CHROMA[sps.chroma_format_idc]
    return chroma, sps.bit_depth_luma, not sps.field_seq, colour


def _vp9(config: bytes | None, first_frame: bytes | None, outer: Colour) -> _Described:
    # The decoder takes the format and colour from the frame header; the vpcC record's colour
    # is the container's (``outer``).
    header = vp9.parse_header(first_frame) if first_frame else None
    if header is None:
        return "no VP9 keyframe first"
    chroma = _SUBSAMPLING.get(header.subsampling)
    if chroma is None:
        return f"VP9 subsampling {header.subsampling}"
    colour = Colour(_code(header.matrix), header.full_range, outer.primaries, outer.transfer)
    return chroma, header.bit_depth, True, colour


def _av1(config: bytes | None, first_frame: bytes | None, outer: Colour) -> _Described:
    # The decoder takes the sequence header of the first temporal unit over the record's.
    header = av1.find_sequence_header(first_frame) if first_frame else None
    if config is not None:
        _, obus = av1.parse_av1c(config)
        header = header or av1.find_sequence_header(obus)
    if header is None:
        return "no AV1 sequence header"
    chroma = "4:0:0" if header.monochrome else _SUBSAMPLING.get(header.subsampling)
    if chroma is None:
        return f"AV1 subsampling {header.subsampling}"
    if header.matrix is None:
        colour = Colour(outer.matrix, header.full_range, outer.primaries, outer.transfer)
    else:
        colour = Colour(
            _code(header.matrix), header.full_range, _code(header.primaries),
            _code(header.transfer),
        )  # fmt: skip
    return chroma, header.bit_depth, True, colour


_READERS = {"h264": _h264, "hevc": _hevc, "vp9": _vp9, "av1": _av1}


# ---------------------------------------------------------------------------------------------
# The turn cv2 gives the frames


def cv2_rotation(matrix: tuple[int, ...]) -> int:
    """The clockwise turn (0, 90, 180 or 270) cv2 5.x gives the frames of a stream with this
    display matrix (FFmpeg's layout: a, b, u, c, d, v, x, y, w; 16.16 fixed point, u, v, w
    2.30). OpenCV takes ``-cvRound(av_display_rotation_get(matrix))``, adds 360 where that is
    negative and turns the frame only for exactly 90, 180 or 270: a mirror is read as a half
    turn (a horizontal one) or none (a vertical one), 89.9 degrees rounds to a quarter turn,
    45 degrees and a degenerate matrix give none."""
    if len(matrix) != 9:
        raise ValueError(f"a display matrix has 9 entries, not {len(matrix)}")
    a, b, c, d = (value / (1 << 16) for value in (matrix[0], matrix[1], matrix[3], matrix[4]))
    scale_x, scale_y = math.hypot(a, c), math.hypot(b, d)
    if scale_x == 0 or scale_y == 0:  # FFmpeg's angle is NaN; cvRound(NaN) is no right angle
        return 0
    ffmpeg_angle = -(math.atan2(b / scale_y, a / scale_x) * 180 / math.pi)
    angle = -round(ffmpeg_angle)  # cvRound rounds half to even, as round() does
    if angle < 0:
        angle += 360
    return angle if angle in (90, 180, 270) else 0
