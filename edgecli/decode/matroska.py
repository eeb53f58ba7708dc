"""A Matroska or WebM file as FFmpeg's matroska demuxer reads it, for the NVDEC verdict: its
one video track (codec, CodecPrivate, Colour, the display matrix FFmpeg makes of its
Projection) and first frame (:func:`describe`); the frame indices of its keyframes, for
:mod:`.segments` (:func:`keyframes`); and its frame count (:func:`frame_count`).

EBML is read with seeks, element headers first: only the header, the Segment's top-level
elements up to the first Cluster, the Tracks element, and block headers are read. Every size is
checked against the file and the element that holds it, every walk has a limit, and anything
that cannot be read gives a short reason instead of an exception.
"""

from __future__ import annotations

import array
import dataclasses
import functools
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import byte_source, streams
from .byte_source import BytesSource, Source, Unreadable, read_whole

# Element IDs (marker bits kept, as the specification writes them).
EBML, DOCTYPE, DOCTYPE_READ_VERSION = 0x1A45DFA3, 0x4282, 0x4285
EBML_READ_VERSION, EBML_MAX_ID_LENGTH, EBML_MAX_SIZE_LENGTH = 0x42F7, 0x42F2, 0x42F3
SEGMENT, SEEK_HEAD, SEEK, SEEK_ID, SEEK_POSITION = 0x18538067, 0x114D9B74, 0x4DBB, 0x53AB, 0x53AC
INFO, TIMESTAMP_SCALE = 0x1549A966, 0x2AD7B1
TRACKS, TRACK_ENTRY, TRACK_NUMBER, TRACK_TYPE = 0x1654AE6B, 0xAE, 0xD7, 0x83
CODEC_ID, CODEC_PRIVATE, CONTENT_ENCODINGS = 0x86, 0x63A2, 0x6D80
VIDEO, PIXEL_WIDTH, PIXEL_HEIGHT, FLAG_INTERLACED = 0xE0, 0xB0, 0xBA, 0x9A
PIXEL_CROPS = (0x54AA, 0x54BB, 0x54CC, 0x54DD)  # bottom, top, left, right
COLOUR, MATRIX, RANGE, TRANSFER, PRIMARIES = 0x55B0, 0x55B1, 0x55B9, 0x55BA, 0x55BB
PROJECTION, PROJECTION_TYPE, PROJECTION_PRIVATE = 0x7670, 0x7671, 0x7672
POSE_YAW, POSE_PITCH, POSE_ROLL = 0x7673, 0x7674, 0x7675
CUES, CLUSTER, CLUSTER_TIMESTAMP = 0x1C53BB6B, 0x1F43B675, 0xE7
SIMPLE_BLOCK, BLOCK_GROUP, BLOCK, REFERENCE_BLOCK = 0xA3, 0xA0, 0xA1, 0xFB
TAGS, CHAPTERS, ATTACHMENTS = 0x1254C367, 0x1043A770, 0x1941A469

# The Segment's children: an element of unknown size (a live stream's Cluster) ends where one
# of these, or another EBML header, begins.
_TOP_LEVEL = {SEEK_HEAD, INFO, TRACKS, CUES, CLUSTER, TAGS, CHAPTERS, ATTACHMENTS}

VIDEO_TRACK = 1

# Codec IDs, by the prefix FFmpeg's ff_mkv_codec_tags matches, and FFmpeg's codec name.
CODECS = {
    "V_MPEG4/ISO/AVC": "h264",
    "V_MPEGH/ISO/HEVC": "hevc",
    "V_VP9": "vp9",
    "V_AV1": "av1",
    "V_VP8": "vp8",
}

# Limits: elements read whole (Tracks with every CodecPrivate, a first frame), the children of
# one element in the headers, the Segment's top-level elements before the first Cluster, and
# the elements a walk of the Clusters reads (2M: some 7 hours of 30 fps video with its audio,
# a few seconds of reading; a longer video is not cut and its count is not known).
_MAX_READ = 1 << 24
_MAX_CHILDREN = 10_000
_MAX_HEAD_ELEMENTS = 10_000
_MAX_WALK = 1 << 21


@dataclass(frozen=True)
class Element:
    id: int
    start: int  # the payload's offset
    end: int  # the offset just past it; for an element of unknown size, its parent's end
    known: bool = True  # whether its size was given

    @property
    def size(self) -> int:
        return self.end - self.start


def _vint(data: bytes, at: int, what: str) -> tuple[int, int]:
    """(width, value with the marker bit cleared) of the EBML variable-size integer at ``at``."""
    if at >= len(data):
        raise Unreadable(f"truncated {what}")
    width = 9 - data[at].bit_length()
    if width > 8:
        raise Unreadable(f"malformed {what}")
    if at + width > len(data):
        raise Unreadable(f"truncated {what}")
    value = int.from_bytes(data[at : at + width], "big") & ((1 << (7 * width)) - 1)
    return width, value


def element_at(source: Source, pos: int, end: int) -> Element:
    """The element whose header starts at ``pos``, within a parent ending at ``end``; its size
    is checked against the parent (one of unknown size is given the parent's end)."""
    head = source.read(pos, 12)
    id_width, _ = _vint(head, 0, "element ID")
    if id_width > 4:
        raise Unreadable(f"malformed element ID at offset {pos}")
    element_id = int.from_bytes(head[:id_width], "big")
    size_width, size = _vint(head, id_width, f"element size at offset {pos}")
    start = pos + id_width + size_width
    if start > end:
        raise Unreadable(f"truncated element at offset {pos}")
    if size == (1 << (7 * size_width)) - 1:  # all ones: unknown
        return Element(element_id, start, end, known=False)
    if size > end - start:
        raise Unreadable(f"element 0x{element_id:X} at offset {pos} overruns its parent")
    return Element(element_id, start, start + size)


def children(source: Source, parent: Element, limit: int = _MAX_CHILDREN) -> Iterator[Element]:
    """The elements inside ``parent``, in order; at most ``limit``."""
    pos = parent.start
    for _ in range(limit):
        if pos >= parent.end:
            return
        element = element_at(source, pos, parent.end)
        if not element.known:
            raise Unreadable(f"element 0x{element.id:X} of unknown size")
        yield element
        pos = element.end
    raise Unreadable(f"more than {limit} elements in element 0x{parent.id:X}")


def payload(source: Source, element: Element, limit: int = _MAX_READ) -> bytes:
    return read_whole(source, element.start, element.size, f"element 0x{element.id:X}", limit)


def _uint(data: bytes) -> int:
    if len(data) > 8:
        raise Unreadable(f"an unsigned integer element of {len(data)} bytes")
    return int.from_bytes(data, "big")


def _float(data: bytes) -> float:
    if len(data) == 0:
        return 0.0
    if len(data) == 4:
        return struct.unpack(">f", data)[0]
    if len(data) == 8:
        return struct.unpack(">d", data)[0]
    raise Unreadable(f"a float element of {len(data)} bytes")


def _fields(source: Source, parent: Element) -> dict[int, Element]:
    """The children of ``parent`` by ID; of repeated ones the first for master elements (as
    FFmpeg takes the first Colour) and the last for values (as FFmpeg's reader overwrites)."""
    found: dict[int, Element] = {}
    for element in children(source, parent):
        if element.id not in found or element.id not in _MASTERS:
            found[element.id] = element
    return found


_MASTERS = {VIDEO, COLOUR, PROJECTION, CONTENT_ENCODINGS, TRACK_ENTRY}


def _value(source: Source, fields: dict[int, Element], key: int, default, read=_uint):
    element = fields.get(key)
    return default if element is None else read(payload(source, element, 1 << 16))


# ---------------------------------------------------------------------------------------------
# The file's header: EBML header, Segment, its top-level elements, its tracks


@dataclass(frozen=True)
class Track:
    number: int
    type: int
    codec_id: str
    codec_private: bytes = b""
    encoded: bool = False  # has ContentEncodings (compression or encryption)
    width: int = 0
    height: int = 0
    interlaced: int = 0  # FlagInterlaced: 0 undetermined, 1 interlaced, 2 progressive
    cropped: bool = False  # a PixelCrop element is not 0
    colour: streams.Colour | None = None  # None: no Colour element
    projection: tuple | None = None  # (type, private, yaw, pitch, roll); None: no Projection

    @property
    def is_video_stream(self) -> bool:
        """Whether FFmpeg makes a video stream of the track: a video track with a CodecID
        that starts with "V" (FFmpeg skips the others)."""
        return self.type == VIDEO_TRACK and self.codec_id.startswith("V")


@dataclass(frozen=True)
class Header:
    segment: Element
    timestamp_scale: int
    tracks: tuple[Track, ...]
    first_cluster: int | None  # the offset of the first Cluster's header
    declared_end: int  # where the Segment says it ends (the file's end for an unknown size)


def read_header(source: Source) -> Header:
    """The Segment, its Info and Tracks, and where its Clusters begin."""
    first = element_at(source, 0, source.size)
    if first.id != EBML:
        raise Unreadable("not a Matroska or WebM file")
    _check_ebml_header(source, first)
    segment = element_at(source, first.end, 1 << 62)
    if segment.id != SEGMENT:
        raise Unreadable("no Segment after the EBML header")
    declared_end = segment.end if segment.known else source.size
    if segment.end > source.size:  # unknown size (a live stream), or a truncated file
        segment = Element(SEGMENT, segment.start, source.size, False)
    found: dict[int, int] = {}  # the top-level elements' header offsets, the first of each
    pos = segment.start
    try:
        for _ in range(_MAX_HEAD_ELEMENTS):
            if pos >= segment.end:
                break
            element = _clipped(source, pos, segment.end)
            found.setdefault(element.id, pos)
            if element.id == CLUSTER:
                break
            if element.id == SEEK_HEAD:
                for kind, offset in _seek_entries(source, element):
                    found.setdefault(kind, segment.start + offset)
            if not element.known:
                raise Unreadable(f"element 0x{element.id:X} of unknown size")
            pos = element.end
    except Unreadable:
        if TRACKS not in found:
            raise
    scale = 1_000_000
    if INFO in found:
        info = element_at(source, found[INFO], segment.end)
        scale = _value(source, _fields(source, info), TIMESTAMP_SCALE, scale)
        if scale == 0:
            raise Unreadable("a TimestampScale of 0")
    if TRACKS not in found:
        raise Unreadable("no Tracks element")
    tracks_element = element_at(source, found[TRACKS], segment.end)
    if tracks_element.id != TRACKS:
        raise Unreadable("a SeekHead entry for Tracks that points elsewhere")
    data = BytesSource(payload(source, tracks_element))
    tracks = tuple(
        _track(data, entry)
        for entry in children(data, Element(TRACKS, 0, data.size))
        if entry.id == TRACK_ENTRY
    )
    return Header(segment, scale, tracks, found.get(CLUSTER), declared_end)


def _check_ebml_header(source: Source, header: Element) -> None:
    fields = _fields(source, header)
    doctype = _value(source, fields, DOCTYPE, b"", bytes).rstrip(b"\0")
    if doctype not in (b"matroska", b"webm"):
        raise Unreadable(f"EBML DocType {doctype.decode('latin-1')!r}, not matroska or webm")
    # What FFmpeg refuses as "EBML header using unsupported features".
    if (
        _value(source, fields, EBML_READ_VERSION, 1) > 1
        or _value(source, fields, EBML_MAX_SIZE_LENGTH, 8) > 8
        or _value(source, fields, EBML_MAX_ID_LENGTH, 4) > 4
        or _value(source, fields, DOCTYPE_READ_VERSION, 1) > 3
    ):
        raise Unreadable("an EBML header using unsupported features")


def _seek_entries(source: Source, seek_head: Element) -> Iterator[tuple[int, int]]:
    """(element ID, offset from the Segment's payload) of each SeekHead entry."""
    for seek in children(source, seek_head):
        if seek.id != SEEK:
            continue
        fields = _fields(source, seek)
        if SEEK_ID in fields and SEEK_POSITION in fields:
            kind = _uint(payload(source, fields[SEEK_ID], 8))
            yield kind, _uint(payload(source, fields[SEEK_POSITION], 8))


def _track(source: Source, entry: Element) -> Track:
    fields = _fields(source, entry)
    codec_id = _value(source, fields, CODEC_ID, b"", bytes).rstrip(b"\0").decode("latin-1")
    private = payload(source, fields[CODEC_PRIVATE]) if CODEC_PRIVATE in fields else b""
    video = _fields(source, fields[VIDEO]) if VIDEO in fields else {}
    colour = projection = None
    if COLOUR in video:
        colour = _colour(source, _fields(source, video[COLOUR]))
    if PROJECTION in video:
        found = _fields(source, video[PROJECTION])
        projection = (
            _value(source, found, PROJECTION_TYPE, 0),
            _value(source, found, PROJECTION_PRIVATE, b"", bytes),
            *(_value(source, found, key, 0.0, _float) for key in (POSE_YAW, POSE_PITCH, POSE_ROLL)),
        )
    return Track(
        number=_value(source, fields, TRACK_NUMBER, 0),
        type=_value(source, fields, TRACK_TYPE, 0),
        codec_id=codec_id,
        codec_private=private,
        encoded=CONTENT_ENCODINGS in fields,
        width=_value(source, video, PIXEL_WIDTH, 0),
        height=_value(source, video, PIXEL_HEIGHT, 0),
        interlaced=_value(source, video, FLAG_INTERLACED, 0),
        cropped=any(_value(source, video, key, 0) for key in PIXEL_CROPS),
        colour=colour,
        projection=projection,
    )


def _colour(source: Source, fields: dict[int, Element]) -> streams.Colour:
    """The Colour element as FFmpeg's mkv_parse_video_color exports it: H.273 code points,
    except unspecified (2) and reserved (3, and 0 for primaries and transfer); Matroska's
    Range 1 (broadcast) and 2 (full), the others left unspecified."""
    matrix = _value(source, fields, MATRIX, 2)
    primaries = _value(source, fields, PRIMARIES, 2)
    transfer = _value(source, fields, TRANSFER, 2)
    full_range = {1: False, 2: True}.get(_value(source, fields, RANGE, 0))
    return streams.Colour(
        matrix=None if matrix in (2, 3) else matrix,
        full_range=full_range,
        primaries=None if primaries in (0, 2, 3) else primaries,
        transfer=None if transfer in (0, 2, 3) else transfer,
    )


def video_track(tracks: tuple[Track, ...]) -> Track | str:
    """The one video track cv2 and NVDEC both decode, or why there is none: cv2 takes
    FFmpeg's first video stream, NVDEC's demuxer the one av_find_best_stream ranks first, so
    a file with two is refused."""
    video = [t for t in tracks if t.is_video_stream]
    if not video:
        return "no video track"
    if len(video) > 1:
        return f"{len(video)} video tracks"
    # FFmpeg gives a block to the first track of its number.
    if sum(t.number == video[0].number for t in tracks) > 1:
        return f"track number {video[0].number} given to more than one track"
    return video[0]


# ---------------------------------------------------------------------------------------------
# The display matrix FFmpeg makes of a Projection


def display_matrix(projection: tuple | None) -> tuple[int, ...] | None:
    """The int32 display matrix FFmpeg's matroska demuxer (7.0 and later) exports for a
    track's Projection, which cv2 applies; None where it exports none. A rectangular
    projection with a pose roll is a rotation; a yaw of ±180° is a mirror, after which the roll
    turns the other way; any pitch, or another yaw, is not a 2-D turn and is ignored."""
    if projection is None:
        return None
    kind, private, yaw, pitch, roll = projection
    if private[:1] not in (b"", b"\0") or kind != 0:
        return None  # unknown private data, or a spherical projection: no display matrix
    if pitch == 0.0 and yaw == 0.0 and roll == 0.0:
        return None
    if pitch != 0.0 or yaw not in (0.0, 180.0, -180.0) or math.isnan(roll):
        return None
    if math.isinf(roll):
        raise Unreadable("a Projection with an infinite roll")
    hflip = yaw != 0.0
    # av_display_rotation_set(matrix, roll * (2 * hflip - 1)), in double as FFmpeg computes it;
    # its (int32_t) conversions truncate toward zero, as int() does.
    radians = -(roll * (2 * hflip - 1)) * math.pi / 180.0
    c, s = math.cos(radians), math.sin(radians)
    matrix = [int(c * 65536), int(-s * 65536), 0, int(s * 65536), int(c * 65536), 0, 0, 0, 1 << 30]
    if hflip:  # av_display_matrix_flip(matrix, 1, 0): the first column negated
        matrix = [-v if i % 3 == 0 else v for i, v in enumerate(matrix)]
    return tuple(matrix)


# ---------------------------------------------------------------------------------------------
# Blocks: the first video frame, and the headers of every video block


class PreadSource:
    """A file read by offset without moving a file position (one system call a read): block
    headers lie far apart, so a buffered reader would read 8 KiB for each 20 bytes."""

    def __init__(self, fd: int):
        self._fd = fd
        self.size = os.fstat(fd).st_size

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, max(0, min(size, self.size - offset)), offset)


@dataclass(frozen=True)
class BlockHeader:
    track: int
    timestamp: int  # the block's, relative to its cluster's
    keyframe: bool | None  # a SimpleBlock's flag; None in a BlockGroup (no ReferenceBlock: key)
    lacing: int  # 0 none, 1 Xiph, 2 fixed-size, 3 EBML
    frames: int  # the frames laced into it (1 without lacing)
    data: int  # the offset of its first lace's sizes, or of its frame without lacing


def block_header(head: bytes, block: Element) -> BlockHeader:
    """The header of ``block`` (a SimpleBlock or Block) from its first bytes ``head``."""
    width, track = _vint(head, 0, "block header")
    lacing = (head[width + 2] >> 1) & 3 if len(head) > width + 2 else 0
    needed = width + 3 + (1 if lacing else 0)
    if len(head) < needed or block.size < needed:
        raise Unreadable(f"truncated block at offset {block.start}")
    timestamp, flags = struct.unpack_from(">hB", head, width)
    frames = head[width + 3] + 1 if lacing else 1
    keyframe = bool(flags & 0x80) if block.id == SIMPLE_BLOCK else None
    return BlockHeader(track, timestamp, keyframe, lacing, frames, block.start + needed)


def _clipped(source: Source, pos: int, end: int) -> Element:
    """The element at ``pos``; one that runs past the end of the file is clipped to it."""
    try:
        return element_at(source, pos, end)
    except Unreadable:
        element = element_at(source, pos, 1 << 62)  # its own header, at least, is readable
        if element.end <= end or end < source.size:
            raise
        return Element(element.id, element.start, source.size, False)


class _Window:
    """The bytes of ``source`` around the last position asked for, read a page at a time:
    the headers of small blocks (audio) close together cost one read."""

    def __init__(self, source: Source):
        self._source, self._start, self._data = source, 0, b""

    def at(self, pos: int, need: int) -> tuple[bytes, int]:
        """Bytes holding ``pos`` and its index in them: ``need`` bytes from there, fewer only
        at the end of the file."""
        at = pos - self._start
        if at < 0 or at + need > len(self._data):
            self._start, self._data, at = pos, self._source.read(pos, max(need, 4096)), 0
        return self._data, at


def _track_blocks(
    source: Source, header: Header, number: int
) -> Iterator[tuple[int, BlockHeader, Element]]:
    """(timestamp, header, element) of each block of track ``number`` in file order, read from
    the Clusters' element headers and the blocks' own headers alone, a page at a time; at
    most _MAX_WALK elements. A BlockGroup's block is a keyframe without a ReferenceBlock. A
    file cut short ends with its last whole block (whether it is cut short is for
    :func:`.cpu.matroska_sizes` to say)."""
    window = _Window(source)
    budget = _MAX_WALK
    pos, end = header.first_cluster, header.segment.end
    while pos is not None and pos < end:
        budget -= 1
        if budget < 0:
            raise Unreadable(f"more than {_MAX_WALK} elements in the Segment")
        cluster = _clipped(source, pos, end)
        if cluster.id != CLUSTER:
            if not cluster.known:
                if cluster.end < source.size:
                    raise Unreadable(f"element 0x{cluster.id:X} of unknown size")
                return  # the file ends inside it
            pos = cluster.end
            continue
        base = None  # the Cluster's Timestamp
        pos = cluster.start
        while pos < cluster.end:
            budget -= 1
            if budget < 0:
                raise Unreadable(f"more than {_MAX_WALK} elements in the Clusters")
            data, at = window.at(pos, 32)
            id_width, _ = _vint(data, at, "element ID")
            if id_width > 4:
                raise Unreadable(f"malformed element ID at offset {pos}")
            kind = int.from_bytes(data[at : at + id_width], "big")
            if kind in _TOP_LEVEL or kind == EBML:
                if cluster.known:
                    raise Unreadable(f"element 0x{kind:X} inside a Cluster")
                break  # a Cluster of unknown size ends here
            size_width, size = _vint(data, at + id_width, "element size")
            body = pos + id_width + size_width
            if size == (1 << (7 * size_width)) - 1:
                raise Unreadable(f"element 0x{kind:X} of unknown size in a Cluster")
            if body + size > cluster.end:
                if cluster.end >= source.size:  # the file ends inside it
                    return
                raise Unreadable(f"element 0x{kind:X} at offset {pos} overruns its Cluster")
            pos = body + size
            if kind == CLUSTER_TIMESTAMP:
                base = _uint(source.read(body, min(size, 9)))
                continue
            if kind == SIMPLE_BLOCK:
                track = at + id_width + size_width  # its track number, where in data
                if size and data[track] >= 0x80 and data[track] & 0x7F != number:
                    continue  # another track's (one byte holds track numbers up to 127)
                block, referenced = Element(kind, body, pos), None
            elif kind == BLOCK_GROUP:
                fields = _fields(source, Element(kind, body, pos))
                if BLOCK not in fields:
                    continue
                block, referenced = fields[BLOCK], REFERENCE_BLOCK in fields
            else:
                continue
            head, at = window.at(block.start, 16)
            found = block_header(head[at : at + min(16, block.size)], block)
            if found.track != number:
                continue
            if base is None:
                raise Unreadable("a block before its Cluster's Timestamp")
            if referenced is not None:
                found = dataclasses.replace(found, keyframe=not referenced)
            yield base + found.timestamp, found, block


@dataclass(frozen=True)
class Blocks:
    """The blocks of one track in the file's (decode) order, from their headers."""

    timestamps: np.ndarray  # int64: each block's, in the Segment's TimestampScale units
    keyframes: np.ndarray  # bool
    frames: int  # laced frames counted
    laced: bool


def walk_blocks(source: Source, header: Header, number: int) -> Blocks:
    """Every block of track ``number``, from the block headers (:func:`_track_blocks`)."""
    timestamps = array.array("q")  # 9 bytes a block with the flags: a long video's are kept
    keys = bytearray()
    frames = laced = 0
    for timestamp, found, _ in _track_blocks(source, header, number):
        timestamps.append(timestamp)
        keys.append(bool(found.keyframe))
        frames += found.frames
        laced |= found.lacing != 0
    times = np.frombuffer(timestamps, np.int64) if timestamps else np.zeros(0, np.int64)
    return Blocks(times, np.frombuffer(bytes(keys), np.bool_), frames, bool(laced))


def first_block(source: Source, header: Header, number: int) -> tuple[BlockHeader, bytes] | str:
    """The header of the first block of track ``number`` and its (first) frame's bytes, or
    why they cannot be read."""
    found = next(_track_blocks(source, header, number), None)
    if found is None:
        return "no video block"
    _, head, block = found
    if block.end - head.data > _MAX_READ:
        return f"a first block of {block.end - head.data} bytes"
    data = payload(source, Element(block.id, head.data, block.end))
    return head, first_lace(data, head.lacing, head.frames)


def first_lace(data: bytes, lacing: int, frames: int) -> bytes:
    """The first frame of a block's ``data`` (after its header) laced ``lacing`` with
    ``frames`` frames: Xiph lacing codes each size but the last as a run of 255s and a byte
    below 255, EBML lacing the first as a size vint and the others as signed differences,
    fixed-size lacing none."""
    if lacing == 0:
        return data
    if lacing == 2:
        if len(data) % frames:
            raise Unreadable("fixed-size lacing that does not divide the block")
        return data[: len(data) // frames]
    sizes, at = [], 0
    for _ in range(frames - 1):
        if lacing == 1:
            size = 0
            while at < len(data) and data[at] == 255:
                size, at = size + 255, at + 1
            if at >= len(data):
                raise Unreadable("truncated Xiph lacing")
            size, at = size + data[at], at + 1
        else:
            width, value = _vint(data, at, "EBML lacing")
            at += width
            if sizes:  # a difference from the size before, signed by its bias
                value = sizes[-1] + value - ((1 << (7 * width - 1)) - 1)
            size = value
        sizes.append(size)
    if any(size < 0 for size in sizes) or at + sum(sizes) > len(data):
        raise Unreadable("lace sizes past the end of the block")
    return data[at : at + sizes[0]] if sizes else data[at:]


# ---------------------------------------------------------------------------------------------
# What the NVDEC path asks of a file

# What reading a file's elements can raise besides Unreadable: a case the checks missed.
MALFORMED = (*byte_source.MALFORMED, UnicodeDecodeError)


def track_reason(track: Track) -> str | None:
    """None when NVDEC's demuxer hands the decoder the same frames as cv2's, as far as the
    track's header says; else why not."""
    if track.encoded:  # header stripping or zlib, or encryption, undone by FFmpeg alone
        return "ContentEncodings on the video track (compressed or encrypted frames)"
    if track.cropped:
        return "a PixelCrop on the video track"
    return None


def codec_name(codec_id: str) -> str | None:
    """FFmpeg's name of the codec with Matroska CodecID ``codec_id``, among those NVDEC may
    decode; None for the others."""
    return next((name for prefix, name in CODECS.items() if codec_id.startswith(prefix)), None)


@dataclass(frozen=True)
class _File:
    header: Header
    track: Track
    codec: str
    first: BlockHeader
    frame: bytes


def _read_file(source: Source) -> _File | str:
    header = read_header(source)
    # FFmpeg reads on past the Segment's end, into a second file appended to the first (the
    # frames of both, cv2 among them): a count of the first file's blocks would be short.
    if header.declared_end < source.size:
        return "data after the Segment's end (another file appended?)"
    track = video_track(header.tracks)
    if isinstance(track, str):
        return track
    reason = track_reason(track)
    if reason is not None:
        return reason
    codec = codec_name(track.codec_id)
    if codec is None:
        return f"codec {track.codec_id!r}"
    found = first_block(source, header, track.number)
    if isinstance(found, str):
        return found
    first, frame = found
    # FFmpeg's decoders return no frame before the first keyframe, so cv2 starts there, while
    # NVDEC conceals what it cannot decode and returns those frames too.
    if not first.keyframe:
        return "the first frame is not a keyframe"
    return _File(header, track, codec, first, frame)


def _guarded(path, read):
    """``read(source)`` on the file at ``path``, or why it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as error:
        return f"cannot read the file ({error.strerror})"
    try:
        return read(PreadSource(fd))
    except OSError as error:
        return f"cannot read the file ({error.strerror})"
    except Unreadable as error:
        return str(error)
    except MALFORMED:
        return "malformed Matroska elements"
    finally:
        os.close(fd)


def describe(path) -> streams.VideoStream | str:
    """The video stream of the Matroska or WebM file at ``path`` as cv2 decodes it
    (:class:`.streams.VideoStream`), or why NVDEC cannot give exactly cv2's frames of it, as
    far as the container says: no single video track, a codec NVDEC does not decode, frames
    FFmpeg transforms (ContentEncodings, PixelCrop), a first frame that is no keyframe,
    unreadable elements."""

    def read(source: Source) -> streams.VideoStream | str:
        found = _read_file(source)
        if isinstance(found, str):
            return found
        track = found.track
        matrix = display_matrix(track.projection)
        rotation = 0 if matrix is None else streams.cv2_rotation(matrix)
        # FFmpeg exports no extradata for VP9 (its CodecPrivate holds only feature levels).
        config = None if found.codec in ("vp9", "vp8") else track.codec_private or None
        colour = track.colour if track.colour is not None else streams.Colour()
        return streams.from_codec(found.codec, config, found.frame, colour, "matroska", rotation)

    return _guarded(path, read)


@dataclass(frozen=True)
class _Walked:
    codec: str
    blocks: Blocks


@functools.lru_cache(maxsize=4)
def _walk(path: str, version: tuple[int, int, int]) -> _Walked | str:
    """The video track's blocks of the file at ``path`` (as it is at ``version``, its inode,
    size and modification time: a file changed since is read again)."""

    def read(source: Source) -> _Walked | str:
        found = _read_file(source)
        if isinstance(found, str):
            return found
        return _Walked(found.codec, walk_blocks(source, found.header, found.track.number))

    return _guarded(path, read)


def _walked(path) -> _Walked | str:
    try:
        status = os.stat(path)
    except OSError as error:
        return f"cannot read the file ({error.strerror})"
    return _walk(os.fspath(path), (status.st_ino, status.st_size, status.st_mtime_ns))


# Codecs whose decoder returns one frame for each block: an H.264 or HEVC access unit (one
# frame or a pair of fields: see frame_count), a VP9 superframe (its hidden frames inside), an
# AV1 temporal unit. A VP8 alternate reference frame may be a block of its own, shown never.
_FRAME_A_BLOCK = ("h264", "hevc", "vp9", "av1")


def frame_count(path) -> int | None:
    """The frames cv2 reads from the Matroska or WebM file at ``path``, counted from the
    headers of its video track's blocks; None where the file does not say (its stream is not
    one :func:`describe` admits, or not progressive, or of a codec whose blocks may hold no
    shown frame), or cannot be read within the limits."""
    stream = describe(path)
    if isinstance(stream, str) or not stream.progressive:
        return None
    walked = _walked(path)
    if isinstance(walked, str) or walked.codec not in _FRAME_A_BLOCK:
        return None
    return walked.blocks.frames or None


def keyframes(path: Path) -> list[int] | None | tuple[()]:
    """The frame indices of the keyframes of the Matroska or WebM file at ``path`` where a
    decoder may start, sorted; None where every frame is one; () where the file does not say.

    A block's frame index is the number of blocks before it in the file (decode order). A
    keyframe is listed only where every block before it is shown before it and every block
    after it is shown after it (by their timestamps): there the frames in decode order split
    as in presentation order, and that index is the frame's place in cv2's order too. An open
    GOP's I frame, with leading pictures after it that are shown before it, is left out.

    The Cues are not read: they give a keyframe's time and Cluster, not its frame number (the
    count of frames before it needs the walk of the block headers anyway, a variable frame
    rate rules out dividing), nor whether its GOP is closed."""
    stream = describe(path)
    if isinstance(stream, str) or not stream.progressive:
        return ()
    walked = _walked(path)
    if isinstance(walked, str) or walked.blocks.laced or not len(walked.blocks.timestamps):
        return ()
    times, keys = walked.blocks.timestamps, walked.blocks.keyframes
    if keys.all():
        return None
    earliest_after = np.minimum.accumulate(times[::-1])[::-1][1:]  # [i]: from block i + 1 on
    latest_before = np.maximum.accumulate(times)[:-1]  # [i]: up to block i
    clean = np.ones(len(times), bool)
    clean[:-1] &= times[:-1] < earliest_after
    clean[1:] &= latest_before < times[1:]
    found = np.flatnonzero(keys & clean).tolist()
    return found if found and found[0] == 0 else ()
