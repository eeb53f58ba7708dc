"""An H.264 stream's format and colour from its sequence parameter set (ITU-T H.264 7.3.2.1.1),
as found in the AVCDecoderConfigurationRecord (``avcC``: MP4's box, Matroska's CodecPrivate)
or in-band before the first picture (``avc3``): chroma format, bit depths, whether pictures
are frames only, and the VUI's video signal type and colour description: read from the
stream's own headers, as the demuxer that feeds NVDEC does not report the colour (it said
"unspecified" of a BT.709 clip). Also the NAL units of a sample, laid out as HEVC's are.

The SPS is read field by field up to the VUI's colour description, the scaling lists and
pic_order_cnt_type 1's cycle included, with emulation prevention bytes removed; nothing after
it is read. Which of several SPSs the decoder uses is :func:`first_sps`'; how FFmpeg resolves
the colour against the container's is :func:`.streams.from_codec`'s. Parameter sets sent later
in the stream (an ``avc3`` stream may send new ones at any keyframe) are not seen.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .bits import Bits, rbsp
from .byte_source import Unreadable

# SPS profile_idc values whose SPS carries chroma_format_idc, bit depths and scaling lists.
_HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}


def avcc_sps(avcc: bytes) -> tuple[int, list[bytes]]:
    """(the byte length of each NAL unit's size in the samples, the SPS NAL units) of an
    AVCDecoderConfigurationRecord (ISO/IEC 14496-15 5.3.3.1)."""
    if len(avcc) < 6 or avcc[0] != 1:
        raise Unreadable("unreadable avcC box")
    nals, _ = config_nals(avcc, 6, avcc[5] & 0x1F, "avcC")
    return (avcc[4] & 3) + 1, nals


def config_nals(record: bytes, pos: int, count: int, box: str) -> tuple[list[bytes], int]:
    """``count`` NAL units of a configuration ``record`` from ``pos`` on, each after its
    16-bit size (avcC's and hvcC's arrays), and where they end."""
    nals = []
    for _ in range(count):
        if pos + 2 > len(record):
            raise Unreadable(f"truncated {box} box")
        (length,) = struct.unpack_from(">H", record, pos)
        nal = record[pos + 2 : pos + 2 + length]
        if len(nal) < length:
            raise Unreadable(f"truncated {box} box")
        nals.append(nal)
        pos += 2 + length
    return nals, pos


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


# ---------------------------------------------------------------------------------------------
# The SPS


@dataclass(frozen=True)
class Sps:
    """The fields of an H.264 sequence parameter set that decide the decoding and the conversion."""

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
