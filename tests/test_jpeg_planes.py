"""edgecli.decode.jpeg_planes against cv2.imdecode: the planes give imdecode's BGR exactly."""

from __future__ import annotations

import io
import os
import struct
import time

import cv2
import numpy as np
import pytest
from PIL import Image

from edgecli.decode.jpeg_header import JpegHeader, parse_header
from edgecli.decode.jpeg_planes import (
    SUBSAMPLINGS,
    apply_exif_orientation,
    chroma_shape,
    planes_to_bgr,
)
from tests import turbojpeg
from tests.media import photo

# (height, width): single pixels and lines, chroma planes 1 and 2 samples wide (box
# upsampling in libjpeg-turbo) and 3 wide (fancy), partial and whole MCUs, odd sizes, 1080p.
SIZES = [(1, 1), (1, 17), (17, 1), (3, 4), (6, 5), (15, 15), (16, 16), (17, 31), (142, 250)]
CV2_SAMPLINGS = ["444", "422", "420", "440", "411"]


@pytest.fixture(scope="module")
def planes_of():
    """turbojpeg.decode_planes, or a skip saying how to get libturbojpeg (a failure under CI,
    so a CI run cannot pass without these tests)."""
    if turbojpeg.load() is None:
        reason = "libturbojpeg not found (Debian: apt-get install libturbojpeg0; make test does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return turbojpeg.decode_planes


def frame(kind: str, height: int, width: int) -> np.ndarray:
    if kind == "photo":
        return photo(height, width, seed=height + width)
    rng = np.random.default_rng(height * 7919 + width)
    return rng.integers(0, 256, (height, width, 3), np.uint8)


def cv2_jpeg(image: np.ndarray, quality: int, sampling: str = "444", *extra: int) -> bytes:
    flag = getattr(cv2, f"IMWRITE_JPEG_SAMPLING_FACTOR_{sampling}")
    params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, flag, *extra]
    ok, buf = cv2.imencode(".jpg", image, params)
    assert ok
    return buf.tobytes()


def pil_jpeg(image: np.ndarray, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image[..., ::-1])).save(out, "JPEG", **options)
    return out.getvalue()


def imdecode(data: bytes, flags: int = cv2.IMREAD_COLOR) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), flags)


def assert_exact(planes_of, data: bytes, subsampling: str) -> None:
    planes, found, width, height = planes_of(data)
    assert found == subsampling
    if found == "gray":
        planes += [None, None]
    got, want = planes_to_bgr(*planes, found, width, height), imdecode(data)
    assert got.shape == want.shape and np.array_equal(got, want), differences(got, want)


def differences(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    diff = np.abs(got.astype(int) - want).max(axis=-1)
    return f"max difference {diff.max()}, {np.count_nonzero(diff)} of {diff.size} pixels differ"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[1]}x{s[0]}")
@pytest.mark.parametrize("sampling", CV2_SAMPLINGS)
def test_cv2_jpegs_exact(planes_of, sampling, size):
    """cv2's JPEGs of each sampling, photo and noise, q50/90/100: planes give imdecode's BGR."""
    for kind in ("photo", "noise"):
        image = frame(kind, *size)
        for quality in (50, 90, 100):
            assert_exact(planes_of, cv2_jpeg(image, quality, sampling), sampling)


@pytest.mark.parametrize("sampling", CV2_SAMPLINGS)
def test_1080p_exact(planes_of, sampling):
    """1918 x 1080 JPEGs of each sampling (photo q90, noise q100): planes give imdecode's BGR."""
    for kind, quality in (("photo", 90), ("noise", 100)):
        assert_exact(planes_of, cv2_jpeg(frame(kind, 1080, 1918), quality, sampling), sampling)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[1]}x{s[0]}")
def test_gray_jpegs_exact(planes_of, size):
    """Gray JPEGs: imdecode's BGR is Y in all three channels."""
    for quality in (50, 100):
        data = cv2_jpeg(frame("photo", *size)[..., 1], quality)
        assert_exact(planes_of, data, "gray")


@pytest.mark.parametrize("size", [(15, 15), (17, 31), (142, 250)], ids=lambda s: f"{s[1]}x{s[0]}")
def test_pil_jpegs_exact(planes_of, size):
    """Pillow-written JPEGs (its own encoder settings and quantization tables) are exact too."""
    image = frame("photo", *size)
    flat = [2] * 64
    for subsampling, name in ((0, "444"), (1, "422"), (2, "420")):
        assert_exact(planes_of, pil_jpeg(image, quality=75, subsampling=subsampling), name)
        assert_exact(planes_of, pil_jpeg(image, subsampling=subsampling, qtables=[flat]), name)


@pytest.mark.parametrize("sampling", ["422", "420", "440"])
def test_encoder_options_exact(planes_of, sampling):
    """Progressive, restart-interval and Huffman-optimized JPEGs decode to the same exact BGR."""
    image = frame("photo", 45, 71)
    for extra in (
        (cv2.IMWRITE_JPEG_PROGRESSIVE, 1),
        (cv2.IMWRITE_JPEG_RST_INTERVAL, 2),
        (cv2.IMWRITE_JPEG_OPTIMIZE, 1),
    ):
        assert_exact(planes_of, cv2_jpeg(image, 85, sampling, *extra), sampling)


def test_rgb_coded_jpeg_is_its_planes(planes_of):
    """A JPEG coded in RGB (no YCbCr transform) is its three planes as they are, B G R."""
    data = pil_jpeg(frame("photo", 17, 31), keep_rgb=True)
    planes, _, _, _ = planes_of(data)
    assert np.array_equal(np.dstack(planes[::-1]), imdecode(data))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_as_imdecode(planes_of, orientation):
    """imdecode turns a JPEG by its EXIF orientation; apply_exif_orientation turns it the same."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = pil_jpeg(frame("photo", 17, 30), subsampling=2, exif=exif.tobytes())
    planes, subsampling, width, height = planes_of(data)
    upright = planes_to_bgr(*planes, subsampling, width, height)
    assert np.array_equal(upright, imdecode(data, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION))
    assert np.array_equal(apply_exif_orientation(upright, orientation), imdecode(data))


def test_bad_planes_rejected():
    """Planes of the wrong shape or type, or an unknown subsampling, raise ValueError naming it."""
    y = np.zeros((15, 15), np.uint8)
    c = np.zeros(chroma_shape("420", 15, 15), np.uint8)
    assert c.shape == (8, 8) and "gray" in SUBSAMPLINGS
    with pytest.raises(ValueError, match=r"cb must be a uint8 array of shape \(8, 8\)"):
        planes_to_bgr(y, c[:7], c, "420", 15, 15)
    with pytest.raises(ValueError, match="cr must be a uint8 array"):
        planes_to_bgr(y, c, c.astype(np.int16), "420", 15, 15)
    with pytest.raises(ValueError, match=r"y must be a uint8 array of shape \(15, 16\)"):
        planes_to_bgr(y, c, c, "420", 16, 15)
    with pytest.raises(ValueError, match="subsampling must be one of"):
        planes_to_bgr(y, c, c, "410", 15, 15)


# --- parse_header: which files the GPU path decodes to imdecode's frame ----------------------

NOISE = frame("noise", 17, 30)  # not square, and no flip or turn of it looks like another
EOI = b"\xff\xd9"


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def segments(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, marker, end) of each segment of a cv2 or Pillow JPEG, SOS the last."""
    found, pos = [], 2
    while True:
        marker, length = data[pos + 1], int.from_bytes(data[pos + 2 : pos + 4], "big")
        found.append((pos, marker, pos + 2 + length))
        if marker == 0xDA:
            return found
        pos += 2 + length


def payload(data: bytes, marker: int) -> bytes:
    """The first ``marker`` segment's payload."""
    start, _, end = next(s for s in segments(data) if s[1] == marker)
    return data[start + 4 : end]


def without(data: bytes, marker: int) -> bytes:
    """``data`` less every ``marker`` segment before the scan."""
    for start, _, end in reversed([s for s in segments(data) if s[1] == marker]):
        data = data[:start] + data[end:]
    return data


def replaced(data: bytes, marker: int, new_payload: bytes) -> bytes:
    start, _, end = next(s for s in segments(data) if s[1] == marker)
    return data[:start] + segment(marker, new_payload) + data[end:]


def after_soi(data: bytes, *inserted: bytes) -> bytes:
    return data[:2] + b"".join(inserted) + data[2:]


def edited_sof(data: bytes, marker: int = 0xC0, **fields) -> bytes:
    """``data`` with SOF fields changed: code (the SOFn marker), precision, height, width,
    ids (component ids, changed in the scan's header too), factors ((h, v) of each component)."""
    sof = bytearray(payload(data, marker))
    if "ids" in fields:
        start, _, end = segments(data)[-1]
        sos = bytearray(data[start + 4 : end])
        new_ids = dict(zip(sof[6::3], fields["ids"], strict=True))
        sos[1 : 1 + 2 * sos[0] : 2] = bytes(new_ids[c] for c in sos[1 : 1 + 2 * sos[0] : 2])
        data = data[:start] + segment(0xDA, bytes(sos)) + data[end:]
    if "precision" in fields:
        sof[0] = fields["precision"]
    if "height" in fields:
        sof[1:3] = struct.pack(">H", fields["height"])
    if "width" in fields:
        sof[3:5] = struct.pack(">H", fields["width"])
    for i, cid in enumerate(fields.get("ids", ())):
        sof[6 + 3 * i] = cid
    for i, (h, v) in enumerate(fields.get("factors", ())):
        sof[7 + 3 * i] = h << 4 | v
    start, _, end = next(s for s in segments(data) if s[1] == marker)
    code = fields.get("code", marker)
    return data[:start] + segment(code, bytes(sof)) + data[end:]


def without_jfif(data: bytes) -> bytes:
    assert payload(data, 0xE0).startswith(b"JFIF\0")
    return without(data, 0xE0)


def adobe(transform: int) -> bytes:
    return segment(0xEE, b"Adobe\0\x64\0\0\0\0" + bytes([transform]))


def entry(order: str, tag: int, kind: int, count: int, value: int | bytes) -> bytes:
    """A 12-byte IFD entry; an int value is a SHORT's (left-justified) or a LONG's/offset."""
    if isinstance(value, int):
        value = (
            struct.pack(order + "HH", value, 0) if kind == 3 else struct.pack(order + "I", value)
        )
    return struct.pack(order + "HHI", tag, kind, count) + value


def tiff(order: str, entries: list[bytes], extra: bytes = b"", head: bytes | None = None) -> bytes:
    """TIFF data with IFD0 at offset 8 holding ``entries``, then ``extra`` (at 8 + 2 + 12 n + 4)."""
    head = head or {"<": b"II*\0", ">": b"MM\0*"}[order] + struct.pack(order + "I", 8)
    ifd = struct.pack(order + "H", len(entries)) + b"".join(entries) + b"\0\0\0\0"
    return head + ifd + extra


def exif(tiff_data: bytes) -> bytes:
    return segment(0xE1, b"Exif\0\0" + tiff_data)


def camera_tiff(order: str, orientation: int) -> bytes:
    """IFD0 as cameras write it: Make and Model out of line, Orientation, X/YResolution,
    ResolutionUnit, the Exif IFD's offset, sorted by tag."""
    n = 7
    base = 8 + 2 + 12 * n + 4
    extra = b"Canon\0Canon EOS 5D\0\0" + struct.pack(order + "IIII", 72, 1, 72, 1)
    extra += struct.pack(order + "H", 0) + b"\0\0\0\0"  # an empty Exif IFD
    entries = [
        entry(order, 0x010F, 2, 6, base),
        entry(order, 0x0110, 2, 13, base + 6),
        entry(order, 0x0112, 3, 1, orientation),
        entry(order, 0x011A, 5, 1, base + 20),
        entry(order, 0x011B, 5, 1, base + 28),
        entry(order, 0x0128, 3, 1, 2),
        entry(order, 0x8769, 4, 1, base + 36),
    ]
    return tiff(order, entries, extra)


def jpeg(sampling: str = "420", image: np.ndarray = NOISE, *extra: int) -> bytes:
    return cv2_jpeg(image, 90, sampling, *extra)


def assert_as_imdecode(data: bytes, header: JpegHeader) -> None:
    """imdecode's frame is its unturned frame, height x width, turned by header.orientation."""
    upright = imdecode(data, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    assert upright.shape == (header.height, header.width, 3)
    assert np.array_equal(apply_exif_orientation(upright, header.orientation), imdecode(data))


def assert_header(data: bytes, *expected, decoded: bool = True) -> None:
    """parse_header(data) is JpegHeader(*expected); for a file it calls fit for the GPU,
    imdecode agrees on its size and orientation (unless ``decoded`` is False: a header made
    up for the test, the scan not matching it)."""
    header = parse_header(data)
    assert header == JpegHeader(*expected)
    if header.gpu_reason is None and decoded:
        assert_as_imdecode(data, header)


@pytest.mark.parametrize("size", [(1, 1), (17, 31), (142, 250), (1080, 1918)], ids=str)
@pytest.mark.parametrize("sampling", ["444", "422", "420", "440"])
def test_header_of_cv2_jpegs(sampling, size):
    """cv2's JPEGs of the GPU's samplings: size and subsampling, fit for the GPU, also with
    restart markers and optimized Huffman tables; progressive ones are not."""
    image = frame("photo", *size)
    h, w = size
    assert_header(cv2_jpeg(image, 90, sampling), w, h, sampling, 1, None)
    assert_header(
        cv2_jpeg(image, 50, sampling, cv2.IMWRITE_JPEG_RST_INTERVAL, 1), w, h, sampling, 1, None
    )
    assert_header(
        cv2_jpeg(image, 75, sampling, cv2.IMWRITE_JPEG_OPTIMIZE, 1), w, h, sampling, 1, None
    )
    progressive = cv2_jpeg(image, 90, sampling, cv2.IMWRITE_JPEG_PROGRESSIVE, 1)
    assert_header(progressive, w, h, sampling, 1, "progressive")


def test_header_of_other_jpegs():
    """4:1:1 stays on the CPU; gray cv2 JPEGs and Pillow's JPEGs are fit for the GPU."""
    assert_header(jpeg("411"), 30, 17, None, 1, "4:1:1 chroma subsampling")
    assert_header(jpeg("444", NOISE[..., 0]), 30, 17, "gray", 1, None)
    assert_header(jpeg("420", NOISE[:1, :1, 0]), 1, 1, "gray", 1, None)
    for subsampling, name in ((0, "444"), (1, "422"), (2, "420")):
        assert_header(pil_jpeg(NOISE, subsampling=subsampling), 30, 17, name, 1, None)
    progressive = pil_jpeg(NOISE, progressive=True)
    assert_header(progressive, 30, 17, "420", 1, "progressive")


@pytest.mark.parametrize("order", ["<", ">"], ids=["little-endian", "big-endian"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation(order, orientation):
    """Each EXIF orientation, in either byte order, a lone entry or among a camera's, before or
    after the JFIF APP0, of a colour or gray file: as imdecode applies it."""
    gray = jpeg("444", NOISE[..., 1])
    lone = tiff(order, [entry(order, 0x0112, 3, 1, orientation)])
    for tiff_data in (lone, camera_tiff(order, orientation)):
        assert_header(after_soi(jpeg(), exif(tiff_data)), 30, 17, "420", orientation, None)
        inside = without_jfif(jpeg("422"))
        assert_header(after_soi(inside, exif(tiff_data)), 30, 17, "422", orientation, None)
        assert_header(after_soi(gray, exif(tiff_data)), 30, 17, "gray", orientation, None)
        _, _, end = segments(gray)[0]
        after_app0 = gray[:end] + exif(tiff_data) + gray[end:]
        assert_header(after_app0, 30, 17, "gray", orientation, None)


@pytest.mark.parametrize("orientation", [0, 9, 255, 0xFFFF])
def test_exif_orientation_out_of_range(orientation):
    """Orientations other than 1..8 leave imdecode's frame as it is."""
    for order in "<>":
        data = after_soi(jpeg(), exif(camera_tiff(order, orientation)))
        assert_header(data, 30, 17, "420", 1, None)


def test_exif_of_pillow():
    """Pillow's EXIF (with and without other tags) gives the orientation imdecode applies."""
    for orientation in (3, 6, 8):
        tags = Image.Exif()
        tags[0x0112] = orientation
        data = pil_jpeg(NOISE, subsampling=2, exif=tags.tobytes())
        assert_header(data, 30, 17, "420", orientation, None)
        tags[0x010F], tags[0x0131] = "Make", "Software that is long"
        data = pil_jpeg(NOISE, subsampling=2, exif=tags.tobytes())
        assert_header(data, 30, 17, "420", orientation, None)


def test_exif_as_opencv_reads_it():
    """EXIF that is odd but read one way only by OpenCV's ExifReader, imdecode's frame the
    check: what follows the orientation entry does not matter; of several "Exif" APP1s the
    first orientation entry counts, in whichever block; an APP1 after the scan is unseen."""
    o = ">"
    orient6 = entry(o, 0x0112, 3, 1, 6)
    whole = tiff(o, [orient6, entry(o, 0x0131, 2, 4, b"abc\0")])
    cut = whole[:8] + struct.pack(">H", 5) + whole[10:22]  # five entries said, one there
    beyond = tiff(o, [orient6, entry(o, 0x0131, 2, 100, 5000)])  # a string out of the data
    inline = tiff(o, [entry(o, 0x010F, 2, 4, b"abc\0"), orient6])  # a string in its entry
    for tiff_data in (whole, cut, beyond, inline):
        assert_header(after_soi(jpeg(), exif(tiff_data)), 30, 17, "420", 6, None)
    three = exif(tiff(o, [entry(o, 0x0112, 3, 1, 3)]))
    make_only = exif(tiff(o, [entry(o, 0x010F, 2, 4, b"abc\0")]))
    xmp = segment(0xE1, b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>")
    for blocks, orientation in (
        ([exif(whole), three], 6),
        ([make_only, three], 3),
        ([xmp, three], 3),
        ([segment(0xE1, b"Exif\0\0"), three], 3),  # 6 bytes: not EXIF to OpenCV
        ([segment(0xE1, b"EXIF\0\0" + whole), three], 3),
        ([segment(0xE2, b"Exif\0\0" + whole), three], 3),  # APP2
        ([exif(tiff(o, [])), three], 3),
    ):
        assert_header(after_soi(jpeg(), *blocks), 30, 17, "420", orientation, None)
    data = jpeg()
    after_scan = data[:-2] + exif(whole) + EOI
    assert_header(after_scan, 30, 17, "420", 1, None)


def malformed_exif() -> dict[str, bytes]:
    """TIFF data (after "Exif\\0\\0") whose orientation is not sure, by what is wrong."""
    o, le = ">", "<"
    orient6 = entry(o, 0x0112, 3, 1, 6)
    good = tiff(o, [orient6])
    two = tiff(o, [entry(o, 0x0131, 2, 4, b"abc\0"), orient6])
    return {
        "cut in the header": good[:6],
        "header II with a big-endian mark": b"II\0*" + good[4:],
        "header XX": b"XX\0*" + good[4:],
        "IFD0 past the data": good[:4] + struct.pack(">I", 4096) + good[8:],
        "IFD0 entry count past the data": two[:8] + struct.pack(">H", 3) + two[10:22],
        "IFD0 cut before the orientation": two[: 8 + 2 + 12 + 6],
        "orientation a LONG (little-endian)": tiff(le, [entry(le, 0x0112, 4, 1, 6)]),
        "orientation a LONG (big-endian)": tiff(o, [entry(o, 0x0112, 4, 1, 6)]),
        "orientation two SHORTs": tiff(o, [entry(o, 0x0112, 3, 2, 6)]),
        "Make past the data": tiff(o, [entry(o, 0x010F, 2, 100, 5000), orient6]),
        "Make's length past the data": tiff(o, [entry(o, 0x010F, 2, 0x7FFFFFFF, 8), orient6]),
        "short inline Model past the data": tiff(o, [entry(o, 0x0110, 2, 4, b"ab\0\0")])[:18],
        "XResolution past the data": tiff(o, [entry(o, 0x011A, 5, 1, 31), orient6]),
        "ReferenceBlackWhite past the data": tiff(o, [entry(o, 0x0214, 5, 6, 12), orient6]),
    }


@pytest.mark.parametrize("case", list(malformed_exif()))
def test_malformed_exif(case):
    """EXIF cut short or odd where its orientation would be read: left to the CPU, as is a file
    whose first such block is bad and a later one good."""
    tiff_data = malformed_exif()[case]
    assert_header(after_soi(jpeg(), exif(tiff_data)), 30, 17, "420", 1, "malformed EXIF")
    good = exif(tiff(">", [entry(">", 0x0112, 3, 1, 3)]))
    assert_header(after_soi(jpeg(), exif(tiff_data), good), 30, 17, "420", 1, "malformed EXIF")
    assert_header(after_soi(jpeg(), good, exif(tiff_data)), 30, 17, "420", 3, None)


def test_colour_space_as_libjpeg_guesses_it():
    """Three components are RGB, not YCbCr, with an Adobe APP14 of transform 0 and no JFIF
    APP0, or with ids 'R', 'G', 'B' and neither; imdecode's frame changes exactly then."""
    data = jpeg("444")
    ycc = imdecode(data)
    bare = without_jfif(data)
    rgb_ids = edited_sof(bare, ids=b"RGB")
    rgb_adobe = "RGB colour space (Adobe transform 0)"
    short_jfif = segment(0xE0, b"JFIF\0\1\1\0\0\1\0\1\0")  # 13 bytes, so no JFIF to libjpeg
    cases = [
        (after_soi(bare, adobe(0)), rgb_adobe),
        (after_soi(bare, adobe(1)), None),
        (after_soi(bare, adobe(2)), None),  # unknown transforms are YCbCr
        (after_soi(data, adobe(0)), None),  # JFIF wins
        (after_soi(bare, adobe(1), adobe(0)), rgb_adobe),  # the last APP14 counts
        (after_soi(bare, adobe(0), adobe(1)), None),
        (after_soi(bare, segment(0xEE, b"Adobe\0\x64\0\0\0\0")), None),  # 11 bytes: not Adobe
        (after_soi(bare, short_jfif, adobe(0)), rgb_adobe),
        (rgb_ids, "RGB colour space (component ids 'R', 'G', 'B')"),
        (after_soi(rgb_ids, adobe(1)), None),  # the APP14 wins
        (edited_sof(data, ids=b"RGB"), None),  # JFIF wins
        (edited_sof(bare, ids=b"\0\1\2"), None),  # other ids: YCbCr
        (edited_sof(bare, ids=b"\1\2\3"), None),
        (edited_sof(bare, ids=b"rgb"), None),
    ]
    for case, reason in cases:
        assert_header(case, 30, 17, "444", 1, reason)
        assert np.array_equal(imdecode(case), ycc) == (reason is None)
    assert_header(pil_jpeg(NOISE, keep_rgb=True), 30, 17, "444", 1, rgb_adobe)


def test_other_component_counts():
    """CMYK and YCCK (Pillow's CMYK JPEGs, its Adobe transform made 2) and two components."""
    out = io.BytesIO()
    Image.fromarray(NOISE).convert("CMYK").save(out, "JPEG")
    cmyk = out.getvalue()
    assert_header(cmyk, 30, 17, None, 1, "CMYK (4 components)")
    assert_header(without(cmyk, 0xEE), 30, 17, None, 1, "CMYK (4 components)")
    ycck = replaced(cmyk, 0xEE, payload(cmyk, 0xEE)[:11] + b"\2")
    assert_header(ycck, 30, 17, None, 1, "YCCK (4 components)")
    gray = jpeg("444", NOISE[..., 0])
    sof = payload(gray, 0xC0)
    two = replaced(gray, 0xC0, sof[:5] + b"\2" + sof[6:9] + b"\2\x11\0")
    assert_header(two, 30, 17, None, 1, "2 components")


@pytest.mark.parametrize(
    "code, reason",
    [
        (0xC1, None),
        (0xC2, "progressive"),
        (0xC3, "lossless"),
        (0xC5, "hierarchical"),
        (0xC6, "progressive, hierarchical"),
        (0xC7, "lossless, hierarchical"),
        (0xC9, "arithmetic coding"),
        (0xCA, "progressive, arithmetic coding"),
        (0xCB, "lossless, arithmetic coding"),
        (0xCD, "arithmetic coding, hierarchical"),
        (0xCE, "progressive, arithmetic coding, hierarchical"),
        (0xCF, "lossless, arithmetic coding, hierarchical"),
    ],
    ids=lambda x: f"{x:X}" if isinstance(x, int) else x,
)
def test_sof_markers(code, reason):
    """Each SOFn: only baseline and extended sequential Huffman frames are fit for the GPU
    (an SOF1 of baseline data decodes as the SOF0 does)."""
    assert_header(edited_sof(jpeg(), code=code), 30, 17, "420", 1, reason)


def test_frame_header_values():
    """12- and 16-bit samples, a height left to a DNL, no width, sizes past libjpeg's limit."""
    data = jpeg()
    assert_header(edited_sof(data, precision=12), 30, 17, "420", 1, "12-bit samples")
    assert_header(edited_sof(data, precision=16), 30, 17, "420", 1, "16-bit samples")
    dnl = "height given after the scan (DNL)"
    assert_header(edited_sof(data, height=0), 30, 0, "420", 1, dnl)
    assert_header(edited_sof(data, width=0), 0, 17, "420", 1, "no width")
    big = "larger than 65500 pixels"
    assert_header(edited_sof(data, width=65501), 65501, 17, "420", 1, big)
    assert_header(edited_sof(data, height=65535), 30, 65535, "420", 1, big)
    assert_header(
        edited_sof(data, width=65500, height=65500), 65500, 65500, "420", 1, None, decoded=False
    )


@pytest.mark.parametrize(
    "factors, subsampling, reason",
    [
        (((1, 2), (1, 2), (1, 2)), "444", None),
        (((2, 1), (2, 1), (2, 1)), "444", None),
        (((4, 1), (2, 1), (2, 1)), "422", None),
        (((2, 1), (2, 1), (1, 1)), None, "Cb and Cr sampled differently"),
        # libjpeg-turbo's limit of 10 blocks in an interleaved scan's MCU (JERR_BAD_MCU_SIZE)
        (((2, 2), (2, 2), (2, 2)), None, "more than 10 blocks per MCU"),
        (((4, 2), (2, 1), (2, 1)), None, "more than 10 blocks per MCU"),
        (((1, 1), (2, 2), (2, 2)), None, "chroma sampling factors that do not divide luma's"),
        (((3, 1), (2, 1), (2, 1)), None, "chroma sampling factors that do not divide luma's"),
        (((2, 1), (1, 1), (2, 1)), None, "Cb and Cr sampled differently"),
        (((1, 4), (1, 1), (1, 1)), None, "4:4:1 chroma subsampling"),
        (((3, 1), (1, 1), (1, 1)), None, "3x1 chroma subsampling"),
        (((4, 2), (1, 1), (1, 1)), None, "4x2 chroma subsampling"),
        (((4, 4), (1, 1), (1, 1)), None, "more than 10 blocks per MCU"),
        (((0, 1), (1, 1), (1, 1)), None, "bad sampling factors"),
        (((2, 2), (1, 5), (1, 1)), None, "bad sampling factors"),
    ],
    ids=str,
)
def test_sampling_factors(factors, subsampling, reason):
    """Subsampling is Y's factors over the chroma planes' (the same for Cb and Cr), whatever
    the factors themselves, within libjpeg-turbo's limits."""
    data = edited_sof(jpeg("444"), factors=factors)
    assert_header(data, 30, 17, subsampling, 1, reason, decoded=False)


def test_gray_sampling_factors():
    """A gray file's one component is never subsampled, whatever its factors: imdecode
    decodes a gray JPEG made 2x2 or 1x3 as it is (one block an MCU in any case)."""
    data = jpeg("444", NOISE[..., 0])
    for factors in ((2, 2), (1, 3), (4, 4)):
        assert_header(edited_sof(data, factors=[factors]), 30, 17, "gray", 1, None)
        assert np.array_equal(imdecode(edited_sof(data, factors=[factors])), imdecode(data))
    assert_header(edited_sof(data, factors=[(5, 1)]), 30, 17, None, 1, "bad sampling factors")


def test_tables_defined():
    """A scan whose Huffman table is not defined (motion-JPEG frames leave them out; libjpeg-
    turbo then decodes with the standard ones, as imdecode shows) or whose quantization table
    is not, stays on the CPU."""
    data = jpeg()
    no_dht = without(data, 0xC4)
    assert_header(no_dht, 30, 17, "420", 1, "Huffman table not defined")
    assert np.array_equal(imdecode(no_dht), imdecode(data))  # cv2 codes with the standard ones
    assert_header(without(data, 0xDB), 30, 17, "420", 1, "quantization table not defined")
    dht = payload(data, 0xC4)
    first = dht[: 17 + sum(dht[1:17])]  # the first table of cv2's one DHT segment
    luma_only = after_soi(no_dht, segment(0xC4, first))
    assert_header(luma_only, 30, 17, "420", 1, "Huffman table not defined")


def test_end_of_image():
    """A file that does not end with EOI: cut short, or with bytes after its EOI."""
    data = jpeg()
    reason = "no end-of-image marker (truncated?)"
    scan = segments(data)[-1][2]
    for cut in (
        data[:-1],
        data[:-2],
        data[: (scan + len(data)) // 2],
        data[:scan],
        data[: scan + 1],
    ):
        assert_header(cut, 30, 17, "420", 1, reason)
    assert_header(data + b"\0", 30, 17, "420", 1, reason)
    assert_header(data + b"trailing data", 30, 17, "420", 1, reason)
    assert_header(data + EOI, 30, 17, "420", 1, None)


def test_marker_walk():
    """Fill bytes before a marker, standalone markers, and segments libjpeg skips change
    nothing; nor does the order of the segments before the scan."""
    data = jpeg()
    expected = (30, 17, "420", 1, None)
    sos = segments(data)[-1][0]
    for inserted in (
        b"\xff\xff\xff",
        b"\xff\x01",
        b"\xff\xd0\xff\xd7",
        segment(0xFE, b"a comment"),
        segment(0xEF, b"APP15"),
        segment(0xDD, b"\0\0"),  # DRI: no restart interval
        segment(0xE1, b""),
    ):
        assert_header(data[:sos] + inserted + data[sos:], *expected)
        assert_header(after_soi(data, inserted), *expected)
    turned = [data[s:e] for s, _, e in segments(data)[:-1]][::-1]
    assert_header(data[:2] + b"".join(turned) + data[sos:], *expected)


def test_not_read():
    """None where libjpeg-turbo reads no frame header or stops before the scan."""
    data = jpeg()
    app0, *_, (sos, _, _) = segments(data)
    sof = next(s for s in segments(data) if s[1] == 0xC0)
    cases = {
        "empty": b"",
        "SOI only": b"\xff\xd8",
        "SOI, FF": b"\xff\xd8\xff",
        "text": b"not a JPEG file at all",
        "noise": np.random.default_rng(5).integers(0, 256, 4096, np.uint8).tobytes(),
        "PNG": cv2.imencode(".png", NOISE)[1].tobytes(),
        "no FF after SOI": b"\xff\xd8\0" + data[3:],
        "cut in the header": data[: sos - 3],
        "cut in SOS": data[: sos + 6],
        "length past the data": data[:4] + b"\xff\xff" + data[6:],
        "length 1": data[: app0[0] + 2] + b"\0\1" + data[app0[0] + 4 :],
        "length 0": data[: app0[0] + 2] + b"\0\0" + data[app0[0] + 4 :],
        "no SOF": without(data, 0xC0),
        "two SOFs": data[: sof[0]] + data[sof[0] : sof[2]] + data[sof[0] :],
        "bytes between segments": data[: app0[2]] + b"\0" + data[app0[2] :],
        "FF 00 between segments": data[: app0[2]] + b"\xff\0" + data[app0[2] :],
        "a marker without its FF": data[: app0[2]] + b"\xfe\0\2" + data[app0[2] :],
        "second SOI": after_soi(data, b"\xff\xd8"),
        "EOI before the scan": data[:sos] + EOI,
        "JPG marker": after_soi(data, segment(0xC8, b"\0" * 4)),
        "unknown marker": after_soi(data, segment(0xF0, b"\0" * 4)),
        "reserved marker": after_soi(data, segment(0x02, b"\0" * 4)),
        "SOF length": replaced(data, 0xC0, payload(data, 0xC0) + b"\0"),
        "SOS length": data[: sos + 3] + bytes([data[sos + 3] + 1]) + data[sos + 4 :],
        "SOS component not in the frame": data[: sos + 5] + b"\x09" + data[sos + 6 :],
        "DHT index": replaced(data, 0xC4, b"\x22" + payload(data, 0xC4)[1:]),
        "DHT cut": replaced(data, 0xC4, payload(data, 0xC4)[:-1]),
        "DQT index": replaced(data, 0xDB, b"\x04" + payload(data, 0xDB)[1:]),
        "DQT cut": replaced(data, 0xDB, payload(data, 0xDB)[:-1]),
    }
    for name, case in cases.items():
        assert parse_header(case) is None, name
        if name in ("SOS length", "SOS component not in the frame", "two SOFs", "no SOF"):
            assert imdecode(case) is None, name  # libjpeg-turbo stops too


def test_buffer_types():
    """bytes, bytearray, memoryview and a uint8 array (what np.fromfile gives) read alike."""
    data = after_soi(jpeg(), exif(camera_tiff("<", 5)))
    expected = JpegHeader(30, 17, "420", 5, None)
    for buffer in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert parse_header(buffer) == expected


def test_parse_header_is_fast():
    """A 1080p JPEG of some 2 MB, with EXIF: well under a millisecond a parse (the scan is never
    read byte by byte)."""
    data = after_soi(jpeg("420", frame("noise", 1080, 1920)), exif(camera_tiff(">", 6)))
    assert len(data) > 1_000_000
    assert parse_header(data) == JpegHeader(1920, 1080, "420", 6, None)
    start = time.perf_counter()
    for _ in range(1000):
        parse_header(data)
    assert time.perf_counter() - start < 1.0
