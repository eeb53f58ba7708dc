"""JPEG on the GPU: nvJPEG's batched decoder to planes, then ``jpeg_planes_to_bgr`` into a
slot, on a thread of its own."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import cupy

from ..engines import keep_jpeg_decoder, take_jpeg_decoder
from ..jpeg_header import EncodedJpeg
from ..jpeg_planes import CHROMA_FACTORS, chroma_shape
from ..nvjpeg import NvjpegError
from .convert import launch_jpeg_to_bgr, module
from .slots import BatchDecoder, DeviceBatch, SlotRing

JPEG_ENGINE, JPEG_CUDA = "nvjpeg-hw", "nvjpeg-cuda"
# Files a decode call: enough to keep the engines busy; larger batches decode hardly faster
# and hold more memory.
JPEG_BATCH = 32

# Batches decoded ahead of the edge kernel, and the ring that holds them and those in flight.
JPEG_AHEAD = 2
JPEG_SLOTS = JPEG_AHEAD + 3


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
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="edgecli-nvjpeg")
        self.opened = self.executor.submit(self._open)

    def _open(self) -> None:
        cupy.cuda.Device(self.device).use()
        self.decoder = take_jpeg_decoder(self.backend, self.device)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.ring = SlotRing(JPEG_SLOTS, self.stop)
        module(self.device)

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
        try:
            self.decoder.decode([item.data for item in items], destinations, self.stream.ptr)
        except NvjpegError:
            # A file the engines refuse fails the whole call: the CPU decodes the batch
            # instead, each file as it would any other (its error, if any, is the CPU's).
            return self.finish(items, slot, frames, range(n), started, ready, self.stream)
        launch_jpeg_to_bgr(
            self.device, planes, frame_bytes, frames, height, width, factors,
            header.orientation, self.stream,
        )  # fmt: skip
        return self.finish(items, slot, frames, [], started, ready, self.stream)

    def close(self) -> None:
        self.stop.set()
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self.opened.done() and self.opened.exception() is None:
            keep_jpeg_decoder(self.decoder, self.backend, self.device)
