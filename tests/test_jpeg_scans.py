"""scan_damage against libjpeg-turbo itself: a JPEG is damaged exactly where libjpeg-turbo,
decoding it, warns or fails; never a whole file."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli import native
from edgecli.decode.cpu import decode_image
from edgecli.decode.jpeg_header import LIBJPEG_ONLY, scan_damage
from tests.media import photo

ROOT = Path(__file__).resolve().parent.parent
# cv2's IMWRITE_JPEG_SAMPLING_FACTOR values, gray aside.
SAMPLINGS = {"444": 0x111111, "422": 0x211111, "420": 0x221111, "440": 0x121111, "gray": None}
# (height, width): a pixel, lines, partial MCUs both ways, several MCU rows.
SIZES = [(1, 1), (1, 37), (37, 1), (17, 33), (120, 160)]
MUTATIONS = ["overwrite", "zero", "flip", "truncate", "insert", "remove"]


# jpeg_scan_damage reads a scan in up to two pieces at once, each of ``piece`` bytes or more,
# and joins them where their Huffman codes fall into step: these pieces cut the test files'
# scans at every few bytes, and the default (16 KiB) leaves a small file in one piece.
PIECES = (1, 5, 300)


class EveryPiece:
    """edgecli._native with a jpeg_scan_damage that reads each file in the default pieces and
    in every size of PIECES, and holds all those verdicts equal."""

    def __init__(self, c):
        self._c = c

    def __getattr__(self, name):
        return getattr(self._c, name)

    def jpeg_scan_damage(self, data):
        verdict = self._c.jpeg_scan_damage(data)
        for piece in PIECES:
            assert self._c.jpeg_scan_damage(data, piece) == verdict, piece
        return verdict


@pytest.fixture(autouse=True)
def every_piece(monkeypatch):
    """Every verdict in this module, libjpeg-turbo's own held against it, is also the verdict
    of the scans read in small pieces."""
    if native.c is not None:
        monkeypatch.setattr(native, "c", EveryPiece(native.c))


def encode(
    sampling: str, height: int, width: int, restarts: int, optimize: bool, quality=90, seed=None
):
    """A JPEG of a photo-like frame (``seed``'s, by default its size's): that sampling, size,
    restart interval (0: none), and optimized Huffman tables or the standard ones."""
    image = photo(height, width, seed=height * width if seed is None else seed)
    params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_RST_INTERVAL, restarts]
    params += [cv2.IMWRITE_JPEG_OPTIMIZE, int(optimize)]
    if SAMPLINGS[sampling] is None:
        image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    else:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[sampling]]
    return cv2.imencode(".jpg", image, params)[1].tobytes()


def generated() -> list[bytes]:
    """Every sampling, size, restart interval (none, 1 and 3 MCUs) and table choice; and
    larger files at quality 95, whose scans libjpeg-turbo mostly reads on its fast path."""
    small = [
        encode(sampling, height, width, restarts, optimize)
        for sampling, (height, width), restarts, optimize in itertools.product(
            SAMPLINGS, SIZES, (0, 1, 3), (False, True)
        )
    ]
    large = [
        encode(sampling, 240, 320, restarts, optimize, quality=95)
        for sampling, restarts, optimize in itertools.product(SAMPLINGS, (0, 4), (False, True))
    ]
    return small + large


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """``data`` with its scan damaged one way: bytes overwritten with random ones, zeroed,
    a bit flipped, the scan cut short (EOI put back), random bytes inserted, bytes removed."""
    sos = data.index(b"\xff\xda")
    start, end = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big"), len(data) - 2
    at = rng.randrange(start, end)
    span = min(rng.randint(1, 40), end - at)
    garble = bytes(rng.randrange(256) for _ in range(span))
    if kind == "overwrite":
        return data[:at] + garble + data[at + span :]
    if kind == "zero":
        return data[:at] + bytes(span) + data[at + span :]
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ 1 << rng.randrange(8)]) + data[at + 1 :]
    if kind == "truncate":
        return data[:at] + b"\xff\xd9"
    if kind == "insert":
        return data[:at] + garble + data[at:]
    return data[:at] + data[at + span :]


def test_whole_jpegs_are_never_damaged(complaint):
    """The sample frames, the test data's JPEGs and every generated kind: libjpeg-turbo says
    nothing of them, and neither does scan_damage."""
    files = [p.read_bytes() for p in sorted(ROOT.glob("sample_frames/*.jpg"))]
    files += [p.read_bytes() for p in sorted(ROOT.glob("tests/data/*.jpg"))]
    files += generated()
    assert len(files) > 150
    for data in files:
        assert complaint(data) is None
        assert scan_damage(data) is None


def verdicts(complaint, bases: list[bytes], per_kind: int, seed: int) -> list[tuple]:
    """(mutation, libjpeg-turbo's complaint, scan_damage's reason) for ``per_kind`` files
    damaged each way from ``bases``."""
    rng = random.Random(seed)
    found = []
    for kind, _ in itertools.product(MUTATIONS, range(per_kind)):
        data = mutate(rng.choice(bases), kind, rng)
        found.append((kind, complaint(data), scan_damage(data)))
    return found


def disagree(found: list[tuple]) -> list[tuple]:
    """The verdicts where scan_damage finds damage and libjpeg-turbo says nothing, or the
    other way round (LIBJPEG_ONLY is no damage: libjpeg-turbo decodes such a file without a
    word)."""
    return [v for v in found if (v[1] is None) == isinstance(v[2], str)]


def test_damaged_exactly_where_libjpeg_warns(complaint):
    """Over 1800 files damaged in their scans in six ways, scan_damage finds damage exactly
    where libjpeg-turbo warns or fails decoding them (the verdict, not its words)."""
    found = verdicts(complaint, generated(), 300, seed=37)
    assert disagree(found) == []
    # Damage libjpeg-turbo decodes in a way of its own, without a word, is common too.
    assert sum(v[2] is LIBJPEG_ONLY for v in found) > 20
    # Both verdicts are common: damage libjpeg-turbo sees in every kind, and damage it decodes
    # without a word (in padding bits, or where it reads a bad code silently) in most.
    damaged = {kind: sum(v[1] is not None for v in found if v[0] == kind) for kind in MUTATIONS}
    assert all(count > 100 for count in damaged.values()), damaged
    assert sum(damaged.values()) < len(found) - 300, damaged


def test_files_of_a_scan_a_component_are_damaged_where_libjpeg_warns(complaint):
    """Sequential files of one scan a component (tests/data/scans_*.jpg, made by jpegtran
    -scans, one with -restart 2: cv2 writes neither), damaged after their first scan's
    header (the later scans' tables and headers too): the same verdicts as libjpeg-turbo."""
    bases = [p.read_bytes() for p in sorted(ROOT.glob("tests/data/scans_*.jpg"))]
    assert len(bases) == 2 and all(data.count(b"\xff\xda") == 3 for data in bases)
    found = verdicts(complaint, bases, 100, seed=38)
    assert disagree(found) == []
    assert 100 < sum(v[1] is not None for v in found) < len(found) - 50


def test_frames_read_in_pieces_are_damaged_where_libjpeg_warns(complaint):
    """Frames of 1280x720 and 1920x1080, large enough to be read in two pieces by default,
    whole, damaged, and with markers put in their scans: the same verdicts as libjpeg-turbo,
    and where it warns of the markers, its words."""
    bases = [
        encode(sampling, height, width, 0, optimize, quality=quality, seed=seed)
        for seed, (sampling, (height, width), optimize, quality) in enumerate(
            [
                ("420", (1080, 1920), False, 95),
                ("444", (720, 1280), True, 90),
                ("422", (720, 1280), False, 75),
                ("gray", (1080, 1920), True, 95),
            ]
        )
    ]
    assert min(len(data) for data in bases) > 2 * 16384
    assert [(complaint(data), scan_damage(data)) for data in bases] == [(None, None)] * 4
    found = verdicts(complaint, bases, 8, seed=41)
    assert disagree(found) == []
    assert 10 < sum(v[1] is not None for v in found) < len(found) - 5
    rng, warned = random.Random(42), 0
    for _ in range(100):
        data = marked(rng.choice(bases), rng)
        warning = complaint(data)
        if warning is not None and warning.startswith("warning: Corrupt JPEG data: "):
            words = warning.removeprefix("warning: Corrupt JPEG data: ")
            assert scan_damage(data).startswith(f"corrupt JPEG data ({words}")
            warned += 1
    assert warned > 80


def noise(sampling: str, height: int, width: int, optimize: bool) -> bytes:
    """A JPEG of random pixels at quality 100: long codes with many magnitude bits, blocks
    that run to their 63rd coefficient, and a stuffed FF byte every few hundred."""
    image = np.random.default_rng(height * width).integers(0, 256, (height, width, 3), np.uint8)
    params = [cv2.IMWRITE_JPEG_QUALITY, 100, cv2.IMWRITE_JPEG_OPTIMIZE, int(optimize)]
    params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[sampling]]
    return cv2.imencode(".jpg", image, params)[1].tobytes()


def marked(data: bytes, rng: random.Random) -> bytes:
    """``data`` with a marker in its scan (an RSTn, a fill byte FF or any other), put in or
    over its bytes, after up to three stuffed FF bytes (1 bits: 16 of them are no code)."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    at = rng.randrange(start, len(data) - 2)
    marker = bytes([0xFF, rng.choice([0xD0 + rng.randrange(8), 0xFF, rng.randrange(1, 256)])])
    put = b"\xff\x00" * rng.choice([0, 0, 1, 2, 3]) + marker
    return data[:at] + put + data[at + len(put) * rng.randrange(2) :]


def test_markers_in_scans_get_libjpegs_first_warning(complaint):
    """Markers put into scans, some after bytes that hold no code: scan_damage names the
    warning libjpeg-turbo gives first, which depends on whether it read the MCU on its fast
    path (a bad code passes there) or its slow one (restart intervals, a scan's last MCUs),
    and where its bit buffer filled."""
    bases = [noise(s, 96, 128, optimize) for s in ("444", "420") for optimize in (False, True)]
    bases += [
        encode(s, 240, 320, restarts, False, 95) for s in ("444", "420") for restarts in (0, 5)
    ]
    bases += [p.read_bytes() for p in sorted(ROOT.glob("tests/data/scans_*.jpg"))]
    # Gray blocks of a few bits: MCUs that need no more bytes, where the marker is near.
    flat = np.full((64, 512), 128, np.uint8)
    bases += [cv2.imencode(".jpg", flat)[1].tobytes(), encode("gray", 64, 512, 0, False, 30)]
    rng = random.Random(40)
    words = []
    for _ in range(1000):
        data = marked(rng.choice(bases), rng)
        warning = complaint(data)
        if warning is not None and warning.startswith("warning: Corrupt JPEG data: "):
            words.append(warning.removeprefix("warning: Corrupt JPEG data: "))
            assert scan_damage(data).startswith(f"corrupt JPEG data ({words[-1]}")
    assert len(words) > 900
    assert sum(w == "bad Huffman code" for w in words) > 100
    assert sum(w == "premature end of data segment" for w in words) > 300


def test_a_marker_where_an_mcu_starts_gets_libjpegs_first_warning(complaint):
    """A gray file of 4000 blocks of a few bits each, with two stuffed FF bytes (no code) and a
    marker put in at each of 48 bytes in turn: wherever libjpeg-turbo's reading stands right
    before the marker as an MCU starts, it reads the next MCUs on its fast path while they
    need no bytes (the bad code silently), and warns where the slow path meets the marker;
    scan_damage says the same, in the same words."""
    base = encode("gray", 8, 32000, restarts=0, optimize=False, quality=30)
    sos = base.index(b"\xff\xda")
    middle = (sos + len(base)) // 2
    found = []
    for at in range(middle, middle + 48):
        data = base[:at] + b"\xff\x00\xff\x00\xff\xd3" + base[at:]
        warning = complaint(data).removeprefix("warning: Corrupt JPEG data: ")
        assert scan_damage(data).startswith(f"corrupt JPEG data ({warning}")
        found.append(warning)
    assert {"bad Huffman code", "premature end of data segment"} <= set(found)


def without_tables(data: bytes) -> bytes:
    """``data`` without its DHT segments, as motion-JPEG frames come: libjpeg-turbo decodes
    them with the standard tables, which cv2 writes unless it optimizes them."""
    while (at := data.find(b"\xff\xc4")) >= 0:
        data = data[:at] + data[at + 2 + int.from_bytes(data[at + 2 : at + 4], "big") :]
    return data


def test_files_without_tables_are_damaged_where_libjpeg_warns(complaint):
    """Files without DHT, whole and damaged: the standard tables read them, as in libjpeg."""
    bases = [
        without_tables(encode(sampling, 48, 64, restarts, optimize=False))
        for sampling, restarts in itertools.product(SAMPLINGS, (0, 2))
    ]
    assert all(b"\xff\xc4" not in data for data in bases)
    assert [(complaint(data), scan_damage(data)) for data in bases] == [(None, None)] * 10
    found = verdicts(complaint, bases, 50, seed=39)
    assert disagree(found) == []
    assert 50 < sum(v[1] is not None for v in found) < len(found) - 20


def test_a_bad_huffman_code_is_named(complaint):
    """A scan that starts with 32 1 bits (FF bytes, stuffed) holds no code of the standard
    tables there: libjpeg-turbo's words, and the MCU."""
    data = encode("444", 64, 64, restarts=0, optimize=False)
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    damaged = data[:start] + b"\xff\x00" * 4 + data[start + 8 :]
    assert complaint(damaged) == "warning: Corrupt JPEG data: bad Huffman code"
    assert scan_damage(damaged) == "corrupt JPEG data (bad Huffman code in MCU 1 of 64)"


def standard_codes(data: bytes) -> dict[tuple[int, int], str]:
    """The codes of the file's DC table 0 (class 0) and AC table 0 (class 1), by (class,
    symbol), as bit strings: from its DHT segments, as any decoder builds them."""
    codes = {}
    at = 0
    while (at := data.find(b"\xff\xc4", at)) >= 0:
        end = at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        at += 4
        while at < end:
            kind, counts = data[at], data[at + 1 : at + 17]
            values, code = iter(data[at + 17 : at + 17 + sum(counts)]), 0
            for length, count in enumerate(counts, start=1):
                for _ in range(count):
                    if kind & 15 == 0:
                        codes[kind >> 4, next(values)] = format(code, f"0{length}b")
                    code += 1
                code <<= 1
            at += 17 + sum(counts)
    return codes


def with_scan(data: bytes, bits: str) -> bytes:
    """The gray baseline JPEG ``data`` with its scan's data replaced by ``bits``, padded with
    1 bits to a byte, each FF stuffed."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    bits += "1" * (-len(bits) % 8)
    scan = bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))
    return data[:start] + scan.replace(b"\xff", b"\xff\x00") + b"\xff\xd9"


@pytest.mark.parametrize("odd_block", [1, 999], ids=["fast path", "slow path"])
@pytest.mark.parametrize("oddity", ["past the block", "zeros past the block", "bad code"])
def test_codes_libjpeg_reads_in_its_own_way(oddity, odd_block, complaint):
    """A gray file of 1000 blocks, each a DC difference of 0 and an end of block, but one: a
    coefficient put past the block's end (three runs of 16 zeros, then a run of 15 and a 1),
    a run of 16 zeros past it (four of them), or 17 1 bits where a DC code belongs, which is
    no code. libjpeg-turbo decodes each without a word, on its fast path (the block early,
    512 bytes and more left) and on its slow one (near the end, where it warns of the bad
    code); scan_damage says it is libjpeg-turbo's alone, where it says nothing, and the CPU
    decodes it as cv2 does."""
    base = encode("gray", 8, 8000, restarts=0, optimize=False)
    codes = standard_codes(base)
    dc0, eob, zrl = codes[0, 0x00], codes[1, 0x00], codes[1, 0xF0]
    odd = {
        "past the block": dc0 + zrl * 3 + codes[1, 0xF1] + "1",
        "zeros past the block": dc0 + zrl * 4,
        "bad code": "1" * 17 + eob,
    }[oddity]
    data = with_scan(base, "".join(odd if b == odd_block else dc0 + eob for b in range(1000)))
    if oddity == "bad code" and odd_block == 999:
        assert complaint(data) == "warning: Corrupt JPEG data: bad Huffman code"
        assert scan_damage(data) == "corrupt JPEG data (bad Huffman code in MCU 1000 of 1000)"
        return
    assert complaint(data) is None
    assert scan_damage(data) is LIBJPEG_ONLY
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert np.array_equal(decode_image(Path("odd.jpg"), data, 10**8), frame)
    # The same blocks without the odd one: whole, and no one's alone.
    assert scan_damage(with_scan(base, (dc0 + eob) * 1000)) is None


def dc_code(codes: dict, diff: int) -> str:
    """The DC difference ``diff`` in the standard DC table's code and its magnitude bits."""
    size = abs(diff).bit_length()
    bits = format(diff if diff >= 0 else diff + (1 << size) - 1, f"0{size}b") if size else ""
    return codes[0, size] + bits


@pytest.mark.parametrize(
    "odd_block", [1, 2999, 3998], ids=["fast path", "fast path, late", "slow path"]
)
@pytest.mark.parametrize("past", [0, 1], ids=["the largest DC an encoder writes", "one more"])
def test_a_dc_no_encoder_writes_is_libjpegs_alone(odd_block, past, complaint):
    """A gray file of 4000 blocks of small DC differences and coefficients but one, which
    takes the DC to the largest an encoder of 8-bit samples writes at the file's DC step, or
    one more, and the next, which takes it back: the kind a damaged scan's misread bits drift
    to, which takes the inverse DCT's samples far out of range, where libjpeg-turbo's
    arithmetic and other decoders' part. libjpeg-turbo decodes both without a word;
    scan_damage passes the first and leaves the second to it, on its fast path (early, and
    late in the last of the pieces a scan is read in) and its slow one, and the CPU decodes
    it as cv2 does."""
    base = encode("gray", 8, 32000, restarts=0, optimize=False)
    step = dc_step(base)
    largest = (1024 + step) // step
    codes = standard_codes(base)
    rng = random.Random(odd_block)
    bits, dc = [], 0
    for block in range(4000):
        if block == odd_block:
            diff, before = largest + past - dc, dc
        elif block == odd_block + 1:
            diff = before - dc
        else:
            diff = rng.choice([-1, 0, 1]) if abs(dc) < 50 else -dc // abs(dc)
        dc += diff
        coefficient = codes[1, 0x01] + rng.choice("01") if rng.random() < 0.5 else ""
        bits.append(dc_code(codes, diff) + coefficient + codes[1, 0x00])
    data = with_scan(base, "".join(bits))
    assert complaint(data) is None
    if not past:
        assert scan_damage(data) is None
        return
    assert scan_damage(data) is LIBJPEG_ONLY
    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert np.array_equal(decode_image(Path("odd.jpg"), data, 10**8), frame)


def huffman_segment(kind: int, lengths: dict[int, int]) -> tuple[bytes, dict[int, str]]:
    """A DHT segment of table 0 of class ``kind`` (0: DC, 1: AC) whose codes have these lengths
    by symbol, and those codes as bit strings, as a decoder assigns them."""
    symbols = sorted(lengths, key=lambda symbol: (lengths[symbol], symbol))
    counts = [sum(length == n for length in lengths.values()) for n in range(1, 17)]
    codes, code, length = {}, 0, 1
    for symbol in symbols:
        code <<= lengths[symbol] - length
        length = lengths[symbol]
        codes[symbol] = format(code, f"0{length}b")
        code += 1
    body = bytes([kind << 4]) + bytes(counts) + bytes(symbols)
    return b"\xff\xc4" + (2 + len(body)).to_bytes(2, "big") + body, codes


def test_scans_of_the_longest_codes_are_read_whole(complaint):
    """A gray file whose tables give the largest DC differences 16-bit codes and the largest
    coefficients (of 10 and 15 magnitude bits) 12- and 16-bit ones, with 8000 blocks of them
    (up to 31 bits a code and its magnitude, back to back, where the bit buffer runs lowest):
    libjpeg-turbo reads it without a word, and so does scan_damage, in every piece."""
    dc_table, dc = huffman_segment(0, {0: 2, 11: 16} | {size: size + 1 for size in range(1, 11)})
    ac_lengths = {0x00: 2, 0xF0: 4, 0x0F: 12, 0x1F: 16} | {run << 4 | 10: 12 for run in range(16)}
    ac_table, ac = huffman_segment(1, ac_lengths)
    rng = random.Random(42)
    bits, predictor = [], 0
    for _ in range(8000):
        if rng.random() < 0.5:  # to 1024, the largest DC at a step of 1, or back to 0
            bits.append(dc[11] + ("01111111111" if predictor else "10000000000"))
            predictor = 1024 - predictor
        else:
            bits.append(dc[0])
        k = 1
        while k < 64:
            run = rng.randrange(min(16, 64 - k))
            pick = rng.random()
            if pick < 0.1:
                break
            if pick < 0.15 and k + 16 <= 64:
                bits.append(ac[0xF0])
                k += 16
            elif pick < 0.4 and k + 2 <= 64:  # no encoder of 8-bit samples writes 15 bits
                size = rng.choice([0x0F, 0x1F])
                bits.append(ac[size] + format(rng.randrange(1 << 15), "015b"))
                k += 1 + (size >> 4)
            else:
                bits.append(ac[run << 4 | 10] + format(rng.randrange(1024), "010b"))
                k += run + 1
        if k < 64:
            bits.append(ac[0x00])
    width = 8 * 8000
    header = b"\xff\xd8\xff\xdb\x00\x43\x00" + bytes([1] * 64)
    header += b"\xff\xc0\x00\x0b\x08\x00\x08" + width.to_bytes(2, "big") + b"\x01\x01\x11\x00"
    header += dc_table + ac_table + b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00"
    data = with_scan(header + b"\xff\xd9", "".join(bits))
    assert len(data) > 2 * 16384
    assert complaint(data) is None
    assert scan_damage(data) is None


def dc_step(data: bytes) -> int:
    """The DC step of the file's first (8-bit) quantization table."""
    at = data.index(b"\xff\xdb")
    return data[at + 5]


@pytest.mark.parametrize("restarts", [0, 1])
@pytest.mark.parametrize("quality", [1, 50, 100])
def test_frames_at_the_ends_of_the_range_are_read_by_every_decoder(restarts, quality):
    """Black, white and blocks of both by turns, at every quality (quality 100's DC step is 1),
    restarts or none: the largest DCs and differences an encoder writes are no one's alone."""
    black, white = np.zeros((48, 64, 3), np.uint8), np.full((48, 64, 3), 255, np.uint8)
    checks = np.kron((np.indices((6, 8)).sum(axis=0) % 2), np.ones((8, 8)))[..., None] * white
    for frame in (black, white, checks.astype(np.uint8)):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_RST_INTERVAL, restarts]
        data = cv2.imencode(".jpg", frame, params)[1].tobytes()
        assert scan_damage(data) is None


def test_extraneous_bytes_are_counted_as_libjpeg_counts_them(complaint):
    """245 zero bytes put between a whole scan and EOI: libjpeg-turbo does not count those its
    bit buffer took in, and gives the same count and marker."""
    data = encode("420", 64, 64, restarts=0, optimize=False)
    damaged = data[:-2] + bytes(245) + data[-2:]
    words = complaint(damaged).removeprefix("warning: Corrupt JPEG data: ")
    assert words.endswith(" extraneous bytes before marker 0xd9")
    assert int(words.split()[0]) < 245
    assert scan_damage(damaged) == f"corrupt JPEG data ({words} at byte {len(damaged) - 2})"


def test_scans_that_end_in_random_bytes_get_libjpegs_words(complaint):
    """Scans whose end is replaced by random bytes (no FF), mostly enough of them for
    libjpeg-turbo to read the last MCUs on its fast path, in 1000 files: what it says then
    (extraneous bytes, and how many; a bad code; a premature end) depends on where its last
    fills fell, and scan_damage says the same."""
    rng = random.Random(39)
    bases = [
        encode(
            rng.choice(list(SAMPLINGS)),
            rng.randrange(8, 72),
            rng.randrange(8, 72),
            0,
            rng.random() < 0.5,
            rng.choice([75, 90, 95, 100]),
        )  # fmt: skip
        for _ in range(40)
    ]
    counted = 0
    for _ in range(1000):
        data = rng.choice(bases)
        sos = data.index(b"\xff\xda")
        cut = rng.randrange(sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big"), len(data) - 2)
        extra = bytes(rng.randrange(255) for _ in range(rng.randrange(4000)))
        damaged = data[:cut] + extra + data[-2:]
        warning = complaint(damaged)
        if warning is None:
            assert scan_damage(damaged) in (None, LIBJPEG_ONLY)
            continue
        words = warning.removeprefix("warning: Corrupt JPEG data: ")
        assert scan_damage(damaged).startswith(f"corrupt JPEG data ({words}")
        counted += words.endswith("extraneous bytes before marker 0xd9")
    assert counted > 300


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
def test_progressive_jpegs_get_the_markers_check(sampling, complaint):
    """A progressive file is not walked: whole, it is not damaged; a stray marker is."""
    image = photo(48, 64)
    params = [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]
    if SAMPLINGS[sampling] is None:
        image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    else:
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[sampling]]
    data = cv2.imencode(".jpg", image, params)[1].tobytes()
    assert native.c.jpeg_scan_damage(data) is None and scan_damage(data) is None
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    stray = data[: start + 1] + b"\xff\x37" + data[start + 3 :]
    assert scan_damage(stray) == "corrupt JPEG data (marker 0x37 inside the image data)"


@pytest.mark.parametrize("data", [b"", b"\xff\xd8", b"\xff\xd8\xff", b"GIF89a", bytes(100)])
def test_not_a_jpeg_is_left_to_the_decoder(data):
    """Bytes that are no JPEG, or only its start: no verdict (the decoder says why)."""
    assert scan_damage(data) is None
    if native.c is not None:
        assert native.c.jpeg_scan_damage(data) is None


def test_a_cut_jpeg_is_left_to_the_decoder():
    """A file cut inside its scan, no EOI: the decoder's own error names it, not this."""
    data = encode("420", 64, 64, restarts=0, optimize=False)
    assert scan_damage(data[: len(data) * 6 // 10]) is None
