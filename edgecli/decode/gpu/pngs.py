"""PNG on the GPU: a batch's zlib streams inflated (``inflate.cu``), then unfiltered and
expanded to BGR (``png.cu``) into a slot, on threads of their own. A file either kernel does
not decode exactly goes to the CPU decoder, whose frame or error it then has: libpng's verdict
on a damaged stream depends on how it reads it (:mod:`edgecli.decode.png_layout`), so the
CPU's own decoder has the last word on every file the kernels do not pass."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import cupy
import numpy as np

from ...cuda.pinned import empty_pinned
from ..png_layout import PALETTE, EncodedPng, copy_streams
from . import inflate, png
from .slots import BatchDecoder, DeviceBatch, Slot, SlotRing

PNG_DECODER = "gpu-png"
# Files a batch. The inflate kernel gives each stream a block of its own, and a stream takes
# the better part of a second to inflate (deflate is sequential within it): the rate is the
# streams in flight over that time, so a launch must hold hundreds of them to fill the SMs.
PNG_BATCH = 128
# Decoding threads, each with a stream, slots and scratch of its own: while one waits for its
# batch's statuses (to send what the kernels did not decode to the CPU), the others pack and
# launch theirs, so PNG_THREADS batches are in flight on the GPU at once.
PNG_THREADS = 6
# A thread's slots: the batch it decodes and the one waiting for the edge kernel.
PNG_SLOTS = 2
# The share of the GPU's free memory (when the decoder opens) that the threads' slots and
# scratch may hold: a smaller GPU gets smaller batches, not an out-of-memory error.
PNG_MEMORY_SHARE = 0.25
# A 1080p frame's pixels: PNG_BATCH counts frames of that size (frames_a_batch).
FRAME_PIXELS = 1920 * 1080


class _ThreadState:
    """One decoding thread's stream, slots, device scratch (the zlib streams and what they
    inflate to, reused batch after batch: the thread's stream orders their uses) and pinned
    host buffers (:meth:`pinned`)."""

    def __init__(self, stop: threading.Event):
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.ring = SlotRing(PNG_SLOTS, stop)
        self.scratch = Slot()
        self.host: dict[str, np.ndarray] = {}

    def pinned(self, name: str, nbytes: int) -> np.ndarray:
        """The pinned buffer ``name``, grown to ``nbytes``: every copy between the host and
        the GPU goes through one, never through pageable memory, whose copies the driver
        makes in the calling thread and which held the other threads' launches back until
        they were done. Its last copy has completed: the thread waits for each batch before
        it takes the next."""
        held = self.host.get(name)
        if held is None or held.size < nbytes:
            size = max(nbytes, 2 * (0 if held is None else held.size))
            held = self.host[name] = empty_pinned(size)
        return held[:nbytes]


def batch_pixels(free_bytes: int) -> int:
    """Pixels a batch may hold so that every thread's slots and scratch (the inflated rows, a
    little over 3 bytes a pixel, and the zlib streams, at most about as much) fit in
    PNG_MEMORY_SHARE of ``free_bytes``: at most PNG_BATCH 1080p frames, at least one."""
    bytes_a_pixel = 3 * (PNG_SLOTS + 2) + 1  # BGR slots, inflated rows and streams, filter bytes
    fitting = int(free_bytes * PNG_MEMORY_SHARE) // (PNG_THREADS * bytes_a_pixel)
    return max(1, min(PNG_BATCH * FRAME_PIXELS, fitting))


class PngDecoder(BatchDecoder):
    """Decodes batches of PNGs of one layout on :data:`PNG_THREADS` threads."""

    timed = ("png", "gpu_decode")
    ahead = PNG_THREADS

    def __init__(self, device: int, max_pixels: int):
        self.device, self.max_pixels = device, max_pixels
        self.name = PNG_DECODER
        self.stop = threading.Event()  # set by close: a decode waiting for a slot gives up
        self.batch = PNG_BATCH
        self.local = threading.local()
        self.executor = ThreadPoolExecutor(PNG_THREADS, thread_name_prefix="edgecli-png")
        self.opened = self.executor.submit(self._open)

    def _open(self) -> None:
        cupy.cuda.Device(self.device).use()
        self.kernels = (inflate.module(self.device), png.kernel(self.device))
        self.batch_pixels = batch_pixels(cupy.cuda.runtime.memGetInfo()[0])

    def _state(self) -> _ThreadState:
        state = getattr(self.local, "state", None)
        if state is None:
            cupy.cuda.Device(self.device).use()
            state = self.local.state = _ThreadState(self.stop)
        return state

    def _decode(self, items: list[EncodedPng]) -> DeviceBatch:
        try:
            return self._decode_batch(items)
        finally:  # the CPU decoded those the GPU did not: the files' bytes are spent
            for item in items:
                item.release()

    def _decode_batch(self, items: list[EncodedPng]) -> DeviceBatch:
        self.opened.result()
        state, (inflater, unfilter) = self._state(), self.kernels
        stream, layout, n = state.stream, items[0].header, len(items)
        image_bytes = layout.inflated_size
        out_h, out_w = layout.height, layout.width
        if layout.orientation >= 5:  # turned a quarter: the frame is the image transposed
            out_h, out_w = out_w, out_h
        offsets = state.pinned("offsets", 2 * (n + 1) * 8).view(np.uint64)
        offsets[: n + 1] = inflate.offsets([item.header.stream_size for item in items])
        offsets[n + 1 :] = np.arange(n + 1, dtype=np.uint64) * np.uint64(image_bytes)
        staged = state.pinned("streams", int(offsets[n]))
        places = zip(items, offsets[:n].tolist(), strict=True)
        copy_streams([(item.data, item.header, at) for item, at in places], staged)
        palettes = None
        if layout.colour_type == PALETTE:
            tables = state.pinned("palettes", n * 256 * 3).reshape(n, 256, 3)
            for i, item in enumerate(items):
                tables[i] = item.header.palette_table()
            palettes = state.scratch.buffer("palettes", tables.nbytes).reshape(n, 256, 3)
        slot = state.ring.take(stream)
        src = state.scratch.buffer("src", staged.size)
        starts = state.scratch.buffer("offsets", offsets.nbytes).view(np.uint64)
        inflated = state.scratch.buffer("inflated", n * image_bytes)
        frames = slot.buffer("frames", n * out_h * out_w * 3).reshape(n, out_h, out_w, 3)
        statuses = slot.buffer("statuses", 2 * n * 4).view(np.int32)
        started, ready = cupy.cuda.Event(), cupy.cuda.Event()
        started.record(stream)
        src.set(staged, stream=stream)
        starts.set(offsets, stream=stream)
        if palettes is not None:
            palettes.set(tables, stream=stream)
        inflate.launch_inflate(
            inflater, src, starts[: n + 1], inflated, starts[n + 1 :], statuses[:n], stream=stream
        )
        png.launch_png_to_bgr(
            unfilter, inflated, image_bytes, frames, statuses[n:], color_type=layout.colour_type,
            depth=layout.bit_depth, palettes=palettes, orientation=layout.orientation,
            stream=stream,
        )  # fmt: skip
        found = state.pinned("statuses", statuses.nbytes).view(np.int32)
        statuses.get(stream=stream, out=found, blocking=False)
        stream.synchronize()  # the batch is decoded: the CPU takes what it did not decode
        failed = np.flatnonzero((found[:n] != inflate.OK) | (found[n:] != 0)).tolist()
        return self.finish(items, slot, frames, failed, started, ready, stream)

    def close(self) -> None:
        self.stop.set()
        self.executor.shutdown(wait=True, cancel_futures=True)
