"""inflate.cu on the GPU (needs CUDA): the host tests' streams (tests/inflate_cases.py) through
the device, each batch under two poisons with guard ranges between the streams, and a batch of
a few hundred 1080p PNG frames' image data as OpenCV writes it, equal to zlib's bytes."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

from edgecli.decode.gpu import inflate

from .inflate_cases import (
    STRATEGIES,
    assert_as_zlib,
    assert_no_wrong_ok,
    compress,
    corrupted,
    cut_off,
    cut_short,
    flushed,
    hand_made,
    inflate_both,
    scanlines,
    sized_data,
    zlib_verdict,
)
from .media import photo

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def kernel(gpu):
    """inflate.cu's kernel on device 0, as the decoder loads it."""
    return inflate.module(0)


def test_every_level_strategy_and_window(kernel, cp, rng):
    """zlib's streams at every level, strategy and window, in one batch, inflate as zlib."""
    data = scanlines(rng, 50_000)
    streams = [
        compress(data, level, wbits, strategy)
        for strategy in STRATEGIES.values()
        for wbits in range(9, 16)
        for level in range(10)
    ]
    assert_as_zlib(kernel, streams, [len(data)] * len(streams), xp=cp)


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_sizes_in_one_batch(kernel, cp, level, rng):
    """A batch of streams of very different sizes, each to its own range, all as zlib."""
    data = sized_data(rng)
    assert_as_zlib(kernel, [compress(d, level) for d in data], [len(d) for d in data], xp=cp)


def test_flushed_streams(kernel, cp, rng):
    """Streams with empty stored or fixed blocks between their parts inflate as zlib."""
    data = scanlines(rng, 200_000)
    modes = (zlib.Z_SYNC_FLUSH, zlib.Z_FULL_FLUSH, zlib.Z_PARTIAL_FLUSH, zlib.Z_BLOCK)
    assert_as_zlib(kernel, [flushed(data, m) for m in modes], [len(data)] * 4, xp=cp)


def test_hand_made_streams(kernel, cp):
    """Streams written bit by bit get the status they get on the host; OK ones hold zlib's
    bytes."""
    cases = hand_made()
    streams, sizes, expected = zip(*cases.values(), strict=True)
    outputs, status = inflate_both(kernel, streams, sizes, xp=cp)
    for name, stream, size, want, got, out in zip(
        cases, streams, sizes, expected, status, outputs, strict=True
    ):
        assert got == want, f"{name}: {inflate.reason(got)}, expected {inflate.reason(want)}"
        if got == inflate.OK:
            assert np.array_equal(out, np.frombuffer(zlib_verdict(stream, size), np.uint8))


def test_corrupt_streams(kernel, cp):
    """Thousands of damaged streams (seeded): none called OK unless zlib inflates it to exactly
    those bytes, none writes outside its range, the launch ends."""
    assert_no_wrong_ok(kernel, *corrupted(20261206, 3000), xp=cp)


def test_cut_short_streams(kernel, cp, rng):
    """A stream cut after any of its bytes is found truncated, as on the host, and writes only
    its own range."""
    streams, size = cut_short(rng)
    _, status = inflate_both(kernel, streams, [size] * len(streams), xp=cp)
    assert [inflate.STATUSES[s].name for s in status] == ["truncated"] * len(streams)


def test_output_longer_than_its_size(kernel, cp, rng):
    """A stream whose output runs past its size stops there (output_long), wherever in a
    literal or a match the size falls, and writes only its own range."""
    streams, sizes = cut_off(rng)
    _, status = inflate_both(kernel, streams, sizes, xp=cp)
    assert [inflate.STATUSES[s].name for s in status] == ["output_long"] * len(streams)


def png_image_data(frame: np.ndarray, level: int) -> tuple[bytes, int]:
    """The zlib stream of ``frame`` as cv2.imencode writes it at ``level`` (its IDAT chunks
    joined), and the size it inflates to (a filter byte and the row, per row)."""
    ok, encoded = cv2.imencode(".png", frame, [cv2.IMWRITE_PNG_COMPRESSION, level])
    assert ok
    data, at, stream = encoded.tobytes(), 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        if kind == b"IDAT":
            stream += data[at + 8 : at + 8 + length]
        at += 12 + length
    height, width, channels = frame.shape
    return stream, height * (1 + width * channels)


def camera_frame(seed: int) -> np.ndarray:
    """A 1080p photograph with a camera's noise, which PNG compresses about as little as real
    frames (a few MB of zlib)."""
    noise = np.random.default_rng(seed).integers(0, 6, (1080, 1920, 3), np.uint8)
    return cv2.add(photo(1080, 1920, seed), noise)


def test_1080p_frames(kernel, cp):
    """300 1080p PNG frames' image data (OpenCV's, levels 1 to 9) in one batch inflate to
    zlib's bytes; and the benchmark's timing of such a batch runs."""
    distinct = [png_image_data(camera_frame(seed), level) for seed, level in
                [(0, 1), (1, 3), (2, 6), (3, 9), (4, 6), (5, 6)]]  # fmt: skip
    streams = [distinct[i % len(distinct)][0] for i in range(300)]
    sizes = [distinct[i % len(distinct)][1] for i in range(300)]
    src, src_start = inflate.pack_streams(streams)
    dst_start = inflate.offsets(sizes)
    dst = cp.full(int(dst_start[-1]), 0xA5, np.uint8)
    status = cp.full(len(streams), -1, np.int32)
    buffers = (cp.asarray(src), cp.asarray(src_start), dst, cp.asarray(dst_start), status)
    inflate.launch_inflate(kernel, *buffers)
    assert (status.get() == inflate.OK).all(), [inflate.reason(s) for s in set(status.get())]
    expected = [np.frombuffer(zlib.decompress(stream), np.uint8) for stream, _ in distinct]
    for i in range(len(streams)):
        out = dst[int(dst_start[i]) : int(dst_start[i + 1])].get()
        assert np.array_equal(out, expected[i % len(distinct)]), f"frame {i}"
