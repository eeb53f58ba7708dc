"""1-bit PNGs compressed on the GPU: ``deflate.cu``'s zlib streams, byte for byte zlib's.

Most of the worker threads' share of a PNG is zlib's; with this, the GPU hands them each frame's
zlib stream, and they only add the PNG chunks and write. The kernel follows zlib's own choices
(``deflate.cu`` says how), so the PNGs are the bytes the CPU path writes; :func:`deflater` checks
that on the device at hand, once a process, against the host's own encoder (``edgecli.output.png``)
before the pipeline uses it: where they differ (another zlib, such as zlib-ng), the host compresses
as before.

A frame whose rows zlib might store rather than code (incompressible rows: ``deflate.cu``) comes
back without a stream, and the host compresses it. Imports CuPy.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import cupy
import numpy as np

from ..cuda.build import compute_capability, load_kernels
from ..errors import KernelBuildError
from ..output.png import png_from_rows_1bit, png_from_zlib_1bit
from .variants import (
    DEFLATE_BLOCK_BYTES,
    DEFLATE_FILE,
    DEFLATE_KERNEL,
    DEFLATE_THREADS,
    deflate_blocks_for,
    deflate_out_bytes,
)


@dataclass(frozen=True)
class Deflater:
    """The loaded kernel of one device."""

    function: cupy.RawKernel
    device: int

    def launch(self, rows_dev, out_dev, sizes_dev, blocks_dev, stream) -> None:
        """Enqueue the zlib streams of ``rows_dev`` (N, H, row bytes) uint8 into ``out_dev``
        (N, deflate_out_bytes) uint8, their lengths (or -1: the host compresses that frame)
        into ``sizes_dev`` (N,) int64, with ``blocks_dev`` (N * deflate_blocks_for *
        DEFLATE_BLOCK_BYTES) uint8 of scratch, on ``stream``. Asynchronous."""
        n_frames = rows_dev.shape[0]
        frame_bytes = rows_dev[0].size if n_frames else 0
        if n_frames == 0 or frame_bytes == 0:
            return
        if (
            out_dev.shape != (n_frames, deflate_out_bytes(frame_bytes))
            or sizes_dev.shape != (n_frames,)
            or sizes_dev.dtype != np.int64
            or blocks_dev.size < n_frames * deflate_blocks_for(frame_bytes) * DEFLATE_BLOCK_BYTES
            or not (rows_dev.flags.c_contiguous and out_dev.flags.c_contiguous)
        ):
            raise ValueError(
                f"deflate buffers do not fit {n_frames} frames of {frame_bytes} bytes: "
                f"out {out_dev.shape}, sizes {sizes_dev.shape} {sizes_dev.dtype}, "
                f"scratch {blocks_dev.size} bytes"
            )
        args = (
            rows_dev,
            np.int64(frame_bytes),
            out_dev,
            np.int64(deflate_out_bytes(frame_bytes) // 4),
            sizes_dev,
            blocks_dev,
            np.int32(deflate_blocks_for(frame_bytes)),
        )
        with cupy.cuda.Device(self.device):
            self.function((n_frames,), (DEFLATE_THREADS,), args, stream=stream)

    def compress(self, rows: np.ndarray) -> list[bytes | None]:
        """The zlib streams of host ``rows`` (N, H, row bytes), None where the host must
        compress: synchronous, for checks and tests."""
        n_frames = rows.shape[0]
        size = deflate_out_bytes(rows[0].size)
        with cupy.cuda.Device(self.device):
            stream = cupy.cuda.Stream(non_blocking=True)
            # The copy and the poison on the launch's own stream: a non-blocking stream does
            # not wait for the default one, where they would still be running when the kernel
            # starts (the poison landing on its zeroed output, the rows half copied).
            with stream:
                rows_dev = cupy.asarray(np.ascontiguousarray(rows))
                out_dev = cupy.full((n_frames, size), 0xA5, np.uint8)  # zeroed by the kernel
                sizes_dev = cupy.full(n_frames, -7, np.int64)
                blocks_dev = cupy.empty(
                    n_frames * deflate_blocks_for(rows[0].size) * DEFLATE_BLOCK_BYTES, np.uint8
                )
                self.launch(rows_dev, out_dev, sizes_dev, blocks_dev, stream)
                out, sizes = out_dev.get(stream=stream), sizes_dev.get(stream=stream)
        return [None if s < 0 else out[i, :s].tobytes() for i, s in enumerate(sizes)]


def _load(device: int) -> Deflater:
    major, minor = compute_capability(device)
    with cupy.cuda.Device(device):
        (function,), _ = load_kernels(DEFLATE_FILE, (DEFLATE_KERNEL,), (), 10 * major + minor)
    return Deflater(function, device)


def check_rows() -> tuple[np.ndarray, int]:
    """Scanlines the check compresses: (4, 300, 241) uint8 of a 1920-pixel-wide 1-bit PNG:
    sparse, denser and evenly spaced bits, each frame with a band of ones (long matches)."""
    rng = np.random.default_rng(20261201)
    width, height = 1920, 300
    frames = []
    for density in (0.002, 0.05, 0.3):
        bits = rng.random((height, width)) < density
        bits[height // 3 : height // 2] = True  # a band of ones: matches of 258
        frames.append(bits)
    skewed = np.zeros((height, width), bool)
    skewed[:, ::7] = rng.random((height, (width + 6) // 7)) < 0.9
    frames.append(skewed)
    rows = np.zeros((len(frames), height, 1 + width // 8), np.uint8)
    rows[:, :, 1:] = np.packbits(np.array(frames), axis=2)
    return rows, width


# An environment setting for benchmarks and diagnosis: "0" keeps PNG compression on the host.
DEFLATE_ENV = "EDGECLI_GPU_DEFLATE"

_checks: dict[int, tuple[Deflater | None, str]] = {}
_lock = threading.Lock()


def deflater(device: int) -> Deflater | None:
    """The GPU's deflate for ``device`` once it has given the host encoder's PNGs byte for byte
    (:func:`check_rows`), else None: compiled once a machine, checked once a process."""
    return _checked(device)[0]


def description(device: int) -> str:
    """What ``edgecli info`` says of the PNG compression of a run on ``device``."""
    loaded, why = _checked(device)
    return "GPU, zlib's bytes (checked on this device)" if loaded else f"CPU ({why})"


def _checked(device: int) -> tuple[Deflater | None, str]:
    with _lock:
        if device not in _checks:
            _checks[device] = _check(device)
        return _checks[device]


def _check(device: int) -> tuple[Deflater | None, str]:
    if os.environ.get(DEFLATE_ENV, "").strip() == "0":
        return None, f"{DEFLATE_ENV}=0"
    try:
        loaded = _load(device)
    except KernelBuildError as exc:  # NVRTC cannot build it here: the host compresses
        return None, f"deflate.cu does not build here: {exc}".splitlines()[0]
    rows, width = check_rows()
    streams = loaded.compress(rows)
    for frame, stream in zip(rows, streams, strict=True):
        # Every check frame compresses well: none may come back for the host to do.
        if stream is None or png_from_zlib_1bit(stream, width, frame.shape[0]) != (
            png_from_rows_1bit(frame, width)
        ):
            return None, "the GPU's zlib streams differ from this host's zlib"
    return loaded, ""
