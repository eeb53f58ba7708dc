"""A PNG file's layout, from one walk of its chunks: the image header, the palette, where its
zlib stream lies, and whether the file is damaged or cut short; and whether a GPU decoder of
that stream (inflate, unfilter, expand to BGR) gives the frame the CPU decoder gives.

The CPU decoder (:mod:`.cpu`) walks a file with ``read_layout`` before it hands it to libpng,
so that a damaged file gets edgecli's reason rather than libpng's line on the process's
stderr, and decodes it itself where ``gpu_reason`` says that inflating, unfiltering and
expanding its rows gives libpng's frame; a GPU decoder asks the same two for whether it may
decode the file. The walk refuses what libpng refuses:
truncation, a critical chunk's CRC, an IHDR the PNG specification forbids, a palette image's
missing, repeated or malformed PLTE, an unknown critical chunk; and a wrong CRC on IEND, which
libpng leaves unread. libpng decodes past the rest (an ancillary chunk's CRC, a PLTE in an RGB
image, an over-long tRNS) with a warning, and the walk passes it silently.

What ``cv2.imread(IMREAD_COLOR)`` makes of the unfiltered rows, measured against cv2 5.1
(libpng 1.6.59), is a function of each pixel's samples alone (docs/gpu-decoding.md, *PNG*):
16-bit samples lose their low byte, gray samples of 1, 2 or 4 bits are scaled to 8 by
repeating their bits, palette indices past the PLTE's entries are black, alpha and tRNS are
dropped, and gAMA, sBIT, sRGB, iCCP, cHRM and bKGD change nothing.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import native
from ..output.png import PNG_SIGNATURE
from .jpeg_header import exif_orientation

# Colour type -> (name, samples a pixel, the bit depths the PNG specification allows with it).
COLOUR_TYPES = {
    0: ("gray", 1, (1, 2, 4, 8, 16)),
    2: ("RGB", 3, (8, 16)),
    3: ("palette", 1, (1, 2, 4, 8)),
    4: ("gray + alpha", 2, (8, 16)),
    6: ("RGBA", 4, (8, 16)),
}
PALETTE = 3
MAX_DIMENSION = 2**31 - 1  # the PNG specification's limit on width and height
# libpng's default user limits (PNG_USER_WIDTH_MAX, PNG_USER_HEIGHT_MAX): a larger image is
# refused by the CPU decoder although the specification allows it.
LIBPNG_MAX_DIMENSION = 1_000_000
# OpenCV's reader walks the chunks before the first IDAT itself, and refuses a chunk there
# whose data it would not allocate (libpng's PNG_USER_CHUNK_MALLOC_MAX, less the 12 bytes
# around the data) or a bKGD whose length is not one of the specification's.
OPENCV_MAX_CHUNK = 8_000_000 - 12
BKGD_LENGTHS = (1, 2, 6)
CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")
# Adam7: each pass's first row, first column, row step and column step.
ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
         (1, 0, 2, 1))  # fmt: skip


class PngDamage(ValueError):
    """A PNG file that no decoder may decode; ``reason`` says why, as a frame error shows it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _corrupt(why: str) -> PngDamage:
    return PngDamage(f"not a decodable image (corrupt PNG: {why})")


def _truncated(why: str) -> PngDamage:
    return PngDamage(f"not a decodable image (truncated PNG: {why})")


@dataclass(frozen=True)
class PngLayout:
    """What ``read_layout`` read of a PNG file.

    ``spans`` holds the (offset, length) of each IDAT chunk's data in the file, in order, as
    native uint64 pairs packed end to end (``idat`` gives them as pairs), and ``stream_size``
    the sum of their lengths: the zlib stream is their concatenation (``copy_stream`` writes it
    into one buffer, such as a pinned one for an upload). A file has hundreds of IDATs, whose
    pairs as Python objects would be made, read and freed under the GIL that the reading and
    decoding threads queue for. Only the first run of consecutive IDATs counts, as in libpng;
    ``idat_apart`` says another chunk came between IDATs. ``palette_bgr`` is the PLTE's
    entries as BGR, (entries, 3) uint8, for palette images (None otherwise): an index past
    them is black (``palette_table``). tRNS is not kept: the CPU decoder drops alpha.
    ``window_size`` is the zlib header's window (0 where the stream is shorter than its
    header): libpng refuses a distance past it where it reaches back before the current call
    of inflate, so a decoder that accepts it may give a frame where libpng gives none.
    ``orientation`` is the EXIF orientation of the eXIf chunk (1 to 8; 1 without one), which
    cv2 applies to a PNG as to a JPEG, wherever the chunk is; ``exif_reason`` says why that
    is not sure ("malformed EXIF", more than one eXIf chunk), else None.
    """

    width: int
    height: int
    bit_depth: int
    colour_type: int
    interlaced: bool
    palette_bgr: np.ndarray | None
    spans: bytes
    stream_size: int
    idat_apart: bool
    window_size: int
    animated: bool
    opencv_refuses: str | None  # a chunk before the image data that OpenCV's reader refuses
    orientation: int = 1
    exif_reason: str | None = None

    @property
    def channels(self) -> int:
        return COLOUR_TYPES[self.colour_type][1]

    @property
    def bits_per_pixel(self) -> int:
        return self.channels * self.bit_depth

    @property
    def filter_bpp(self) -> int:
        """The filters' ``bpp``: bytes a pixel, rounded up, at least 1."""
        return max(1, self.bits_per_pixel // 8)

    @property
    def row_bytes(self) -> int:
        """Bytes of one scanline of a non-interlaced image, less its filter byte."""
        return row_bytes(self.width, self.colour_type, self.bit_depth)

    @property
    def inflated_size(self) -> int:
        """Bytes of the unfiltered image data, filter bytes included: what the stream must
        inflate to at least (libpng ignores the rest, with a warning)."""
        if not self.interlaced:
            return image_bytes(self.width, self.height, self.colour_type, self.bit_depth)
        total = 0
        for y0, x0, dy, dx in ADAM7:
            rows = (self.height - y0 + dy - 1) // dy
            columns = (self.width - x0 + dx - 1) // dx
            if rows > 0 and columns > 0:
                total += rows * (1 + (columns * self.bits_per_pixel + 7) // 8)
        return total

    @property
    def idat(self) -> tuple[tuple[int, int], ...]:
        """The (offset, length) of each IDAT chunk's data, in order."""
        values = array("Q", self.spans)
        return tuple(zip(values[0::2], values[1::2], strict=True))

    def copy_stream(self, data: bytes, out) -> int:
        """Write the zlib stream, IDAT by IDAT, to the start of the writable buffer ``out``
        (at least ``stream_size`` bytes); return its length."""
        return copy_streams([(data, self, 0)], out)

    def stream(self, data: bytes) -> bytes:
        """The zlib stream as one bytes object."""
        return b"".join(data[offset : offset + length] for offset, length in self.idat)

    def palette_table(self) -> np.ndarray:
        """(256, 3) uint8: the palette as BGR, black past its entries, as libpng expands an
        index (a GPU decoder's lookup table, indexed without a bounds check)."""
        table = np.zeros((256, 3), np.uint8)
        if self.palette_bgr is not None:
            table[: len(self.palette_bgr)] = self.palette_bgr
        return table


def check_colour(colour_type: int, bit_depth: int) -> None:
    """ValueError naming the pair where the PNG specification has no such colour type and
    bit depth (a launch's argument check; a file's IHDR gets :class:`PngDamage`)."""
    if colour_type not in COLOUR_TYPES:
        raise ValueError(f"PNG colour type must be one of {sorted(COLOUR_TYPES)}, "
                         f"got {colour_type!r}")  # fmt: skip
    depths = COLOUR_TYPES[colour_type][2]
    if bit_depth not in depths:
        raise ValueError(f"PNG colour type {colour_type} has bit depths {depths}, "
                         f"got {bit_depth!r}")  # fmt: skip


def row_bytes(width: int, colour_type: int, bit_depth: int) -> int:
    """Bytes of one scanline ``width`` pixels wide, less its filter byte."""
    return (width * COLOUR_TYPES[colour_type][1] * bit_depth + 7) // 8


def image_bytes(width: int, height: int, colour_type: int, bit_depth: int) -> int:
    """Bytes of a non-interlaced image's inflated data: a filter byte and a scanline a row."""
    return height * (1 + row_bytes(width, colour_type, bit_depth))


def copy_streams(parts, out) -> int:
    """Write each (data, layout, at) of ``parts``, the zlib stream of the PNG file ``data`` of
    that layout, IDAT by IDAT, into the writable buffer ``out`` from ``at`` on; return the
    bytes written. Where the C half is built, in one call that lets go of the GIL once for all
    of them: a batch's files, gathered on a thread that would otherwise wait to win the GIL
    back from busy workers once a file."""
    if native.c is not None:
        return native.c.png_gather([(data, layout.spans, at) for data, layout, at in parts], out)
    target = memoryview(out).cast("B")
    total = 0
    for data, layout, at in parts:
        view = memoryview(data)
        for offset, length in layout.idat:
            target[at : at + length] = view[offset : offset + length]
            at += length
            total += length
    return total


def read_layout(data: bytes) -> PngLayout:
    """The layout of the PNG file ``data``, or :class:`PngDamage` saying why no decoder may
    decode it: the file is cut short, a critical chunk fails its CRC check, or its IHDR,
    PLTE or chunk order breaks a rule that libpng enforces.

    A file is checked up to its IEND chunk; what follows is ignored, as libpng does. The CRCs
    are the critical chunks' only (libpng checks those). A run of IDAT chunks, hundreds of a
    few KB each in FFmpeg's files, is walked by ``edgecli._native`` where it was built, without
    the GIL, which the reading threads of a GPU run would otherwise queue for; the chunk that
    ends the run, or that it stops at, is judged here as any other. A file whose compressed
    data was made wrong with the CRCs made to match is not damage this finds: the inflater has
    its say.
    """
    if data[: len(PNG_SIGNATURE)] != PNG_SIGNATURE:
        raise _corrupt("no PNG signature")
    view = memoryview(data)
    position = len(PNG_SIGNATURE)
    header = None
    palette = None
    idat = array("Q")  # (offset, length) pairs, flat
    stream_size = 0
    idat_ended = idat_apart = animated = False
    opencv_refuses = None
    exif: list[tuple[int, int]] = []  # the eXIf chunks' data, (start, end)
    while position + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        name = kind.decode("latin-1")
        if position == len(PNG_SIGNATURE) and kind != b"IHDR":
            raise _corrupt("no IHDR chunk first")
        if not kind.isalpha():
            raise _corrupt(f"no chunk at byte {position}")
        end = position + 12 + length
        if end > len(data):
            raise _truncated(f"the file ends inside its {name} chunk")
        if kind[0] <= ord("Z"):  # critical
            (crc,) = struct.unpack_from(">I", data, end - 4)
            if zlib.crc32(view[position + 4 : end - 4]) != crc:
                raise _corrupt(f"its {name} chunk fails its CRC check")
            if kind not in CRITICAL:
                raise _corrupt(f"unknown critical chunk {name}")
        if kind == b"IHDR":
            if header is not None:
                raise _corrupt("a second IHDR chunk")
            header = _check_header(view[position + 8 : end - 4])
        elif kind == b"PLTE":
            palette = _check_palette(header, palette, view[position + 8 : end - 4])
        elif kind == b"IDAT":
            if header[3] == PALETTE and palette is None:
                raise _corrupt("no PLTE chunk before its image data")
            if idat_ended:
                idat_apart = True
            else:
                idat.extend((position + 8, length))
                stream_size += length
                if native.c is not None:  # the rest of the run, walked without the GIL
                    end, more, more_size = native.c.png_idat_run(data, end)
                    idat.frombytes(more)
                    stream_size += more_size
        elif kind == b"IEND":
            if not idat:
                raise _corrupt("no IDAT chunk")
            window = _window_size(data, idat)
            width, height, bit_depth, colour_type, interlace = header
            orientation, exif_reason = exif_orientation(view, exif)
            if len(exif) > 1:
                orientation, exif_reason = 1, "more than one eXIf chunk"
            return PngLayout(
                width=width,
                height=height,
                bit_depth=bit_depth,
                colour_type=colour_type,
                interlaced=bool(interlace),
                palette_bgr=palette,
                spans=idat.tobytes(),
                stream_size=stream_size,
                idat_apart=idat_apart,
                window_size=window,
                animated=animated,
                opencv_refuses=opencv_refuses,
                orientation=orientation,
                exif_reason=exif_reason,
            )
        elif not idat:  # an ancillary chunk before the image data
            animated |= kind in (b"acTL", b"fcTL")  # an fcTL alone too: cv2 checks its frame
            if kind == b"bKGD" and length not in BKGD_LENGTHS:
                opencv_refuses = f"a bKGD chunk of {length} bytes"
            elif length > OPENCV_MAX_CHUNK and kind not in (b"tEXt", b"tRNS", b"fdAT"):
                opencv_refuses = f"a {name} chunk of {length} bytes"
        if kind == b"eXIf":
            exif.append((position + 8, end - 4))
        if idat and kind != b"IDAT":
            idat_ended = True
        position = end
    raise _truncated("no IEND chunk")


def _check_header(body: memoryview) -> tuple[int, int, int, int, int]:
    """(width, height, bit depth, colour type, interlace method) of a valid IHDR's data."""
    if len(body) != 13:
        raise _corrupt(f"an IHDR chunk of {len(body)} bytes, not 13")
    width, height, bit_depth, colour_type, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", body
    )
    for side, value in (("width", width), ("height", height)):
        if not 1 <= value <= MAX_DIMENSION:
            raise _corrupt(f"{side} {value}, not 1 to {MAX_DIMENSION}")
    if colour_type not in COLOUR_TYPES:
        raise _corrupt(f"colour type {colour_type}, not one of 0, 2, 3, 4, 6")
    colour, _, depths = COLOUR_TYPES[colour_type]
    if bit_depth not in depths:
        allowed = ", ".join(map(str, depths))
        raise _corrupt(f"bit depth {bit_depth} with colour type {colour_type} ({colour}), "
                       f"not {allowed}")  # fmt: skip
    if compression != 0:
        raise _corrupt(f"compression method {compression}, not 0")
    if filtering != 0:
        raise _corrupt(f"filter method {filtering}, not 0")
    if interlace not in (0, 1):
        raise _corrupt(f"interlace method {interlace}, not 0 or 1")
    return width, height, bit_depth, colour_type, interlace


def _check_palette(header, palette, body: memoryview) -> np.ndarray | None:
    """The PLTE's entries as BGR for a palette image, or libpng's error on it (a PLTE after
    the image data is caught as a second one: the first must come before it); ``palette``,
    None, for another image, whose PLTE libpng ignores."""
    if header[3] != PALETTE:
        return palette
    if palette is not None:
        raise _corrupt("a second PLTE chunk")
    entries, rest = divmod(len(body), 3)
    if rest or not 1 <= entries <= 256:
        raise _corrupt(f"a PLTE chunk of {len(body)} bytes, not 3 to 768 in threes")
    entries = min(entries, 1 << header[2])  # libpng drops the entries no index can reach
    rgb = np.frombuffer(body, np.uint8, entries * 3).reshape(entries, 3)
    return np.ascontiguousarray(rgb[:, ::-1])


def _window_size(data: bytes, idat: array) -> int:
    """The window the zlib header declares, 256 << CINFO; 0 where the stream is empty
    (``idat``: the (offset, length) pairs, flat)."""
    for i in range(0, len(idat), 2):
        if idat[i + 1]:
            return 256 << (data[idat[i]] >> 4)
    return 0


def gpu_reason(layout: PngLayout) -> str | None:
    """None where inflating the file's zlib stream, unfiltering its rows and expanding each
    pixel to BGR (a function of its samples alone, the PLTE's for a palette image) gives the
    CPU decoder's frame; else why not, in a few words.

    A file this passes whose stream a GPU decoder finds malformed anywhere (its Adler-32, a
    code, a distance past ``window_size``, fewer than ``inflated_size`` bytes, a filter type
    over 4) must go to the CPU decoder, which gives its own frame or error: libpng reads the
    stream in pieces as its rows need it, and whether such damage past the last row is an
    error or a warning depends on where those pieces end."""
    if layout.interlaced:
        return "interlaced (Adam7)"
    if layout.animated:
        return "animated (APNG)"  # cv2 composes the animation's first frame
    if layout.idat_apart:
        return "IDAT chunks apart"  # libpng ignores those after the first run, or fails
    if layout.opencv_refuses is not None:
        return f"{layout.opencv_refuses}, which OpenCV's reader refuses"
    if max(layout.width, layout.height) > LIBPNG_MAX_DIMENSION:
        return f"over libpng's limit of {LIBPNG_MAX_DIMENSION} pixels a side"
    return layout.exif_reason


@dataclass(frozen=True)
class EncodedPng:
    """A PNG file read and found fit for the GPU decoder: its bytes and layout (``header``, as
    an EncodedJpeg's, for what batches it: its size), and the ReadBuffers (edgecli.decode.cpu)
    its bytes are in, if any: :meth:`release` gives them back once its decoder has spent them."""

    out_name: str
    source: str
    path: Path
    data: bytes | memoryview
    header: PngLayout
    buffers: object = None

    def release(self) -> None:
        """Give the file's bytes back to the buffers they were read into; unread after."""
        if self.buffers is not None:
            self.buffers.give(self.data)

    def key(self) -> tuple:
        """What the files of one batch share: the layout one launch decodes, and the turn."""
        h = self.header
        return ("png", h.width, h.height, h.colour_type, h.bit_depth, h.orientation)
