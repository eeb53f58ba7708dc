"""An independent PNG decoder in plain Python, the contract the GPU's PNG kernels are held to:
a zlib inflater (RFC 1950 and 1951, no zlib), the five filters' unfilter, Adam7, and the
expansion of each pixel to the BGR frame ``cv2.imread(IMREAD_COLOR)`` gives
(docs/gpu-decoding.md, *PNG*). Written for clarity over speed: a 300x200 image takes about a
second.

The inflater refuses every stream a decoder must refuse, with zlib's words for why: a bad
header, a preset dictionary, a reserved block type, a stored block whose lengths disagree, code
lengths that over-subscribe a code or leave it incomplete (bar the one-code case zlib allows),
a repeat with nothing to repeat or past the code lengths' end, an end-of-block code of length
0, the literal/length codes 286 and 287, the distance codes 30 and 31, a distance reaching
before the output's start or past the header's window, a stream cut short, a wrong Adler-32.
"""

from __future__ import annotations

import numpy as np

from edgecli.decode.png_layout import ADAM7, PngLayout, read_layout

# RFC 1951 3.2.5: base lengths and extra bits of the length codes 257..285, and of the
# distance codes 0..29.
LENGTH_BASE = (3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83,
               99, 115, 131, 163, 195, 227, 258)  # fmt: skip
LENGTH_EXTRA = (0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5,
                5, 0)  # fmt: skip
DISTANCE_BASE = (1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769,
                 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577)  # fmt: skip
DISTANCE_EXTRA = (0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11,
                  11, 12, 12, 13, 13)  # fmt: skip
# RFC 1951 3.2.7: the order in which the code length code's lengths are sent.
CODE_LENGTH_ORDER = (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15)
FIXED_LITERAL_LENGTHS = [8] * 144 + [9] * 112 + [7] * 24 + [8] * 8
FIXED_DISTANCE_LENGTHS = [5] * 32  # codes 30 and 31 exist, and are refused
MAX_BITS = 15


class InflateError(ValueError):
    """A zlib stream that a decoder must refuse."""


class BitReader:
    """The bits of ``data`` from the least significant of each byte, as deflate packs them."""

    def __init__(self, data: bytes, start: int = 0) -> None:
        self.data = data
        self.position = start * 8  # in bits

    def bits(self, count: int) -> int:
        """The next ``count`` bits as an integer, the first one lowest."""
        if count == 0:
            return 0
        end = self.position + count
        if end > len(self.data) * 8:
            raise InflateError("unexpected end of stream")
        first, last = self.position >> 3, (end + 7) >> 3
        value = int.from_bytes(self.data[first:last], "little") >> (self.position & 7)
        self.position = end
        return value & ((1 << count) - 1)

    def peek(self, count: int) -> tuple[int, int]:
        """Up to ``count`` next bits without consuming them, and how many there were."""
        available = min(count, len(self.data) * 8 - self.position)
        first = self.position >> 3
        value = int.from_bytes(self.data[first : first + 3], "little") >> (self.position & 7)
        return value & ((1 << available) - 1), available

    def align(self) -> None:
        self.position = (self.position + 7) & ~7


class Huffman:
    """A canonical Huffman code (RFC 1951 3.2.2) from its code lengths, decoded through a table
    of every ``longest``-bit pattern: the bits are read first bit lowest, so the table is
    indexed by each code reversed, padded with every value of the bits after it."""

    def __init__(self, lengths, what: str) -> None:
        counts = [0] * (MAX_BITS + 1)
        for length in lengths:
            counts[length] += 1
        counts[0] = 0
        left = 1
        for length in range(1, MAX_BITS + 1):
            left = (left << 1) - counts[length]
            if left < 0:
                raise InflateError(f"invalid {what} set")  # over-subscribed
        used = [length for length in lengths if length]
        self.longest = max(used, default=0)
        # zlib's inflate_table: an incomplete code is an error, except one of a single code
        # of one bit for literals/lengths or distances (a block that uses one distance).
        if left > 0 and (what == "code lengths" or self.longest != 1):
            if not (what == "distances" and self.longest == 0):
                raise InflateError(f"invalid {what} set")  # incomplete
        self.table: list[tuple[int, int] | None] = [None] * (1 << self.longest)
        code = 0
        next_code = [0] * (MAX_BITS + 2)
        for length in range(1, MAX_BITS + 1):
            code = (code + counts[length - 1]) << 1 if length > 1 else 0
            next_code[length] = code
        for symbol, length in enumerate(lengths):
            if not length:
                continue
            code = next_code[length]
            next_code[length] += 1
            reversed_code = int(f"{code:0{length}b}"[::-1], 2)
            for pad in range(1 << (self.longest - length)):
                self.table[reversed_code | (pad << length)] = (symbol, length)
        self.what = what

    def decode(self, reader: BitReader) -> int:
        bits, available = reader.peek(self.longest)
        entry = self.table[bits] if available == self.longest else None
        if entry is None:
            for length in range(1, available + 1):  # near the end: a shorter code may fit
                candidate = self.table[bits & ((1 << length) - 1)] if self.longest else None
                if candidate is not None and candidate[1] == length:
                    entry = candidate
                    break
            else:
                if available < self.longest:
                    raise InflateError("unexpected end of stream")
                raise InflateError(f"invalid {self.what} code")
        symbol, length = entry
        reader.position += length
        return symbol


def _code_lengths(reader: BitReader) -> tuple[Huffman, Huffman]:
    """A dynamic block's literal/length and distance codes (RFC 1951 3.2.7)."""
    literals = reader.bits(5) + 257
    distances = reader.bits(5) + 1
    code_lengths = reader.bits(4) + 4
    if literals > 286 or distances > 30:
        raise InflateError("too many length or distance symbols")
    order = [0] * 19
    for i in range(code_lengths):
        order[CODE_LENGTH_ORDER[i]] = reader.bits(3)
    code = Huffman(order, "code lengths")
    if code.longest == 0:
        raise InflateError("invalid code lengths set")
    lengths: list[int] = []
    while len(lengths) < literals + distances:
        symbol = code.decode(reader)
        if symbol < 16:
            lengths.append(symbol)
            continue
        if symbol == 16:
            if not lengths:
                raise InflateError("invalid bit length repeat")
            value, repeat = lengths[-1], 3 + reader.bits(2)
        elif symbol == 17:
            value, repeat = 0, 3 + reader.bits(3)
        else:
            value, repeat = 0, 11 + reader.bits(7)
        if len(lengths) + repeat > literals + distances:
            raise InflateError("invalid bit length repeat")
        lengths += [value] * repeat
    if lengths[256] == 0:
        raise InflateError("invalid code -- missing end-of-block")
    return (
        Huffman(lengths[:literals], "literal/lengths"),
        Huffman(lengths[literals:], "distances"),
    )


def inflate_raw(
    data: bytes, start: int = 0, window: int = 32768, blocks: list | None = None
) -> tuple[bytearray, int]:
    """Inflate the raw deflate stream at byte ``start`` of ``data``: the output, and the byte
    after the stream's last block. A distance past ``window`` is refused. Each block's type
    (0 stored, 1 fixed, 2 dynamic) is appended to ``blocks``, where given."""
    reader = BitReader(data, start)
    out = bytearray()
    fixed = None
    final = False
    while not final:
        final = bool(reader.bits(1))
        kind = reader.bits(2)
        if blocks is not None:
            blocks.append(kind)
        if kind == 0:  # stored
            reader.align()
            length, complement = reader.bits(16), reader.bits(16)
            if length != complement ^ 0xFFFF:
                raise InflateError("invalid stored block lengths")
            first = reader.position >> 3
            if first + length > len(data):
                raise InflateError("unexpected end of stream")
            out += data[first : first + length]
            reader.position += 8 * length
            continue
        if kind == 1:
            if fixed is None:
                fixed = (
                    Huffman(FIXED_LITERAL_LENGTHS, "literal/lengths"),
                    Huffman(FIXED_DISTANCE_LENGTHS, "distances"),
                )
            literal_code, distance_code = fixed
        elif kind == 2:
            literal_code, distance_code = _code_lengths(reader)
        else:
            raise InflateError("invalid block type")
        while True:
            symbol = literal_code.decode(reader)
            if symbol < 256:
                out.append(symbol)
                continue
            if symbol == 256:
                break
            if symbol > 285:
                raise InflateError("invalid literal/length code")
            length = LENGTH_BASE[symbol - 257] + reader.bits(LENGTH_EXTRA[symbol - 257])
            if distance_code.longest == 0:
                raise InflateError("invalid distance code")
            symbol = distance_code.decode(reader)
            if symbol > 29:
                raise InflateError("invalid distance code")
            distance = DISTANCE_BASE[symbol] + reader.bits(DISTANCE_EXTRA[symbol])
            if distance > len(out) or distance > window:
                raise InflateError("invalid distance too far back")
            if distance >= length:
                out += out[-distance : len(out) - distance + length]
            else:
                for _ in range(length):  # overlapping: each byte copies one already written
                    out.append(out[-distance])
    return out, (reader.position + 7) >> 3


def adler32(data: bytes) -> int:
    a, b = 1, 0
    for i in range(0, len(data), 5552):  # zlib's NMAX: the sums stay small before the modulo
        for byte in data[i : i + 5552]:
            a += byte
            b += a
        a %= 65521
        b %= 65521
    return (b << 16) | a


def inflate(data: bytes, *, window_checked: bool = True, blocks: list | None = None) -> bytes:
    """The zlib stream ``data`` inflated (RFC 1950), or InflateError. Bytes after its Adler-32
    are ignored, as zlib.decompress does. With ``window_checked``, a distance past the window
    the header declares is refused (libpng may refuse it); zlib.decompress allows 32 KB."""
    if len(data) < 2:
        raise InflateError("unexpected end of stream")
    cmf, flags = data[0], data[1]
    if (cmf << 8 | flags) % 31:
        raise InflateError("incorrect header check")
    if cmf & 0x0F != 8:
        raise InflateError("unknown compression method")
    if cmf >> 4 > 7:
        raise InflateError("invalid window size")
    if flags & 0x20:
        raise InflateError("need dictionary")
    window = 256 << (cmf >> 4) if window_checked else 32768
    out, end = inflate_raw(data, 2, window, blocks)
    if end + 4 > len(data):
        raise InflateError("unexpected end of stream")
    if int.from_bytes(data[end : end + 4], "big") != adler32(out):
        raise InflateError("incorrect data check")
    return bytes(out)


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(data: bytes, height: int, row_bytes: int, bpp: int) -> np.ndarray:
    """The (height, row_bytes) uint8 scanlines of ``height`` filtered rows of ``data``, each a
    filter byte then ``row_bytes`` bytes, filtered with ``bpp`` bytes to the left (PNG 9.2)."""
    rows = np.zeros((height, row_bytes), np.uint8)
    above = bytearray(row_bytes)
    for y in range(height):
        start = y * (row_bytes + 1)
        kind = data[start]
        row = bytearray(data[start + 1 : start + 1 + row_bytes])
        if kind == 1:
            for i in range(bpp, row_bytes):
                row[i] = (row[i] + row[i - bpp]) & 0xFF
        elif kind == 2:
            for i in range(row_bytes):
                row[i] = (row[i] + above[i]) & 0xFF
        elif kind == 3:
            for i in range(row_bytes):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + above[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(row_bytes):
                left = row[i - bpp] if i >= bpp else 0
                corner = above[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + paeth(left, above[i], corner)) & 0xFF
        elif kind != 0:
            raise InflateError(f"bad adaptive filter value {kind}")
        rows[y] = np.frombuffer(bytes(row), np.uint8)
        above = row
    return rows


def samples(rows: np.ndarray, width: int, channels: int, bit_depth: int) -> np.ndarray:
    """(H, width, channels) samples of unfiltered scanlines: sub-byte samples from the high
    bit of each byte, 16-bit samples big-endian (uint16)."""
    height = rows.shape[0]
    count = width * channels
    if bit_depth == 16:
        return rows[:, : 2 * count].view(">u2").astype(np.uint16).reshape(height, width, channels)
    if bit_depth == 8:
        return rows[:, :count].reshape(height, width, channels)
    bits = np.unpackbits(rows, axis=1)[:, : count * bit_depth].reshape(height, count, bit_depth)
    weights = (1 << np.arange(bit_depth - 1, -1, -1)).astype(np.uint8)
    return (bits * weights).sum(axis=2, dtype=np.uint8).reshape(height, width, channels)


def to_bgr(values: np.ndarray, layout: PngLayout) -> np.ndarray:
    """(H, W, 3) uint8 BGR from a PNG's samples, as cv2.imread(IMREAD_COLOR) makes it: the
    high byte of a 16-bit sample; a 1, 2 or 4-bit gray sample scaled to 8 bits by repeating
    its bits; a palette index through the PLTE (black past its end); alpha dropped."""
    depth = layout.bit_depth
    if layout.colour_type == 3:
        return layout.palette_table()[values[:, :, 0]]
    if depth == 16:
        values = (values >> 8).astype(np.uint8)
    elif depth < 8:
        values = (values.astype(np.uint16) * (255 // ((1 << depth) - 1))).astype(np.uint8)
    if layout.colour_type in (0, 4):
        return np.repeat(values[:, :, :1], 3, axis=2)
    return np.ascontiguousarray(values[:, :, 2::-1])


def decode_rows(inflated: bytes, layout: PngLayout) -> np.ndarray:
    """The image's samples (H, W, C) from its inflated data, de-interlacing Adam7."""
    channels, depth, bpp = layout.channels, layout.bit_depth, layout.filter_bpp
    if len(inflated) < layout.inflated_size:
        raise InflateError("Not enough image data")
    if not layout.interlaced:
        rows = unfilter(inflated, layout.height, layout.row_bytes, bpp)
        return samples(rows, layout.width, channels, depth)
    dtype = np.uint16 if depth == 16 else np.uint8
    image = np.zeros((layout.height, layout.width, channels), dtype)
    at = 0
    for y0, x0, dy, dx in ADAM7:
        height = (layout.height - y0 + dy - 1) // dy
        width = (layout.width - x0 + dx - 1) // dx
        if height <= 0 or width <= 0:
            continue
        row_bytes = (width * channels * depth + 7) // 8
        rows = unfilter(inflated[at:], height, row_bytes, bpp)
        image[y0::dy, x0::dx] = samples(rows, width, channels, depth)
        at += height * (1 + row_bytes)
    return image


def decode(data: bytes) -> np.ndarray:
    """The BGR frame of the PNG file ``data`` (PngDamage or InflateError where it has none)."""
    layout = read_layout(data)
    inflated = inflate(layout.stream(data))
    return to_bgr(decode_rows(inflated, layout), layout)
