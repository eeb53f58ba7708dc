"""A VP9 stream's format and colour: from the uncompressed header of its first frame (VP9
bitstream specification 6.2: profile, bit depth, colour space, range and subsampling, which a
keyframe always carries) and from MP4's ``vpcC`` record (VP Codec ISO Media File Format
Binding 2.2), whose colour fields FFmpeg's mov demuxer takes as the container's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bits import Bits
from .byte_source import Unreadable

_SYNC_CODE = 0x498342
_CS_RGB = 7

# color_space (6.2.2) as an H.273 matrix_coefficients code point, as FFmpeg's vp9 decoder maps
# it: CS_UNKNOWN, CS_BT_601, CS_BT_709, CS_SMPTE_170, CS_SMPTE_240, CS_BT_2020, CS_RESERVED, CS_RGB.
_MATRICES = (2, 5, 1, 6, 7, 9, 3, 0)


@dataclass(frozen=True)
class Header:
    """What a VP9 keyframe's uncompressed header says of the stream."""

    profile: int
    bit_depth: int
    matrix: int  # color_space as an H.273 code point (2: unspecified)
    full_range: bool
    subsampling: tuple[int, int]  # (subsampling_x, subsampling_y)


@dataclass(frozen=True)
class Record:
    """The fields of a vpcC record (version 1)."""

    profile: int
    bit_depth: int
    chroma_subsampling: int  # 0, 1: 4:2:0; 2: 4:2:2; 3: 4:4:4
    full_range: bool
    primaries: int
    transfer: int
    matrix: int


def parse_vpcc(vpcc: bytes) -> Record:
    """The fields of a vpcC box's payload (its version and flags first)."""
    if len(vpcc) < 12 or vpcc[0] != 1:
        raise Unreadable("unreadable vpcC box")
    packed = vpcc[6]
    return Record(vpcc[4], packed >> 4, (packed >> 1) & 7, bool(packed & 1), *vpcc[7:10])


def first_of_superframe(frame: bytes) -> bytes:
    """The first frame of a sample: a superframe (6.4: several frames and an index of their
    sizes at the end) is split; any other sample is one frame."""
    if not frame:
        raise Unreadable("empty first frame")
    marker = frame[-1]
    if marker & 0xE0 == 0xC0:
        size_bytes, count = ((marker >> 3) & 3) + 1, (marker & 7) + 1
        index = 2 + size_bytes * count
        if len(frame) >= index and frame[-index] == marker:
            size = int.from_bytes(frame[-index + 1 : -index + 1 + size_bytes], "little")
            if size == 0 or size > len(frame) - index:
                raise Unreadable("unreadable VP9 superframe index")
            return frame[:size]
    return frame


def parse_header(frame: bytes) -> Header | None:
    """The colour config of the first frame of a sample (its uncompressed header, 6.2); None
    where that frame carries none (an inter frame, a shown existing frame); raises
    Unreadable where it is not a VP9 frame."""
    bits = Bits(first_of_superframe(frame)[:64], "VP9 frame header")
    if bits.u(2) != 2:  # frame_marker
        raise bits.fail()
    low, high = bits.u(1), bits.u(1)
    profile = (high << 1) | low
    if profile == 3:
        bits.skip(1)  # reserved_zero
    if bits.flag():  # show_existing_frame
        return None
    key_frame = not bits.flag()  # frame_type
    show_frame = bits.flag()
    error_resilient = bits.flag()
    if not key_frame:
        intra_only = not show_frame and bits.flag()
        if not intra_only:
            return None
        if not error_resilient:
            bits.skip(2)  # reset_frame_context
        if bits.u(24) != _SYNC_CODE:
            raise bits.fail()
        if profile == 0:  # an intra-only frame of profile 0 is BT.601, 8-bit 4:2:0
            return Header(0, 8, _MATRICES[1], False, (1, 1))
        return _color_config(bits, profile)
    if bits.u(24) != _SYNC_CODE:
        raise bits.fail()
    return _color_config(bits, profile)


def _color_config(bits: Bits, profile: int) -> Header:
    """color_config() (6.2.2)."""
    depth = (12 if bits.flag() else 10) if profile >= 2 else 8  # ten_or_twelve_bit
    color_space = bits.u(3)
    if color_space == _CS_RGB:
        subsampling = (0, 0)
        full_range = True
    else:
        full_range = bits.flag()  # color_range
        subsampling = (1, 1)
    if profile in (1, 3):
        if color_space != _CS_RGB:
            subsampling = (bits.u(1), bits.u(1))
        bits.skip(1)  # reserved_zero
    return Header(profile, depth, _MATRICES[color_space], full_range, subsampling)
