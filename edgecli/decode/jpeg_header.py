"""Which JPEG files the GPU path decodes to ``cv2.imdecode``'s frame, from their headers.

The planes :mod:`.jpeg_planes` turns into imdecode's frame are libjpeg-turbo's only for the
files libjpeg-turbo decodes that way: 8-bit sequential Huffman YCbCr or gray, sampled as one
of ``SUBSAMPLINGS``. ``parse_header`` is a pure-Python walk of a JPEG file's marker segments up
to its first scan (never the entropy-coded data, so it costs the same for a 100 kB and a 10 MB
file: microseconds) that gives the frame's size, subsampling and the EXIF orientation imdecode
applies, and says why a file must stay on the CPU (progressive or arithmetic coding, 12-bit
samples, RGB or CMYK colour, 4:1:1 and other samplings, no EOI at the end, EXIF that OpenCV may
read differently...).

``scan_damage``, which both decoders' callers ask before decoding, does read the entropy-coded
data: it refuses what libjpeg-turbo (CPU) would warn of and decode past, as nvJPEG (GPU) would
too, by libjpeg-turbo's own rules where the C extension walks the file's Huffman codes, by the
markers in the data elsewhere.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import native
from .jpeg_planes import CHROMA_FACTORS

JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")

# SOFn markers (C0..CF but C4 DHT, C8 JPG, CC DAC): what keeps each one off the GPU, None for
# the two the GPU path decodes. libjpeg-turbo reads C0..C3 and C9..CB; C5..C7 and CD..CF are
# hierarchical (differential) frames, which it refuses.
_SOF_REASONS = {
    0xC0: None,  # baseline
    0xC1: None,  # extended sequential, Huffman: more tables than baseline, the same decoding
    0xC2: "progressive",
    0xC3: "lossless",
    0xC5: "hierarchical",
    0xC6: "progressive, hierarchical",
    0xC7: "lossless, hierarchical",
    0xC9: "arithmetic coding",
    0xCA: "progressive, arithmetic coding",
    0xCB: "lossless, arithmetic coding",
    0xCD: "arithmetic coding, hierarchical",
    0xCE: "progressive, arithmetic coding, hierarchical",
    0xCF: "lossless, arithmetic coding, hierarchical",
}
# Markers without a length: RST0..RST7 and TEM (jdmarker.c's read_markers skips them).
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}
# Markers with a length that libjpeg-turbo reads or skips before the first scan (anything else
# is JERR_UNKNOWN_MARKER there, so None here): DAC, DNL, DRI, APP0..APP15, COM. DHT, DQT and
# the SOFn are read below.
_SKIPPED = frozenset({0xCC, 0xDC, 0xDD, *range(0xE0, 0xF0), 0xFE})
# jdinput.c's limits: JPEG_MAX_DIMENSION, MAX_SAMP_FACTOR and D_MAX_BLOCKS_IN_MCU.
_MAX_DIMENSION = 65500
_MAX_BLOCKS_IN_MCU = 10
# Y's sampling over the chroma planes' -> the subsampling's name, for those the GPU path takes
# (4:1:1 and 4:4:1, rare, stay on the CPU), then for those only named in reasons.
_GPU_SUBSAMPLINGS = {CHROMA_FACTORS[s]: s for s in ("444", "422", "420", "440")}
_RATIO_NAMES = {(4, 1): "4:1:1", (1, 4): "4:4:1"}

# OpenCV's ExifReader (exif.cpp) reads the IFD0 entries in their order, and stops at the first
# one it cannot read: it reads these tags' values, and a value out of the data ends the walk
# (orientation unread if it was still to come). Strings: their count of bytes at the entry's
# offset 8 when it is 4 or less (offset 8 of the TIFF data, as exif.cpp has it), else at the
# offset there; rationals: this many pairs of 32-bit words at the offset there.
_EXIF_STRINGS = frozenset({0x010E, 0x010F, 0x0110, 0x0131, 0x0132, 0x8298})
_EXIF_RATIONALS = {0x011A: 1, 0x011B: 1, 0x013E: 2, 0x013F: 6, 0x0211: 3, 0x0214: 6}
_ORIENTATION_TAG = 0x0112


@dataclass(frozen=True)
class JpegHeader:
    """What ``parse_header`` read of a JPEG file.

    ``subsampling`` is one of ``SUBSAMPLINGS`` or None (another sampling: 4:1:1, 4:4:1, odd
    or unequal factors, four components...). ``orientation`` is the EXIF orientation
    cv2.imdecode will apply (``apply_exif_orientation``): 1..8, 1 when there is none.
    ``gpu_reason`` is None when the file's planes give imdecode's frame through
    ``planes_to_bgr`` and ``apply_exif_orientation``, else why not, in a few words.
    """

    width: int
    height: int
    subsampling: str | None
    orientation: int
    gpu_reason: str | None


def parse_header(data: bytes | bytearray | memoryview) -> JpegHeader | None:
    """The frame header of the JPEG file ``data`` and whether the GPU path decodes it exactly;
    None when ``data`` is not a JPEG whose header libjpeg-turbo reads (the CPU decoder will
    say why).

    The walk is libjpeg-turbo's (jdmarker.c's ``read_markers``) from SOI to the first SOS,
    stricter where it would go on with a warning: bytes that are not a marker between two
    segments give None here. The colour space is jdapimin.c's ``default_decompress_parms``
    guess: a JFIF APP0 makes three components YCbCr; failing that an Adobe APP14 with
    transform 0 makes them RGB; failing both, component ids 'R', 'G', 'B' do. The
    orientation is the one OpenCV's ExifReader finds: it parses every "Exif" APP1 before the
    scan in turn into one map that keeps a tag's first value, so the first orientation entry
    it reaches wins, whichever block holds it. Where that reading is unsure (an EXIF block
    cut short, an orientation that is not one SHORT) the file is left to the CPU as
    "malformed EXIF".

    Not checked, as it would mean reading the scans: that the entropy-coded data is whole,
    and what follows the first scan (a sequential file of one scan a component passes on its
    first scan's tables). ``data`` must at least end with EOI (FF D9): libjpeg-turbo stops at
    the first EOI and ignores what follows, but a file that ends otherwise is most often a cut
    one (imdecode gives no frame for those).

    One function for the whole walk, as libjpeg-turbo's ``jdmarker.c`` reads the markers:
    what one segment means depends on those before it (which SOF, the last Adobe marker,
    JFIF, EXIF), and split up, that state would pass through every piece.
    """
    mv = memoryview(data).cast("B")
    n = len(mv)
    if n < 4 or mv[0] != 0xFF or mv[1] != 0xD8 or mv[2] != 0xFF:
        return None  # imdecode knows a JPEG by FF D8 FF
    sof = None  # (marker, precision, height, width, [(id, h, v, quant table), ...])
    jfif = False
    adobe = None  # the Adobe APP14's transform; the last one counts, as in jdmarker.c
    exif = []  # (start, end) of each "Exif\0\0" APP1's TIFF data
    quant, huffman = set(), set()  # the DQT tables, the DHT (class, table) defined
    pos = 2
    while True:
        if pos >= n or mv[pos] != 0xFF:
            return None  # cut short, or bytes between segments
        while pos < n and mv[pos] == 0xFF:  # FF fill bytes before the marker code
            pos += 1
        if pos >= n:
            return None
        marker = mv[pos]
        pos += 1
        if marker in _STANDALONE:
            continue
        if pos + 2 > n:
            return None
        length = (mv[pos] << 8) | mv[pos + 1]
        start, end = pos + 2, pos + length
        if length < 2 or end > n:
            return None
        pos = end
        if marker == 0xDA:  # SOS
            scan = _scan_tables(mv, start, end)
            break
        if marker in _SOF_REASONS:
            if sof is not None or length < 8:
                return None  # JERR_SOF_DUPLICATE, JERR_BAD_LENGTH
            precision, height, width, count = struct.unpack_from(">BHHB", mv, start)
            if length != 8 + 3 * count:
                return None
            components = [
                (mv[i], mv[i + 1] >> 4, mv[i + 1] & 15, mv[i + 2]) for i in range(start + 6, end, 3)
            ]
            sof = marker, precision, height, width, components
        elif marker == 0xDB:
            if not _read_dqt(mv, start, end, quant):
                return None
        elif marker == 0xC4:
            if not _read_dht(mv, start, end, huffman):
                return None
        elif marker == 0xE0:
            # jdmarker.c's examine_app0: 14 bytes or more, "JFIF\0" first.
            jfif |= length - 2 >= 14 and mv[start : start + 5] == b"JFIF\0"
        elif marker == 0xEE:
            # examine_app14: 12 bytes or more, "Adobe" first, the transform last.
            if length - 2 >= 12 and mv[start : start + 5] == b"Adobe":
                adobe = mv[start + 11]
        elif marker == 0xE1:
            # grfmt_jpeg.cpp: an APP1 of more than 6 bytes, "Exif\0\0" first.
            if length - 2 > 6 and mv[start : start + 6] == b"Exif\0\0":
                exif.append((start + 6, end))
        elif marker not in _SKIPPED:
            return None  # SOI, EOI, JPG and the unknown markers end libjpeg-turbo's header
    if sof is None or scan is None:
        return None
    marker, precision, height, width, components = sof
    ids = [c[0] for c in components]
    if any(c not in ids for c, _, _ in scan):
        return None  # JERR_BAD_COMPONENT_ID
    subsampling, sampling_reason = _subsampling(components)
    orientation, exif_reason = exif_orientation(mv, exif)
    reasons = [
        _SOF_REASONS[marker],
        f"{precision}-bit samples" if precision != 8 else None,
        "height given after the scan (DNL)" if height == 0 else None,
        "no width" if width == 0 else None,
        f"larger than {_MAX_DIMENSION} pixels" if max(width, height) > _MAX_DIMENSION else None,
        _colour_reason(components, jfif, adobe),
        sampling_reason,
        _table_reason(components, scan, quant, huffman),
        exif_reason,
        "no end-of-image marker (truncated?)" if mv[n - 2 : n] != b"\xff\xd9" else None,
    ]
    reason = next((r for r in reasons if r is not None), None)
    return JpegHeader(width, height, subsampling, orientation, reason)


def _scan_tables(mv: memoryview, start: int, end: int) -> list[tuple[int, int, int]] | None:
    """The first scan's (component id, DC table, AC table)s; None where jdmarker.c's get_sos
    would stop (JERR_BAD_LENGTH)."""
    count = mv[start] if start < end else 0
    if not 1 <= count <= 4 or end - start != 4 + 2 * count:
        return None
    return [
        (mv[i], mv[i + 1] >> 4, mv[i + 1] & 15) for i in range(start + 1, start + 1 + 2 * count, 2)
    ]


def _read_dqt(mv: memoryview, start: int, end: int, tables: set) -> bool:
    """Adds a DQT segment's table numbers to ``tables``; False where get_dqt would stop."""
    pos = start
    while pos < end:
        precision, table = mv[pos] >> 4, mv[pos] & 15
        pos += 1 + 64 * (precision + 1)
        if precision > 1 or table > 3 or pos > end:
            return False
        tables.add(table)
    return True


def _read_dht(mv: memoryview, start: int, end: int, tables: set) -> bool:
    """Adds a DHT segment's (class, table)s to ``tables``; False where get_dht would stop."""
    pos = start
    while pos < end:
        if pos + 17 > end:
            return False
        index, count = mv[pos], sum(mv[pos + 1 : pos + 17])
        pos += 17 + count
        if index & 0xEC or count > 256 or pos > end:  # class 0 (DC) or 1 (AC), table 0..3
            return False
        tables.add((index >> 4, index & 3))
    return True


def _subsampling(components: list[tuple[int, int, int, int]]) -> tuple[str | None, str | None]:
    """(subsampling, the reason it keeps the file off the GPU) from the sampling factors."""
    factors = [(h, v) for _, h, v, _ in components]
    if any(not (1 <= f <= 4) for hv in factors for f in hv):
        return None, "bad sampling factors"  # jdinput.c: JERR_BAD_SAMPLING
    if len(components) == 1:
        return "gray", None  # one component is never subsampled, whatever its factors
    if sum(h * v for h, v in factors) > _MAX_BLOCKS_IN_MCU:
        return None, f"more than {_MAX_BLOCKS_IN_MCU} blocks per MCU"
    if len(components) != 3:
        return None, None  # the colour space's reason says why
    (yh, yv), cb, cr = factors
    if cb != cr:
        return None, "Cb and Cr sampled differently"
    ch, cv = cb
    if yh % ch or yv % cv:
        return None, "chroma sampling factors that do not divide luma's"
    ratio = yh // ch, yv // cv
    if ratio in _GPU_SUBSAMPLINGS:
        return _GPU_SUBSAMPLINGS[ratio], None
    return None, f"{_RATIO_NAMES.get(ratio, f'{ratio[0]}x{ratio[1]}')} chroma subsampling"


def _colour_reason(components: list, jfif: bool, adobe: int | None) -> str | None:
    """Why the colour space keeps the file off the GPU (default_decompress_parms' guess)."""
    count = len(components)
    if count == 1:
        return None
    if count == 3:
        if jfif:
            return None
        if adobe is not None:
            return "RGB colour space (Adobe transform 0)" if adobe == 0 else None
        if [c[0] for c in components] == [82, 71, 66]:
            return "RGB colour space (component ids 'R', 'G', 'B')"
        return None
    if count == 4:
        return f"{'CMYK' if adobe in (None, 0) else 'YCCK'} (4 components)"
    return f"{count} components"


def _table_reason(components: list, scan: list, quant: set, huffman: set) -> str | None:
    """Why the first scan's tables keep the file off the GPU: one not defined before it.

    libjpeg-turbo decodes with the standard Huffman tables where a file has none (motion-JPEG
    frames leave them out) and stops where a quantization table is missing.
    """
    tables = {c[0]: c[3] for c in components}
    if any(tables[c] not in quant for c, _, _ in scan):
        return "quantization table not defined"
    if any((0, dc) not in huffman or (1, ac) not in huffman for _, dc, ac in scan):
        return "Huffman table not defined"
    return None


def exif_orientation(mv: memoryview, blocks: list[tuple[int, int]]) -> tuple[int, str | None]:
    """(orientation, "malformed EXIF" or None) from the TIFF data of the "Exif" APP1s (of a
    JPEG; of the eXIf chunk, for a PNG), ``blocks`` their (start, end) in ``mv``.

    As OpenCV's ExifReader reads them: blocks in turn, each one's IFD0 entries in turn until
    the first orientation entry (whose first 16-bit word of value it takes, 0 and 9.. leaving
    the frame as it is). An entry, a string or a rational out of a block's data would end
    ExifReader's walk of that block with an exception; here that, a TIFF header that is not
    "II*\\0" or "MM\\0*", and an orientation that is not one SHORT, make the answer unsure.
    """
    for start, end in blocks:
        size = end - start
        head = mv[start : start + 4]
        if head == b"II*\0":
            order = "<"
        elif head == b"MM\0*":
            order = ">"
        else:
            return 1, "malformed EXIF"
        if size < 8:
            return 1, "malformed EXIF"
        ifd = struct.unpack_from(order + "I", mv, start + 4)[0]
        if ifd + 2 > size:
            return 1, "malformed EXIF"
        entry = ifd + 2
        for _ in range(struct.unpack_from(order + "H", mv, start + ifd)[0]):
            if entry + 12 > size:
                return 1, "malformed EXIF"
            tag, kind, count, value = struct.unpack_from(order + "HHII", mv, start + entry)
            if tag == _ORIENTATION_TAG:
                if kind != 3 or count != 1:
                    return 1, "malformed EXIF"
                orientation = struct.unpack_from(order + "H", mv, start + entry + 8)[0]
                return (orientation if 1 <= orientation <= 8 else 1), None
            if tag in _EXIF_STRINGS:
                at = 8 if count <= 4 else value
                if at + count > size:
                    return 1, "malformed EXIF"
            elif tag in _EXIF_RATIONALS and value + 8 * _EXIF_RATIONALS[tag] > size:
                return 1, "malformed EXIF"
            entry += 12
    return 1, None


@dataclass(frozen=True)
class EncodedJpeg:
    """A JPEG file read and found fit for the GPU decoder: its bytes and parsed header."""

    out_name: str
    source: str
    path: Path
    data: bytes
    header: JpegHeader

    def key(self) -> tuple:
        """What the files of one batch share: size, sampling, orientation."""
        h = self.header
        return (h.width, h.height, h.subsampling, h.orientation)


# Markers that may follow a scan other than EOI: the tables, restart interval, comments and
# application data of the next scan, its SOS, and DNL. What follows them is not checked.
_BETWEEN_SCANS = frozenset({0xC4, 0xCC, 0xDA, 0xDB, 0xDC, 0xDD, 0xFE, *range(0xE0, 0xF0)})


class _OwnReading:
    """:data:`LIBJPEG_ONLY`'s type."""

    def __repr__(self) -> str:
        return "LIBJPEG_ONLY"


# scan_damage's verdict on a file libjpeg-turbo decodes without a word, reading codes where the
# standard says nothing in a way of its own: a bad Huffman code that its fast path takes for a
# 0, a coefficient (or a run of zeros) past a block's end, which it puts in the block's last
# place, or a DC no encoder of 8-bit samples writes (misread bits drift there), which takes its
# inverse DCT's samples far out of range, where its arithmetic and other decoders' part.
# Other decoders, the JPEG engines among them, make other pixels of such a file, so only
# libjpeg-turbo (cv2) may decode it.
LIBJPEG_ONLY = _OwnReading()


class _Unwalked:
    """:data:`UNWALKED`'s type."""

    def __repr__(self) -> str:
        return "UNWALKED"


# What scan_damage is given where the C walk has not yet run on a file's bytes (it then runs it):
# ``edgecli._native.read_walked`` walks them as it reads them, and its callers pass on its
# verdict instead, so that a file costs one wait for the GIL fewer.
UNWALKED = _Unwalked()


def scan_damage(
    data: bytes | bytearray | memoryview, walked: object = UNWALKED
) -> str | _OwnReading | None:
    """Why the scans of the JPEG file ``data`` are corrupt; None where they are as they
    should be (or ``data`` is no JPEG whose scans this finds: the decoder says why).
    ``walked``: the C walk's verdict on ``data`` where it has run already.

    libjpeg-turbo decodes past damage to the entropy-coded data with only a warning
    ("Corrupt JPEG data: ..."), which it writes to the process's stderr, and gives a frame
    with grey or shifted blocks; nvJPEG decodes such a file too. So the callers of both ask
    this first, and give a damaged file the same verdict whichever decoder has it.

    A sequential Huffman file (SOF0, SOF1), where edgecli's C extension is built, is judged as
    libjpeg-turbo judges it: ``edgecli._native.jpeg_scan_damage`` decodes every scan's Huffman
    codes as libjpeg-turbo's decoder reads them (no IDCT) and gives its first warning or error
    in its words: a bad Huffman code, a marker before a scan's last block ("premature end of
    data segment"), bytes before a marker ("N extraneous bytes"), a restart marker out of order
    or missing; or, where it gives none, :data:`LIBJPEG_ONLY` for codes it reads silently in a
    way of its own, and DCs no encoder writes. Other files (progressive or arithmetic-coded, or
    no C extension) get the markers' check, at memory speed with no Huffman decoding: a byte
    pair FF xx that no scan can hold (random bytes over the data hold one most often), restart
    markers out of order and, in a file of one scan with a restart interval, too few or too many
    of them. Damage that leaves the markers right (a flipped bit, zeroed bytes in a file without
    restart markers) only the Huffman decoder finds: libjpeg's warning is then all there is for
    those.
    """
    mv = memoryview(data).cast("B")
    n = len(mv)
    if n < 4 or mv[0] != 0xFF or mv[1] != 0xD8:
        return None
    coded = np.frombuffer(mv, np.uint8)
    pos, restart_interval, sof, scans = 2, 0, None, 0
    while True:  # segment by segment, as parse_header walks them; a scan's data after SOS
        if pos + 4 > n or mv[pos] != 0xFF:
            return None
        marker = mv[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker == 0xD9:
            return None
        if marker in _STANDALONE:
            pos += 2
            continue
        length = (mv[pos + 2] << 8) | mv[pos + 3]
        start, pos = pos + 4, pos + 2 + length
        if length < 2 or pos > n:
            return None
        if marker == 0xDD and length >= 4:
            restart_interval = (mv[start] << 8) | mv[start + 1]
        elif marker in _SOF_REASONS and length >= 8:
            # (an extension built before it had the walker has no such function)
            walk = getattr(native.c, "jpeg_scan_damage", None)
            if marker in (0xC0, 0xC1) and walk is not None:
                reason = walk(mv) if walked is UNWALKED else walked
                if reason is None:
                    return None
                if reason is False:  # whole, as libjpeg-turbo alone reads it
                    return LIBJPEG_ONLY
                return f"corrupt JPEG data ({reason})"
            sof = mv[start:pos]
        elif marker == 0xDA:
            scans += 1
            marks = pos + np.flatnonzero(coded[pos:-1] == 0xFF)
            codes = coded[marks + 1]
            restart = (codes >= 0xD0) & (codes <= 0xD7)
            ends = np.flatnonzero((codes != 0x00) & (codes != 0xFF) & ~restart)
            if len(ends) == 0:
                return None  # no end-of-image marker: the decoders refuse it, saying so
            end = int(ends[0])
            code = int(codes[end])
            if code != 0xD9 and code not in _BETWEEN_SCANS:
                return f"corrupt JPEG data (marker 0x{code:02x} inside the image data)"
            restarts = codes[:end][restart[:end]]
            order = np.arange(len(restarts)) % 8 + 0xD0
            if not np.array_equal(restarts, order):
                first = int(np.flatnonzero(restarts != order)[0])
                return (
                    f"corrupt JPEG data (restart marker RST{restarts[first] - 0xD0} "
                    f"where RST{order[first] - 0xD0} belongs)"
                )
            if restart_interval and code == 0xD9 and scans == 1 and sof is not None:
                mcus = _mcus(sof, mv[start] if length >= 3 else 0)
                wanted = None if mcus is None else -(-mcus // restart_interval) - 1
                if wanted is not None and len(restarts) != wanted:
                    return (
                        f"corrupt JPEG data ({len(restarts)} restart markers where its "
                        f"{mcus} blocks call for {wanted})"
                    )
            pos = int(marks[end])


def _mcus(sof: memoryview, scanned: int) -> int | None:
    """The MCUs of a scan of ``scanned`` components in the frame whose SOF body is ``sof``:
    an interleaved scan of them all, or the blocks of a frame of one component; None else."""
    if len(sof) < 6:
        return None
    height, width, count = struct.unpack_from(">HHB", sof, 1)
    if scanned != count or len(sof) < 6 + 3 * count or not height or not width:
        return None
    if count == 1:
        return -(-width // 8) * -(-height // 8)
    h_max = max(sof[7 + 3 * i] >> 4 for i in range(count))
    v_max = max(sof[7 + 3 * i] & 15 for i in range(count))
    if not h_max or not v_max:
        return None
    return -(-width // (8 * h_max)) * -(-height // (8 * v_max))
