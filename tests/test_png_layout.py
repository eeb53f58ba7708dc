"""edgecli.decode.png_layout: one walk of a PNG's chunks gives its header, palette and zlib
stream, refuses what libpng refuses with edgecli's reason, and says which files a GPU decoder
may take (``gpu_reason``)."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import cv2
import numpy as np
import pytest

from edgecli import native
from edgecli.decode.png_layout import (
    LIBPNG_MAX_DIMENSION,
    PngDamage,
    copy_streams,
    gpu_reason,
    read_layout,
)

from .png_corpus import SIGNATURE, chunk, chunks, encode_png, mutations, own_files, random_palette

OWN = own_files()


def png_damage(data: bytes) -> str | None:
    """read_layout's reason for refusing ``data``, as the CPU decoder words it; None where
    its chunks are whole."""
    try:
        read_layout(data)
    except PngDamage as damage:
        return damage.reason
    return None


RGB = np.full((3, 5, 3), 7, np.uint16)
INDICES = np.zeros((3, 5, 1), np.uint16)


def cv2_refuses(data: bytes) -> bool:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) is None


@pytest.mark.parametrize("name", sorted(OWN))
def test_layout_sizes(name):
    """Width, height, row bytes and the inflated size (Adam7's passes too) are those of the
    file: cv2's frame's shape, and exactly the bytes its zlib stream inflates to."""
    data = OWN[name]
    layout = read_layout(data)
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert (layout.height, layout.width) == frame.shape[:2]
    assert layout.inflated_size == len(zlib.decompress(layout.stream(data)))
    assert layout.filter_bpp == max(1, layout.channels * layout.bit_depth // 8)
    assert layout.window_size == 256 << (layout.stream(data)[0] >> 4)


@pytest.mark.parametrize("name", ["one-byte IDATs", "empty IDATs", "IDAT split in halves"])
def test_copy_stream_joins_the_idats(name):
    """copy_stream writes the IDATs' data, in order, to the start of a larger buffer: the
    zlib stream whole, as ``stream`` gives it."""
    data = OWN[name]
    layout = read_layout(data)
    buffer = np.full(layout.stream_size + 16, 0xA5, np.uint8)  # poisoned past the stream
    assert layout.copy_stream(data, buffer) == layout.stream_size
    assert buffer[: layout.stream_size].tobytes() == layout.stream(data)
    assert (buffer[layout.stream_size :] == 0xA5).all()
    assert len(zlib.decompress(layout.stream(data))) == layout.inflated_size


@pytest.fixture(params=["C", "Python"])
def gather(request, monkeypatch):
    """copy_streams by the C half (where built) and by its Python fallback."""
    if request.param == "Python":
        monkeypatch.setattr(native, "c", None)
    elif native.c is None:
        pytest.skip("edgecli._native is not built here")
    return copy_streams


def test_copy_streams_puts_each_stream_at_its_place(gather):
    """A batch's files, each stream at its own offset of one buffer with gaps between them:
    every stream whole where it was put, the gaps untouched, the bytes counted."""
    names = ["one-byte IDATs", "empty IDATs", "IDAT split in halves", "one-byte IDATs"]
    layouts = [read_layout(OWN[name]) for name in names]
    places, at = [], 3
    for layout in layouts:
        places.append(at)
        at += layout.stream_size + 5
    buffer = np.full(at, 0xA5, np.uint8)
    parts = [
        (OWN[n], layout, place) for n, layout, place in zip(names, layouts, places, strict=True)
    ]
    assert gather(parts, buffer) == sum(layout.stream_size for layout in layouts)
    expected = np.full(at, 0xA5, np.uint8)
    for name, layout, place in zip(names, layouts, places, strict=True):
        expected[place : place + layout.stream_size] = np.frombuffer(
            layout.stream(OWN[name]), np.uint8
        )
    assert buffer.tobytes() == expected.tobytes()
    assert gather([], buffer) == 0


def test_copy_streams_refuses_a_buffer_too_small(gather):
    """A stream that would run past the buffer's end is refused (ValueError), never written
    past it."""
    data = OWN["IDAT split in halves"]
    layout = read_layout(data)
    buffer = np.zeros(layout.stream_size + 8, np.uint8)
    with pytest.raises(ValueError):
        gather([(data, layout, 9)], buffer[: layout.stream_size + 8])


def test_palette_as_bgr():
    """The palette comes as BGR entries, cut to the 2**depth an index can reach, and its table
    is black past them, as libpng expands an index."""
    palette = random_palette(7)
    layout = read_layout(encode_png(INDICES, 3, 2, palette=palette))
    rgb = np.frombuffer(palette, np.uint8).reshape(7, 3)
    assert np.array_equal(layout.palette_bgr, rgb[:4, ::-1])
    table = layout.palette_table()
    assert table.shape == (256, 3) and np.array_equal(table[:4], rgb[:4, ::-1])
    assert not table[4:].any()
    assert read_layout(encode_png(RGB, 2, 8, palette=palette)).palette_bgr is None


def with_ihdr(width=5, height=3, depth=8, colour=2, compression=0, filtering=0, interlace=0):
    """A small RGB PNG whose IHDR is replaced, with a matching CRC."""
    data = encode_png(RGB, 2, 8)
    body = struct.pack(">IIBBBBB", width, height, depth, colour, compression, filtering, interlace)
    return SIGNATURE + chunk(b"IHDR", body) + data[33:]


def without(data: bytes, kind: bytes) -> bytes:
    for at, found, length in chunks(data):
        if found == kind:
            return data[:at] + data[at + 12 + length :]
    raise AssertionError(kind)


def flip(data: bytes, at: int) -> bytes:
    """``data`` with the byte at ``at`` inverted."""
    changed = bytearray(data)
    changed[at] ^= 0xFF
    return bytes(changed)


CORRUPT = "not a decodable image (corrupt PNG: "
DAMAGED = {
    "no signature": (b"\x89PNG\r\n\x1a\x00" + encode_png(RGB, 2, 8)[8:], "no PNG signature"),
    "IHDR not first": (
        SIGNATURE + chunk(b"tEXt", b"a\0b") + encode_png(RGB, 2, 8)[8:],
        "no IHDR chunk first",
    ),
    "IHDR of 14 bytes": (
        SIGNATURE
        + chunk(b"IHDR", encode_png(RGB, 2, 8)[16:29] + b"\0")
        + encode_png(RGB, 2, 8)[33:],
        "an IHDR chunk of 14 bytes, not 13",
    ),
    "width 0": (with_ihdr(width=0), "width 0, not 1 to 2147483647"),
    "height 2**31": (with_ihdr(height=2**31), "height 2147483648, not 1 to 2147483647"),
    "colour type 5": (with_ihdr(colour=5), "colour type 5, not one of 0, 2, 3, 4, 6"),
    "RGB 4-bit": (with_ihdr(depth=4), "bit depth 4 with colour type 2 (RGB), not 8, 16"),
    "palette 16-bit": (
        with_ihdr(depth=16, colour=3),
        "bit depth 16 with colour type 3 (palette), not 1, 2, 4, 8",
    ),
    "gray 3-bit": (
        with_ihdr(depth=3, colour=0),
        "bit depth 3 with colour type 0 (gray), not 1, 2, 4, 8, 16",
    ),  # fmt: skip
    "compression 1": (with_ihdr(compression=1), "compression method 1, not 0"),
    "filter method 64": (with_ihdr(filtering=64), "filter method 64, not 0"),
    "interlace 2": (with_ihdr(interlace=2), "interlace method 2, not 0 or 1"),
    "second IHDR": (
        encode_png(RGB, 2, 8, before=[encode_png(RGB, 2, 8)[8:33]]),
        "a second IHDR chunk",
    ),
    "no PLTE": (encode_png(INDICES, 3, 8), "no PLTE chunk before its image data"),
    "PLTE after IDAT": (
        encode_png(INDICES, 3, 8, after=[chunk(b"PLTE", bytes(6))]),
        "no PLTE chunk before its image data",
    ),
    "second PLTE": (
        encode_png(INDICES, 3, 8, palette=bytes(6), after=[chunk(b"PLTE", bytes(6))]),
        "a second PLTE chunk",
    ),
    "PLTE of 0 bytes": (
        encode_png(INDICES, 3, 8, palette=b""),
        "a PLTE chunk of 0 bytes, not 3 to 768 in threes",
    ),  # fmt: skip
    "PLTE of 5 bytes": (
        encode_png(INDICES, 3, 8, palette=bytes(5)),
        "a PLTE chunk of 5 bytes, not 3 to 768 in threes",
    ),  # fmt: skip
    "PLTE of 257 entries": (
        encode_png(INDICES, 3, 8, palette=bytes(771)),
        "a PLTE chunk of 771 bytes, not 3 to 768 in threes",
    ),
    "unknown critical chunk": (
        encode_png(RGB, 2, 8, before=[chunk(b"ABCD", b"x")]),
        "unknown critical chunk ABCD",
    ),
    "no IDAT": (without(encode_png(RGB, 2, 8), b"IDAT"), "no IDAT chunk"),
    "IDAT CRC": (flip(encode_png(RGB, 2, 8), -13), "its IDAT chunk fails its CRC check"),
    "no chunk type": (
        encode_png(RGB, 2, 8, before=[chunk(b"\0\0\0\0", b"")]),
        "no chunk at byte 33",
    ),
}
TRUNCATED = "not a decodable image (truncated PNG: "
CUT = {
    "inside IDAT": (encode_png(RGB, 2, 8)[:50], "the file ends inside its IDAT chunk"),
    "no IEND": (encode_png(RGB, 2, 8)[:-12], "no IEND chunk"),
    "signature only": (SIGNATURE, "no IEND chunk"),
}


@pytest.mark.parametrize("name", list(DAMAGED) + list(CUT))
def test_damage_reasons(name):
    """Each damaged or cut file is refused with its reason, which png_damage gives too, and
    cv2 refuses it as well: the walk is never stricter than libpng."""
    data, why = DAMAGED[name] if name in DAMAGED else CUT[name]
    reason = (CORRUPT if name in DAMAGED else TRUNCATED) + why + ")"
    with pytest.raises(PngDamage) as raised:
        read_layout(data)
    assert raised.value.reason == reason
    assert png_damage(data) == reason
    assert cv2_refuses(data)


ACCEPTED = {
    "ancillary CRC wrong": encode_png(RGB, 2, 8, before=[flip(chunk(b"tEXt", b"a\0b"), -1)]),
    "PLTE in an RGB image, 5 bytes": encode_png(RGB, 2, 8, palette=bytes(5)),
    "second PLTE in an RGB image": encode_png(
        RGB, 2, 8, palette=bytes(6), after=[chunk(b"PLTE", bytes(6))]
    ),
    "tRNS longer than the palette": encode_png(INDICES, 3, 8, palette=bytes(6), trns=bytes(5)),
    "bytes after IEND": encode_png(RGB, 2, 8) + b"trailing",
    "IDAT after another chunk": encode_png(
        RGB, 2, 8, after=[chunk(b"tEXt", b"a\0b"), chunk(b"IDAT", b"")]
    ),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_what_libpng_passes_is_not_damage(name):
    """What libpng decodes past with a warning, the walk passes, and cv2 decodes."""
    assert png_damage(ACCEPTED[name]) is None
    assert not cv2_refuses(ACCEPTED[name])


@pytest.mark.parametrize("seed", range(3))
def test_walk_refuses_only_what_cv2_refuses(seed):
    """On corrupt and cut variants of a third of the tests' PNGs each, a file the walk refuses
    is one cv2 refuses too, bar a wrong CRC on IEND (which libpng does not read, and which
    edgecli has always refused)."""
    names = sorted(name for name, data in OWN.items() if len(data) < 20_000)[seed::3]
    refused = 0
    for index, name in enumerate(names):
        for variant, data in mutations(OWN[name], seed * 1000 + index):
            reason = png_damage(data)
            if reason is None or reason.endswith("its IEND chunk fails its CRC check)"):
                continue
            if variant == "random bytes":
                continue  # cv2 allocates a chunk's declared length first: gigabytes, here
            assert cv2_refuses(data), f"{name}: {variant}: {reason}"
            refused += 1
    assert refused > 100


def _walked(data: bytes):
    """read_layout's layout of ``data`` and the stream it copies, or its PngDamage's text."""
    try:
        layout = read_layout(data)
    except PngDamage as exc:
        return str(exc)
    out = bytearray(layout.stream_size)
    fields = {
        field.name: np.asarray(value).tolist() if field.name == "palette_bgr" else value
        for field in dataclasses.fields(layout)
        for value in [getattr(layout, field.name)]
    }
    return fields, layout.copy_stream(data, out), bytes(out)


@pytest.mark.skipif(native.c is None, reason="edgecli._native is not built here")
@pytest.mark.parametrize("seed", range(3))
def test_the_native_idat_walk_agrees_with_the_python_walk(seed, monkeypatch):
    """Where edgecli._native walks the IDAT runs, every file and every corrupt or cut variant
    gets the layout, the stream or the reason the Python walk gives."""
    names = sorted(OWN)[seed::3]
    compared = 0
    for index, name in enumerate(names):
        variants = [("as written", OWN[name]), *mutations(OWN[name], seed * 1000 + index)]
        for variant, data in variants:
            with_c = _walked(data)
            monkeypatch.setattr(native, "c", None)
            in_python = _walked(data)
            monkeypatch.undo()
            assert with_c == in_python, f"{name}: {variant}"
            compared += 1
    assert compared > 300


def animated() -> bytes:
    return encode_png(RGB, 2, 8, before=[chunk(b"acTL", struct.pack(">II", 2, 0))])


GPU_REASONS = {
    "rgb 8-bit 33x17": (OWN["rgb 8-bit 33x17"], None),
    "palette with tRNS": (OWN["palette 8-bit, 253 entries, tRNS 126"], None),
    "rgb with all of them": (OWN["rgb with all of them"], None),
    "one-byte IDATs": (OWN["one-byte IDATs"], None),
    "interlaced": (OWN["interlaced rgb 8-bit 9x9"], "interlaced (Adam7)"),
    "animated": (animated(), "animated (APNG)"),
    "a frame control chunk": (
        encode_png(RGB, 2, 8, before=[chunk(b"fcTL", bytes(26))]),
        "animated (APNG)",
    ),
    "IDATs apart": (ACCEPTED["IDAT after another chunk"], "IDAT chunks apart"),
    "bKGD of 4 bytes": (
        encode_png(RGB, 2, 8, before=[chunk(b"bKGD", bytes(4))]),
        "a bKGD chunk of 4 bytes, which OpenCV's reader refuses",
    ),
    "a chunk of 8 MB": (
        encode_png(RGB, 2, 8, before=[chunk(b"zzZz", bytes(7_999_989))]),
        "a zzZz chunk of 7999989 bytes, which OpenCV's reader refuses",
    ),
    "over libpng's width": (
        encode_png(np.zeros((1, LIBPNG_MAX_DIMENSION + 1, 1), np.uint16), 0, 1),
        "over libpng's limit of 1000000 pixels a side",
    ),
}


@pytest.mark.parametrize("name", list(GPU_REASONS))
def test_gpu_reason(name):
    """Which files a GPU decoder may take, and why not the others; of those, the ones cv2
    refuses whole (an OpenCV or libpng limit) are refused by cv2 indeed."""
    data, reason = GPU_REASONS[name]
    assert gpu_reason(read_layout(data)) == reason
    if reason is not None and ("refuses" in reason or "limit" in reason):
        assert cv2_refuses(data)


def test_chunk_at_opencv_limit_is_read():
    """A chunk of 7,999,988 bytes before the image data, one less than OpenCV's reader
    refuses, leaves the file to the GPU, and cv2 decodes it."""
    data = encode_png(RGB, 2, 8, before=[chunk(b"zzZz", bytes(7_999_988))])
    assert gpu_reason(read_layout(data)) is None
    assert not cv2_refuses(data)


def exif(orientation: int, order: str = "MM") -> bytes:
    """An eXIf chunk whose IFD0 holds one entry, the orientation (one SHORT)."""
    e = ">" if order == "MM" else "<"
    tiff = order.encode() + struct.pack(f"{e}HIH", 42, 8, 1)
    tiff += struct.pack(f"{e}HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(f"{e}I", 0)
    return chunk(b"eXIf", tiff)


@pytest.mark.parametrize("where", ("before", "after"))
@pytest.mark.parametrize("orientation", range(1, 9))
def test_the_exif_orientation_is_read_wherever_the_chunk_is(orientation, where):
    """The eXIf chunk's orientation is the turn cv2 gives the frame, before or after the data."""
    samples = np.arange(3 * 5 * 3, dtype=np.uint16).reshape(3, 5, 3) * 5
    plain = encode_png(samples, 2, 8)
    data = encode_png(samples, 2, 8, **{where: [exif(orientation, "II")]})
    layout = read_layout(data)
    assert layout.orientation == orientation and gpu_reason(layout) is None
    upright = cv2.imdecode(np.frombuffer(plain, np.uint8), cv2.IMREAD_COLOR)
    turned = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    expected = (5, 3) if orientation >= 5 else (3, 5)
    assert turned.shape[:2] == expected
    assert np.array_equal(turned, upright) == (orientation == 1)


@pytest.mark.parametrize(
    ("chunks_after", "reason"),
    [
        ([chunk(b"eXIf", b"XX*\0" + bytes(12))], "malformed EXIF"),
        ([exif(6), exif(3)], "more than one eXIf chunk"),
    ],
)
def test_an_unsure_exif_orientation_leaves_the_file_to_the_cpu(chunks_after, reason):
    """A malformed eXIf chunk, or two, give a reason: the turn cv2 gives is not sure."""
    data = encode_png(RGB, 2, 8, after=chunks_after)
    layout = read_layout(data)
    assert layout.orientation == 1 and gpu_reason(layout) == reason
