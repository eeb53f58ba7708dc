"""An HEVC stream's format and colour from its sequence parameter set (ITU-T H.265 7.3.2.2),
as found in the HEVCDecoderConfigurationRecord (``hvcC``: MP4's box, Matroska's CodecPrivate)
or in-band before the first picture (``hev1``): chroma format, bit depths, the VUI's video
signal type and colour description, and whether pictures are fields.

The SPS is read field by field up to the VUI, so every structure before it is parsed as the
standard lays it out: the profile_tier_level of each sub-layer, the conformance window, the
scaling lists, PCM, the short-term reference picture sets (whose inter-prediction depends on
the sets before) and the long-term ones. Every count is bounded as the standard bounds it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .bits import Bits, rbsp
from .byte_source import Unreadable
from .h264 import config_nals, sample_nals

_SPS = 33  # nal_unit_type of an SPS
_VCL = range(0, 32)  # nal_unit_types of coded slices (and reserved VCL types)


@dataclass(frozen=True)
class Sps:
    """The fields of an HEVC SPS that decide the decoding and the conversion."""

    profile_idc: int  # general_profile_idc: 1 Main, 2 Main 10, 4 range extensions, ...
    chroma_format_idc: int
    bit_depth_luma: int
    bit_depth_chroma: int
    field_seq: bool  # VUI field_seq_flag: each picture is a field
    full_range: bool | None  # None: no video_signal_type in the VUI
    primaries: int | None  # colour_primaries; None: no colour description in the VUI
    transfer: int | None
    matrix: int | None


def hvcc_sps(hvcc: bytes) -> tuple[int, list[bytes]]:
    """(the byte length of each NAL unit's size in the samples, the SPS NAL units) of an
    HEVCDecoderConfigurationRecord (ISO/IEC 14496-15 8.3.3.1)."""
    if len(hvcc) < 23 or hvcc[0] != 1:
        raise Unreadable("unreadable hvcC box")
    length_size = (hvcc[21] & 3) + 1
    pos, nals = 23, []
    for _ in range(hvcc[22]):  # numOfArrays
        if pos + 3 > len(hvcc):
            raise Unreadable("truncated hvcC box")
        kind, count = hvcc[pos] & 0x3F, struct.unpack_from(">H", hvcc, pos + 1)[0]
        found, pos = config_nals(hvcc, pos + 3, count, "hvcC")
        if kind == _SPS:
            nals += found
    return length_size, nals


def first_sps(config: bytes | None, first_frame: bytes | None) -> Sps | None:
    """The SPS the decoder holds when it decodes the first picture: the last base-layer one of
    the hvcC record and of the first sample's NAL units before its first slice; None where
    there is none."""
    length_size, nals = hvcc_sps(config) if config else (4, [])
    for nal in sample_nals(first_frame or b"", length_size):
        if len(nal) < 2:
            raise Unreadable("unreadable first frame")
        kind = (nal[0] >> 1) & 0x3F
        if kind in _VCL:
            break
        if kind == _SPS:
            nals.append(nal)
    base = [nal for nal in nals if len(nal) >= 2 and _layer(nal) == 0]
    return parse_sps(base[-1]) if base else None


def _layer(nal: bytes) -> int:
    """The NAL unit's nuh_layer_id: 0 for the base layer, the one decoded."""
    return ((nal[0] & 1) << 5) | (nal[1] >> 3)


def parse_sps(nal: bytes) -> Sps:
    """The fields of an SPS NAL unit (ITU-T H.265 7.3.2.2.1) up to the VUI's field_seq_flag;
    raises Unreadable ("unreadable HEVC SPS") where it is not one."""
    if len(nal) < 2 or (nal[0] >> 1) & 0x3F != _SPS:
        raise Unreadable("unreadable HEVC SPS")
    bits = Bits(rbsp(nal, 2), "HEVC SPS")
    bits.skip(4)  # sps_video_parameter_set_id
    sub_layers = bits.u(3)  # sps_max_sub_layers_minus1
    if sub_layers > 6:
        raise bits.fail()
    bits.skip(1)  # sps_temporal_id_nesting_flag
    profile_idc = _profile_tier_level(bits, sub_layers)
    bits.ue(15)  # sps_seq_parameter_set_id
    chroma = bits.ue(3)
    if chroma == 3:
        bits.skip(1)  # separate_colour_plane_flag
    bits.ue()  # pic_width_in_luma_samples
    bits.ue()  # pic_height_in_luma_samples
    if bits.flag():  # conformance_window_flag
        for _ in range(4):
            bits.ue()  # conf_win_{left,right,top,bottom}_offset
    depth_luma = 8 + bits.ue(8)
    depth_chroma = 8 + bits.ue(8)
    poc_lsb_bits = 4 + bits.ue(12)  # log2_max_pic_order_cnt_lsb_minus4
    ordering_info = bits.flag()  # sps_sub_layer_ordering_info_present_flag
    for _ in range(sub_layers + 1 if ordering_info else 1):
        bits.ue()  # sps_max_dec_pic_buffering_minus1
        bits.ue()  # sps_max_num_reorder_pics
        bits.ue()  # sps_max_latency_increase_plus1
    for _ in range(6):
        bits.ue()  # coding and transform block sizes, transform hierarchy depths
    if bits.flag() and bits.flag():  # scaling_list_enabled, sps_scaling_list_data_present
        _skip_scaling_list_data(bits)
    bits.skip(2)  # amp_enabled_flag, sample_adaptive_offset_enabled_flag
    if bits.flag():  # pcm_enabled_flag
        bits.skip(8)  # pcm_sample_bit_depth_{luma,chroma}_minus1
        bits.ue()  # log2_min_pcm_luma_coding_block_size_minus3
        bits.ue()  # log2_diff_max_min_pcm_luma_coding_block_size
        bits.skip(1)  # pcm_loop_filter_disabled_flag
    _skip_short_term_ref_pic_sets(bits, bits.ue(64))
    if bits.flag():  # long_term_ref_pics_present_flag
        for _ in range(bits.ue(32)):  # num_long_term_ref_pics_sps
            bits.skip(poc_lsb_bits + 1)  # lt_ref_pic_poc_lsb_sps, used_by_curr_pic_lt_sps_flag
    bits.skip(2)  # sps_temporal_mvp_enabled_flag, strong_intra_smoothing_enabled_flag
    vui = _vui(bits) if bits.flag() else (None, None, False)
    full_range, colour, field_seq = vui
    primaries, transfer, matrix = colour or (None, None, None)
    return Sps(
        profile_idc, chroma, depth_luma, depth_chroma, field_seq, full_range,
        primaries, transfer, matrix,
    )  # fmt: skip


def _profile_tier_level(bits: Bits, sub_layers: int) -> int:
    """profile_tier_level(1, sps_max_sub_layers_minus1) (7.3.3); its general_profile_idc."""
    bits.skip(3)  # general_profile_space, general_tier_flag
    profile_idc = bits.u(5)
    bits.skip(32 + 48)  # compatibility flags; source, constraint and reserved flags
    bits.skip(8)  # general_level_idc
    present = [(bits.flag(), bits.flag()) for _ in range(sub_layers)]
    if sub_layers > 0:
        bits.skip(2 * (8 - sub_layers))  # reserved_zero_2bits
    for profile_present, level_present in present:
        bits.skip(88 * profile_present + 8 * level_present)
    return profile_idc


def _skip_scaling_list_data(bits: Bits) -> None:
    """scaling_list_data() (7.3.4)."""
    for size_id in range(4):
        for _ in range(0, 6, 3 if size_id == 3 else 1):
            if not bits.flag():  # scaling_list_pred_mode_flag
                bits.ue(5)  # scaling_list_pred_matrix_id_delta
                continue
            if size_id > 1:
                bits.se(128)  # scaling_list_dc_coef_minus8
            for _ in range(min(64, 1 << (4 + 2 * size_id))):
                bits.se(128)  # scaling_list_delta_coef


def _skip_short_term_ref_pic_sets(bits: Bits, count: int) -> None:
    """The SPS's st_ref_pic_set(i) for i < ``count`` (7.3.7). A set predicted from the one
    before it codes a flag or two per picture of that set, and holds those flagged used (as
    FFmpeg counts them), so only each set's count of pictures is tracked."""
    pictures: list[int] = []
    for index in range(count):
        if index and bits.flag():  # inter_ref_pic_set_prediction_flag
            bits.skip(1)  # delta_rps_sign
            bits.ue(1 << 15)  # abs_delta_rps_minus1
            kept = 0
            for _ in range(pictures[-1] + 1):
                used = bits.flag()  # used_by_curr_pic_flag
                kept += used or bits.flag()  # use_delta_flag
            pictures.append(kept)
        else:
            negative, positive = bits.ue(16), bits.ue(16)
            for _ in range(negative + positive):
                bits.ue(1 << 15)  # delta_poc_s{0,1}_minus1
                bits.skip(1)  # used_by_curr_pic_s{0,1}_flag
            pictures.append(negative + positive)
        if pictures[-1] > 32:
            raise bits.fail()


def _vui(bits: Bits) -> tuple[bool | None, tuple[int, int, int] | None, bool]:
    """(video_full_range_flag, (colour_primaries, transfer_characteristics,
    matrix_coefficients), field_seq_flag) of vui_parameters() (E.2.1), the first two None
    where the VUI leaves them out; the rest of the VUI is not read."""
    if bits.flag():  # aspect_ratio_info_present_flag
        if bits.u(8) == 255:  # aspect_ratio_idc: EXTENDED_SAR
            bits.skip(32)  # sar_width, sar_height
    if bits.flag():  # overscan_info_present_flag
        bits.skip(1)  # overscan_appropriate_flag
    full_range, colour = None, None
    if bits.flag():  # video_signal_type_present_flag
        bits.skip(3)  # video_format
        full_range = bits.flag()
        if bits.flag():  # colour_description_present_flag
            colour = (bits.u(8), bits.u(8), bits.u(8))
    if bits.flag():  # chroma_loc_info_present_flag
        bits.ue(5)  # chroma_sample_loc_type_top_field
        bits.ue(5)  # chroma_sample_loc_type_bottom_field
    bits.skip(1)  # neutral_chroma_indication_flag
    return full_range, colour, bits.flag()  # field_seq_flag
