"""JPEG on the GPU: nvJPEG's batched decoder to planes, then ``jpeg_planes_to_bgr`` into a
slot, on a thread of its own; beside it, on the SMs, ``jpeg_check.cu`` checks the scans of the
files read with a plan, and those it does not pass are judged on the CPU."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import cupy
import numpy as np

from ... import native
from ...cuda.pinned import empty_pinned
from ..engines import keep_jpeg_decoder, take_jpeg_decoder
from ..jpeg_header import EncodedJpeg, scan_damage
from ..jpeg_planes import CHROMA_FACTORS, chroma_shape
from ..nvjpeg import NvjpegError
from . import jpeg_check
from .convert import launch_jpeg_to_bgr, module
from .inflate import offsets
from .slots import BatchDecoder, DeviceBatch, Slot, SlotRing

JPEG_ENGINE, JPEG_CUDA = "nvjpeg-hw", "nvjpeg-cuda"
# Files a decode call: enough to keep the engines busy; larger batches decode hardly faster
# and hold more memory.
JPEG_BATCH = 32

# Batches decoded ahead of the edge kernel, and the ring that holds them and those in flight.
JPEG_AHEAD = 2
JPEG_SLOTS = JPEG_AHEAD + 3
# An environment setting for benchmarks and diagnosis: "1" checks the JPEGs' scans on the GPU
# beside the engines (the C extension makes the plans) instead of on the CPU as each file is
# read. Off by default: its one measurement so far made whole runs slower, not faster.
SCAN_CHECK_ENV = "EDGECLI_GPU_SCAN_CHECK"


class JpegDecoder(BatchDecoder):
    """Decodes batches of JPEGs on one thread of its own (nvJPEG's state is not thread-safe,
    and one thread feeds the engines all they take: a second, with a decoder of its own, only
    contends with it)."""

    ahead = JPEG_AHEAD

    def __init__(self, device: int, backend: str, max_pixels: int):
        self.device, self.backend, self.max_pixels = device, backend, max_pixels
        self.name = JPEG_ENGINE if backend == "hardware" else JPEG_CUDA
        self.stop = threading.Event()  # set by close: a decode waiting for a slot gives up
        self.batch = JPEG_BATCH
        # Whether the reader plans files' scans for the check here (FrameReader._encoded).
        self.checks_scans = native.c is not None and os.environ.get(SCAN_CHECK_ENV) == "1"
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="edgecli-nvjpeg")
        # The checks' own thread: a batch's plans staged and checked while this decoder's
        # thread hands the batch to the engines (one at a time: they share staging).
        self.checks = ThreadPoolExecutor(1, thread_name_prefix="edgecli-jpeg-check")
        self.opened = self.executor.submit(self._open)

    def _open(self) -> None:
        cupy.cuda.Device(self.device).use()
        self.decoder = take_jpeg_decoder(self.backend, self.device)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.ring = SlotRing(JPEG_SLOTS, self.stop)
        module(self.device)
        if self.checks_scans:
            self.checker = jpeg_check.module(self.device)
            self.check_stream = cupy.cuda.Stream(non_blocking=True)
            self.check_scratch = Slot()  # the plans and statuses of the batch checked
            self.check_staging = empty_pinned(0)

    def _check(self, items: list[EncodedJpeg]) -> tuple[list[int], np.ndarray | None, float]:
        """The check of the scans of the ``items`` read with a plan: their indices, their
        statuses (None where there are none), and the milliseconds it took. Runs on the checks'
        thread."""
        planned = [i for i, item in enumerate(items) if item.plan is not None]
        if not planned:
            return planned, None, 0.0
        start = time.perf_counter()
        cupy.cuda.Device(self.device).use()
        n = len(planned)
        starts = offsets([len(items[i].plan) for i in planned])  # multiples of 8, as plans are
        head = 8 * (n + 1)
        total = head + int(starts[-1])
        if self.check_staging.size < total:
            self.check_staging = empty_pinned(max(total, 2 * self.check_staging.size))
        staged = self.check_staging[:total]
        staged[:head].view(np.uint64)[:] = starts
        for j, i in enumerate(planned):  # without the GIL: 32 plans are tens of megabytes
            plan = items[i].plan
            native.c.png_gather(plan, ((0, len(plan)),), staged[head + int(starts[j]) :])
        device = self.check_scratch.buffer("plans", total)
        status = self.check_scratch.buffer("status", 4 * n).view(np.int32)
        device.set(staged, stream=self.check_stream)
        jpeg_check.launch_jpeg_check(
            self.checker, device[head:], device[:head].view(np.uint64), status,
            stream=self.check_stream,
        )  # fmt: skip
        found = status.get(stream=self.check_stream)  # staging and scratch free again
        return planned, found, (time.perf_counter() - start) * 1e3

    def _decode(self, items: list[EncodedJpeg]) -> DeviceBatch:
        self.opened.result()
        header = items[0].header
        height, width, sampling = header.height, header.width, header.subsampling
        luma = height * width
        if sampling == "gray":
            factors, chroma = None, (0, 0)
        else:
            factors, chroma = CHROMA_FACTORS[sampling], chroma_shape(sampling, width, height)
        frame_bytes = luma + 2 * chroma[0] * chroma[1]
        n = len(items)
        out_h, out_w = (width, height) if header.orientation >= 5 else (height, width)
        slot = self.ring.take(self.stream)
        planes = slot.buffer("planes", n * frame_bytes)
        frames = slot.buffer("frames", n * out_h * out_w * 3).reshape(n, out_h, out_w, 3)
        started, ready = cupy.cuda.Event(), cupy.cuda.Event()
        started.record(self.stream)
        base = planes.data.ptr
        destinations = []
        for i in range(n):
            y = base + i * frame_bytes
            if factors is None:  # nvJPEG writes Y only; the chroma pointers stay unused
                destinations.append([(y, width)])
            else:
                cb = y + luma
                cr = cb + chroma[0] * chroma[1]
                destinations.append([(y, width), (cb, chroma[1]), (cr, chroma[1])])
        checking = self.checks.submit(self._check, items) if self.checks_scans else None
        try:
            self.decoder.decode([item.data for item in items], destinations, self.stream.ptr)
        except NvjpegError:
            # A file the engines refuse fails the whole call: the CPU decodes the batch
            # instead, each file as it would any other (its error, if any, is the CPU's).
            if checking is not None:
                checking.result()
            return self.finish(items, slot, frames, range(n), started, ready, self.stream)
        launch_jpeg_to_bgr(
            self.device, planes, frame_bytes, frames, height, width, factors,
            header.orientation, self.stream,
        )  # fmt: skip
        failed, also = [], {}
        if checking is not None:
            # A scan the check did not pass is judged here, as it would have been when read:
            # a whole one keeps the engines' frame; a damaged one goes to the CPU's decoder,
            # which refuses it in the same words, and so does one that only libjpeg-turbo
            # reads as cv2 does (LIBJPEG_ONLY), which it decodes.
            planned, found, also["scan_check"] = checking.result()
            if found is not None:
                unpassed = [planned[j] for j in np.flatnonzero(found != jpeg_check.CLEAN)]
                failed = [i for i in unpassed if scan_damage(items[i].data) is not None]
        return self.finish(items, slot, frames, failed, started, ready, self.stream, also)

    def close(self) -> None:
        self.stop.set()
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.checks.shutdown(wait=True, cancel_futures=True)
        if self.opened.done() and self.opened.exception() is None:
            keep_jpeg_decoder(self.decoder, self.backend, self.device)
