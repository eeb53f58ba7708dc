"""The GPU's zlib streams (cuda/deflate.cu) without a GPU: the file's serial reference,
built with the host's C compiler, runs the same per-block code the kernel runs (zlib's trees.c,
line for line), and must give zlib's own bytes; and the PNGs made from such a stream are the
host encoders' PNGs."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from edgecli import native
from edgecli.cuda.compiling import kernel_path
from edgecli.edges import variants as kernel
from edgecli.output import png
from edgecli.output.png import PackedEdges, encode_png, png_from_rows_1bit, png_rows_1bit

from .deflate_cases import cases, incompressible, zlib_stream

CASES = cases()
pytestmark = pytest.mark.skipif(
    "ng" in zlib.ZLIB_RUNTIME_VERSION, reason="zlib-ng makes other streams than zlib's"
)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """deflate.cu's serial reference (DEFLATE_HOST), as a shared library."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        pytest.skip("no C compiler (cc) to build deflate.cu's serial reference")
    library = tmp_path_factory.mktemp("deflate") / "libdeflate.so"
    source = kernel_path(kernel.DEFLATE_FILE)
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-DDEFLATE_HOST", "-x", "c", str(source), "-o",
         str(library)],
        check=True,
    )  # fmt: skip
    lib = ctypes.CDLL(str(library))
    lib.deflate_serial.restype = ctypes.c_longlong
    lib.deflate_serial.argtypes = [ctypes.c_char_p, ctypes.c_longlong] + [ctypes.c_void_p] * 2
    lib.deflate_out_bytes.restype = lib.deflate_block_bytes.restype = ctypes.c_longlong
    lib.deflate_out_bytes.argtypes = [ctypes.c_longlong]
    return lib


def compress(serial, data: bytes) -> bytes | None:
    """The serial reference's zlib stream of ``data``, or None where it leaves it to the
    host; its output buffer poisoned first."""
    size = kernel.deflate_out_bytes(len(data))
    out = ctypes.create_string_buffer(b"\xa5" * size, size)
    scratch = ctypes.create_string_buffer(
        kernel.deflate_blocks_for(len(data)) * kernel.DEFLATE_BLOCK_BYTES
    )
    length = serial.deflate_serial(data, len(data), out, scratch)
    assert length == -1 or 0 < length <= size
    return None if length < 0 else out.raw[:length]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_streams_are_zlibs(serial, name):
    """Byte for byte zlib's stream, or (incompressible bytes only) left to the host."""
    data = CASES[name]
    stream = compress(serial, data)
    if stream is None:
        assert incompressible(data), "a compressible input was left to the host"
    else:
        assert stream == zlib_stream(data)


def test_edge_maps_of_photos_are_never_left_to_the_host(serial):
    """Real edge maps (the reference's, of photos of several sizes and thresholds) all get
    their stream, equal to zlib's."""
    from edgecli.edges import reference
    from edgecli.options.params import Options

    from .media import photo

    for seed, (height, width) in enumerate([(1, 1), (1, 77), (77, 1), (237, 321), (1080, 1920)]):
        for threshold in (0, 60, 300):
            edges = reference.detect_frame(
                photo(height, width, seed=seed), Options(threshold=threshold)
            )
            rows = png_rows_1bit(edges).tobytes()
            assert compress(serial, rows) == zlib_stream(rows), (height, width, threshold)


def test_the_layout_matches_the_python_side(serial):
    """The scratch block's size and the output bound are the same numbers in C and Python."""
    assert serial.deflate_block_bytes() == kernel.DEFLATE_BLOCK_BYTES
    for n in (1, 2, 3, 4, 5, 32766, 32767, 32768, 65534, 65535, 260_280, 10**7):
        assert serial.deflate_out_bytes(n) == kernel.deflate_out_bytes(n)


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (37, 100), (300, 1920)])
def test_a_png_from_a_zlib_stream_is_the_encoders(rng, shape):
    """png_from_zlib_1bit, in C and in Python, and encode_png of PackedEdges carrying the
    stream, give png_from_rows_1bit's PNG of the same scanlines."""
    edges = (rng.random(shape) < 0.2).astype(np.uint8) * 255
    rows = png_rows_1bit(edges)
    expected = png_from_rows_1bit(rows, shape[1])
    stream = np.frombuffer(zlib_stream(rows.tobytes()), np.uint8)
    assert png.png_from_zlib_1bit(stream, shape[1], shape[0]) == expected
    assert png._png_1bit([stream.tobytes()], shape[1], shape[0]) == expected
    assert encode_png(PackedEdges(rows, shape[1], stream), 1) == expected
    if native.c is not None:
        assert native.c.png_from_zlib(stream, shape[1], shape[0]) == expected


@pytest.mark.skipif(native.c is None, reason="edgecli._native is not built")
def test_the_c_chunks_refuse_bad_arguments():
    """Sizes out of PNG's range, an empty stream and a wrong argument count are ValueError and
    TypeError, never a crash."""
    with pytest.raises(ValueError, match="width"):
        native.c.png_from_zlib(b"x", 0, 1)
    with pytest.raises(ValueError, match="height"):
        native.c.png_from_zlib(b"x", 1, 2**31)
    with pytest.raises(ValueError, match="zlib stream of 0 bytes"):
        native.c.png_from_zlib(b"", 1, 1)
    with pytest.raises(TypeError, match="3 arguments"):
        native.c.png_from_zlib(b"x", 1)
