"""zlib streams that edgecli's GPU inflater (``inflate.cu``) is held to on the host
(test_inflate.py) and on the GPU (test_gpu_inflate.py): zlib's own at every level, strategy and
window, and streams written bit by bit here for the corners zlib never writes (a single
distance code, codes of 15 bits, a length of 258 as code 284 plus 31, distance 32768) and for
each way a stream can be wrong. :func:`inflate_batch` runs one batch through
``launch_inflate`` with NumPy (a host build of the kernel) or CuPy arrays alike."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from edgecli.decode.gpu import inflate

GUARD = 13  # poisoned bytes between two streams' outputs, which neither may write
POISONS = (0xA5, 0x5A)  # no byte equals both: an unwritten one fails one of the two runs
STRATEGIES = {
    "default": zlib.Z_DEFAULT_STRATEGY,
    "filtered": zlib.Z_FILTERED,
    "huffman_only": zlib.Z_HUFFMAN_ONLY,
    "rle": zlib.Z_RLE,
    "fixed": zlib.Z_FIXED,
}


def compress(data: bytes, level: int = 6, wbits: int = 15, strategy: int = 0) -> bytes:
    """zlib's stream of ``data`` with these settings."""
    deflate = zlib.compressobj(level, zlib.DEFLATED, wbits, 8, strategy)
    return deflate.compress(data) + deflate.flush()


def scanlines(rng, size: int) -> bytes:
    """Bytes like a PNG's filtered rows: runs, small differences, repeats a row apart, noise."""
    row = max(1, min(size, 3 * 97))
    base = np.cumsum(rng.integers(-3, 4, row)).astype(np.uint8)
    rows = []
    for i in range(-(-size // row)):
        kind = i % 4
        if kind == 0:
            rows.append(base)
        elif kind == 1:
            rows.append(rng.integers(0, 3, row, dtype=np.uint8))
        elif kind == 2:
            rows.append(np.where(rng.random(row) < 0.1, rng.integers(0, 256, row), base))
        else:
            rows.append(rng.integers(0, 256, row, dtype=np.uint8))
    return np.concatenate(rows).astype(np.uint8)[:size].tobytes()


def flushed(data: bytes, mode: int) -> bytes:
    """``data`` compressed in four parts with a ``mode`` flush after each (empty stored or fixed
    blocks between the parts)."""
    deflate = zlib.compressobj(6)
    out = b""
    for i in range(4):
        out += deflate.compress(data[i * len(data) // 4 : (i + 1) * len(data) // 4])
        out += deflate.flush(mode)
    return out + deflate.flush()


# ---- streams written bit by bit ---------------------------------------------------------------


class Bits:
    """Deflate's bit order: values least significant bit first, Huffman codes most first."""

    def __init__(self):
        self.value = 0
        self.count = 0

    def put(self, value: int, n: int) -> Bits:
        self.value |= (value & ((1 << n) - 1)) << self.count
        self.count += n
        return self

    def code(self, code: int, length: int) -> Bits:
        for i in reversed(range(length)):
            self.put((code >> i) & 1, 1)
        return self

    def align(self) -> Bits:
        self.count = -(-self.count // 8) * 8
        return self

    def bytes(self) -> bytes:
        return self.value.to_bytes(-(-self.count // 8), "little")


def canonical(lengths: list[int]) -> list[int]:
    """RFC 1951's canonical codes of ``lengths`` (0 for an unused symbol)."""
    counts = [lengths.count(n) for n in range(16)]
    counts[0] = 0
    code, first = 0, [0] * 16
    for n in range(1, 16):
        code = (code + counts[n - 1]) << 1
        first[n] = code
    codes = []
    for n in lengths:
        codes.append(first[n] if n else 0)
        if n:
            first[n] += 1
    return codes


LENGTH_BASES = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83,
                99, 115, 131, 163, 195, 227, 258]  # fmt: skip
LENGTH_EXTRA = [0] * 8 + [n for n in range(1, 6) for _ in range(4)] + [0]
DISTANCE_BASES = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769,
                  1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]  # fmt: skip
DISTANCE_EXTRA = [0] * 4 + [n for n in range(1, 14) for _ in range(2)]
FIXED_LITLEN = [8] * 144 + [9] * 112 + [7] * 24 + [8] * 8
FIXED_DISTANCE = [5] * 32


def length_code(length: int) -> tuple[int, int, int]:
    """(symbol, extra value, extra bits) of a match length, as zlib codes it."""
    i = 28 if length == 258 else max(i for i, b in enumerate(LENGTH_BASES[:28]) if b <= length)
    return 257 + i, length - LENGTH_BASES[i], LENGTH_EXTRA[i]


def distance_code(distance: int) -> tuple[int, int, int]:
    i = max(i for i, b in enumerate(DISTANCE_BASES) if b <= distance)
    return i, distance - DISTANCE_BASES[i], DISTANCE_EXTRA[i]


@dataclass
class Codes:
    """A block's two codes: their lengths and canonical codes."""

    litlen: list[int]
    distance: list[int]

    def __post_init__(self):
        self.litlen_codes = canonical(self.litlen)
        self.distance_codes = canonical(self.distance)

    def symbol(self, bits: Bits, symbol: int) -> None:
        bits.code(self.litlen_codes[symbol], self.litlen[symbol])

    def literals(self, bits: Bits, data: bytes) -> None:
        for byte in data:
            self.symbol(bits, byte)

    def match(self, bits: Bits, length: int, distance: int, *, symbols=None) -> None:
        """A match; ``symbols`` ((length symbol, extra), (distance symbol, extra)) overrides
        the coding."""
        (lsym, lextra, lbits), (dsym, dextra, dbits) = length_code(length), distance_code(distance)
        if symbols is not None:
            (lsym, lextra), (dsym, dextra) = symbols
            lbits, dbits = LENGTH_EXTRA[lsym - 257], (DISTANCE_EXTRA + [0, 0])[dsym]
        self.symbol(bits, lsym)
        bits.put(lextra, lbits)
        bits.code(self.distance_codes[dsym], self.distance[dsym])
        bits.put(dextra, dbits)


def sized(lengths: dict[int, int], size: int) -> list[int]:
    """A list of ``size`` code lengths, those given by symbol, the others 0."""
    out = [0] * size
    for symbol, length in lengths.items():
        out[symbol] = length
    return out


# The code-length code these streams use: complete, with every repeat code.
CODE_LENGTHS = [5] * 16 + [3, 3, 2]
CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]


def dynamic_header(bits: Bits, codes: Codes, *, last=True, code_lengths=CODE_LENGTHS,
                   length_symbols=None, hlit=None) -> None:  # fmt: skip
    """A dynamic block's header for ``codes``; ``length_symbols`` ((symbol, extra) pairs)
    overrides how the code lengths are sent, ``hlit`` the literal/length count sent."""
    bits.put(int(last), 1).put(2, 2)
    bits.put((hlit or len(codes.litlen)) - 257, 5).put(len(codes.distance) - 1, 5).put(15, 4)
    for symbol in CODE_LENGTH_ORDER:
        bits.put(code_lengths[symbol], 3)
    cl_codes = canonical(code_lengths)
    if length_symbols is None:
        length_symbols = [(n, 0) for n in codes.litlen + codes.distance]
    for symbol, extra in length_symbols:
        bits.code(cl_codes[symbol], code_lengths[symbol])
        bits.put(extra, {16: 2, 17: 3, 18: 7}.get(symbol, 0))


def stored(bits: Bits, data: bytes, *, last=True, nlen=None) -> None:
    bits.put(int(last), 1).put(0, 2).align()
    bits.put(len(data), 16).put(len(data) ^ 0xFFFF if nlen is None else nlen, 16)
    for byte in data:
        bits.put(byte, 8)


def wrap(raw: bytes, data: bytes, *, cinfo: int = 7, adler: int | None = None) -> bytes:
    """``raw`` deflate in a zlib header (window 2^(cinfo + 8)) and the Adler-32 of ``data``."""
    cmf = (cinfo << 4) | 8
    flg = (31 - cmf * 256 % 31) % 31
    check = zlib.adler32(data) if adler is None else adler
    return bytes([cmf, flg]) + raw + check.to_bytes(4, "big")


def _finish(bits: Bits, codes: Codes) -> bytes:
    codes.symbol(bits, 256)
    return bits.bytes()


def one_distance_code(*, use_missing: bool) -> tuple[bytes, bytes]:
    """A dynamic block with a single one-bit distance code (incomplete, as zlib allows), its
    match coded with it, or with the unused pattern."""
    codes = Codes(sized({97: 2, 98: 2, 256: 2, 257: 2}, 258), [1])
    bits = Bits()
    dynamic_header(bits, codes)
    codes.literals(bits, b"ab")
    codes.symbol(bits, 257)
    bits.put(1 if use_missing else 0, 1)  # distance code 0 is "0"; "1" is none
    return _finish(bits, codes), b"abbbb"


def long_codes() -> tuple[bytes, bytes]:
    """Codes of 1 to 15 bits, literal/length and distance alike, the 15-bit ones used."""
    lit = {97 + i: i + 1 for i in range(14)} | {256: 15, 257: 15}
    codes = Codes(sized(lit, 258), [i + 1 for i in range(14)] + [15, 15])
    data = bytes(97 + (i * 3 % 14) for i in range(200))
    bits = Bits()
    dynamic_header(bits, codes)
    codes.literals(bits, data)
    codes.match(bits, 3, 193, symbols=((257, 0), (15, 0)))  # 15-bit codes both
    codes.match(bits, 3, 130, symbols=((257, 0), (14, 1)))  # a 15-bit distance code too
    return _finish(bits, codes), None


def pairs_across_blocks() -> tuple[bytes, bytes]:
    """Three dynamic blocks of literals, each with other codes of 1 to 3 bits that pair up in
    one lookup, each ending on a literal whose code and end-of-block's fit in one lookup: no
    pair spans a block's end or outlives its block's table."""
    bits, data = Bits(), b""
    blocks = ({97: 1, 98: 2, 99: 3, 256: 3}, {97: 3, 98: 1, 99: 2, 256: 3}, {99: 1, 256: 1})
    for block, lengths in enumerate(blocks):
        codes = Codes(sized(lengths, 257), [0])
        dynamic_header(bits, codes, last=block == len(blocks) - 1)
        literals = bytes(b for b in b"abcacbbca" * 67 if b in lengths)
        codes.literals(bits, literals)
        codes.symbol(bits, 256)
        data += literals
    return bits.bytes(), data


def length_258_as_284() -> tuple[bytes, bytes]:
    """Length code 284 with extra bits 31: 258, which zlib's inflate accepts."""
    codes = Codes(sized({97: 1, 256: 2, 284: 2}, 285), [1])
    bits = Bits()
    dynamic_header(bits, codes)
    codes.literals(bits, b"a")
    codes.match(bits, 258, 1, symbols=((284, 31), (0, 0)))
    return _finish(bits, codes), b"a" * 259


def no_distance_codes() -> tuple[bytes, bytes]:
    """A literal-only dynamic block whose one distance code length is 0 (zlib accepts it)."""
    codes = Codes(sized({97: 1, 98: 2, 256: 2}, 257), [0])
    bits = Bits()
    dynamic_header(bits, codes)
    codes.literals(bits, b"abba")
    return _finish(bits, codes), b"abba"


def end_of_block_only() -> tuple[bytes, bytes]:
    """A dynamic block whose one literal/length code is end-of-block, one bit long."""
    codes = Codes(sized({256: 1}, 257), [1])
    bits = Bits()
    dynamic_header(bits, codes)
    return _finish(bits, codes), b""


def distance_32768() -> tuple[bytes, bytes]:
    """A stored block of 32 KB, then fixed-code matches 32768 and 32760 back (zlib makes none
    beyond 32506)."""
    rng = np.random.default_rng(32768)
    head = rng.integers(0, 256, 32768, dtype=np.uint8).tobytes()
    codes = Codes(FIXED_LITLEN, FIXED_DISTANCE)
    bits = Bits()
    stored(bits, head, last=False)
    bits.put(1, 1).put(1, 2)
    codes.match(bits, 258, 32768)
    codes.match(bits, 10, 32768)
    codes.match(bits, 20, 32760)  # reads window slots that later bytes of it overwrite
    codes.match(bits, 258, 32760)
    codes.literals(bits, b"x")
    codes.match(bits, 258, 1)
    return _finish(bits, codes), None


def short_stored_blocks() -> tuple[bytes, bytes]:
    """Fixed blocks of literals, each followed by a short stored block: stored data that the
    decoder read ahead of, in the round before (blocks of exactly one round's 128 symbols, then
    an empty stored block) and at other offsets in a round (100 to 140, then 0 to 3 bytes)."""
    rng = np.random.default_rng(41)
    codes = Codes(FIXED_LITLEN, FIXED_DISTANCE)
    bits = Bits()
    for i in range(60):
        literals = 128 if i < 30 else int(rng.integers(100, 141))
        bits.put(0, 1).put(1, 2)
        codes.literals(bits, rng.integers(0, 256, literals, np.uint8).tobytes())
        codes.symbol(bits, 256)
        size = 0 if i < 30 else int(rng.integers(0, 4))
        stored(bits, rng.integers(0, 256, size, np.uint8).tobytes(), last=False)
    stored(bits, rng.integers(0, 256, 3000, np.uint8).tobytes())
    return bits.bytes(), None


def fixed_block(emit) -> bytes:
    codes = Codes(FIXED_LITLEN, FIXED_DISTANCE)
    bits = Bits()
    bits.put(1, 1).put(1, 2)
    emit(bits, codes)
    return _finish(bits, codes)


def broken_dynamic(kind: str) -> bytes:
    """A dynamic block wrong in one way of ``kind``."""
    bits = Bits()
    good = Codes(sized({97: 1, 256: 2, 257: 2}, 258), [1])
    if kind == "litlen over-subscribed":
        dynamic_header(bits, Codes(sized({97: 1, 98: 1, 256: 1}, 257), [1]))
    elif kind == "litlen incomplete":
        dynamic_header(bits, Codes(sized({97: 1, 256: 2}, 257), [1]))
    elif kind == "distance incomplete":
        dynamic_header(bits, Codes(good.litlen, [1, 2]))
    elif kind == "distance over-subscribed":
        dynamic_header(bits, Codes(good.litlen, [1, 1, 1]))
    elif kind == "code lengths incomplete":
        dynamic_header(bits, good, code_lengths=[5] * 16 + [3, 3, 3])
    elif kind == "code lengths over-subscribed":
        dynamic_header(bits, good, code_lengths=[4] * 16 + [3, 3, 2])
    elif kind == "no code-length codes":
        dynamic_header(bits, good, code_lengths=[0] * 19, length_symbols=[])
        bits.put(0, 400)
    elif kind == "repeat first":
        symbols = [(16, 0)] + [(n, 0) for n in good.litlen[3:] + good.distance]
        dynamic_header(bits, good, length_symbols=symbols)
    elif kind == "repeat past the end":
        symbols = [(n, 0) for n in good.litlen + good.distance[:0]] + [(18, 10)]
        dynamic_header(bits, good, length_symbols=symbols)
    elif kind == "too many codes":
        dynamic_header(bits, Codes(good.litlen + [0] * 29, [1]), hlit=287)
    elif kind == "missing end of block":
        dynamic_header(bits, Codes(sized({97: 1, 257: 1}, 258), [1]))
    else:
        raise ValueError(kind)
    bits.put(0, 64)
    return bits.bytes()


def hand_made() -> dict[str, tuple[bytes, int, int]]:
    """Named (zlib stream, output size, status) written bit by bit."""
    cases: dict[str, tuple[bytes, int, int]] = {}
    for name, (raw, data) in {
        "one distance code": one_distance_code(use_missing=False),
        "15-bit codes": long_codes(),
        "length 258 as 284 + 31": length_258_as_284(),
        "literal pairs across blocks": pairs_across_blocks(),
        "no distance codes": no_distance_codes(),
        "end of block only": end_of_block_only(),
        "distance 32768": distance_32768(),
        "short stored blocks": short_stored_blocks(),
    }.items():
        if data is None:  # what zlib makes of it is the expected output
            data = _raw_inflate(raw)
        cases[name] = (wrap(raw, data), len(data), inflate.OK)

    tail = b"stored, at the end of the input"
    bits = Bits()
    stored(bits, b"", last=False)
    stored(bits, tail)
    cases["stored block at the input's end"] = (wrap(bits.bytes(), tail), len(tail), inflate.OK)
    valid = cases["stored block at the input's end"][0]
    cases["stored block cut short"] = (valid[:-8], len(tail), 1)
    cases["stored lengths cut short"] = (valid[:9], len(tail), 1)
    bits = Bits()
    stored(bits, tail, nlen=len(tail))
    cases["stored LEN/NLEN mismatch"] = (wrap(bits.bytes(), tail), len(tail), 7)

    raw, data = one_distance_code(use_missing=True)
    cases["the missing distance code"] = (wrap(raw, data), len(data), 15)
    cases["block type 3"] = (wrap(Bits().put(1, 1).put(3, 2).put(0, 21).bytes(), b""), 0, 6)

    for kind, status in {
        "litlen over-subscribed": 12,
        "litlen incomplete": 12,
        "distance incomplete": 13,
        "distance over-subscribed": 13,
        "code lengths incomplete": 9,
        "code lengths over-subscribed": 9,
        "no code-length codes": 9,
        "repeat first": 10,
        "repeat past the end": 10,
        "too many codes": 8,
        "missing end of block": 11,
    }.items():
        cases[kind] = (wrap(broken_dynamic(kind), b"a"), 1, status)

    def far(bits, codes):
        codes.literals(bits, b"a")
        codes.match(bits, 3, 2)

    cases["distance too far back"] = (wrap(fixed_block(far), b"a" * 4), 4, 16)

    def symbol_286(bits, codes):
        codes.literals(bits, b"a")
        codes.symbol(bits, 286)

    cases["literal/length code 286"] = (wrap(fixed_block(symbol_286), b"a"), 1, 14)

    def distance_30(bits, codes):
        codes.literals(bits, b"a")
        codes.match(bits, 3, 1, symbols=((257, 0), (30, 0)))

    cases["distance code 30"] = (wrap(fixed_block(distance_30), b"a" * 4), 4, 15)

    data = bytes(range(256)) * 2 + b"tail"

    def beyond(bits, codes):
        codes.literals(bits, data[:512])
        codes.match(bits, 4, 300)

    beyond_data = data[:512] + data[212:216]
    cases["distance beyond a 256-byte window"] = (
        wrap(fixed_block(beyond), beyond_data, cinfo=0), len(beyond_data), 19,
    )  # fmt: skip

    good = compress(b"hello, hello, hello")
    cases["header check"] = (good[:1] + bytes([good[1] ^ 1]) + good[2:], 19, 2)
    cases["header method 7"] = (_header(0x77) + good[2:], 19, 3)
    cases["header window 2^16"] = (_header(0x88) + good[2:], 19, 4)
    cases["header dictionary"] = (_header(0x78, dictionary=True) + good[2:], 19, 5)
    cases["Adler-32 mismatch"] = (good[:-1] + bytes([good[-1] ^ 0x40]), 19, 17)
    cases["output longer than its size"] = (good, 18, 20)
    cases["output shorter than its size"] = (good, 20, 21)
    cases["data after the stream"] = (good + b"\0", 19, 22)
    cases["empty input"] = (b"", 0, 1)
    cases["header only"] = (good[:2], 19, 1)
    return cases


def _header(cmf: int, *, dictionary: bool = False) -> bytes:
    flg = 0x20 if dictionary else 0
    flg += (31 - (cmf * 256 + flg) % 31) % 31
    return bytes([cmf, flg])


def _raw_inflate(raw: bytes) -> bytes:
    return zlib.decompressobj(-15).decompress(raw)


# ---- running a batch ---------------------------------------------------------------------------


def inflate_batch(kernel, streams, sizes, *, poison: int, xp=np):
    """Each stream's output and status from one launch_inflate, the output buffer poisoned with
    ``poison`` and a GUARD-byte range (a stream of no input) before, between and after the
    streams' ranges; asserts that no guard was written. ``xp``: numpy for a host build of the
    kernel, cupy for the device."""
    inputs, lengths = [], []
    for stream, size in zip(streams, sizes, strict=True):
        inputs += [b"", stream]
        lengths += [GUARD, size]
    inputs.append(b"")
    lengths.append(GUARD)
    src, src_start = inflate.pack_streams(inputs)
    dst_start = inflate.offsets(lengths)
    dst = np.full(int(dst_start[-1]), poison, np.uint8)
    status = np.full(len(inputs), -1, np.int32)
    buffers = [xp.asarray(a) for a in (src, src_start, dst, dst_start, status)]
    inflate.launch_inflate(kernel, *buffers)
    dst, status = (b if isinstance(b, np.ndarray) else b.get() for b in buffers[2::2])
    ranges = [dst[dst_start[i] : dst_start[i + 1]] for i in range(len(inputs))]
    for guard in ranges[::2]:
        assert (guard == poison).all(), "a stream wrote outside its range"
    assert (status[::2] == 1).all(), "a stream of no input was not found truncated"
    return ranges[1::2], status[1::2]


def inflate_both(kernel, streams, sizes, *, xp=np):
    """:func:`inflate_batch` under both poisons: each stream's output (the same from both where
    its status is OK) and status (the same from both)."""
    (first, status), (second, again) = (
        inflate_batch(kernel, streams, sizes, poison=p, xp=xp) for p in POISONS
    )
    assert np.array_equal(status, again)
    for i in np.flatnonzero(status == inflate.OK):
        assert np.array_equal(first[i], second[i]), f"stream {i}: output bytes left unwritten"
    return first, status


def zlib_verdict(stream: bytes, size: int) -> bytes | None:
    """zlib's output of ``stream`` where it inflates to exactly ``size`` bytes, else None."""
    try:
        out = zlib.decompress(stream)
    except zlib.error:
        return None
    return out if len(out) == size else None


def assert_as_zlib(kernel, streams, sizes, *, xp=np):
    """Each stream inflates to exactly zlib's bytes, with status OK."""
    outputs, status = inflate_both(kernel, streams, sizes, xp=xp)
    for i, (stream, out) in enumerate(zip(streams, outputs, strict=True)):
        assert status[i] == inflate.OK, f"stream {i}: {inflate.reason(status[i])}"
        assert np.array_equal(out, np.frombuffer(zlib.decompress(stream), np.uint8))


def zlib_accepts_whole(stream: bytes, size: int) -> bool:
    """Whether zlib inflates ``stream`` to ``size`` bytes using all of it, with a 32 KB window:
    the streams the kernel must call OK."""
    if stream[:1] != b"\x78":
        return False
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(stream)
    except zlib.error:
        return False
    return inflater.eof and not inflater.unused_data and len(out) == size


def assert_no_wrong_ok(kernel, streams, sizes, *, xp=np):
    """OK exactly where zlib inflates the whole stream to its size, with zlib's bytes; never
    OK where zlib refuses."""
    outputs, status = inflate_both(kernel, streams, sizes, xp=xp)
    for i, (stream, size) in enumerate(zip(streams, sizes, strict=True)):
        verdict = zlib_verdict(stream, size)
        if status[i] == inflate.OK:
            assert verdict is not None, f"stream {i}: OK where zlib refuses it"
            assert np.array_equal(outputs[i], np.frombuffer(verdict, np.uint8))
        elif status[i] not in inflate.CPU_DECIDES:
            assert verdict is None, f"stream {i}: {inflate.reason(status[i])}, zlib accepts"
        if zlib_accepts_whole(stream, size):
            assert status[i] == inflate.OK, f"stream {i}: {inflate.reason(status[i])}"


def corrupted(seed: int, count: int) -> tuple[list[bytes], list[int]]:
    """``count`` damaged streams: bit flips, truncations, random bytes after a valid header,
    random bytes; each with the size its original inflated to."""
    rng = np.random.default_rng(seed)
    streams, sizes = [], []
    for i in range(count):
        data = scanlines(rng, int(rng.integers(1, 3000)))
        level = int(rng.integers(0, 10))
        strategy = list(STRATEGIES.values())[i % len(STRATEGIES)]
        stream = bytearray(compress(data, level, 15, strategy))
        kind = i % 4
        if kind == 0:
            for _ in range(int(rng.integers(1, 4))):
                bit = int(rng.integers(0, 8 * len(stream)))
                stream[bit // 8] ^= 1 << (bit % 8)
        elif kind == 1:
            del stream[int(rng.integers(0, len(stream))) :]
        elif kind == 2:
            stream[2:] = rng.integers(0, 256, len(stream) - 2, dtype=np.uint8).tobytes()
        else:
            stream = bytearray(rng.integers(0, 256, len(stream), dtype=np.uint8).tobytes())
        streams.append(bytes(stream))
        sizes.append(len(data))
    return streams, sizes


def cut_short(rng) -> tuple[list[bytes], int]:
    """A stream of dynamic blocks cut after each of its bytes but the last, and the size it
    inflates to whole: the end of the input falls at every distance from where the kernel
    stops decoding unchecked. Past the end the kernel reads zero bits, which complete codes
    such as these decode as codes, so every cut is found truncated."""
    data = scanlines(rng, 3000)
    stream = compress(data, 6)
    return [stream[:cut] for cut in range(len(stream))], len(data)


def literal_runs() -> tuple[bytes, bytes]:
    """A dynamic block of two-bit codes: one to four literals (a lookup resolves two), then a
    match of 258, again and again; the stream and its output."""
    codes = Codes(sized({97: 2, 98: 2, 256: 2, 285: 2}, 286), [1])
    bits, data = Bits(), b""
    dynamic_header(bits, codes)
    for unit in range(12):
        literals = b"abba"[: 1 + unit % 4]
        codes.literals(bits, literals)
        codes.match(bits, 258, 1)
        data += literals + literals[-1:] * 258
    return wrap(_finish(bits, codes), data), data


def cut_off(rng) -> tuple[list[bytes], list[int]]:
    """Streams whose output is longer than the size they are given, by 1 byte to all of it:
    literals followed by matches of 258 (:func:`literal_runs`, so that the size falls at every
    point of such a pair) and scanlines (mostly literals and short matches); each must stop at
    its size wherever in a symbol the size falls."""
    runs, data = literal_runs()
    scanned = scanlines(rng, 2000)
    streams = [runs] * len(data) + [compress(scanned, 9)] * len(scanned)
    return streams, [*range(len(data)), *range(len(scanned))]


def sized_data(rng) -> list[bytes]:
    """Outputs of very different sizes: none, one byte, across 32 KB and 64 KB, runs (matches
    of 258 at distance 1), repeats 32 KB back, incompressible bytes (stored blocks)."""
    noise = rng.integers(0, 256, 40_000, dtype=np.uint8).tobytes()
    return [
        b"",
        b"\x07",
        bytes(300),
        scanlines(rng, 32_767),
        scanlines(rng, 32_769),
        scanlines(rng, 65_537),
        bytes(70_000),
        noise,
        noise[:30_000] + noise[:30_000],
        b"ab" * 20_000,
    ]
