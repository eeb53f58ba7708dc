"""``jpeg_check.cu``: the scans of a batch of JPEG files checked on the GPU, launched on a CuPy
stream, so that the CPU need not read every file's Huffman codes before the engines decode it.

A file's plan (``edgecli._native.jpeg_scan_plan``, made on the CPU as the file is read: its
markers walked up to its scan as libjpeg-turbo reads them, then the scan's data copied without
its stuffed zeros and restart markers, a fraction of a millisecond) holds its one scan's MCUs,
Huffman tables, restart intervals and data. The kernel passes a file (:data:`CLEAN`) only
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
# The size of a plan's header and tables (_native.c's and jpeg_check.cu's struct check_plan),
# which the restart intervals' offsets and the scan's data follow.
PLAN_BYTES = 19632
CLEAN, BAD_PLAN, BAD_CODE, NO_SYNC, MCUS = 0, 1, 2, 3, 4
# jpeg_check.cu's statuses: why a file was not passed (the CPU then judges it).
STATUSES = {
    CLEAN: "passed",
    BAD_PLAN: "a plan no file makes",
    BAD_CODE: "bits that start no code of the table in use",
    NO_SYNC: "a lane never fell into step with the next",
    MCUS: "the MCUs do not end in the data's last byte",
}


def module(device: int):
    """jpeg_check.cu's kernel on ``device`` (:func:`edgecli.cuda.build.kernels_on`)."""
    from ...cuda.build import kernels_on  # imports CuPy, which tests/cuda_host.py does without

    return kernels_on(device, CHECK_FILE, (KERNEL,))[KERNEL]


def launch_jpeg_check(kernel, plans, plan_start, status, *, stream=None) -> None:
    """Enqueue the check of n files' scans: file i's plan is
    ``plans[plan_start[i]:plan_start[i + 1]]`` (``jpeg_scan_plan``'s bytes, each starting at a
    multiple of 8); ``status[i]`` (int32) becomes :data:`CLEAN` or another of
    :data:`STATUSES`. ``kernel`` is :func:`module`'s (or a host build's); the buffers are
    device arrays (uint8, and uint64 offsets of n + 1 entries). Asynchronous on ``stream``."""
    n = status.shape[0]
    if (
        plan_start.shape != (n + 1,)
        or plan_start.dtype != np.uint64
        or plans.dtype != np.uint8
        or status.dtype != np.int32
    ):
        raise ValueError(
            f"JPEG check buffers do not fit {n} files: offsets {plan_start.shape} "
            f"{plan_start.dtype}, plans {plans.dtype}, status {status.dtype}"
        )
    if n == 0:
        return
    kernel((n,), (LANES,), (plans, plan_start, status, np.uint32(n)), stream=stream)


def pack_plans(plans) -> tuple[np.ndarray, np.ndarray]:
    """The ``plans`` (bytes, each a multiple of 8 long) end to end in one uint8 array, and
    their n + 1 start offsets: :func:`launch_jpeg_check`'s ``plans`` and ``plan_start``."""
    starts = offsets([len(p) for p in plans])
    return np.frombuffer(b"".join(plans), np.uint8), starts
