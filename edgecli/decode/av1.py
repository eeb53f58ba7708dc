"""An AV1 stream's format and colour: from its sequence header OBU (AV1 bitstream
specification 5.5: seq_profile and color_config), found in the AV1CodecConfigurationRecord
(``av1C``: MP4's box, Matroska's CodecPrivate) after its four fixed bytes, or in the first
temporal unit, whose keyframe is preceded by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bits import Bits
from .byte_source import Unreadable

_OBU_SEQUENCE_HEADER = 1
_MAX_OBUS = 1024  # OBUs looked through for a sequence header


@dataclass(frozen=True)
class SequenceHeader:
    """What an AV1 sequence header's color_config says (5.5.2); primaries, transfer and matrix
    None where it has no colour description (the specification infers "unspecified", but
    FFmpeg then keeps the container's)."""

    profile: int
    bit_depth: int
    monochrome: bool
    subsampling: tuple[int, int]  # (subsampling_x, subsampling_y)
    primaries: int | None
    transfer: int | None
    matrix: int | None
    full_range: bool


@dataclass(frozen=True)
class Record:
    """The fixed fields of an av1C record (its first four bytes)."""

    profile: int
    bit_depth: int
    monochrome: bool
    subsampling: tuple[int, int]


def parse_av1c(av1c: bytes) -> tuple[Record, bytes]:
    """The fixed fields of an av1C record and its configOBUs."""
    if len(av1c) < 4 or av1c[0] != 0x81:  # marker 1, version 1
        raise Unreadable("unreadable av1C box")
    flags = av1c[2]
    high, twelve = bool(flags & 0x40), bool(flags & 0x20)
    depth = 12 if twelve else 10 if high else 8
    record = Record(av1c[1] >> 5, depth, bool(flags & 0x10), ((flags >> 3) & 1, (flags >> 2) & 1))
    return record, av1c[4:]


def find_sequence_header(obus: bytes) -> SequenceHeader | None:
    """The first sequence header among OBUs in low-overhead format (each with its size, 5.2),
    as the configOBUs of av1C and the samples of MP4 and Matroska hold them; None where there
    is none."""
    pos = 0
    for _ in range(_MAX_OBUS):
        if pos >= len(obus):
            return None
        header = obus[pos]
        if header & 0x80:  # obu_forbidden_bit
            raise Unreadable("unreadable AV1 OBU")
        kind, extension, has_size = (header >> 3) & 15, bool(header & 4), bool(header & 2)
        pos += 1 + extension
        if not has_size:  # the OBU runs to the end
            size = len(obus) - pos
        else:
            size, pos = _leb128(obus, pos)
        if pos + size > len(obus):
            raise Unreadable("truncated AV1 OBU")
        if kind == _OBU_SEQUENCE_HEADER:
            return parse_sequence_header(obus[pos : pos + size])
        pos += size
    raise Unreadable(f"more than {_MAX_OBUS} OBUs before a sequence header")


def _leb128(data: bytes, pos: int) -> tuple[int, int]:
    """leb128() (4.10.5): the value and the position after it."""
    value = 0
    for i in range(8):
        if pos + i >= len(data):
            raise Unreadable("truncated AV1 OBU")
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise Unreadable("unreadable AV1 OBU size")


def parse_sequence_header(obu: bytes) -> SequenceHeader:
    """sequence_header_obu() (5.5.1) up to color_config()."""
    bits = Bits(obu, "AV1 sequence header")
    profile = bits.u(3)
    if profile > 2:
        raise bits.fail()
    bits.skip(1)  # still_picture
    reduced = bits.flag()  # reduced_still_picture_header
    if reduced:
        bits.skip(5)  # seq_level_idx[0]
    else:
        decoder_model, delay_length = False, 0
        if bits.flag():  # timing_info_present_flag
            bits.skip(64)  # num_units_in_display_tick, time_scale
            if bits.flag():  # equal_picture_interval
                bits.uvlc()  # num_ticks_per_picture_minus_1
            decoder_model = bits.flag()  # decoder_model_info_present_flag
            if decoder_model:
                delay_length = bits.u(5) + 1  # buffer_delay_length_minus_1
                bits.skip(32 + 5 + 5)  # tick, removal and presentation time lengths
        display_delay = bits.flag()  # initial_display_delay_present_flag
        for _ in range(bits.u(5) + 1):  # operating_points_cnt_minus_1
            bits.skip(12)  # operating_point_idc
            if bits.u(5) > 7:  # seq_level_idx
                bits.skip(1)  # seq_tier
            if decoder_model and bits.flag():  # decoder_model_present_for_this_op
                bits.skip(2 * delay_length + 1)  # buffer delays, low_delay_mode_flag
            if display_delay and bits.flag():  # initial_display_delay_present_for_this_op
                bits.skip(4)  # initial_display_delay_minus_1
    width_bits, height_bits = bits.u(4) + 1, bits.u(4) + 1
    bits.skip(width_bits + height_bits)  # max_frame_width_minus_1, max_frame_height_minus_1
    if not reduced and bits.flag():  # frame_id_numbers_present_flag
        bits.skip(7)  # delta_frame_id_length_minus_2, additional_frame_id_length_minus_1
    bits.skip(3)  # use_128x128_superblock, enable_filter_intra, enable_intra_edge_filter
    if not reduced:
        bits.skip(4)  # interintra and masked compound, warped motion, dual filter
        order_hint = bits.flag()  # enable_order_hint
        if order_hint:
            bits.skip(2)  # enable_jnt_comp, enable_ref_frame_mvs
        if bits.flag() or bits.flag():  # seq_choose_screen_content_tools, or force
            if not bits.flag():  # seq_choose_integer_mv
                bits.skip(1)  # seq_force_integer_mv
        if order_hint:
            bits.skip(3)  # order_hint_bits_minus_1
    bits.skip(3)  # enable_superres, enable_cdef, enable_restoration
    return _color_config(bits, profile)


def _color_config(bits: Bits, profile: int) -> SequenceHeader:
    """color_config() (5.5.2)."""
    high_bitdepth = bits.flag()
    depth = 8
    if profile == 2 and high_bitdepth:
        depth = 12 if bits.flag() else 10  # twelve_bit
    elif high_bitdepth:
        depth = 10
    monochrome = profile != 1 and bits.flag()  # mono_chrome
    primaries = transfer = matrix = None
    if bits.flag():  # color_description_present_flag
        primaries, transfer, matrix = bits.u(8), bits.u(8), bits.u(8)
    if monochrome:
        full_range, subsampling = bits.flag(), (1, 1)
    elif (primaries, transfer, matrix) == (1, 13, 0):  # BT.709 primaries, sRGB, identity
        full_range, subsampling = True, (0, 0)
    else:
        full_range = bits.flag()  # color_range
        if profile == 0:
            subsampling = (1, 1)
        elif profile == 1:
            subsampling = (0, 0)
        elif depth == 12:
            x = bits.u(1)
            subsampling = (x, bits.u(1) if x else 0)
        else:
            subsampling = (1, 0)
    return SequenceHeader(
        profile, depth, monochrome, subsampling, primaries, transfer, matrix, full_range
    )
