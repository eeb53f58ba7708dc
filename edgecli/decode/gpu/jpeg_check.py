"""``jpeg_check.cu``: the scans of a batch of JPEG files checked on the GPU, launched on a CuPy
stream, so that the CPU need not read every file's Huffman codes before the engines decode it.

A file's plan (``edgecli._native.jpeg_scan_plan``, made on the CPU as the file is read: its
markers walked up to its scan as libjpeg-turbo reads them, in microseconds) says where its one
scan starts, its MCUs and its Huffman tables. The kernel passes a file (:data:`CLEAN`) only
where libjpeg-turbo decodes that scan without a warning; any other status is no verdict, and
the file is then judged on the CPU as any other (``edgecli._native.jpeg_scan_damage``), which
also words its error. The kernel's header says why a pass is sound and how a scan is cut
between the lanes of a warp.

CuPy is imported only to load the kernel: tests/cuda_host.py stands a host build of the kernel
in for it, so :func:`launch_jpeg_check` runs on the CPU, arguments and all.
"""

from __future__ import annotations

import numpy as np

from .inflate import offsets

CHECK_FILE = "jpeg_check.cu"
KERNEL = "jpeg_check"
LANES = 32  # jpeg_check.cu's CHECK_LANES: a warp a file
# The size of a plan (_native.c's and jpeg_check.cu's struct check_plan).
PLAN_BYTES = 19624
CLEAN, BAD_PLAN, NO_EOI, NO_SYNC = 0, 1, 2, 4
# jpeg_check.cu's statuses: why a file was not passed (the CPU then judges it).
STATUSES = {
    0: "passed",
    1: "a plan that does not fit its file",
    2: "the first marker after the scan's start is not EOI",
    3: "bits that start no code of the table in use",
    4: "a lane never fell into step with the next",
    5: "the MCUs do not end in the data's last byte",
    6: "a file too large to check here",
}


def module(device: int):
    """jpeg_check.cu's kernel on ``device`` (:func:`edgecli.cuda.build.kernels_on`)."""
    from ...cuda.build import kernels_on  # imports CuPy, which tests/cuda_host.py does without

    return kernels_on(device, CHECK_FILE, (KERNEL,))[KERNEL]


def launch_jpeg_check(kernel, data, data_start, plans, status, *, stream=None) -> None:
    """Enqueue the check of n files: file i is ``data[data_start[i]:data_start[i + 1]]`` and
    its plan ``plans[i]`` (n rows of :data:`PLAN_BYTES`); ``status[i]`` (int32) becomes
    :data:`CLEAN` or another of :data:`STATUSES`. ``kernel`` is :func:`module`'s (or a host
    build's); the buffers are device arrays (uint8, uint64 offsets of n + 1 entries).
    Asynchronous on ``stream``."""
    n = status.shape[0]
    if (
        data_start.shape != (n + 1,)
        or data_start.dtype != np.uint64
        or plans.shape != (n, PLAN_BYTES)
        or plans.dtype != np.uint8
        or status.dtype != np.int32
        or data.dtype != np.uint8
    ):
        raise ValueError(
            f"JPEG check buffers do not fit {n} files: offsets {data_start.shape} "
            f"{data_start.dtype}, plans {plans.shape} {plans.dtype}, status {status.dtype}, "
            f"data {data.dtype}"
        )
    if n == 0:
        return
    args = (data, data_start, plans, np.uint64(PLAN_BYTES), status, np.uint32(n))
    kernel((n,), (LANES,), args, stream=stream)


def pack_files(files) -> tuple[np.ndarray, np.ndarray]:
    """The ``files`` (bytes-like) end to end in one uint8 array, and their n + 1 start
    offsets: :func:`launch_jpeg_check`'s ``data`` and ``data_start``."""
    starts = offsets([len(f) for f in files])
    packed = np.frombuffer(b"".join(bytes(f) for f in files), np.uint8)
    return packed, starts
