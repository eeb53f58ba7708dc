"""PNG, the one place that knows its format: the 1-bit scanlines (which the GPU also packs:
``pack_rows_1bit`` in cuda/edges.cu), the encoders, the chunk layout, and the check that a PNG
on disk is whole (what ``--skip-existing`` keeps).

1-bit grayscale is the default: the host packs the rows, or the GPU does on the CUDA path (a
nonzero pixel is a 1 bit, which reads back as 255), each row has filter type 0 (none), and zlib
compresses with its run-length strategy, as libpng does for OpenCV's IMWRITE_PNG_BILEVEL: files
as small as OpenCV's, without its filter search (measured: benchmarks/RESULTS.md, "PNG
encoding").

Two encoders make those bytes: :mod:`edgecli.native`'s C (where it was built) lets go of the
GIL once a PNG, for all of it; the Python code below, used where it is missing, wins the GIL
back after each zlib call and holds it for the chunks, so the worker threads that encode
queue for it. Both link a zlib; where it is the same one, the bytes are the same.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .. import native
from ..errors import OutputError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The last chunk of every PNG: length 0, type IEND, and the CRC-32 of b"IEND".
IEND_CHUNK = b"\x00\x00\x00\x00IEND\xaeB`\x82"
PNG_8BIT: list[int] = []  # 8-bit grayscale: OpenCV's defaults
_IHDR_GRAY_1BIT = (1, 0, 0, 0, 0)  # bit depth 1, grayscale, deflate, adaptive filters, no interlace
NATIVE_MAX_BYTES = 2**31  # edgecli._native takes less; the Python encoder any size


def png_row_bytes_1bit(width: int) -> int:
    """Bytes of one scanline of a 1-bit PNG ``width`` pixels wide: its filter byte, then the
    pixels' bits, ceil(width / 8) bytes."""
    return 1 + (width + 7) // 8


@dataclass(frozen=True)
class PackedEdges:
    """An edge map already packed as the scanlines of a 1-bit PNG (by the GPU: cuda/edges.cu,
    ``pack_rows_1bit``): ``rows`` is (H, 1 + ceil(width / 8)) uint8, as :func:`png_rows_1bit`
    makes them."""

    rows: np.ndarray
    width: int
    # The zlib stream of ``rows`` as edgecli's zlib settings make it, where the GPU compressed
    # them (edgecli.edges.cuda_deflate); None: the host compresses them.
    zlib: np.ndarray | None = None

    def __post_init__(self) -> None:
        rows, row_bytes = self.rows, png_row_bytes_1bit(self.width)
        if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != row_bytes:
            raise ValueError(
                f"packed rows of a {self.width}-pixel-wide map must be uint8 shaped "
                f"(H, {row_bytes}), got {rows.dtype} {rows.shape}"
            )


def encode_png(edges: np.ndarray | PackedEdges, bits: int) -> bytes:
    """PNG bytes of one (H, W) 0/255 edge map, 1-bit or 8-bit grayscale; a
    :class:`PackedEdges` makes a 1-bit PNG only."""
    if isinstance(edges, PackedEdges):
        if bits != 1:
            raise ValueError(f"packed edge rows make 1-bit PNGs, not {bits}-bit")
        if edges.zlib is not None:
            return png_from_zlib_1bit(edges.zlib, edges.width, edges.rows.shape[0])
        return png_from_rows_1bit(edges.rows, edges.width)
    if bits == 1:
        return encode_png_1bit(edges)
    ok, encoded = cv2.imencode(".png", edges, PNG_8BIT)
    if not ok:
        raise OutputError(f"PNG encoding failed for an edge map of shape {edges.shape}")
    return encoded.tobytes()


def encode_png_1bit(edges: np.ndarray) -> bytes:
    """A 1-bit grayscale PNG of an (H, W) uint8 edge map: nonzero pixels white."""
    if native.c is not None and edges.dtype == np.uint8 and 0 < edges.size < NATIVE_MAX_BYTES:
        return native.c.encode_map(np.ascontiguousarray(edges), edges.shape[1])
    return png_from_rows_1bit(png_rows_1bit(edges), edges.shape[1])


def png_rows_1bit(edges: np.ndarray) -> np.ndarray:
    """The scanlines of a 1-bit grayscale PNG of an (H, W) edge map: (H, 1 + ceil(W / 8))
    uint8, each a filter byte 0 (none), then the pixels as bits, the first in the most
    significant bit, a nonzero pixel a 1 and the last byte padded with 0 bits.

    ``np.packbits`` holds the GIL, so threads calling it pack one at a time: the GPU path
    packs on the device (:class:`PackedEdges`), and :func:`encode_png_1bit` packs in C where
    edgecli._native is built."""
    height, width = edges.shape
    rows = np.zeros((height, png_row_bytes_1bit(width)), np.uint8)
    rows[:, 1:] = np.packbits(edges, axis=1)
    return rows


def png_from_rows_1bit(rows: np.ndarray, width: int) -> bytes:
    """A 1-bit grayscale PNG of ``width`` pixels a row from its scanlines (:func:`png_rows_1bit`
    or the GPU's), compressed by zlib."""
    if native.c is not None and 0 < rows.size < NATIVE_MAX_BYTES:
        return native.c.encode_rows(np.ascontiguousarray(rows), width)
    return png_from_rows_1bit_python(rows, width)


def png_from_rows_1bit_python(rows: np.ndarray, width: int) -> bytes:
    """:func:`png_from_rows_1bit` in Python: the encoder where ``edgecli._native`` is not
    built, and what the tests hold it to."""
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    return _png_1bit([deflate.compress(rows), deflate.flush()], width, rows.shape[0])


def png_from_zlib_1bit(stream, width: int, height: int) -> bytes:
    """A 1-bit grayscale PNG of ``width`` x ``height`` pixels from the zlib stream of its
    scanlines (``stream``: bytes or a uint8 array, as edgecli.edges.cuda_deflate makes it): the
    chunks and their CRCs, in C without the GIL where edgecli._native is built."""
    if native.c is not None and 0 < len(stream) < NATIVE_MAX_BYTES:
        return native.c.png_from_zlib(stream, width, height)
    return _png_1bit([memoryview(stream).cast("B")], width, height)


def _png_1bit(image_data: list, width: int, height: int) -> bytes:
    header = struct.pack(">II5B", width, height, *_IHDR_GRAY_1BIT)
    # One join: the compressed bytes are copied once, with the GIL held.
    return b"".join(
        [
            PNG_SIGNATURE,
            *_png_chunk(b"IHDR", [header]),
            *_png_chunk(b"IDAT", image_data),
            *_png_chunk(b"IEND", []),
        ]
    )


def _png_chunk(kind: bytes, parts: list[bytes]) -> list[bytes]:
    """The pieces of a PNG chunk whose data is ``parts`` joined: length, type, data, and the
    CRC-32 of type and data."""
    crc = zlib.crc32(kind)
    for part in parts:
        crc = zlib.crc32(part, crc)
    return [struct.pack(">I", sum(map(len, parts))), kind, *parts, struct.pack(">I", crc)]


def whole_png_pixels(path: Path, png_bits: int) -> int | None:
    """Width x height of the PNG at ``path`` if it is whole and of the format ``png_bits``
    makes (grayscale, that bit depth, not interlaced), else None (missing, empty, garbage,
    truncated, damaged).

    Whole means: the signature, an IHDR chunk first, every chunk's length in bounds and its
    CRC-32 right, and an IEND chunk last. That reads the file once (a 1080p 1-bit map is
    about 40 KB) and checksums it, without inflating it: edgecli writes each PNG whole, by
    rename, so what damages one afterwards (truncation, a zero-length file, overwritten
    bytes) breaks its structure or a CRC.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not (data.startswith(PNG_SIGNATURE) and data.endswith(IEND_CHUNK)):
        return None
    if data[12:16] != b"IHDR" or len(data) < 33:
        return None
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if (depth, colour, interlace) != (png_bits, 0, 0) or not width or not height:
        return None
    at = len(PNG_SIGNATURE)
    view = memoryview(data)
    while at < len(data):
        if at + 12 > len(data):
            return None
        (length,) = struct.unpack_from(">I", data, at)
        end = at + 8 + length
        if end + 4 > len(data):
            return None
        if zlib.crc32(view[at + 4 : end]) != struct.unpack_from(">I", data, end)[0]:
            return None
        at = end + 4
    return width * height
