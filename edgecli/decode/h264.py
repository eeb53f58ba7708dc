"""Whether an MP4/QuickTime video is one whose frames NVDEC and ``yuv.nv12_to_bgr`` reproduce.

H.264 decoding is exact, so NVDEC's Y/U/V planes equal FFmpeg's, and what must match
cv2.VideoCapture is only the conversion to BGR: :mod:`edgecli.decode.yuv` reproduces swscale's
BT.601 limited-range conversion of 8-bit 4:2:0, so only streams that cv2 converts that way may
go to NVDEC. The demuxer that feeds NVDEC reports codec, depth and chroma sampling but not the
colour tags (it said "unspecified" of a BT.709 clip), so :func:`stream_reason` reads them from
the file itself, in well under a millisecond and without decoding: the sample entry of the
video track (``moov/trak/mdia/minf/stbl/stsd``), its ``avcC`` SPS and its ``colr`` box.

How FFmpeg resolves the colour that cv2 then converts with:

- The mov demuxer sets the stream's matrix (and, from ``nclx``, its range) from the sample
  entry's ``colr`` box (``nclx``: ISO/IEC 23001-8 code points and a full-range bit; QuickTime's
  ``nclc``: the same code points, no range).
- The h264 decoder then overrides them from the SPS's VUI: ``video_signal_type_present_flag``
  sets the range, ``colour_description_present_flag`` the matrix. Where the VUI says nothing,
  the container's values stand; where neither does, swscale converts as BT.601 limited range.

cv2 follows this order frame by frame (measured on clips whose SPS and ``colr`` disagree), while
ffprobe and ``ffmpeg -i`` show the container's tag: a clip tagged bt470bg in ``colr`` and bt709
in its SPS is converted with BT.709. Here each source is checked on its own: a stream is
admitted only when neither the SPS nor any ``colr`` box names a matrix other than
BT.601/unspecified, or full range. That also refuses the rare files where the container names
another matrix than an SPS that FFmpeg would follow, which costs only a CPU decode. Every SPS
in ``avcC`` counts: FFmpeg keeps the last of several with one id (measured: a second, BT.709
SPS made cv2 convert with BT.709), and every sample entry counts.

Which track cv2 decodes: OpenCV opens the first stream FFmpeg calls video. That is a track whose
handler is ``vide`` or, with any handler but ``soun``, whose sample entry FFmpeg knows as video;
iTunes cover art (``covr``) also becomes a video stream where it comes first. NVDEC's demuxer may
pick another of several video streams (the "best" one), so files with more than one are refused.

What this cannot see: parameter sets sent in the stream rather than the sample entry (``avc3``
may carry all of them in-band; an ``avc1`` stream may repeat or change them), which could
change the colour or format mid-stream. Files muxed from such streams are unusual.

What FFmpeg does to the frames after decoding them (:mod:`.mp4`): it exports the display
matrix of the track's ``tkhd`` box times the movie's ``mvhd`` box, which cv2 5.x applies (a
phone's portrait clip comes out turned); it drops frames outside the span of an edit list
(``elst``), which a ``-ss … -c copy`` cut starts mid-GOP; and its decoder returns nothing before
the first keyframe. NVDEC does none of these, so such files are refused: a display matrix other
than the identity, an edit list that drops a frame, a first sample that is no sync sample.

Where the samples lie: a file cut short (a copy or a recording that stopped) still has its
whole moov when moov comes first, and NVDEC then conceals and returns a couple of partial frames
more than FFmpeg does (measured: cv2 decoded 32 of 90 frames, NVDEC 34), so a stream is admitted
only when every sample of its video track, as the moov's ``stsz``/``stz2``, ``stsc`` and
``stco``/``co64`` tables place it, lies within the file. Bytes after the last sample are
harmless. Fragmented files (``mvex`` in moov, ``moof`` boxes) keep samples outside these tables
and are refused whole.

Boxes are walked with seeks: only box headers, ``hdlr``, ``stsd``, the metadata headers and the
video track's three sample tables above are read (one read each, summed with numpy), never the
other tables (``stts``, ``ctts``, ``stss``) or the media data: a 36000-frame file is judged in
about a millisecond.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from .bits import Bits, rbsp
from .mp4 import (
    H264_ENTRIES,
    MALFORMED,
    VISUAL_ENTRY_FIELDS,
    Box,
    BytesSource,
    FileSource,
    Source,
    Track,
    Unreadable,
    children,
    display_reason,
    edit_reason,
    find_video,
    first_frame_reason,
    fourcc,
    samples_reason,
)

# SPS profile_idc values whose SPS carries chroma_format_idc, bit depths and scaling lists.
_HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}

# matrix_coefficients (ITU-T H.273) that swscale converts with the BT.601 coefficients.
_BT601_MATRICES = {2, 5, 6}  # unspecified, bt470bg, smpte170m
_MATRIX_NAMES = {
    0: "gbr", 1: "bt709", 3: "reserved", 4: "fcc", 7: "smpte240m", 8: "ycgco", 9: "bt2020nc",
    10: "bt2020c", 11: "smpte2085", 12: "chroma-derived-nc", 13: "chroma-derived-c", 14: "ictcp",
    15: "ipt-c2", 16: "ycgco-re", 17: "ycgco-ro",
}  # fmt: skip
_CHROMA_NAMES = {0: "4:0:0", 1: "4:2:0", 2: "4:2:2", 3: "4:4:4"}


def stream_reason(path: Path) -> str | None:
    """None when the file's first video track is H.264 (avc1/avc3 sample entry) with an SPS
    saying: chroma_format_idc 1 (4:2:0), 8-bit luma and chroma, frame_mbs_only_flag 1
    (progressive), and its colour as FFmpeg resolves it is BT.601-or-unspecified matrix and
    limited-or-unspecified range, FFmpeg shows every sample as decoded (no display matrix,
    no edit list that drops a frame, a keyframe first), and every sample of the track lies
    within the file; else a short reason string ("not H.264 (hvc1)", "4:2:2 chroma",
    "10-bit", "interlaced", "matrix bt709", "full range", "rotated 90°", "an edit list that
    starts after the first frame", "the first frame is not a keyframe", "no moov box",
    "unreadable SPS", "fragmented MP4", "samples past the end of the file (truncated?)", ...).
    The codec and colour reasons come before those of the presentation and the sample
    layout."""
    try:
        with open(path, "rb") as f:
            return _file_reason(FileSource(f))
    except OSError as exc:
        return f"cannot read the file ({exc.strerror or exc})"
    except Unreadable as exc:
        return str(exc)
    except MALFORMED as exc:  # a case missed above
        return f"unreadable file ({type(exc).__name__})"


# ---------------------------------------------------------------------------------------------
# The video track (the file's boxes: .mp4)


def _file_reason(source: Source) -> str | None:
    video = find_video(source)
    if isinstance(video, str):
        return video
    track, moov = video.track, video.moov
    reason = (
        _entries_reason(track)
        or display_reason(source, moov, track)
        or edit_reason(source, moov, track)
        or first_frame_reason(source, track)
    )
    if reason is not None:
        return reason
    if video.fragmented:
        return "fragmented MP4"
    return samples_reason(source, track.stbl)


def _entries_reason(track: Track) -> str | None:
    if not track.entries:
        return "no sample entry"
    for kind, body in track.entries:
        reason = _entry_reason(kind, body)
        if reason is not None:
            return reason
    return None


# ---------------------------------------------------------------------------------------------
# The sample entry: avcC and colr


def _entry_reason(kind: bytes, body: bytes) -> str | None:
    if kind not in H264_ENTRIES:
        return f"not H.264 ({fourcc(kind)})"
    if len(body) < VISUAL_ENTRY_FIELDS:
        return f"truncated {fourcc(kind)} sample entry"
    source = BytesSource(body)
    avcc, colrs = None, []
    for box in children(source, Box(kind, VISUAL_ENTRY_FIELDS, len(body))):
        if box.type == b"avcC" and avcc is None:
            avcc = body[box.start : box.end]
        elif box.type == b"colr":
            colrs.append(body[box.start : box.end])
    if avcc is None:
        return "no avcC box"
    sps_nals = _avcc_sps(avcc)
    if not sps_nals:
        return "no SPS in the avcC box"
    for nal in sps_nals:
        reason = _sps_reason(parse_sps(nal))
        if reason is not None:
            return reason
    for colr in colrs:
        reason = _colr_reason(colr)
        if reason is not None:
            return reason
    return None


def _avcc_sps(avcc: bytes) -> list[bytes]:
    """The SPS NAL units of an AVCDecoderConfigurationRecord."""
    return avcc_sps(avcc)[1]


def avcc_sps(avcc: bytes) -> tuple[int, list[bytes]]:
    """(the byte length of each NAL unit's size in the samples, the SPS NAL units) of an
    AVCDecoderConfigurationRecord (ISO/IEC 14496-15 5.3.3.1)."""
    if len(avcc) < 6 or avcc[0] != 1:
        raise Unreadable("unreadable avcC box")
    count, pos, nals = avcc[5] & 0x1F, 6, []
    for _ in range(count):
        if pos + 2 > len(avcc):
            raise Unreadable("truncated avcC box")
        (length,) = struct.unpack_from(">H", avcc, pos)
        nal = avcc[pos + 2 : pos + 2 + length]
        if len(nal) < length:
            raise Unreadable("truncated avcC box")
        nals.append(nal)
        pos += 2 + length
    return (avcc[4] & 3) + 1, nals


def sample_nals(sample: bytes, length_size: int) -> list[bytes]:
    """The NAL units of an MP4/Matroska sample: each after its size in ``length_size`` bytes."""
    nals, pos = [], 0
    while pos < len(sample):
        if pos + length_size > len(sample):
            raise Unreadable("unreadable first frame")
        length = int.from_bytes(sample[pos : pos + length_size], "big")
        pos += length_size
        if length == 0 or pos + length > len(sample):
            raise Unreadable("unreadable first frame")
        nals.append(sample[pos : pos + length])
        pos += length
    return nals


def first_sps(config: bytes | None, first_frame: bytes | None) -> Sps | None:
    """The SPS the decoder holds when it decodes the first picture: the last one of the avcC
    record and of the first sample's NAL units before its first slice (an ``avc3`` stream
    sends them in-band); None where there is none."""
    length_size, nals = avcc_sps(config) if config else (4, [])
    for nal in sample_nals(first_frame or b"", length_size):
        kind = nal[0] & 0x1F
        if 1 <= kind <= 5:  # a slice: the parameter sets it uses came before it
            break
        if kind == 7:
            nals.append(nal)
    return parse_sps(nals[-1]) if nals else None


def _matrix_reason(matrix: int) -> str | None:
    if matrix in _BT601_MATRICES:
        return None
    return f"matrix {_MATRIX_NAMES.get(matrix, matrix)}"


def _colr_reason(colr: bytes) -> str | None:
    kind = colr[:4]
    if kind not in (b"nclx", b"nclc"):
        return None  # an ICC profile ('prof', 'rICC'): FFmpeg does not convert by it
    if len(colr) < 10 + (kind == b"nclx"):
        raise Unreadable("truncated colr box")
    (matrix,) = struct.unpack_from(">H", colr, 8)
    reason = _matrix_reason(matrix)
    if reason is None and kind == b"nclx" and colr[10] & 0x80:
        reason = "full range"
    return reason


# ---------------------------------------------------------------------------------------------
# The SPS


@dataclass(frozen=True)
class Sps:
    """The fields of an H.264 sequence parameter set that decide the conversion."""

    profile_idc: int
    chroma_format_idc: int
    bit_depth_luma: int
    bit_depth_chroma: int
    frame_mbs_only: bool
    full_range: bool | None  # None: no video_signal_type in the VUI
    matrix: int | None  # matrix_coefficients; None: no colour description in the VUI
    primaries: int | None = None  # colour_primaries, as matrix
    transfer: int | None = None  # transfer_characteristics, as matrix


def _skip_scaling_list(bits: Bits, size: int) -> None:
    """scaling_list() of 7.3.2.1.1.1: deltas until nextScale is 0 or the list is full."""
    last = 8
    for _ in range(size):
        delta = bits.se()
        if not -128 <= delta <= 127:
            raise Unreadable("unreadable SPS")
        last = (last + delta) % 256
        if last == 0:  # the rest of the list repeats the last value: nothing more is coded
            return


def parse_sps(nal: bytes) -> Sps:
    """The fields of an SPS NAL unit (ITU-T H.264 7.3.2.1.1) up to the VUI's colour
    description; raises ValueError ("unreadable SPS") where it is not one."""
    if not nal or nal[0] & 0x1F != 7:
        raise Unreadable("unreadable SPS")
    bits = Bits(rbsp(nal, 1), "SPS")
    profile_idc = bits.u(8)
    bits.u(16)  # constraint_set flags, reserved_zero_2bits, level_idc
    bits.ue(31)  # seq_parameter_set_id
    chroma, depth_luma, depth_chroma = 1, 8, 8
    if profile_idc in _HIGH_PROFILES:
        chroma = bits.ue(3)
        if chroma == 3:
            bits.flag()  # separate_colour_plane_flag
        depth_luma = 8 + bits.ue(6)
        depth_chroma = 8 + bits.ue(6)
        bits.flag()  # qpprime_y_zero_transform_bypass_flag
        if bits.flag():  # seq_scaling_matrix_present_flag
            for i in range(8 if chroma != 3 else 12):
                if bits.flag():  # seq_scaling_list_present_flag[i]
                    _skip_scaling_list(bits, 16 if i < 6 else 64)
    bits.ue(12)  # log2_max_frame_num_minus4
    poc_type = bits.ue(2)
    if poc_type == 0:
        bits.ue(12)  # log2_max_pic_order_cnt_lsb_minus4
    elif poc_type == 1:
        bits.flag()  # delta_pic_order_always_zero_flag
        bits.se()  # offset_for_non_ref_pic
        bits.se()  # offset_for_top_to_bottom_field
        for _ in range(bits.ue(255)):  # num_ref_frames_in_pic_order_cnt_cycle
            bits.se()  # offset_for_ref_frame[i]
    bits.ue()  # max_num_ref_frames
    bits.flag()  # gaps_in_frame_num_value_allowed_flag
    bits.ue()  # pic_width_in_mbs_minus1
    bits.ue()  # pic_height_in_map_units_minus1
    frame_mbs_only = bits.flag()
    if not frame_mbs_only:
        bits.flag()  # mb_adaptive_frame_field_flag
    bits.flag()  # direct_8x8_inference_flag
    if bits.flag():  # frame_cropping_flag
        for _ in range(4):
            bits.ue()  # frame_crop_{left,right,top,bottom}_offset
    full_range, colour = _vui_colour(bits) if bits.flag() else (None, None)
    primaries, transfer, matrix = colour or (None, None, None)
    return Sps(
        profile_idc, chroma, depth_luma, depth_chroma, frame_mbs_only, full_range, matrix,
        primaries, transfer,
    )  # fmt: skip


def _vui_colour(bits: Bits) -> tuple[bool | None, tuple[int, int, int] | None]:
    """(video_full_range_flag, (colour_primaries, transfer_characteristics,
    matrix_coefficients)) of vui_parameters() (E.1.1), each None where the VUI leaves it out;
    the rest of the VUI is not read."""
    if bits.flag():  # aspect_ratio_info_present_flag
        if bits.u(8) == 255:  # aspect_ratio_idc: Extended_SAR
            bits.u(32)  # sar_width, sar_height
    if bits.flag():  # overscan_info_present_flag
        bits.flag()  # overscan_appropriate_flag
    if not bits.flag():  # video_signal_type_present_flag
        return None, None
    bits.u(3)  # video_format
    full_range = bits.flag()
    if not bits.flag():  # colour_description_present_flag
        return full_range, None
    return full_range, (bits.u(8), bits.u(8), bits.u(8))


def _sps_reason(sps: Sps) -> str | None:
    if sps.chroma_format_idc != 1:
        return f"{_CHROMA_NAMES[sps.chroma_format_idc]} chroma"
    if sps.bit_depth_luma != 8 or sps.bit_depth_chroma != 8:
        if sps.bit_depth_luma == sps.bit_depth_chroma:
            return f"{sps.bit_depth_luma}-bit"
        return f"{sps.bit_depth_luma}-bit luma, {sps.bit_depth_chroma}-bit chroma"
    if not sps.frame_mbs_only:
        return "interlaced"
    if sps.matrix is not None and (reason := _matrix_reason(sps.matrix)) is not None:
        return reason
    if sps.full_range:
        return "full range"
    return None
