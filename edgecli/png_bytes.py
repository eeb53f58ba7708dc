"""A 1-bit grayscale PNG's bytes from its packed scanlines, with the standard library alone:
the PNG encoder processes (:mod:`edgecli.encoders`) import this and nothing heavier (no NumPy,
no OpenCV: each starts in a few tens of milliseconds). The rest of the format, and the
encoders that make scanlines, are :mod:`edgecli.png`.
"""

from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The last chunk of every PNG: length 0, type IEND, and the CRC-32 of b"IEND".
IEND_CHUNK = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_IHDR_GRAY_1BIT = (1, 0, 0, 0, 0)  # bit depth 1, grayscale, deflate, adaptive filters, no interlace


def png_row_bytes_1bit(width: int) -> int:
    """Bytes of one scanline of a 1-bit PNG ``width`` pixels wide: its filter byte, then the
    pixels' bits, ceil(width / 8) bytes."""
    return 1 + (width + 7) // 8


def png_from_rows_1bit(rows, width: int) -> bytes:
    """A 1-bit grayscale PNG of ``width`` pixels a row from its scanlines, any contiguous
    buffer of whole rows (:func:`edgecli.png.png_rows_1bit`'s, or the GPU's), compressed by
    zlib, which lets go of the GIL while it works."""
    view = memoryview(rows).cast("B")
    height = view.nbytes // png_row_bytes_1bit(width)
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    image_data = [deflate.compress(view), deflate.flush()]
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
