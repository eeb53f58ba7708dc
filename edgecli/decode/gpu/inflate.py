"""``inflate.cu``: a batch of zlib streams inflated on the GPU, launched on CuPy streams.

A PNG's image data is one zlib stream whose inflated size its header gives, so each stream is
inflated into a range of one output buffer of exactly that size, and comes back with a status:
:data:`OK` where its bytes are exactly zlib's, else why not (:data:`STATUSES`). Every stream
whose status is not OK must be decoded again on the CPU, which then gives the CPU's image or
error: a status is never the file's error by itself, since libpng takes some streams zlib
refuses (it warns and keeps the image when the Adler-32 differs or the stream is cut after the
last row). The statuses in :data:`CPU_DECIDES` are those where even zlib's verdict hangs on
how it is fed; on the others zlib refuses the stream.

CuPy is imported only to load and time the kernel: tests/cuda_host.py stands a host build of
the kernel in for it, so :func:`launch_inflate` runs on the CPU, arguments and all.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

INFLATE_FILE = "inflate.cu"
KERNEL = "inflate_zlib"
THREADS = 64  # inflate.cu's INFLATE_THREADS: two warps, a decoder and a writer
# The most input and output bytes a stream may have (inflate.cu counts input bits and output
# bytes in 32 bits); a larger one comes back with status bad_range, for the CPU.
MAX_INPUT_BYTES = 0x0FFFFFFF
MAX_OUTPUT_BYTES = 0x7FFFFFFF


class Status(NamedTuple):
    name: str
    reason: str


# inflate.cu's statuses, by code: zlib's own message where zlib has one.
STATUSES = {
    0: Status("ok", "inflated"),
    1: Status("truncated", "the zlib stream is truncated"),
    2: Status("header_check", "incorrect header check"),
    3: Status("header_method", "unknown compression method"),
    4: Status("header_window", "invalid window size"),
    5: Status("header_dictionary", "the stream needs a preset dictionary"),
    6: Status("block_type", "invalid block type"),
    7: Status("stored_length", "invalid stored block lengths"),
    8: Status("too_many_codes", "too many length or distance symbols"),
    9: Status("code_lengths_set", "invalid code lengths set"),
    10: Status("length_repeat", "invalid bit length repeat"),
    11: Status("missing_end_of_block", "invalid code -- missing end-of-block"),
    12: Status("litlen_set", "invalid literal/lengths set"),
    13: Status("distance_set", "invalid distances set"),
    14: Status("litlen_code", "invalid literal/length code"),
    15: Status("distance_code", "invalid distance code"),
    16: Status("distance_too_far", "invalid distance too far back"),
    17: Status("adler", "incorrect data check (Adler-32)"),
    18: Status("bad_range", "offsets that run backwards, or a stream too large to inflate here"),
    19: Status("beyond_window", "a distance beyond the window the zlib header names"),
    20: Status("output_long", "more data than the image needs"),
    21: Status("output_short", "less data than the image needs"),
    22: Status("trailing", "data after the end of the zlib stream"),
}
OK = 0
# Where zlib may accept the stream or not, as its caller feeds it: libpng inflates row by row
# with the window the header names, and may warn and go on where data is missing or left over.
CPU_DECIDES = frozenset({19, 20, 21, 22})


def module(device: int):
    """inflate.cu's kernel on ``device`` (:func:`edgecli.cuda.build.kernels_on`)."""
    from ...cuda.build import kernels_on  # imports CuPy, which tests/cuda_host.py does without

    return kernels_on(device, INFLATE_FILE, (KERNEL,))[KERNEL]


def reason(status: int) -> str:
    """The reason a stream's ``status`` gives, as a message names it."""
    known = STATUSES.get(int(status))
    return known.reason if known else f"unknown inflate status {int(status)}"


def offsets(sizes) -> np.ndarray:
    """The n + 1 start offsets (uint64) of n ranges of ``sizes`` bytes laid end to end."""
    starts = np.zeros(len(sizes) + 1, np.uint64)
    np.cumsum(np.asarray(sizes, np.uint64), out=starts[1:])
    return starts


def launch_inflate(kernel, src, src_start, dst, dst_start, status, *, stream=None) -> None:
    """Enqueue the inflation of n zlib streams: stream i is ``src[src_start[i]:src_start[i + 1]]``
    and must inflate to exactly ``dst[dst_start[i]:dst_start[i + 1]]``, which it writes (and
    nothing else); ``status[i]`` (int32) becomes :data:`OK` or another of :data:`STATUSES`.
    ``kernel`` is :func:`module`'s (or a host build's); the buffers are device arrays (uint8,
    uint64 offsets of n + 1 entries each). Asynchronous on ``stream``."""
    n = status.shape[0]
    if (
        src_start.shape != (n + 1,)
        or dst_start.shape != (n + 1,)
        or src_start.dtype != np.uint64
        or dst_start.dtype != np.uint64
        or status.dtype != np.int32
        or src.dtype != np.uint8
        or dst.dtype != np.uint8
    ):
        raise ValueError(
            f"inflate buffers do not fit {n} streams: offsets {src_start.shape} "
            f"{src_start.dtype} and {dst_start.shape} {dst_start.dtype}, status {status.dtype}, "
            f"src {src.dtype}, dst {dst.dtype}"
        )
    if n == 0:
        return
    kernel((n,), (THREADS,), (src, src_start, dst, dst_start, status, np.uint32(n)), stream=stream)


def pack_streams(streams) -> tuple[np.ndarray, np.ndarray]:
    """The zlib ``streams`` (bytes-like) end to end in one uint8 array, and their n + 1 start
    offsets: :func:`launch_inflate`'s ``src`` and ``src_start``."""
    starts = offsets([len(s) for s in streams])
    packed = np.frombuffer(b"".join(bytes(s) for s in streams), np.uint8)
    return packed, starts
