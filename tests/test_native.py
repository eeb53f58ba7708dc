"""edgecli._native's 1-bit PNG encoder: the bytes of edgecli.output.png's Python encoder, for packed
scanlines and for 8-bit maps, from any thread; bad buffers refused with the reason (its atomic
write: tests/test_files.py). Skipped, saying so, where it was not built (setup.py builds it
optionally)."""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest

import edgecli.output.png as png
from edgecli import native as native_module
from edgecli.output.png import PackedEdges, encode_png, png_from_rows_1bit_python, png_rows_1bit

from .media import photo

native = native_module.c
pytestmark = pytest.mark.skipif(
    native is None,
    reason="edgecli._native is not built (no C compiler or zlib.h when edgecli was installed)",
)
SHAPES = [(1, 1), (1, 7), (1, 8), (1, 9), (7, 1), (9, 1), (17, 31), (33, 65), (3, 1001)]
SHAPES += [(1080, 1918)]


def edge_map(shape, content: str) -> np.ndarray:
    rng = np.random.default_rng(shape[0] * 7919 + shape[1])
    if content == "random":
        return rng.integers(0, 2, shape, dtype=np.uint8) * np.uint8(255)
    if content == "sparse":  # long runs of 0 bytes, as most edge maps have
        return (rng.random(shape) < 0.02).astype(np.uint8) * np.uint8(255)
    return np.full(shape, 255 if content == "white" else 0, np.uint8)


def python_png(edges: np.ndarray) -> bytes:
    return png_from_rows_1bit_python(png_rows_1bit(edges), edges.shape[1])


def assert_same_png(got: bytes, edges: np.ndarray) -> None:
    """The PNG of the Python encoder, byte for byte, where both run on one zlib version;
    elsewhere (another zlib may deflate differently) the same pixels."""
    decoded = cv2.imdecode(np.frombuffer(got, np.uint8), cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(decoded, np.where(edges != 0, 255, 0).astype(np.uint8))
    if native.zlib_version() == zlib.ZLIB_RUNTIME_VERSION:
        assert got == python_png(edges)


@pytest.mark.parametrize("content", ["random", "sparse", "black", "white"])
@pytest.mark.parametrize("shape", SHAPES)
def test_scanlines_give_the_python_encoders_png(shape, content):
    """Packed scanlines (what the GPU hands over) make the Python encoder's PNG."""
    edges = edge_map(shape, content)
    rows = png_rows_1bit(edges)
    assert_same_png(native.encode_rows(rows, shape[1]), edges)
    assert_same_png(encode_png(PackedEdges(rows, shape[1]), 1), edges)


@pytest.mark.parametrize("content", ["random", "sparse", "black", "white"])
@pytest.mark.parametrize("shape", SHAPES)
def test_8bit_maps_give_the_python_encoders_png(shape, content):
    """An 8-bit map (the CPU backend's) is packed as np.packbits packs it, then encoded."""
    edges = edge_map(shape, content)
    assert_same_png(native.encode_map(edges, shape[1]), edges)
    assert_same_png(png.encode_png_1bit(edges), edges)


def test_any_nonzero_pixel_is_white():
    """Not only 255: 1, 7 and 128 are edge pixels too, as np.packbits counts them."""
    edges = np.array([[0, 1, 7, 128, 255, 0, 0, 3, 0, 200]], np.uint8)
    assert_same_png(native.encode_map(edges, edges.shape[1]), edges)


def test_a_real_edge_map_and_views_of_it():
    """The edge map of a photograph, and views that are not contiguous (every other column,
    a crop, flipped), through edgecli.output.png.encode_png_1bit."""
    from edgecli.edges.reference import detect_frame
    from edgecli.options.params import Options

    edges = detect_frame(photo(257, 389), Options())
    for view in (edges, edges[:, ::2], edges[5:200, 3:301], edges[::-1, ::-1]):
        assert_same_png(png.encode_png_1bit(view), view)


def test_threads_encode_what_one_thread_does():
    """Sixteen threads encoding at once (the worker pool, without the GIL) make the same
    PNGs as one thread, each of its own map."""
    maps = [edge_map((97, 131 + i), "random") for i in range(64)]
    alone = [native.encode_map(m, m.shape[1]) for m in maps]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda m: native.encode_map(m, m.shape[1]), maps * 4))
    assert together == alone * 4


def test_the_python_encoder_stands_in_where_the_module_is_missing(monkeypatch):
    """With the module gone, edgecli.output.png encodes the same PNGs itself."""
    edges = edge_map((33, 65), "random")
    with_module = png.encode_png_1bit(edges), encode_png(PackedEdges(png_rows_1bit(edges), 65), 1)
    monkeypatch.setattr(native_module, "c", None)
    without = png.encode_png_1bit(edges), encode_png(PackedEdges(png_rows_1bit(edges), 65), 1)
    for got in without:
        assert got == python_png(edges)
    if native.zlib_version() == zlib.ZLIB_RUNTIME_VERSION:
        assert with_module == without


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: native.encode_rows(np.zeros((2, 3), np.uint8), 17), ValueError, "not whole scan"),
        (lambda: native.encode_rows(b"", 8), ValueError, "not whole scanlines"),
        (lambda: native.encode_rows(b"\0\0", 0), ValueError, "width must be from 1"),
        (lambda: native.encode_rows(b"\0\0", -1), ValueError, "width must be a whole number"),
        (lambda: native.encode_rows(b"\0\0", 2**40), ValueError, "width must be from 1"),
        (lambda: native.encode_rows(b"\0\0", "8"), ValueError, "width must be a whole number"),
        (lambda: native.encode_map(np.zeros(10, np.uint8), 3), ValueError, "not whole rows"),
        (lambda: native.encode_map(np.zeros((4, 4), np.uint8)[:, ::2], 2), ValueError, "contig"),
        (lambda: native.encode_map([0, 1], 2), TypeError, "bytes-like object"),
        (lambda: native.encode_map(b"\0"), TypeError, "takes 2 arguments"),
    ],
)
def test_bad_buffers_are_refused_with_the_reason(call, error, message):
    """Wrong sizes, widths and buffers raise, saying what is wrong; nothing is encoded."""
    with pytest.raises(error, match=message):
        call()
