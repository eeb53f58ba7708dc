"""Decoded batches, and the ring of device buffers each decoder decodes into: GPU memory
bounded by the options, never by the number of files.
"""

from __future__ import annotations

import threading

import cupy
import numpy as np

from ...errors import FrameError, GpuMemoryError
from ..cpu import decode_image

# What a batch's frames were decoded by, in the summary's ``decoders``, besides the GPU's own.
CPU = "cpu"
# At most this many pixels a batch (32 1080p frames), so a ring of larger frames (8K, say)
# holds as much GPU memory as one of 1080p frames, not 16 times as much.
BATCH_PIXELS = 32 * 1920 * 1080


def frames_a_batch(most: int, pixels: int, batch_pixels: int = BATCH_PIXELS) -> int:
    """Frames of ``pixels`` each a decoded batch holds: ``most``, fewer past
    ``batch_pixels``."""
    return max(1, min(most, batch_pixels // max(pixels, 1)))


def upload(frames: cupy.ndarray, pixels: list[np.ndarray], stream: cupy.cuda.Stream) -> None:
    """CPU-decoded ``pixels`` into ``frames[:len(pixels)]`` on ``stream``, done when it
    returns (the copies from pageable memory have read them)."""
    for i, image in enumerate(pixels):
        frames[i].set(image, stream=stream)
    stream.synchronize()


class Stopped(Exception):
    """The run ended while a decoder waited for a buffer."""


class Slot:
    """Device buffers for one decoded batch, reused in turn. ``free`` is set once the batch
    decoded into it last was handed to the edge kernel (or dropped); ``consumed`` is the CUDA
    event after that kernel, which a decoder's stream waits on before writing here again, so
    no thread ever waits for the GPU to reuse a slot."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self.free.set()
        self.consumed = cupy.cuda.Event(disable_timing=True)
        self.buffers: dict[str, cupy.ndarray] = {}

    def buffer(self, name: str, nbytes: int) -> cupy.ndarray:
        """The slot's buffer ``name``, grown to ``nbytes`` (a fresh allocation: aligned)."""
        held = self.buffers.get(name)
        if held is None or held.size < nbytes:
            self.buffers.pop(name, None)  # freed before the larger one is allocated
            try:
                held = self.buffers[name] = cupy.empty(max(nbytes, 1), dtype=np.uint8)
            except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError) as exc:
                raise GpuMemoryError(
                    f"cannot allocate {nbytes / 1e6:.0f} MB of GPU memory for decoded frames "
                    f"({exc}); use --decode cpu, or free the GPU"
                ) from None
        return held[:nbytes]


class SlotRing:
    """``size`` slots used in turn by one decoder: GPU memory bounded by the options, never
    by the number of files."""

    def __init__(self, size: int, stop: threading.Event):
        self.slots = [Slot() for _ in range(size)]
        self.turn = 0
        self.stop = stop

    def take(self, stream: cupy.cuda.Stream) -> Slot:
        slot = self.slots[self.turn]
        self.turn = (self.turn + 1) % len(self.slots)
        while not slot.free.wait(0.05):
            if self.stop.is_set():
                raise Stopped
        slot.free.clear()
        stream.wait_event(slot.consumed)  # the kernel that read it last has run
        return slot


class BatchDecoder:
    """What the reader asks of a GPU decoder of still images, on top of the ``opened`` Future
    of its opening, its ``executor``, its ``batch`` size and its ``_decode`` of one batch; and
    how a batch is finished (:meth:`finish`), in the resource it occupies (``timed``)."""

    timed = ("jpeg", "gpu_decode")
    # Batches the run may have submitted and not yet taken (each decoder's own: enough to keep
    # its threads busy while the oldest goes to the edge kernel, and what its ring holds).
    ahead: int
    # At most this many pixels a batch (frames_a_batch).
    batch_pixels = BATCH_PIXELS

    def ready(self) -> bool:
        """Whether the decoder is open, never waiting (until it is, its files go to the CPU)."""
        return self.opened.done() and self.opened.exception() is None

    def failure(self) -> str | None:
        """Why the decoder could not open, once that is known; else None."""
        if not self.opened.done() or self.opened.exception() is None:
            return None
        return str(self.opened.exception())

    def batch_for(self, header) -> int:
        """Files a batch of ``header``'s size holds: ``batch``, fewer for large frames."""
        return frames_a_batch(self.batch, header.width * header.height, self.batch_pixels)

    def submit(self, items: list):
        """A Future of the DeviceBatch of ``items`` (which share a key), saying in ``ahead``
        how many such batches the run may hold submitted (:attr:`ahead`)."""
        future = self.executor.submit(self._decode, items)
        future.ahead = self.ahead
        return future

    def cpu_frame(self, item, shape: tuple) -> np.ndarray:
        """``item`` decoded by the CPU decoder, for a batch of frames of ``shape``: its
        frame, or FrameError saying why not (its own error, or a shape its header belied)."""
        pixels = decode_image(item.path, item.data, self.max_pixels)
        if pixels.shape != shape:
            raise FrameError(item.source, f"decoded as {pixels.shape}, its header says {shape}")
        return pixels

    def finish(self, items, slot, frames, failed, started, ready, stream) -> DeviceBatch:
        """The DeviceBatch of ``items`` decoded into ``frames`` on ``stream``, the files at the
        indices in ``failed`` (which the GPU did not decode) decoded by the CPU into their
        places, and those it cannot decode dropped, the frames after them moved up."""
        names, sources, errors, kept = [], [], [], 0
        failed = set(failed)
        for i, item in enumerate(items):
            if i in failed:
                try:
                    pixels = self.cpu_frame(item, frames.shape[1:])
                except FrameError as exc:
                    errors.append(exc)
                    continue
                frames[kept].set(pixels, stream=stream)
            elif kept != i:
                with stream:
                    cupy.copyto(frames[kept], frames[i])
            names.append(item.out_name)
            sources.append(item.source)
            kept += 1
        ready.record(stream)
        if failed:
            stream.synchronize()  # the copies from pageable memory have read the CPU's frames
        on_cpu = len(failed) - len(errors)
        decoders = {name: count for name, count in ((self.name, kept - on_cpu), (CPU, on_cpu))
                    if count}  # fmt: skip
        return DeviceBatch(names, sources, frames[:kept], ready, slot, decoders, errors, started,
                           timed=self.timed)  # fmt: skip


class DeviceBatch:
    """Frames decoded on the GPU into a slot: ``frames`` (n, H, W, 3) BGR, valid on the device
    once ``ready`` has fired. ``errors``: files of the batch that could not be decoded
    (FrameError, each as the CPU decoder words it); ``decoders``: frames per decoder;
    ``timed``: the resource its decode occupied for :meth:`decode_ms`, and as what stage."""

    def __init__(self, names, sources, frames, ready, slot, decoders, errors=(), started=None,
                 decode_ms=None, timed=("jpeg", "gpu_decode")):  # fmt: skip
        self.names, self.sources, self.frames = names, sources, frames
        self.ready, self.slot, self.decoders = ready, slot, decoders
        self.errors = list(errors)
        self.started = started  # a CUDA event before the decode, for its time
        self._decode_ms = decode_ms
        self.timed = timed

    def decode_ms(self) -> float:
        """Milliseconds the batch took to decode (once it is ready)."""
        if self._decode_ms is None:
            self._decode_ms = cupy.cuda.get_elapsed_time(self.started, self.ready)
        return self._decode_ms

    def consumed(self, stream: cupy.cuda.Stream) -> None:
        """Called once the edge kernel that reads the frames is enqueued on ``stream``."""
        self.slot.consumed.record(stream)
        self.slot.free.set()

    def discard(self) -> None:
        """Give the slot back unread."""
        self.slot.free.set()

    def result(self) -> DeviceBatch:
        return self
