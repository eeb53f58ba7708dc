"""The PNG reference decoder (tests/png_reference.py), the contract the GPU's PNG kernels are
held to: its frames are cv2.imread's on the whole corpus (tests/png_corpus.py), its inflater
gives zlib's bytes on zlib's streams and refuses every malformed stream zlib refuses, and it
never decodes a damaged file that cv2 refuses."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

from edgecli.decode.png_layout import PngDamage, gpu_reason, read_layout
from tests import png_reference as reference

from .deflate_cases import cases
from .png_corpus import (
    COLOUR_NAMES,
    DEPTHS,
    FILTERS,
    SIGNATURE,
    STRATEGIES,
    chunk,
    external_files,
    mutations,
    own_files,
)

OWN = own_files()


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    return external_files(tmp_path_factory.mktemp("png_corpus"))


def cv2_frame(data: bytes) -> np.ndarray | None:
    """edgecli's CPU decoder's frame of the PNG ``data``: cv2.imdecode(IMREAD_COLOR)."""
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


@pytest.mark.parametrize("name", sorted(OWN))
def test_reference_equals_cv2(name):
    """The reference's frame of each of the tests' own PNGs equals cv2's, array for array."""
    want = cv2_frame(OWN[name])
    assert want is not None
    got = reference.decode(OWN[name])
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("writer", ["cv2", "pillow", "ffmpeg"])
def test_reference_equals_cv2_on_other_encoders(external, writer):
    """The reference's frame of each PNG written by libpng, Pillow or FFmpeg equals cv2's."""
    files = {name: data for name, data in external.items() if name.startswith(writer)}
    assert len(files) >= 7
    for name, data in files.items():
        want = cv2_frame(data)
        got = reference.decode(data)
        assert got.shape == want.shape and np.array_equal(got, want), name


def test_corpus_covers_types_depths_filters_and_blocks(external):
    """The corpus holds every colour type x bit depth, every filter type in the rows of one
    image, stored, fixed and dynamic blocks, multi-IDAT files and FFmpeg's every filter."""
    pairs, filters_seen, blocks_seen = set(), set(), set()
    for data in {**OWN, **external}.values():
        layout = read_layout(data)
        pairs.add((layout.colour_type, layout.bit_depth))
        blocks: list[int] = []
        inflated = reference.inflate(layout.stream(data), blocks=blocks)
        blocks_seen.update(blocks)
        if not layout.interlaced:
            step = 1 + layout.row_bytes
            filters_seen.update(inflated[0 : layout.inflated_size : step])
    assert pairs == {(c, d) for c, depths in DEPTHS.items() for d in depths}
    assert filters_seen == set(FILTERS)
    assert blocks_seen == {0, 1, 2}
    assert len(read_layout(OWN["one-byte IDATs"]).idat) > 200
    for prediction, kind in (("sub", 1), ("up", 2), ("avg", 3), ("paeth", 4)):
        data = external[f"ffmpeg rgb24 pred={prediction}"]
        layout = read_layout(data)
        inflated = reference.inflate(layout.stream(data))
        used = set(inflated[0 : layout.inflated_size : 1 + layout.row_bytes])
        assert kind in used and used <= {0, 1, kind}  # FFmpeg's first row: None or Sub


SETTINGS = {
    **{f"level {level}": (level, zlib.Z_DEFAULT_STRATEGY, 15) for level in range(10)},
    **{f"strategy {name}": (6, strategy, 15) for name, strategy in STRATEGIES.items()},
    **{f"window {1 << bits}": (9, zlib.Z_DEFAULT_STRATEGY, bits) for bits in (9, 10, 12, 14)},
}
SMALL_CASES = {name: data for name, data in cases().items() if len(data) <= 40_000}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_inflate_equals_zlib(setting):
    """The reference inflater gives zlib.decompress's bytes on zlib's streams of every case of
    tests/deflate_cases.py up to 40 KB, at each level, strategy and window."""
    level, strategy, window_bits = SETTINGS[setting]
    for name, data in SMALL_CASES.items():
        deflate = zlib.compressobj(level, zlib.DEFLATED, window_bits, 9, strategy)
        stream = deflate.compress(data) + deflate.flush()
        assert reference.inflate(stream) == zlib.decompress(stream) == data, name


class Bits:
    """Bits packed as deflate packs them: values from their lowest bit, Huffman codes from
    their highest."""

    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def put(self, value: int, count: int) -> Bits:
        self.value |= value << self.count
        self.count += count
        return self

    def code(self, code: int, length: int) -> Bits:
        return self.put(int(f"{code:0{length}b}"[::-1], 2), length)

    def bytes(self) -> bytes:
        return self.value.to_bytes((self.count + 7) // 8, "little")


def zlib_wrap(raw: bytes, output: bytes = b"", header: bytes = b"\x78\x01") -> bytes:
    """A zlib stream: ``header``, the raw deflate data, the Adler-32 of ``output``."""
    return header + raw + zlib.adler32(output).to_bytes(4, "big")


def fixed_literal(bits: Bits, symbol: int) -> Bits:
    """A literal/length symbol in the fixed code (RFC 1951 3.2.6)."""
    if symbol < 144:
        return bits.code(0x30 + symbol, 8)
    if symbol < 256:
        return bits.code(0x190 + symbol - 144, 9)
    if symbol < 280:
        return bits.code(symbol - 256, 7)
    return bits.code(0xC0 + symbol - 280, 8)


def canonical(lengths: list[int]) -> dict[int, tuple[int, int]]:
    """symbol -> (code, length) of the canonical Huffman code with these lengths."""
    codes, code = {}, 0
    for length in range(1, 16):
        for symbol, size in enumerate(lengths):
            if size == length:
                codes[symbol] = (code, length)
                code += 1
        code <<= 1
    return codes


def dynamic_header(bits: Bits, literal_lengths: list[int], distance_lengths: list[int]) -> Bits:
    """A final dynamic block's header sending these lengths plainly: the code length code
    gives the symbols 0..15 four bits each, and 16, 17, 18 none."""
    bits.put(1, 1).put(2, 2)
    bits.put(len(literal_lengths) - 257, 5).put(len(distance_lengths) - 1, 5).put(15, 4)
    for symbol in reference.CODE_LENGTH_ORDER:
        bits.put(0 if symbol >= 16 else 4, 3)
    for length in literal_lengths + distance_lengths:
        bits.code(length, 4)
    return bits


def one_literal_code() -> list[int]:
    """Literal/length lengths: 'a' (97) one bit, end-of-block and length 3 (257) two bits."""
    lengths = [0] * 258
    lengths[97], lengths[256], lengths[257] = 1, 2, 2
    return lengths


def no_distance_block(use_a_length: bool) -> bytes:
    """A dynamic block with no distance codes, that writes 'aa' then, if told, a match."""
    lengths = one_literal_code()
    codes = canonical(lengths)
    bits = dynamic_header(Bits(), lengths, [0])
    bits.code(*codes[97]).code(*codes[97])
    if use_a_length:
        bits.code(*codes[257])
    return zlib_wrap(bits.code(*codes[256]).bytes(), b"aa")


def code_lengths_block(symbols: list[tuple[int, int, int]]) -> bytes:
    """A dynamic block of 257 + 1 lengths whose code length code gives 0, 16, 17, 18 two bits
    each, sending ``symbols``: (code length symbol, extra bits value, extra bit count)."""
    bits = Bits().put(1, 1).put(2, 2).put(0, 5).put(0, 5).put(0, 4)  # 4 code length codes
    for _ in range(4):  # 16, 17, 18, 0: complete, codes 00 (0), 01 (16), 10 (17), 11 (18)
        bits.put(2, 3)
    codes = {0: 0, 16: 1, 17: 2, 18: 3}
    for symbol, extra, count in symbols:
        bits.code(codes[symbol], 2).put(extra, count)
    return zlib_wrap(bits.bytes())


def fixed_block(*symbols: tuple[int, int]) -> bytes:
    """A final fixed block: (literal/length symbol, None) or (distance code, extra bits)."""
    bits = Bits().put(1, 1).put(1, 2)
    for kind, value in symbols:
        if kind == "literal":
            fixed_literal(bits, value)
        else:
            bits.code(value, 5)
    return zlib_wrap(fixed_literal(bits, 256).bytes())


def stored_block(length: int, complement: int, payload: bytes) -> bytes:
    bits = Bits().put(1, 1).put(0, 2).put(0, 5).put(length, 16).put(complement, 16)
    return zlib_wrap(bits.bytes() + payload, payload)


def zlib_header(cmf: int, flags: int = 0) -> bytes:
    """A zlib header with CMF ``cmf`` and FLG ``flags`` plus the check bits that make it valid."""
    return bytes([cmf, flags | (31 - (cmf << 8 | flags) % 31) % 31])


def far_window_stream() -> bytes:
    """A stream of 300 random bytes then a copy of them, its header declaring a 256-byte
    window: zlib.decompress takes it (it allows 32 KB), libpng may not."""
    data = np.random.default_rng(5).integers(0, 256, 300, np.uint8).tobytes() * 2
    stream = zlib.compress(data, 9)
    return zlib_header(0x08) + stream[2:]


BAD_STREAMS = {
    "header check": (b"\x78\x9d" + zlib.compress(b"x")[2:], "incorrect header check"),
    "method 7": (zlib_header(0x77) + zlib.compress(b"x")[2:], "unknown compression method"),
    "window 64 KB": (zlib_header(0x88) + zlib.compress(b"x")[2:], "invalid window size"),
    "dictionary": (zlib_header(0x78, 0x20) + bytes(4) + zlib.compress(b"x")[2:], "need dictionary"),
    "block type 3": (zlib_wrap(b"\x07"), "invalid block type"),
    "stored lengths": (stored_block(5, 0, b"abcde"), "invalid stored block lengths"),
    "stored cut": (stored_block(5, 0xFFFA, b"ab")[:-4], "unexpected end of stream"),
    "287 lengths": (
        zlib_wrap(Bits().put(5, 3).put(30, 5).put(0, 5).bytes() + bytes(8)),
        "too many length or distance symbols",
    ),  # fmt: skip
    "31 distances": (
        zlib_wrap(Bits().put(5, 3).put(0, 5).put(30, 5).bytes() + bytes(8)),
        "too many length or distance symbols",
    ),  # fmt: skip
    "code lengths over-subscribed": (
        zlib_wrap(Bits().put(5, 3).put(0, 10).put(0, 4).put(1, 3).put(1, 3).put(1, 3).bytes()),
        "invalid code lengths set",
    ),
    "code lengths incomplete": (
        zlib_wrap(Bits().put(5, 3).put(0, 10).put(0, 4).put(1, 3).put(0, 9).bytes() + bytes(4)),
        "invalid code lengths set",
    ),
    "repeat first": (code_lengths_block([(16, 0, 2)]), "invalid bit length repeat"),
    "repeat past the end": (
        code_lengths_block([(18, 127, 7), (18, 127, 7)]),
        "invalid bit length repeat",
    ),
    "no end-of-block": (
        code_lengths_block([(18, 127, 7), (18, 109, 7)]),
        "invalid code -- missing end-of-block",
    ),
    "literal 286": (fixed_block(("literal", 286)), "invalid literal/length code"),
    "distance code 30": (
        fixed_block(("literal", 97), ("literal", 257), ("distance", 30)),
        "invalid distance code",
    ),
    "no distance codes": (no_distance_block(use_a_length=True), "invalid distance code"),
    "before the start": (
        fixed_block(("literal", 97), ("literal", 257), ("distance", 1)),
        "invalid distance too far back",
    ),
    "Adler-32": (zlib.compress(b"abc")[:-1] + b"\x00", "incorrect data check"),
    "cut before Adler-32": (zlib.compress(b"abc")[:-2], "unexpected end of stream"),
}


@pytest.mark.parametrize("name", list(BAD_STREAMS))
def test_inflate_refuses_malformed_streams(name):
    """Each malformed stream is refused by the reference with zlib's reason, and by zlib."""
    stream, reason = BAD_STREAMS[name]
    with pytest.raises(reference.InflateError, match=f"^{reason}$"):
        reference.inflate(stream)
    with pytest.raises(zlib.error):
        zlib.decompress(stream)


def test_inflate_takes_what_zlib_takes_at_the_edges():
    """A block with no distance codes that uses none, and a stream reaching past its header's
    window (taken unless the window is checked), inflate as zlib inflates them."""
    stream = no_distance_block(use_a_length=False)
    assert reference.inflate(stream) == zlib.decompress(stream) == b"aa"
    far = far_window_stream()
    assert reference.inflate(far, window_checked=False) == zlib.decompress(far)
    with pytest.raises(reference.InflateError, match="invalid distance too far back"):
        reference.inflate(far)


def test_inflate_refuses_every_cut():
    """A zlib stream cut at any byte is refused, by the reference as by zlib."""
    data = OWN["rgb 8-bit 33x17"]
    stream = read_layout(data).stream(data)
    for end in range(len(stream)):
        with pytest.raises(reference.InflateError):
            reference.inflate(stream[:end])
        with pytest.raises(zlib.error):
            zlib.decompress(stream[:end])


def test_unfilter_refuses_filter_type_5():
    """A row whose filter byte is 5 is refused (libpng: bad adaptive filter value)."""
    with pytest.raises(reference.InflateError, match="bad adaptive filter value 5"):
        reference.unfilter(b"\x00\x01\x02\x05\x03\x04", 2, 2, 1)


FUZZED = sorted(name for name, data in OWN.items() if len(data) < 20_000)


@pytest.mark.parametrize("seed", range(4))
def test_reference_never_decodes_what_cv2_refuses(seed):
    """On corrupt and cut variants of a quarter of the corpus each, where the layout lets the
    GPU decode and the reference decodes, cv2 decodes the same frame; what cv2 refuses, the
    walk or the reference refuses (a refusal goes to the CPU decoder, which has the last
    word)."""
    decoded = 0
    for index, name in enumerate(FUZZED[seed::4]):
        for variant, data in mutations(OWN[name], seed * 1000 + index):
            try:
                layout = read_layout(data)
                got = reference.decode(data) if gpu_reason(layout) is None else None
            except (PngDamage, reference.InflateError):
                continue
            if got is not None:
                want = cv2_frame(data)
                assert want is not None, f"{name}: {variant}"
                assert np.array_equal(got, want), f"{name}: {variant}"
                decoded += 1
    assert decoded >= 5  # variants that stay whole (a flip in a stored block's data...)


def test_expansion_rules():
    """1, 2 and 4-bit gray repeat their bits, 16-bit samples keep their high byte, alpha and
    tRNS are dropped, palette indices past the PLTE are black: on hand-made samples."""
    for depth, scale in ((1, 255), (2, 85), (4, 17)):
        data = OWN[f"{COLOUR_NAMES[0]} {depth}-bit 33x17"]
        frame = cv2_frame(data)
        assert set(np.unique(frame)) <= {v * scale for v in range(1 << depth)}
    frame = cv2_frame(OWN["palette 2-bit, indices past its 2 entries"])
    assert (frame[:, 2::4] == 0).all() and (frame[:, 3::4] == 0).all()


def png_of_stream(stream: bytes, width: int, height: int) -> bytes:
    """An 8-bit RGB PNG of ``width`` x ``height`` whose IDAT holds ``stream``."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


@pytest.mark.parametrize("extra", [b"", bytes(64)], ids=["exact", "past the rows"])
def test_wrong_adler_is_an_error_or_not_by_where_libpng_stops(extra):
    """A wrong Adler-32 is cv2's error where the stream ends with the image's last row, and
    passes (cv2 gives the rows' frame) where the stream goes on past it: the reference
    refuses both, so a GPU decoder that follows it hands both to the CPU decoder."""
    rows = b"\x00\x0a\x14\x1e" + b"\x00\x28\x32\x3c"  # two rows of one pixel, filter None
    stream = bytearray(zlib.compress(rows + extra))
    stream[-1] ^= 1
    data = png_of_stream(bytes(stream), 1, 2)
    with pytest.raises(reference.InflateError, match="incorrect data check"):
        reference.decode(data)
    frame = cv2_frame(data)
    if extra:
        assert frame.tolist() == [[[30, 20, 10]], [[60, 50, 40]]]
    else:
        assert frame is None
