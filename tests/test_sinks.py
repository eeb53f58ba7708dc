"""The 1-bit PNG encoder (edgecli.output.png.encode_png_1bit, and from packed rows): valid PNGs,
exact pixels."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import imageio.v3 as iio
import numpy as np
import pytest

from edgecli.edges.reference import detect_frame
from edgecli.options.params import Options
from edgecli.output.png import (
    PNG_SIGNATURE,
    PackedEdges,
    encode_png,
    encode_png_1bit,
    png_rows_1bit,
)

from .media import photo

SHAPES = [(1, 1), (1, 8), (1, 9), (8, 1), (9, 1), (17, 31), (33, 65), (64, 64), (3, 1001)]


def chunks(png: bytes) -> list[tuple[bytes, bytes, int]]:
    """(type, data, stored CRC) of each chunk, in order."""
    assert png[:8] == PNG_SIGNATURE
    found, at = [], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length : at + 12 + length])
        found.append((kind, data, crc))
        at += 12 + length
    assert at == len(png)
    return found


def edge_map(shape, content: str) -> np.ndarray:
    if content == "random":
        rng = np.random.default_rng(shape[0] * 1000 + shape[1])
        return rng.integers(0, 2, shape, dtype=np.uint8) * np.uint8(255)
    return np.full(shape, 255 if content == "white" else 0, np.uint8)


@pytest.mark.parametrize("content", ["random", "black", "white"])
@pytest.mark.parametrize("shape", SHAPES)
def test_1bit_png_reads_back_exactly(shape, content):
    """Any size, widths that are not a multiple of 8 included (the row's last byte is
    padded), reads back as the same 0/255 pixels through OpenCV and through Pillow."""
    edges = edge_map(shape, content)
    png = encode_png_1bit(edges)
    for flag in (cv2.IMREAD_GRAYSCALE, cv2.IMREAD_UNCHANGED):
        decoded = cv2.imdecode(np.frombuffer(png, np.uint8), flag)
        assert decoded is not None and decoded.dtype == np.uint8
        np.testing.assert_array_equal(decoded, edges)
    pillow = iio.imread(io.BytesIO(png), extension=".png")
    np.testing.assert_array_equal(np.asarray(pillow) != 0, edges != 0)


def test_1bit_png_is_well_formed():
    """IHDR (width, height, bit depth 1, grayscale), one IDAT that inflates to a filter byte
    0 and the packed bits of each row, IEND; every chunk's CRC right."""
    edges = edge_map((5, 13), "random")
    found = chunks(encode_png_1bit(edges))
    assert [kind for kind, _, _ in found] == [b"IHDR", b"IDAT", b"IEND"]
    for kind, data, crc in found:
        assert zlib.crc32(data, zlib.crc32(kind)) == crc, kind
    assert struct.unpack(">II5B", found[0][1]) == (13, 5, 1, 0, 0, 0, 0)
    rows = np.frombuffer(zlib.decompress(found[1][1]), np.uint8).reshape(5, 3)
    assert (rows[:, 0] == 0).all()
    np.testing.assert_array_equal(np.unpackbits(rows[:, 1:], axis=1)[:, :13] * 255, edges)
    assert found[2][1] == b""


def test_any_nonzero_pixel_is_white_and_views_are_read_as_they_are():
    """The encoder takes what the pipeline hands it: a view (a frame of a batch, strided),
    and any nonzero value as an edge."""
    batch = edge_map((3, 20, 40), "random")
    view = batch[1, :, ::2]  # not contiguous
    view[0, :5] = 1
    decoded = cv2.imdecode(np.frombuffer(encode_png_1bit(view), np.uint8), cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(decoded, np.where(view != 0, 255, 0))


def test_1bit_png_is_no_larger_than_opencvs():
    """On a photograph's edges, the PNG is within 1% of OpenCV's bilevel PNG (libpng, the
    same run-length strategy): the compression was not traded for speed."""
    frame = cv2.resize(photo(120, 160), (640, 480), interpolation=cv2.INTER_CUBIC)
    edges = detect_frame(frame, Options(threshold=40))
    assert 0.02 < (edges > 0).mean() < 0.5  # a real edge map, neither empty nor full
    flags = [cv2.IMWRITE_PNG_BILEVEL, 1, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]
    opencv = cv2.imencode(".png", edges, flags)[1].tobytes()
    assert len(encode_png_1bit(edges)) <= 1.01 * len(opencv)


def test_encode_png_picks_the_bit_depth():
    edges = edge_map((4, 6), "random")
    assert encode_png(edges, 1) == encode_png_1bit(edges)
    eight = encode_png(edges, 8)
    assert eight[24:26] == b"\x08\x00"  # bit depth 8, grayscale
    np.testing.assert_array_equal(
        cv2.imdecode(np.frombuffer(eight, np.uint8), cv2.IMREAD_GRAYSCALE), edges
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_packed_rows_are_png_scanlines(shape):
    """png_rows_1bit: a filter byte 0, then the bits, the first pixel in the most significant
    bit, any nonzero pixel a 1, the last byte padded with 0 bits; and a PNG made from
    PackedEdges of those rows is the very PNG of the edge map."""
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    edges = rng.integers(0, 2, shape, dtype=np.uint8) * rng.integers(1, 256, shape, dtype=np.uint8)
    rows = png_rows_1bit(edges)
    width = shape[1]
    assert rows.dtype == np.uint8 and rows.shape == (shape[0], 1 + (width + 7) // 8)
    assert (rows[:, 0] == 0).all()
    bits = np.unpackbits(rows[:, 1:], axis=1)
    np.testing.assert_array_equal(bits[:, :width], edges != 0)
    assert not bits[:, width:].any()
    assert encode_png(PackedEdges(rows, width), 1) == encode_png_1bit(edges)


def test_packed_edges_are_checked():
    """Rows of the wrong width or type are refused, naming the shape wanted; packed rows make
    1-bit PNGs only."""
    with pytest.raises(ValueError, match=r"\(H, 3\)"):
        PackedEdges(np.zeros((4, 2), np.uint8), 13)
    with pytest.raises(ValueError, match="uint8"):
        PackedEdges(np.zeros((4, 3), np.int16), 13)
    packed = PackedEdges(np.zeros((4, 3), np.uint8), 13)
    with pytest.raises(ValueError, match="1-bit"):
        encode_png(packed, 8)
