"""Byte strings that the zlib streams of edgecli.edges.cuda_deflate (``deflate.cu``) are held to, on
the host (its serial reference, tests/test_deflate.py) and on the GPU (test_gpu_deflate.py):
runs at and around the 258-byte match limit, blocks of exactly 32767 tokens (so a last block
holds none), several blocks, Fibonacci frequencies (codes longer than 15 bits, cut back as
zlib's gen_bitlen does), sparse and dense bits, and incompressible bytes."""

from __future__ import annotations

import zlib

import numpy as np


def zlib_stream(data: bytes) -> bytes:
    """What edgecli.output.png's encoders make of PNG scanlines: level 6, window 15, memLevel 9,
    Z_RLE."""
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    return deflate.compress(data) + deflate.flush()


def fibonacci_bytes() -> bytes:
    """Bytes 1..22 with Fibonacci counts, shuffled, a 0 between equal neighbours: Huffman codes
    of 20 bits and more before zlib's cut to 15."""
    counts = [1, 1]
    while len(counts) < 22:
        counts.append(counts[-1] + counts[-2])
    symbols = np.repeat(np.arange(1, 23, dtype=np.uint8), counts)
    np.random.default_rng(22).shuffle(symbols)
    out = bytearray()
    for value in symbols.tolist():
        if out and out[-1] == value:
            out.append(0)
        out.append(value)
    return bytes(out)


def cases() -> dict[str, bytes]:
    """Named byte strings, from 1 byte to about 300 KB."""
    rng = np.random.default_rng(20261201)
    found = {
        "one byte": b"\x00",
        "two bytes": b"\x00\x80",
        "alphabet": bytes(range(256)) * 3,
        "alternating, 32767 tokens": bytes(i % 2 for i in range(32767)),
        "alternating, 65534 tokens": bytes(i % 2 for i in range(65534)),
        "thirds, 32766 tokens": bytes(i % 3 for i in range(32766)),
        "fibonacci": fibonacci_bytes(),
        "fibonacci x3": fibonacci_bytes() * 3,
    }
    for length in (3, 4, 5, 10, 257, 258, 259, 260, 261, 262, 515, 516, 517, 518, 100_000):
        found[f"run of {length}"] = b"\x01" + b"\x00" * (length - 1)
    for length in range(1, 600, 37):
        found[f"runs of {length}"] = (b"\x01" + b"\x00" * length) * 40
    for size in (2, 5, 100, 1000, 32767, 65535, 100_000, 260_280):
        for density in (0.001, 0.05, 0.3):
            bits = rng.random(size * 8) < density
            found[f"{size} bytes, bits {density}"] = np.packbits(bits).tobytes()
        found[f"{size} zeros"] = bytes(size)
        found[f"{size} random bytes"] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    for i in range(40):
        size = int(rng.integers(1, 120_000))
        values = rng.integers(0, int(rng.integers(1, 256)), size, dtype=np.uint8)
        values[rng.random(size) < rng.random()] = 0
        found[f"mixed {i}"] = values.tobytes()
    return found


def incompressible(data: bytes) -> bool:
    """Whether zlib's own stream is about as long as the bytes: where it may store a block,
    which edgecli's deflate leaves to the host."""
    return len(zlib_stream(data)) > 0.95 * len(data)
