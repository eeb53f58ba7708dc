"""One MP4 video track, ``copies`` times over, in one MP4 file: a stream copy in plain Python.

    python scripts/concat_mp4.py bench_data/pan.mp4 40 bench_data/pan_long40.mp4

The long video of the benchmarks (``make_bench_media.py --long-copies``) is made this way, not
by FFmpeg, because the GPU host has no FFmpeg (nor anything else that writes MP4: cv2's and
PyNvVideoCodec's writers encode), and the 9,600-frame video, at 133 MB, is too large to carry
there: it is made there from the 3 MB pan.mp4 in about a second.

The copies share one sample entry (the same avcC: the same SPS and PPS), so the samples are
simply repeated: the sample sizes, sync samples, decoding deltas and composition offsets
repeat (the sync sample numbers moved on by a copy's samples each time), the chunks repeat
with new offsets into one mdat, and the durations (movie, track, media, and the one edit's)
are multiplied. Decoders see one video whose every copy starts at a keyframe: clips that
begin with an IDR picture, as x264 writes them, join without a seam. What this does not
handle (several tracks, several edits, fragments, sample tables it does not know, such as
sdtp or sample groups) it refuses, naming it, rather than write a file that might lie.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

# The boxes this walks into; the others are copied whole.
CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"}
# The stbl children it knows how to repeat.
SAMPLE_TABLES = {b"stsd", b"stts", b"ctts", b"stss", b"stsc", b"stsz", b"stco", b"co64"}


class Box:
    def __init__(self, kind: bytes, body: bytes = b"", children: list[Box] | None = None):
        self.kind, self.body, self.children = kind, body, children

    def child(self, kind: bytes) -> Box | None:
        return next((c for c in self.children or () if c.kind == kind), None)

    def pack(self) -> bytes:
        body = (
            b"".join(c.pack() for c in self.children) if self.children is not None else (self.body)
        )
        if len(body) + 8 > 0xFFFFFFFF:
            return struct.pack(">I4sQ", 1, self.kind, len(body) + 16) + body
        return struct.pack(">I4s", len(body) + 8, self.kind) + body


def parse(data: bytes, start: int = 0, end: int | None = None) -> list[Box]:
    boxes, at, end = [], start, len(data) if end is None else end
    while at + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, at)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, at + 8)
            header = 16
        elif size == 0:
            size = end - at
        if size < header or at + size > end:
            raise SystemExit(f"malformed {kind!r} box at byte {at}")
        if kind in CONTAINERS:
            boxes.append(Box(kind, children=parse(data, at + header, at + size)))
        else:
            boxes.append(Box(kind, data[at + header : at + size]))
        at += size
    return boxes


def table(box: Box, fields: str) -> tuple[bytes, list[tuple]]:
    """A full box's version and flags, and its entries of struct layout ``fields``."""
    (count,) = struct.unpack_from(">I", box.body, 4)
    size = struct.calcsize(fields)
    return box.body[:4], [struct.unpack_from(fields, box.body, 8 + i * size) for i in range(count)]


def full_box(kind: bytes, head: bytes, fields: str, entries: list[tuple]) -> Box:
    body = head + struct.pack(">I", len(entries))
    return Box(kind, body + b"".join(struct.pack(fields, *e) for e in entries))


def scale_duration(box: Box, v0: int, v1: int, copies: int) -> None:
    """Multiply the duration field at byte ``v0`` (version 0: 32 bits) or ``v1`` (64 bits)."""
    body = bytearray(box.body)
    at, field = (v1, ">Q") if body[0] == 1 else (v0, ">I")
    (duration,) = struct.unpack_from(field, body, at)
    struct.pack_into(field, body, at, duration * copies)
    box.body = bytes(body)


def repeat_samples(stbl: Box, data: bytes, copies: int) -> tuple[list[Box], list[bytes]]:
    """The new sample tables (chunk offsets still relative to the mdat's data) and the chunks'
    bytes in order, for ``copies`` copies of the track ``stbl`` describes in ``data``."""
    if unknown := {c.kind for c in stbl.children} - SAMPLE_TABLES:
        names = ", ".join(sorted(k.decode("latin-1") for k in unknown))
        raise SystemExit(f"sample tables this cannot repeat: {names}")
    head, sizes = stbl.child(b"stsz").body[:4], stbl.child(b"stsz").body
    uniform, count = struct.unpack_from(">II", sizes, 4)
    sample_sizes = (
        [uniform] * count if uniform else list(struct.unpack_from(f">{count}I", sizes, 12))
    )
    offsets_box = stbl.child(b"stco") or stbl.child(b"co64")
    _, offsets = table(offsets_box, ">I" if offsets_box.kind == b"stco" else ">Q")
    stsc_head, stsc = table(stbl.child(b"stsc"), ">III")
    chunks = len(offsets)
    per_chunk = []
    for i, (first, samples, _) in enumerate(stsc):
        last = stsc[i + 1][0] if i + 1 < len(stsc) else chunks + 1
        per_chunk += [samples] * (last - first)
    if len(per_chunk) != chunks or sum(per_chunk) != count:
        raise SystemExit("the stsc, stsz and stco boxes disagree")
    blobs, sample = [], 0
    for (offset,), samples in zip(offsets, per_chunk, strict=True):
        size = sum(sample_sizes[sample : sample + samples])
        blobs.append(data[offset : offset + size])
        sample += samples
    tables = []
    for box in stbl.children:
        if box.kind == b"stsd":
            tables.append(box)
        elif box.kind in (b"stts", b"ctts"):
            version, entries = table(box, ">II")
            tables.append(full_box(box.kind, version, ">II", entries * copies))
        elif box.kind == b"stss":
            version, entries = table(box, ">I")
            moved = [(n + k * count,) for k in range(copies) for (n,) in entries]
            tables.append(full_box(b"stss", version, ">I", moved))
        elif box.kind == b"stsc":
            moved = [(f + k * chunks, s, e) for k in range(copies) for f, s, e in stsc]
            tables.append(full_box(b"stsc", stsc_head, ">III", moved))
        elif box.kind == b"stsz":
            body = head + struct.pack(">II", uniform, count * copies)
            tables.append(Box(b"stsz", body if uniform else body + sizes[12:] * copies))
        else:  # the chunk offsets: placed by concat() once the moov's size is known
            tables.append(full_box(b"stco", b"\0" * 4, ">I", [(0,)] * (chunks * copies)))
    return tables, blobs * copies


def concat(clip: Path, copies: int, path: Path) -> None:
    """Write ``clip``'s one video track ``copies`` times over to ``path`` (ftyp, moov, mdat)."""
    data = clip.read_bytes()
    top = parse(data)
    moov = next((b for b in top if b.kind == b"moov"), None)
    if moov is None or any(b.kind == b"moof" for b in top):
        raise SystemExit(f"{clip}: no moov box, or a fragmented MP4")
    tracks = [c for c in moov.children if c.kind == b"trak"]
    if len(tracks) != 1:
        raise SystemExit(f"{clip}: {len(tracks)} tracks; this repeats one video track")
    trak = tracks[0]
    mdia = trak.child(b"mdia")
    stbl = mdia.child(b"minf").child(b"stbl")
    scale_duration(moov.child(b"mvhd"), 16, 24, copies)
    scale_duration(trak.child(b"tkhd"), 20, 28, copies)
    scale_duration(mdia.child(b"mdhd"), 16, 24, copies)
    if (edts := trak.child(b"edts")) is not None:
        elst = edts.child(b"elst")
        fields = ">QqhH" if elst.body[0] == 1 else ">IihH"
        head, edits = table(elst, fields)
        if len(edits) != 1 or edits[0][1] < 0:
            raise SystemExit(f"{clip}: an edit list other than one edit of the whole track")
        duration, start, rate, fraction = edits[0]
        edts.children = [
            full_box(b"elst", head, fields, [(duration * copies, start, rate, fraction)])
        ]
    stbl.children, blobs = repeat_samples(stbl, data, copies)
    ftyp = next(b for b in top if b.kind == b"ftyp").pack()
    mdat_size = sum(len(b) for b in blobs)
    mdat_header = 16 if mdat_size + 8 > 0xFFFFFFFF else 8
    # The moov's size depends on the offsets' width, not their values: 32 bits where they fit,
    # as muxers write them; placed after ftyp, moov and the mdat's header.
    at = stbl.children.index(stbl.child(b"stco"))
    for kind, field in ((b"stco", ">I"), (b"co64", ">Q")):
        stbl.children[at] = full_box(kind, b"\0" * 4, field, [(0,)] * len(blobs))
        base = len(ftyp) + len(moov.pack()) + mdat_header
        if kind == b"co64" or base + mdat_size <= 0xFFFFFFFF:
            break
    offsets, position = [], base
    for blob in blobs:
        offsets.append((position,))
        position += len(blob)
    stbl.children[at] = full_box(kind, b"\0" * 4, field, offsets)
    if mdat_header == 8:
        header = struct.pack(">I4s", mdat_size + 8, b"mdat")
    else:
        header = struct.pack(">I4sQ", 1, b"mdat", mdat_size + 16)
    temp = path.with_name(f".{path.name}.part")
    with temp.open("wb") as out:
        out.write(ftyp + moov.pack() + header)
        for blob in blobs:
            out.write(blob)
    temp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip", type=Path)
    parser.add_argument("copies", type=int)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.copies < 1:
        parser.error("copies must be >= 1")
    concat(args.clip, args.copies, args.out)
    print(f"{args.out}: {args.clip.name} x {args.copies}, {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
