"""An MP4/QuickTime file as FFmpeg's mov demuxer reads it: its boxes (walked with seeks, only
headers and the few boxes asked for read), its tracks and which of them FFmpeg takes for video,
the video stream they hold (:func:`describe`, for :mod:`.video_file`), its display matrix, and
whether every sample of a track lies within the file; a track's keyframes, for
:mod:`.segments`; and its frame count, for the progress bar.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from .byte_source import MALFORMED, BytesSource, FileSource, Source, Unreadable, read_whole
from .streams import Colour, VideoStream, cv2_rotation, from_codec
from .vp9 import parse_vpcc

T = TypeVar("T")

# The file names of this family (ISO base media and QuickTime).
MP4_CONTAINERS = (".mp4", ".m4v", ".mov")

# The boxes read whole (hdlr, stsd): real ones are far smaller (an stsd is ~100-200 bytes).
_MAX_READ = 1 << 20
# The sample tables (4 bytes a sample in stsz): 256 MiB is some 67 million samples.
_MAX_TABLE = 1 << 28
_MAX_TOP_LEVEL_BOXES = 100_000


# Sample entry types FFmpeg maps to a video codec (a subset of its ff_codec_movvideo_tags):
# a track with another handler than 'vide' or 'soun' and one of these is a video stream too.
_VIDEO_ENTRIES = {
    b"avc1", b"avc3", b"avc2", b"avc4", b"hvc1", b"hev1", b"dvh1", b"dvhe", b"dvav", b"dva1",
    b"dav1", b"mp4v", b"av01", b"vp08", b"vp09", b"jpeg", b"mjpa", b"mjpb", b"mjp2", b"png ",
    b"apcn", b"apch", b"apcs", b"apco", b"ap4h", b"ap4x", b"s263", b"h263", b"vvc1", b"vvi1",
    b"raw ", b"2vuy",
}  # fmt: skip


@dataclass(frozen=True)
class Box:
    type: bytes
    start: int  # the payload's offset
    end: int  # the offset just past the box

    @property
    def size(self) -> int:
        return self.end - self.start


def fourcc(kind: bytes) -> str:
    return kind.decode("latin-1") if kind.isascii() and kind.decode().isprintable() else kind.hex()


def _box_at(source: Source, pos: int, end: int) -> Box | None:
    """The box whose header starts at ``pos`` within a parent ending at ``end``; None where
    fewer than 8 bytes are left (QuickTime may end a list with a 32-bit zero)."""
    if end - pos < 8:
        return None
    header = source.read(pos, 16)
    if len(header) < 8:
        return None
    size, kind = struct.unpack_from(">I4s", header)
    head = 8
    if size == 1:
        if len(header) < 16:
            raise Unreadable(f"truncated {fourcc(kind)} box")
        (size,) = struct.unpack_from(">Q", header, 8)
        head = 16
    elif size == 0:
        size = end - pos
    if size < head:
        raise Unreadable(f"malformed {fourcc(kind)} box")
    return Box(kind, pos + head, pos + size)


def children(source: Source, parent: Box, skip: int = 0) -> Iterator[Box]:
    """The boxes inside ``parent`` (after ``skip`` bytes of its own fields), in order."""
    pos = parent.start + skip
    while (box := _box_at(source, pos, parent.end)) is not None:
        if box.end > parent.end:
            raise Unreadable(f"truncated {fourcc(box.type)} box")
        yield box
        pos = box.end


def child(source: Source, parent: Box, kind: bytes) -> Box | None:
    return next((box for box in children(source, parent) if box.type == kind), None)


def box_path(source: Source, box: Box | None, *kinds: bytes) -> Box | None:
    for kind in kinds:
        if box is None:
            return None
        box = child(source, box, kind)
    return box


def payload(source: Source, box: Box, limit: int = _MAX_READ) -> bytes:
    return read_whole(source, box.start, box.size, f"{fourcc(box.type)} box", limit)


def top_level(source: Source) -> Iterator[Box]:
    """The file's top-level boxes up to the first that runs past its end."""
    pos = 0
    for index in range(_MAX_TOP_LEVEL_BOXES):
        box = _box_at(source, pos, source.size)
        if box is None:
            return
        if index == 0 and not all(0x20 <= c < 0x7F for c in box.type):
            raise Unreadable("not an MP4/QuickTime file")
        if box.end > source.size:
            if box.type == b"moov":
                raise Unreadable("truncated moov box")
            return  # a truncated file: what follows is gone
        yield box
        pos = box.end
    raise Unreadable(f"more than {_MAX_TOP_LEVEL_BOXES} top-level boxes")


@dataclass(frozen=True)
class Track:
    handler: bytes
    entries: tuple[tuple[bytes, bytes], ...]  # (sample entry type, its bytes after the header)
    stbl: Box | None = field(default=None, compare=False)  # where its sample tables are
    trak: Box | None = field(default=None, compare=False)  # its tkhd, edts and mdia

    @property
    def is_video(self) -> bool:  # as FFmpeg's mov demuxer types the stream
        if self.handler == b"vide":
            return True
        return self.handler != b"soun" and any(k in _VIDEO_ENTRIES for k, _ in self.entries[:1])


COVER = Track(b"covr", ())  # an iTunes cover picture: FFmpeg makes it a video stream


def moof_in(boxes: Iterator[Box]) -> bool:
    """Whether a moof box is among the rest of the top-level boxes; what cannot be read as
    boxes (bytes appended after the last one) ends the search."""
    try:
        return any(box.type == b"moof" for box in boxes)
    except Unreadable:
        return False


def moov_streams(source: Source, moov: Box) -> list[Track]:
    streams = []
    for box in children(source, moov):
        if box.type == b"trak":
            streams.append(_track(source, box))
        elif box.type in (b"meta", b"udta") and has_cover(source, box):
            streams.append(COVER)
        elif box.type == b"cmov":
            raise Unreadable("compressed moov box")
    return streams


def video_track(streams: list[Track]) -> Track | str:
    """The one video track cv2 and NVDEC both decode, or why there is none. OpenCV opens the
    first stream FFmpeg calls video, iTunes cover art included where it comes first; NVDEC's
    demuxer may pick another of several (the "best" one), so several are refused."""
    video = [s for s in streams if s is COVER or s.is_video]
    if not video:
        return "no video track"
    if video[0] is COVER:
        return "cover art before the video track"
    tracks = [s for s in video if s is not COVER]
    if len(tracks) > 1:
        return f"{len(tracks)} video tracks"
    return tracks[0]


@dataclass(frozen=True)
class Video:
    """The one video track of a file (:func:`video_track`), its moov box, and whether the file
    is fragmented (samples in moof boxes, outside the moov's tables)."""

    track: Track
    moov: Box
    fragmented: bool


def find_video(source: Source) -> Video | str:
    """The video track of an MP4/QuickTime file, or why there is none ("no moov box", "2
    video tracks", "cover art before the video track", ...)."""
    if source.size == 0:
        return "empty file"
    streams: list[Track] = []
    fragments = False  # a moof box before moov
    boxes = top_level(source)
    for box in boxes:
        if box.type == b"moov":
            track = video_track(streams + moov_streams(source, box))
            if isinstance(track, str):
                return track
            fragmented = fragments or child(source, box, b"mvex") is not None or moof_in(boxes)
            return Video(track, box, fragmented)
        fragments |= box.type == b"moof"
        if box.type in (b"meta", b"udta") and has_cover(source, box):
            streams.append(COVER)
    return "no moov box"


def read_video_track(path, read: Callable[[Source, Track, Box, Iterator[Box]], T], default: T) -> T:
    """``read(source, track, moov, rest)`` for the one video track (:func:`video_track`, its
    sample tables present) of the MP4/QuickTime file at ``path``, ``rest`` the top-level boxes
    after its moov box; ``default`` where the file has no such track or cannot be read."""
    try:
        with open(path, "rb") as f:
            source = FileSource(f)
            streams: list[Track] = []
            boxes = top_level(source)
            for box in boxes:
                if box.type == b"moov":
                    track = video_track(streams + moov_streams(source, box))
                    if isinstance(track, str) or track.stbl is None:
                        return default
                    return read(source, track, box, boxes)
                if box.type in (b"meta", b"udta") and has_cover(source, box):
                    streams.append(COVER)
    except (OSError, Unreadable, *MALFORMED):
        pass
    return default


# Sample entry types by the FFmpeg decoder cv2 decodes them with.
_CODECS = {
    b"avc1": "h264", b"avc3": "h264", b"hvc1": "hevc", b"hev1": "hevc", b"vp09": "vp9",
    b"av01": "av1",
}  # fmt: skip
H264_ENTRIES = frozenset(kind for kind, codec in _CODECS.items() if codec == "h264")
# Each codec's configuration box in its sample entry.
_CONFIGS = {"h264": b"avcC", "hevc": b"hvcC", "vp9": b"vpcC", "av1": b"av1C"}
# A visual sample entry's fields before its child boxes: 6 reserved, data_reference_index,
# 16 pre_defined/reserved, width, height, resolutions, reserved, frame_count, compressorname,
# depth, pre_defined.
VISUAL_ENTRY_FIELDS = 78
# The first sample is read whole (a VP9 superframe's index is at its end); a keyframe of 8K
# video is some megabytes.
_MAX_FIRST_SAMPLE = 1 << 26


def describe(path) -> VideoStream | str:
    """The video stream (:class:`~.streams.VideoStream`) of the MP4/QuickTime file at ``path``
    as cv2 decodes it, or why it cannot be described or would not be decoded as its samples
    say: the first video track's codec by its sample entry (avc1/avc3, hvc1/hev1, vp09, av01;
    any other: "codec <fourcc>"), its colour from the codec's configuration record, its first
    sample and the entry's colr (and vpcC) boxes by the codec's rules
    (:func:`~.streams.from_codec`), its turn from the display matrix; then the refusals of
    what cv2 would not show as the samples are: an edit list that drops frames, a first sample
    that is no keyframe, a fragmented file, samples past the end of the file, several video
    tracks or several sample entries, cover art first."""
    try:
        with open(path, "rb") as f:
            return _describe(FileSource(f))
    except OSError as exc:
        return f"cannot read the file ({exc.strerror or exc})"
    except Unreadable as exc:
        return str(exc)
    except MALFORMED as exc:  # a case missed above
        return f"unreadable file ({type(exc).__name__})"


def _describe(source: Source) -> VideoStream | str:

    video = find_video(source)
    if isinstance(video, str):
        return video
    track, moov = video.track, video.moov
    if not track.entries:
        return "no sample entry"
    if len(track.entries) > 1:
        return f"{len(track.entries)} sample entries"
    kind, body = track.entries[0]
    codec = _CODECS.get(kind)
    if codec is None:
        return f"codec {fourcc(kind)}"
    config, colour = _sample_entry(kind, body, _CONFIGS[codec])
    # Without a keyframe first, the first sample's headers are not the stream's.
    reason = first_frame_reason(source, track)
    if reason is not None:
        return reason
    rotation = cv2_rotation(display_matrix(source, moov, track))
    stream = from_codec(codec, config, _first_sample(source, track.stbl), colour, "mp4", rotation)
    if isinstance(stream, str):
        return stream
    reason = edit_reason(source, moov, track)
    if reason is not None:
        return reason
    if video.fragmented:
        return "fragmented MP4"
    return samples_reason(source, track.stbl) or stream


def _sample_entry(kind: bytes, body: bytes, config_type: bytes) -> tuple[bytes | None, Colour]:
    """(the codec's configuration record or None, the container's Colour) of a visual sample
    entry. FFmpeg's mov demuxer sets the stream's colour from each colr box (nclx: ISO/IEC
    23001-8 code points and a full-range bit; QuickTime's nclc: no range; an ICC profile:
    nothing) and from a vpcC record, a later box over an earlier one."""
    if len(body) < VISUAL_ENTRY_FIELDS:
        raise Unreadable(f"truncated {fourcc(kind)} sample entry")
    source = BytesSource(body)
    config, colour = None, Colour()
    for box in children(source, Box(kind, VISUAL_ENTRY_FIELDS, len(body))):
        data = body[box.start : box.end]
        if box.type == config_type and config is None:
            config = data
        if box.type == b"colr" and data[:4] in (b"nclx", b"nclc"):
            if len(data) < 10 + (data[:4] == b"nclx"):
                raise Unreadable("truncated colr box")
            primaries, transfer, matrix = (_known(c) for c in struct.unpack_from(">3H", data, 4))
            full_range = bool(data[10] & 0x80) if data[:4] == b"nclx" else colour.full_range
            colour = Colour(matrix, full_range, primaries, transfer)
        elif box.type == b"vpcC" and data[:1] == b"\x01":  # FFmpeg reads version 1 only
            record = parse_vpcc(data)
            primaries, transfer = _known(record.primaries), _known(record.transfer)
            colour = Colour(_known(record.matrix), record.full_range, primaries, transfer)
    return config, colour


def _known(code: int) -> int | None:
    """An H.273 code point as the container's colour: None for unspecified (2)."""
    return None if code == 2 else code


def _first_sample(source: Source, stbl: Box | None) -> bytes | None:
    """The bytes of the track's first sample in decode order, or None where the sample tables
    do not place it within the file."""
    if stbl is None:
        return None
    sizes = child(source, stbl, b"stsz") or child(source, stbl, b"stz2")
    offsets = child(source, stbl, b"stco") or child(source, stbl, b"co64")
    if sizes is None or offsets is None:
        return None
    sample_size, table, count = _sample_sizes(source, sizes)
    chunks = _chunk_offsets(source, offsets)
    if count == 0 or len(chunks) == 0:
        return None
    size = int(table[0]) if table is not None else sample_size
    if size > _MAX_FIRST_SAMPLE:
        raise Unreadable(f"a first sample of {size} bytes")
    data = source.read(int(chunks[0]), size)
    return data if len(data) == size else None


def frame_count(path) -> int | None:
    """The frames of the MP4/QuickTime file's video track as its sample table counts them
    (FFmpeg's ``nb_frames``, which cv2 reports as ``CAP_PROP_FRAME_COUNT``), read without a
    decoder; None where that is not the count of frames FFmpeg shows (an edit list drops some,
    or the first is no keyframe: :func:`edit_reason`, :func:`first_frame_reason`) or where the
    file does not say: fragmented (the samples are in moof boxes), no single video track,
    unreadable."""

    def count(source: Source, track: Track, moov: Box, rest: Iterator[Box]) -> int | None:
        if child(source, moov, b"mvex") is not None or moof_in(rest):
            return None
        if edit_reason(source, moov, track) or first_frame_reason(source, track):
            return None
        sizes = child(source, track.stbl, b"stsz") or child(source, track.stbl, b"stz2")
        return (_sample_sizes(source, sizes)[2] or None) if sizes is not None else None

    return read_video_track(path, count, None)


def _track(source: Source, trak: Box) -> Track:
    mdia = child(source, trak, b"mdia")
    hdlr = box_path(source, mdia, b"hdlr")
    handler = payload(source, hdlr)[8:12] if hdlr is not None else b""
    if handler == b"soun":
        return Track(handler, ())  # never video: its sample entries are not needed
    stbl = box_path(source, mdia, b"minf", b"stbl")
    stsd = box_path(source, stbl, b"stsd")
    return Track(handler, _sample_entries(payload(source, stsd)) if stsd else (), stbl, trak)


def _sample_entries(stsd: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """(type, body) of each sample entry of an stsd box's payload."""
    if len(stsd) < 8:
        raise Unreadable("truncated stsd box")
    (count,) = struct.unpack_from(">I", stsd, 4)
    source = BytesSource(stsd)
    entries = []
    for box in children(source, Box(b"stsd", 0, len(stsd)), skip=8):
        if len(entries) == count:
            break
        entries.append((box.type, stsd[box.start : box.end]))
    return tuple(entries)


def has_cover(source: Source, box: Box) -> bool:
    """Whether a udta or meta box holds iTunes cover art (meta/ilst/covr)."""
    meta = box if box.type == b"meta" else child(source, box, b"meta")
    if meta is None:
        return False
    # An ISO meta box is a full box (4 bytes of version and flags); QuickTime's is not.
    first = source.read(meta.start, 4)
    skip = 4 if first == b"\0\0\0\0" else 0
    ilst = next((b for b in children(source, meta, skip) if b.type == b"ilst"), None)
    return ilst is not None and child(source, ilst, b"covr") is not None


_TRUNCATED = "samples past the end of the file (truncated?)"


_INCONSISTENT = "inconsistent sample tables"


def samples_reason(source: Source, stbl: Box | None) -> str | None:
    """None when every sample of the track, as stsz (or stz2), stsc and stco (or co64) place
    it, ends within the file. A file cut short with its moov first still lists the lost
    samples: cv2's decoding ends where the bytes do, while NVDEC conceals and returns a frame or
    two more. Bytes after the last sample are harmless. Sums over the tables with numpy: no
    per-sample Python work."""
    if stbl is None:
        return "no stbl box"
    tables: dict[bytes, Box] = {}
    for box in children(source, stbl):
        kind = b"co64" if box.type == b"stco" else b"stsz" if box.type == b"stz2" else box.type
        if kind in (b"stsz", b"stsc", b"co64"):
            tables.setdefault(kind, box)  # FFmpeg ignores a second one of each
    for kind, name in ((b"stsz", "stsz"), (b"stsc", "stsc"), (b"co64", "stco")):
        if kind not in tables:
            return f"no {name} box"
    sample_size, sizes, sample_count = _sample_sizes(source, tables[b"stsz"])
    offsets = _chunk_offsets(source, tables[b"co64"])
    first, per_entry = _sample_to_chunk(source, tables[b"stsc"])
    chunk_count = len(offsets)
    if len(first) == 0:
        return None if sample_count == 0 and chunk_count == 0 else _INCONSISTENT
    if first[0] != 1 or first[-1] > chunk_count or not (first[1:] > first[:-1]).all():
        return _INCONSISTENT
    # Chunks first[i] .. first[i + 1] - 1 hold per_entry[i] samples each (chunks count from 1).
    runs = np.diff(first.astype(np.int64), append=chunk_count + 1)
    per_chunk = np.repeat(per_entry, runs)
    if int(per_chunk.sum(dtype=np.uint64)) != sample_count:  # at most 2**32 times 2**26 chunks
        return _INCONSISTENT
    if chunk_count == 0:
        return None
    if int(offsets.max()) > source.size:
        return _TRUNCATED
    if sizes is None:  # every sample sample_size bytes: below 2**64, as per_chunk <= 2**32
        chunk_bytes = per_chunk * np.uint64(sample_size)
    else:  # the bytes of chunk k: the sizes of samples ends[k] - per_chunk[k] .. ends[k] - 1
        ends = np.cumsum(per_chunk, dtype=np.uint64)  # sample_count at most: valid indices
        total = np.concatenate(([np.uint64(0)], np.cumsum(sizes, dtype=np.uint64)))
        chunk_bytes = total[ends.astype(np.int64)] - total[(ends - per_chunk).astype(np.int64)]
    # offset + bytes <= size, written so that nothing can wrap around (offsets <= size).
    if (chunk_bytes > np.uint64(source.size) - offsets).any():
        return _TRUNCATED
    return None


def _full_box_table(source: Source, box: Box, head: int) -> bytes:
    """The box's payload (one read), at least ``head`` bytes of it."""
    data = payload(source, box, _MAX_TABLE)
    if len(data) < head:
        raise Unreadable(f"truncated {fourcc(box.type)} box")
    return data


def _array(data: bytes, at: int, count: int, dtype: str, box: Box) -> np.ndarray:
    itemsize = np.dtype(dtype).itemsize
    if len(data) - at < count * itemsize:
        raise Unreadable(f"truncated {fourcc(box.type)} box")
    return np.frombuffer(data, dtype, count, at).astype(np.uint64)


def _sample_sizes(source: Source, box: Box) -> tuple[int, np.ndarray | None, int]:
    """(sample_size, the table of sizes or None where all are sample_size, sample_count) of
    an stsz box, or of an stz2 box (sizes of 4, 8 or 16 bits)."""
    data = _full_box_table(source, box, 12)
    if box.type == b"stsz":
        sample_size, count = struct.unpack_from(">II", data, 4)
        if sample_size:
            return sample_size, None, count
        return 0, _array(data, 12, count, ">u4", box), count
    bits, count = data[7], struct.unpack_from(">I", data, 8)[0]
    if bits == 16:
        return 0, _array(data, 12, count, ">u2", box), count
    if bits == 8:
        return 0, _array(data, 12, count, "u1", box), count
    if bits == 4:  # two a byte, the first in the high nibble
        packed = _array(data, 12, (count + 1) // 2, "u1", box)
        return 0, np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[:count], count
    raise Unreadable(f"stz2 box of {bits}-bit sizes")


def _chunk_offsets(source: Source, box: Box) -> np.ndarray:
    data = _full_box_table(source, box, 8)
    (count,) = struct.unpack_from(">I", data, 4)
    return _array(data, 8, count, ">u4" if box.type == b"stco" else ">u8", box)


def _sample_to_chunk(source: Source, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(first_chunk, samples_per_chunk) of each entry of an stsc box."""
    data = _full_box_table(source, box, 8)
    (count,) = struct.unpack_from(">I", data, 4)
    entries = _array(data, 8, 3 * count, ">u4", box).reshape(count, 3)
    return entries[:, 0], entries[:, 1]


def sync_samples(source: Source, stbl: Box) -> np.ndarray | None:
    """The track's sync samples (its keyframes) from its stss box: their 0-based numbers in
    decode order, sorted, without repeats; None where it has no stss box (every sample is a
    sync sample)."""
    stss = child(source, stbl, b"stss")
    if stss is None:
        return None
    data = _full_box_table(source, stss, 8)
    (count,) = struct.unpack_from(">I", data, 4)
    numbers = _array(data, 8, count, ">u4", stss).astype(np.int64)
    return np.unique(numbers[numbers > 0] - 1)


# ---------------------------------------------------------------------------------------------
# What FFmpeg does to a track's frames beyond decoding them: its display matrix, its edit list

# The identity display matrix: a, b, u / c, d, v / x, y, w; 16.16 fixed point, u, v, w 2.30.
_IDENTITY = (1 << 16, 0, 0, 0, 1 << 16, 0, 0, 0, 1 << 30)


def _matrix_at(source: Source, box: Box | None, v0: int, v1: int) -> tuple[int, ...] | None:
    """The 9 matrix entries of an mvhd or tkhd box (at offset ``v0`` of a version 0 box, ``v1``
    of a version 1 box), or None where there is no such box."""
    if box is None:
        return None
    data = payload(source, box)
    at = v1 if data[:1] == b"\x01" else v0
    if len(data) < at + 36:
        raise Unreadable(f"truncated {fourcc(box.type)} box")
    return struct.unpack_from(">9i", data, at)


def display_matrix(source: Source, moov: Box, track: Track) -> tuple[int, ...]:
    """The display matrix FFmpeg exports for the track: its tkhd matrix times the movie's mvhd
    matrix, as the mov demuxer multiplies them (each product shifted down by 16 bits, or 30
    for the third row's, and summed into a 32-bit integer); the identity where a box is
    missing."""
    track_matrix = _matrix_at(source, child(source, track.trak, b"tkhd"), 40, 52) or _IDENTITY
    movie_matrix = _matrix_at(source, child(source, moov, b"mvhd"), 36, 48) or _IDENTITY
    product = []
    for i in range(3):
        for j in range(3):
            total = 0
            for e in range(3):
                term = (track_matrix[3 * i + e] * movie_matrix[3 * e + j]) >> (30 if e == 2 else 16)
                total = _int32(total + _int32(term))
            product.append(total)
    return tuple(product)


def _int32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def first_frame_reason(source: Source, track: Track) -> str | None:
    """None when the track's first sample is a keyframe (a sync sample, or every sample is one);
    else why not. FFmpeg's decoder returns no frame before the first keyframe, so cv2 starts
    there, while NVDEC conceals what it cannot decode and returns those frames too; a file cut
    from a stream without regard to its keyframes (a recording, a broken remux) starts so."""
    if track.stbl is None:
        return None
    keyframes = sync_samples(source, track.stbl)
    if keyframes is not None and (len(keyframes) == 0 or keyframes[0] != 0):
        return "the first frame is not a keyframe"
    return None


# Samples a track may have for its edit list to be checked (2**26 is 25 days at 30 fps); a
# table larger than this is refused rather than expanded.
_MAX_SAMPLES = 1 << 26


def edit_reason(source: Source, moov: Box, track: Track) -> str | None:
    """None when FFmpeg's mov demuxer keeps every sample of the track as a frame; else why not.

    An edit list (trak/edts/elst) tells FFmpeg which span of the media to present: it drops the
    frames whose presentation time falls before the edit's start or at or past its end (a clip
    cut with ``ffmpeg -ss 1 -c copy`` starts its edit mid-GOP), and cv2 never returns them,
    while NVDEC decodes every sample. Admitted: no edit list, or empty edits (a start delay,
    which drops nothing) before one edit at normal rate whose span holds every sample's
    presentation time, as encoders with B-frames write it (the start is the first frame's
    composition offset)."""
    elst = box_path(source, track.trak, b"edts", b"elst")
    if elst is None:
        return None
    data = _full_box_table(source, elst, 8)
    version, count = data[0], struct.unpack_from(">I", data, 4)[0]
    layout, size = (">QqhH", 20) if version == 1 else (">IihH", 12)
    if len(data) < 8 + count * size:
        raise Unreadable("truncated elst box")
    edits = [struct.unpack_from(layout, data, 8 + i * size) for i in range(count)]
    while edits and edits[0][1] == -1:  # an empty edit: the track starts later, whole
        edits.pop(0)
    if not edits:
        return None
    if len(edits) > 1:
        return f"an edit list of {len(edits)} edits"
    duration, start, rate, _ = edits[0]
    if rate != 1:
        return "an edit list at another rate"
    movie_scale = _timescale(source, child(source, moov, b"mvhd"), 12, 20)
    media_scale = _timescale(source, box_path(source, track.trak, b"mdia", b"mdhd"), 12, 20)
    times = _presentation_times(source, track.stbl)
    if times is None or len(times) == 0:
        return None
    if int(times.min()) < start:
        return "an edit list that starts after the first frame"
    # FFmpeg rescales the edit's duration to the media's timescale, rounding to nearest.
    end = start + (duration * media_scale + movie_scale // 2) // movie_scale
    if duration and int(times.max()) >= end:
        return "an edit list that ends before the last frame"
    return None


def _timescale(source: Source, box: Box | None, v0: int, v1: int) -> int:
    if box is None:
        raise Unreadable("no mvhd or mdhd box")
    data = payload(source, box)
    at = v1 if data[:1] == b"\x01" else v0
    if len(data) < at + 4:
        raise Unreadable(f"truncated {fourcc(box.type)} box")
    (scale,) = struct.unpack_from(">I", data, at)
    if scale == 0:
        raise Unreadable(f"{fourcc(box.type)} box with timescale 0")
    return scale


def _runs(source: Source, box: Box, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(count, value) of each entry of an stts or ctts box."""
    data = _full_box_table(source, box, 8)
    (count,) = struct.unpack_from(">I", data, 4)
    if len(data) - 8 < count * 8:
        raise Unreadable(f"truncated {fourcc(box.type)} box")
    entries = np.frombuffer(data, np.dtype([("n", ">u4"), ("v", dtype)]), count, 8)
    return entries["n"].astype(np.int64), entries["v"].astype(np.int64)


def _presentation_times(source: Source, stbl: Box | None) -> np.ndarray | None:
    """Each sample's presentation time in the media's timescale, as FFmpeg reads it: decoding
    times from stts, plus the composition offsets of ctts (signed, as FFmpeg reads either
    version); None where the track has no stts box."""
    stts = child(source, stbl, b"stts") if stbl is not None else None
    if stts is None:
        return None
    counts, deltas = _runs(source, stts, ">u4")
    total = int(counts.sum())
    if total > _MAX_SAMPLES:
        raise Unreadable(f"stts box of {total} samples")
    decode_times = np.concatenate(([0], np.cumsum(np.repeat(deltas, counts))))[:total]
    ctts = child(source, stbl, b"ctts")
    if ctts is None:
        return decode_times
    counts, offsets = _runs(source, ctts, ">i4")
    counts = np.diff(np.minimum(np.cumsum(counts), total), prepend=0)  # none past the samples
    offsets = np.repeat(offsets, counts)
    if len(offsets) < total:  # FFmpeg takes samples past the table as offset 0
        offsets = np.concatenate((offsets, np.zeros(total - len(offsets), np.int64)))
    return decode_times + offsets
