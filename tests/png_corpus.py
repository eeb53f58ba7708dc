"""PNG files for the PNG decoders' tests (the CPU reference, the GPU kernels): every colour type
and bit depth, odd sizes, every filter type, multi-IDAT files, zlib's levels, strategies and
block types, and files written by libpng (cv2.imwrite), Pillow and FFmpeg; and corrupt variants
of them (``mutations``) for the fuzz tests.

Most files come from ``encode_png`` below, a PNG encoder of the tests' own that chooses each
row's filter, the IDAT split and the zlib settings; those are made in memory, in a second or
so. The others need cv2, Pillow or FFmpeg and a folder to write in (``external_files``).
"""

from __future__ import annotations

import itertools
import struct
import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.media import photo

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Colour type -> samples a pixel, and the bit depths the PNG specification allows with it.
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
COLOUR_NAMES = {0: "gray", 2: "rgb", 3: "palette", 4: "gray+alpha", 6: "rgba"}
FILTERS = (0, 1, 2, 3, 4)  # None, Sub, Up, Average, Paeth
SIZES = ((1, 1), (1, 37), (23, 1), (2, 2), (7, 3), (33, 17), (255, 1))  # (width, height)
STRATEGIES = {
    "default": zlib.Z_DEFAULT_STRATEGY,
    "filtered": zlib.Z_FILTERED,
    "huffman": zlib.Z_HUFFMAN_ONLY,
    "rle": zlib.Z_RLE,
    "fixed": zlib.Z_FIXED,
}
# Adam7: each pass's first row, first column, row step and column step.
ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
         (1, 0, 2, 1))  # fmt: skip


def chunk(kind: bytes, body: bytes) -> bytes:
    """One chunk: length, type, body, CRC-32 of type and body."""
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def chunks(data: bytes) -> list[tuple[int, bytes, int]]:
    """``(offset, type, length)`` of each whole chunk of ``data`` after the signature."""
    found, at = [], len(SIGNATURE)
    while at + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, at)
        if at + 12 + length > len(data):
            break
        found.append((at, kind, length))
        at += 12 + length
    return found


def pack_rows(samples: np.ndarray, bit_depth: int) -> np.ndarray:
    """(H, W, C) samples as PNG scanlines without their filter bytes: (H, row bytes) uint8,
    sub-byte samples packed from the high bit, 16-bit ones big-endian."""
    height, width, channels = samples.shape
    flat = samples.reshape(height, width * channels).astype(np.uint16)
    if bit_depth == 16:
        return flat.astype(">u2").view(np.uint8).reshape(height, -1)
    if bit_depth == 8:
        return flat.astype(np.uint8)
    bits = np.unpackbits(flat.astype(np.uint8)[..., np.newaxis], axis=2)[..., 8 - bit_depth :]
    return np.packbits(bits.reshape(height, -1), axis=1)


def filter_row(kind: int, row: bytes, above: bytes, bpp: int) -> bytes:
    """``row`` filtered by filter ``kind`` against the unfiltered row ``above``."""
    out = bytearray(len(row))
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = above[i]
        c = above[i - bpp] if i >= bpp else 0
        if kind == 0:
            predictor = 0
        elif kind == 1:
            predictor = a
        elif kind == 2:
            predictor = b
        elif kind == 3:
            predictor = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
        out[i] = (x - predictor) & 0xFF
    return bytes(out)


def scanlines(rows: np.ndarray, bpp: int, filters: Sequence[int]) -> bytes:
    """Filtered scanlines, row ``y`` by ``filters[y % len(filters)]``."""
    out = bytearray()
    above = bytes(rows.shape[1])
    for y, row in enumerate(rows):
        kind = filters[y % len(filters)]
        out.append(kind)
        out += filter_row(kind, row.tobytes(), above, bpp)
        above = row.tobytes()
    return bytes(out)


def encode_png(
    samples: np.ndarray,
    colour_type: int,
    bit_depth: int,
    *,
    palette: bytes | None = None,
    trns: bytes | None = None,
    filters: Sequence[int] = (0,),
    level: int = 6,
    strategy: int = zlib.Z_DEFAULT_STRATEGY,
    window_bits: int = 15,
    idat_sizes: Sequence[int] = (),
    before: Sequence[bytes] = (),
    after: Sequence[bytes] = (),
    interlaced: bool = False,
) -> bytes:
    """A PNG of (H, W, C) ``samples`` (palette indices for colour type 3). ``idat_sizes``
    splits the zlib stream into IDATs of those sizes (0: an empty one) and one IDAT for the
    rest; ``before`` and ``after`` are whole chunks placed before PLTE and after the IDATs."""
    height, width, _ = samples.shape
    bpp = max(1, CHANNELS[colour_type] * bit_depth // 8)
    if interlaced:
        raw = b""
        for y0, x0, dy, dx in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.size:
                raw += scanlines(pack_rows(sub, bit_depth), bpp, filters)
    else:
        raw = scanlines(pack_rows(samples, bit_depth), bpp, filters)
    deflate = zlib.compressobj(level, zlib.DEFLATED, window_bits, 9, strategy)
    stream = deflate.compress(raw) + deflate.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, int(interlaced))
    parts = [SIGNATURE, chunk(b"IHDR", ihdr), *before]
    if palette is not None:
        parts.append(chunk(b"PLTE", palette))
    if trns is not None:
        parts.append(chunk(b"tRNS", trns))
    at = 0
    for size in idat_sizes:
        parts.append(chunk(b"IDAT", stream[at : at + size]))
        at += size
    parts += [chunk(b"IDAT", stream[at:]), *after, chunk(b"IEND", b"")]
    return b"".join(parts)


def make_samples(
    width: int, height: int, colour_type: int, bit_depth: int, seed: int = 0
) -> np.ndarray:
    """(H, W, C) samples below 2**bit_depth: a photograph's values, with noise in the low bits
    of 16-bit samples and a gradient in alpha, so that matches and literals both occur."""
    channels = CHANNELS[colour_type]
    rng = np.random.default_rng(seed)
    base = photo(height, width, seed=seed).astype(np.uint16)[:, :, ::-1]  # RGB
    gray = base.mean(axis=2, dtype=np.float64).astype(np.uint16)[..., np.newaxis]
    colour = base if channels >= 3 else gray
    alpha = (np.arange(height * width, dtype=np.uint16).reshape(height, width, 1) * 7) % 256
    values = np.concatenate([colour, alpha], axis=2) if channels in (2, 4) else colour
    if bit_depth == 16:
        return values * 257 + rng.integers(0, 256, values.shape, dtype=np.uint16) % 3
    return values >> (8 - bit_depth)


def random_palette(entries: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed + 1000)
    return rng.integers(0, 256, entries * 3, dtype=np.uint8).tobytes()


def own_files() -> dict[str, bytes]:
    """PNGs of ``encode_png``, by name: every colour type x bit depth x ``SIZES``, with every
    filter type taking turns by row; palettes full and short, with and without tRNS (short
    tRNS too); three photographs of about 300x200; one filter for a whole image; zlib levels
    0-9 and strategies; IDATs of one byte and empty ones; ancillary chunks cv2 might act on
    (gAMA, sBIT, sRGB, iCCP, cHRM, bKGD, tEXt, pHYs, tIME); Adam7 interlacing."""
    found = {}
    for colour_type, depths in DEPTHS.items():
        for bit_depth, (width, height) in itertools.product(depths, SIZES):
            seed = len(found)
            samples = make_samples(width, height, colour_type, bit_depth, seed)
            name = f"{COLOUR_NAMES[colour_type]} {bit_depth}-bit {width}x{height}"
            palette = None
            if colour_type == 3:
                palette = random_palette(1 << bit_depth, seed)
            found[name] = encode_png(
                samples, colour_type, bit_depth, palette=palette, filters=FILTERS
            )
    for bit_depth in DEPTHS[3]:  # palettes short of 2**depth entries, with tRNS of each length
        entries = max(1, (1 << bit_depth) - 3)
        samples = make_samples(33, 17, 0, bit_depth, bit_depth) % entries
        palette = random_palette(entries, bit_depth)
        for trns_length in (None, 1, entries // 2, entries):
            trns = None if trns_length is None else bytes(range(trns_length))
            name = f"palette {bit_depth}-bit, {entries} entries, tRNS {trns_length}"
            found[name] = encode_png(
                samples, 3, bit_depth, palette=palette, trns=trns, filters=FILTERS
            )
    indices = np.arange(16, dtype=np.uint16).reshape(2, 8, 1) % 4
    found["palette 2-bit, indices past its 2 entries"] = encode_png(
        indices, 3, 2, palette=random_palette(2), filters=FILTERS
    )
    found["palette 2-bit, PLTE of 7 entries"] = encode_png(
        indices, 3, 2, palette=random_palette(7), filters=FILTERS
    )
    trns_by_type = {0: struct.pack(">H", 3), 2: struct.pack(">HHH", 1, 2, 3)}
    for (colour_type, trns), bit_depth in itertools.product(trns_by_type.items(), (8, 16)):
        samples = make_samples(33, 17, colour_type, bit_depth, colour_type)
        name = f"{COLOUR_NAMES[colour_type]} {bit_depth}-bit, tRNS"
        found[name] = encode_png(samples, colour_type, bit_depth, trns=trns, filters=FILTERS)
    for colour_type, bit_depth in ((2, 8), (6, 16), (3, 8), (0, 16)):
        samples = make_samples(300, 200, colour_type, bit_depth, colour_type)
        palette = random_palette(256, 1) if colour_type == 3 else None
        name = f"{COLOUR_NAMES[colour_type]} {bit_depth}-bit 300x200"
        found[name] = encode_png(samples, colour_type, bit_depth, palette=palette, filters=FILTERS)
    rgb = make_samples(64, 48, 2, 8, 3)
    for kind in FILTERS:
        found[f"filter {kind} in every row"] = encode_png(rgb, 2, 8, filters=(kind,))
    for level in range(10):
        found[f"zlib level {level}"] = encode_png(rgb, 2, 8, filters=FILTERS, level=level)
    for name, strategy in STRATEGIES.items():
        found[f"zlib strategy {name}"] = encode_png(rgb, 2, 8, filters=FILTERS, strategy=strategy)
    for window_bits in (9, 12):
        found[f"zlib window {1 << window_bits}"] = encode_png(
            rgb, 2, 8, filters=FILTERS, window_bits=window_bits
        )
    stream_length = len(encode_png(rgb, 2, 8, filters=FILTERS)) - 57  # about the zlib stream
    found["one-byte IDATs"] = encode_png(rgb, 2, 8, filters=FILTERS, idat_sizes=[1] * 200)
    found["empty IDATs"] = encode_png(rgb, 2, 8, filters=FILTERS, idat_sizes=[0, 5, 0, 0, 100, 0])
    found["IDAT split in halves"] = encode_png(
        rgb, 2, 8, filters=FILTERS, idat_sizes=[stream_length // 2]
    )
    found["empty IDAT last"] = encode_png(rgb, 2, 8, filters=FILTERS, after=[chunk(b"IDAT", b"")])
    ancillary = {
        "gAMA": chunk(b"gAMA", struct.pack(">I", 100000)),
        "sBIT": chunk(b"sBIT", bytes([3, 5, 2])),
        "sRGB": chunk(b"sRGB", b"\x00"),
        "iCCP": chunk(b"iCCP", b"profile\x00\x00" + zlib.compress(bytes(200))),
        "cHRM": chunk(b"cHRM", struct.pack(">8I", *(31270, 32900, 64000, 33000) * 2)),
        "bKGD": chunk(b"bKGD", struct.pack(">HHH", 255, 0, 0)),
        "tEXt": chunk(b"tEXt", b"Comment\x00made by the tests"),
        "pHYs": chunk(b"pHYs", struct.pack(">IIB", 2835, 2835, 1)),
        "tIME": chunk(b"tIME", struct.pack(">HBBBBB", 2026, 12, 5, 1, 2, 3)),
    }
    for name, extra in ancillary.items():
        found[f"rgb with {name}"] = encode_png(rgb, 2, 8, filters=FILTERS, before=[extra])
    found["rgb with all of them"] = encode_png(
        rgb, 2, 8, filters=FILTERS, before=list(ancillary.values())
    )
    gray = make_samples(64, 48, 0, 8, 4)
    found["gray with gAMA and sBIT"] = encode_png(
        gray, 0, 8, filters=FILTERS, before=[ancillary["gAMA"], chunk(b"sBIT", b"\x03")]
    )
    found["rgb 16-bit with gAMA and sBIT"] = encode_png(
        make_samples(33, 17, 2, 16, 5),
        2,
        16,
        filters=FILTERS,
        before=[ancillary["gAMA"], chunk(b"sBIT", bytes([9, 12, 5]))],
    )
    for (width, height), (colour_type, bit_depth) in itertools.product(
        ((1, 1), (9, 9), (33, 17)), ((2, 8), (0, 1), (6, 16))
    ):
        name = f"interlaced {COLOUR_NAMES[colour_type]} {bit_depth}-bit {width}x{height}"
        samples = make_samples(width, height, colour_type, bit_depth, width)
        found[name] = encode_png(samples, colour_type, bit_depth, filters=FILTERS, interlaced=True)
    return found


def ffmpeg_exe() -> str:
    """imageio-ffmpeg's ffmpeg, or a skip where it is not installed (the GPU host has none)."""
    reason = "imageio-ffmpeg (edgecli[dev]) is not installed"
    return pytest.importorskip("imageio_ffmpeg", reason=reason).get_ffmpeg_exe()


# FFmpeg's PNG encoder's pixel formats (rgb48be, rgba64be, ya16be are its 16-bit ones).
FFMPEG_FORMATS = ("rgb24", "rgba", "gray", "ya8", "gray16be", "rgb48be", "rgba64be", "ya16be",
                  "pal8", "monob")  # fmt: skip
# FFmpeg's -pred: none, sub, up, avg, paeth, mixed (libpng's heuristic per row).
FFMPEG_PREDICTIONS = ("none", "sub", "up", "avg", "paeth", "mixed")
CV2_STRATEGIES = {
    "default": cv2.IMWRITE_PNG_STRATEGY_DEFAULT,
    "filtered": cv2.IMWRITE_PNG_STRATEGY_FILTERED,
    "huffman": cv2.IMWRITE_PNG_STRATEGY_HUFFMAN_ONLY,
    "rle": cv2.IMWRITE_PNG_STRATEGY_RLE,
    "fixed": cv2.IMWRITE_PNG_STRATEGY_FIXED,
}


def external_files(folder: Path) -> dict[str, bytes]:
    """PNGs written by cv2.imwrite (libpng: compression 0-9, every strategy; BGR, BGRA, gray,
    16-bit), by Pillow (modes 1, L, LA, P with and without transparency, RGB, RGBA, I;16) and
    by FFmpeg (``FFMPEG_FORMATS``, and rgb24 with each ``FFMPEG_PREDICTIONS``), made in
    ``folder`` on the first call and read from it on later ones."""
    folder.mkdir(parents=True, exist_ok=True)
    frame = photo(61, 97, seed=2)  # odd sizes: rows that are not a multiple of any block
    files = {}

    def cached(name: str, make) -> None:
        path = folder / (name.replace(" ", "_").replace(",", "").replace("=", "") + ".png")
        if not path.exists():
            partial = path.with_suffix(".part.png")
            make(partial)
            partial.replace(path)
        files[name] = path.read_bytes()

    def cv2_writer(image, params):
        return lambda path: cv2.imwrite(str(path), image, params)

    bgra = np.dstack([frame, (np.arange(61 * 97).reshape(61, 97) % 256).astype(np.uint8)])
    gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
    deep = frame.astype(np.uint16) * 257 + 1
    for level in range(10):
        cached(
            f"cv2 bgr compression {level}", cv2_writer(frame, [cv2.IMWRITE_PNG_COMPRESSION, level])
        )
    for name, strategy in CV2_STRATEGIES.items():
        cached(f"cv2 bgr strategy {name}", cv2_writer(frame, [cv2.IMWRITE_PNG_STRATEGY, strategy]))
    cached("cv2 bgra", cv2_writer(bgra, []))
    cached("cv2 gray", cv2_writer(gray, []))
    cached("cv2 bgr 16-bit", cv2_writer(deep, []))
    cached("cv2 gray 16-bit", cv2_writer(deep[:, :, 0], []))
    cached("cv2 1x1", cv2_writer(frame[:1, :1], []))

    from PIL import Image

    rgb = np.ascontiguousarray(frame[:, :, ::-1])
    pillow_images = {
        "1": Image.fromarray(gray > 128),
        "L": Image.fromarray(gray),
        "LA": Image.fromarray(bgra[:, :, 1:3].copy(), "LA"),
        "P": Image.fromarray(rgb).quantize(100),
        "RGB": Image.fromarray(rgb),
        "RGBA": Image.fromarray(np.ascontiguousarray(bgra[:, :, [2, 1, 0, 3]])),
        "I;16": Image.fromarray(deep[:, :, 0]),
    }
    for mode, image in pillow_images.items():
        cached(f"pillow {mode}", lambda path, image=image: image.save(path, format="PNG"))
    transparent = pillow_images["P"]
    cached(
        "pillow P with transparency",
        lambda path: transparent.save(path, format="PNG", transparency=bytes(range(0, 200, 4))),
    )
    cached("pillow RGB optimize", lambda path: pillow_images["RGB"].save(path, optimize=True))

    source = folder / "ffmpeg_source.png"
    if not source.exists():
        cv2.imwrite(str(source), bgra)

    def ffmpeg(pixel_format: str, prediction: str = "mixed"):
        command = [ffmpeg_exe(), "-v", "error", "-y", "-i", str(source), "-pix_fmt",
                   pixel_format, "-pred", prediction, "-f", "image2", "-c:v", "png"]  # fmt: skip
        return lambda path: subprocess.run([*command, str(path)], check=True)

    for pixel_format in FFMPEG_FORMATS:
        cached(f"ffmpeg {pixel_format}", ffmpeg(pixel_format))
    for prediction in FFMPEG_PREDICTIONS:
        cached(f"ffmpeg rgb24 pred={prediction}", ffmpeg("rgb24", prediction))
    return files


def corpus(folder: Path) -> dict[str, bytes]:
    """Every file of ``own_files`` and ``external_files(folder)``, by name."""
    return {**own_files(), **external_files(folder)}


def mutations(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    """Corrupt and truncated variants of the PNG ``data``, by name: bit flips in the IDAT data
    (with the CRC made to match, so that the inflater meets them, and without), the file cut
    at every chunk boundary and inside chunks, each chunk's CRC wrong, the Adler-32 wrong,
    the zlib header wrong, and IHDR fields out of range (with matching CRCs)."""
    rng = np.random.default_rng(seed)
    found = []
    layout = chunks(data)
    idats = [(at, length) for at, kind, length in layout if kind == b"IDAT" and length]

    def recrc(buffer: bytearray, at: int, length: int) -> None:
        crc = zlib.crc32(bytes(buffer[at + 4 : at + 8 + length]))
        buffer[at + 8 + length : at + 12 + length] = struct.pack(">I", crc)

    for _ in range(8):
        if not idats:
            break
        at, length = idats[int(rng.integers(len(idats)))]
        position = at + 8 + int(rng.integers(length))
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        found.append((f"bit flip at byte {position}, CRC stale", bytes(flipped)))
        recrc(flipped, at, length)
        found.append((f"bit flip at byte {position}, CRC matched", bytes(flipped)))
    for at, kind, length in layout:
        name = kind.decode("latin-1")
        found.append((f"cut before {name} at byte {at}", data[:at]))
        if length:
            middle = at + 8 + int(rng.integers(length))
            found.append((f"cut inside {name} at byte {middle}", data[:middle]))
        bad = bytearray(data)
        bad[at + 8 + length] ^= 0x80
        found.append((f"{name} at byte {at} with a wrong CRC", bytes(bad)))
    found.append(("cut in the signature", data[:5]))
    if idats:
        *_, (at, length) = idats
        adler = bytearray(data)
        adler[at + 8 + length - 1] ^= 0x01
        recrc(adler, at, length)
        found.append(("Adler-32 wrong", bytes(adler)))
        at, length = idats[0]
        header = bytearray(data)
        header[at + 8] ^= 0x01  # CM or CINFO, and the check bits no longer match
        recrc(header, at, length)
        found.append(("zlib header wrong", bytes(header)))
    ihdr_fields = {  # offset in IHDR's body -> byte values that the specification forbids
        0: (0x80,),  # width over 2**31 - 1
        3: (0,),  # width 0 (when its other bytes are 0)
        8: (0, 3, 5, 32),  # bit depth
        9: (1, 5, 7),  # colour type
        10: (1,),  # compression method
        11: (1,),  # filter method
        12: (2,),  # interlace method
    }
    for offset, values in ihdr_fields.items():
        for value in values:
            bad = bytearray(data)
            if offset == 3:
                bad[16:20] = b"\0\0\0\0"
            else:
                bad[16 + offset] = value
            recrc(bad, 8, 13)
            found.append((f"IHDR byte {offset} = {value}", bytes(bad)))
    for _ in range(4):  # random bytes anywhere, CRCs stale
        bad = bytearray(data)
        for position in rng.integers(8, len(data), 3):
            bad[int(position)] = int(rng.integers(256))
        found.append(("random bytes", bytes(bad)))
    return found
