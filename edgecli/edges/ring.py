"""The CUDA side of the pipeline: a ring of slabs, each with pinned buffers and a stream.

Where the bytes go, per batch:

    main thread:   takes the next slab for a batch (``SlabRing.fill``)
    worker:        each decoded frame -> its place in the slab's pinned input, as soon as the
                   main thread has it (a task per frame, in parallel; the pipeline does this)
    main thread:   one async H2D of the whole batch into the slab's device buffer; the kernel
                   (for 1-bit PNGs, then the packing of its rows into PNG scanlines and, where
                   the GPU's deflate is checked, their zlib streams); async D2H into the
                   slab's pinned output -- all on the slab's stream, with CUDA events between
                   the stages (they time them, and say when they are done)
    encode worker: PNG straight from the slab's pinned output (its zlib stream wrapped in the
                   PNG's chunks, or its rows compressed); the last one releases the slab

So the host-side work that scales with pixels runs on worker threads, and the main thread
makes a handful of CUDA calls per batch: each one gives up the GIL and has to win it back
from busy workers. Imports CuPy: only :mod:`edgecli.edges.cuda_backend` imports this module.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import cupy as cp
import numpy as np

from ..cuda.pinned import empty_pinned
from ..errors import GpuMemoryError
from ..output.png import PackedEdges, png_row_bytes_1bit
from .cuda_deflate import Deflater
from .variants import DEFLATE_BLOCK_BYTES, deflate_blocks_for, deflate_out_bytes


def _allocation_error(what: str, nbytes: int, exc: Exception) -> GpuMemoryError:
    return GpuMemoryError(
        f"cannot allocate {nbytes / 1e6:.0f} MB of {what} ({exc}); "
        "use a smaller --batch or fewer --streams"
    )


class Slab:
    """Pinned input and output buffers and device buffers for one batch, the stream that uses
    them, and the events that mark its stages. Buffers grow to the largest batch asked for.

    ``packed``: the host gets the edge maps as 1-bit PNG scanlines, packed on the device after
    the kernel (an eighth of the bytes to copy back, and nothing for the encoders to pack);
    else as the edge maps themselves. ``deflate`` (packed slabs only): the scanlines' zlib
    streams too, compressed on the device. ``work_bytes``: bytes a pixel of device work space
    the kernel needs (the Canny kernels' labels), held with the edge maps and reused: the
    slab's stream orders one batch's use of it before the next's."""

    def __init__(self, packed: bool = False, deflate: Deflater | None = None, work_bytes: int = 0):
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.packed = packed
        self.deflate = deflate if packed else None
        self.work_bytes = work_bytes
        # What the deflate buffers hold: bytes of zlib streams, bytes of scratch, frames.
        self.zlib_capacity = (0, 0, 0)
        self.capacity = 0  # pixels (frames x height x width) the edge buffer holds
        self.input_capacity = 0  # pixels the input buffers (host frames) hold
        self.out_capacity = 0  # bytes the output buffers hold
        # ``rows_ready``: after the kernel (and the packing), before the deflate, which the
        # summary counts as compression, not as the kernel.
        self.started, self.uploaded, self.rows_ready, self.computed, self.downloaded = (
            cp.cuda.Event() for _ in range(5)
        )
        # Set while no one reads out_pinned; cleared from fill() until release().
        self.free = threading.Event()
        self.free.set()

    def _reserve(self, pixels: int, out_bytes: int, host_input: bool) -> None:
        try:
            if pixels > self.capacity:
                self.edges_dev = self.work_dev = None
                self.edges_dev = cp.empty(pixels, dtype=np.uint8)
                if self.work_bytes:
                    self.work_dev = cp.empty(pixels * self.work_bytes, dtype=np.uint8)
                self.capacity = pixels
            if host_input and pixels > self.input_capacity:
                # Frames decoded on the GPU come in buffers of their own: only frames from
                # the host need these.
                self.frames_pinned = self.frames_dev = None
                self.frames_pinned = empty_pinned(pixels * 3)
                self.frames_dev = cp.empty(pixels * 3, dtype=np.uint8)
                self.input_capacity = pixels
            if out_bytes > self.out_capacity:
                self.out_pinned = empty_pinned(out_bytes)
                if self.packed:
                    self.rows_dev = cp.empty(out_bytes, dtype=np.uint8)
                self.out_capacity = out_bytes
        except (cp.cuda.memory.OutOfMemoryError, cp.cuda.runtime.CUDARuntimeError) as exc:
            # Frames pinned and on the device, edge maps (and work space) on the device; the
            # output pinned, and packed rows on the device.
            wanted = pixels * (7 + self.work_bytes) + out_bytes * (2 if self.packed else 1)
            raise _allocation_error("GPU and pinned memory for a batch", wanted, exc) from None

    def _reserve_deflate(self, frames: int, frame_bytes: int) -> None:
        """Room for ``frames`` zlib streams of frames of ``frame_bytes``: on the device, with the
        kernel's scratch, and pinned; their lengths on both sides."""
        wanted = (
            frames * deflate_out_bytes(frame_bytes),
            frames * deflate_blocks_for(frame_bytes) * DEFLATE_BLOCK_BYTES,
            frames,
        )
        if all(w <= c for w, c in zip(wanted, self.zlib_capacity, strict=True)):
            return
        wanted = tuple(max(w, c) for w, c in zip(wanted, self.zlib_capacity, strict=True))
        streams, scratch, frames = wanted
        try:
            self.zlib_dev = self.zlib_pinned = self.blocks_dev = None
            self.zlib_dev = cp.empty(streams, dtype=np.uint8)
            self.zlib_pinned = empty_pinned(streams)
            self.blocks_dev = cp.empty(scratch, dtype=np.uint8)
            self.sizes_dev = cp.empty(frames, dtype=np.int64)
            self.sizes_pinned = empty_pinned(frames * 8).view(np.int64)
            self.zlib_capacity = wanted
        except (cp.cuda.memory.OutOfMemoryError, cp.cuda.runtime.CUDARuntimeError) as exc:
            self.zlib_capacity = (0, 0, 0)
            raise _allocation_error(
                "GPU and pinned memory for a batch's PNG compression", 2 * streams + scratch, exc
            ) from None

    def fill(
        self, shape: tuple[int, ...], capacity: int, device: int, launch, pack,
        host_input: bool = True,
    ) -> Filling:  # fmt: skip
        """This slab, once the encoders of its previous batch are done with it, for a batch
        of up to ``capacity`` frames of ``shape`` (H, W, 3); without ``host_input``, for
        frames already on the device (:meth:`Filling.submit_device`)."""
        self.free.wait()
        self.free.clear()
        h, w = shape[:2]
        self._reserve(capacity * h * w, capacity * h * out_row_bytes(w, self.packed), host_input)
        if self.deflate is not None:
            self._reserve_deflate(capacity, h * out_row_bytes(w, True))
        # The previous batch's upload from frames_pinned is done: its result was collected
        # before the slab was freed.
        inputs = None
        if host_input:
            inputs = self.frames_pinned[: capacity * h * w * 3].reshape(capacity, h, w, 3)
        return Filling(self, inputs, device, launch, pack, (capacity, h, w))


def out_row_bytes(width: int, packed: bool) -> int:
    """Bytes of one row of a slab's output: a 1-bit PNG scanline (a filter byte, then
    ceil(width / 8) bytes of bits) or an edge map's row."""
    return png_row_bytes_1bit(width) if packed else width


class Filling:
    """A batch being put together in a slab: the caller copies its frames into ``inputs``
    (pinned memory; from any thread), then submits the first n of them."""

    def __init__(self, slab: Slab, inputs, device: int, launch, pack, shape):
        self.slab, self.inputs, self.device = slab, inputs, device
        self.launch, self.pack = launch, pack
        self.shape = shape  # (frames, H, W) the slab was filled for

    def submit(self, n: int) -> InFlight:
        """Queue the upload of ``inputs[:n]``, the kernel (and the packing) and the download on
        the slab's stream. The copies into those inputs must be done."""
        h, w = self.shape[1:]
        # A prefix slice of a fresh allocation: 16-byte aligned, as the kernel requires.
        frames_dev = self.slab.frames_dev[: n * h * w * 3].reshape(n, h, w, 3)
        return self._submit(n, frames_dev, upload=self.inputs[:n])

    def submit_device(self, frames_dev, ready, then=None) -> InFlight:
        """Queue the kernel (and the packing) and the download of frames already on the
        device, once the CUDA event ``ready`` has fired; ``then(stream)`` is called once the
        kernel that reads them is enqueued on the slab's stream."""
        return self._submit(len(frames_dev), frames_dev, ready=ready, then=then)

    def _submit(self, n: int, frames_dev, upload=None, ready=None, then=None) -> InFlight:
        if not 1 <= n <= self.shape[0]:
            raise ValueError(f"a batch of {n} frames in a slab filled for {self.shape[0]}")
        slab = self.slab
        h, w = self.shape[1:]
        edges_dev = slab.edges_dev[: n * h * w].reshape(n, h, w)
        row_bytes = out_row_bytes(w, slab.packed)
        out_pinned = slab.out_pinned[: n * h * row_bytes].reshape(n, h, row_bytes)
        out_dev = (
            slab.rows_dev[: n * h * row_bytes].reshape(n, h, row_bytes)
            if slab.packed
            else edges_dev
        )
        with cp.cuda.Device(self.device):
            if ready is not None:
                slab.stream.wait_event(ready)
            slab.started.record(slab.stream)
            if upload is not None:
                frames_dev.set(upload, stream=slab.stream)  # one async copy, from pinned
            slab.uploaded.record(slab.stream)
            if slab.work_bytes:
                work_dev = slab.work_dev[: n * h * w * slab.work_bytes]
                self.launch(frames_dev, edges_dev, slab.stream, work_dev)
            else:
                self.launch(frames_dev, edges_dev, slab.stream)
            if then is not None:
                then(slab.stream)
            if slab.packed:
                self.pack(edges_dev, out_dev, slab.stream)
            slab.rows_ready.record(slab.stream)
            streams = None
            if slab.deflate is not None:
                size = deflate_out_bytes(h * row_bytes)
                zlib_dev = slab.zlib_dev[: n * size].reshape(n, size)
                sizes_dev = slab.sizes_dev[:n]
                slab.deflate.launch(out_dev, zlib_dev, sizes_dev, slab.blocks_dev, slab.stream)
                streams = (slab.zlib_pinned[: n * size].reshape(n, size), slab.sizes_pinned[:n])
            slab.computed.record(slab.stream)
            # Into pinned memory, on the slab's stream, without waiting: CuPy's get waits for
            # its stream unless told not to (blocking, CuPy 13+), which held the main thread
            # on every batch's kernel, deflate and copies; result() waits for them instead.
            out_dev.get(stream=slab.stream, out=out_pinned, blocking=False)
            if streams is not None:
                zlib_dev.get(stream=slab.stream, out=streams[0], blocking=False)
                sizes_dev.get(stream=slab.stream, out=streams[1], blocking=False)
            slab.downloaded.record(slab.stream)
        return InFlight(slab, out_pinned, w if slab.packed else None, streams)

    def release(self) -> None:
        """Give the slab back (once done with the batch's result, or if never submitted)."""
        self.slab.free.set()


class InFlight:
    """A submitted batch. ``result`` waits for it; ``release`` frees its slab for reuse.
    ``width``: its outputs are 1-bit PNG scanlines of maps that wide, which ``result`` gives as
    :class:`PackedEdges`, with their zlib streams where ``streams`` (the pinned streams and
    their lengths) holds them."""

    def __init__(self, slab: Slab, outputs, width: int | None = None, streams=None):
        self.slab = slab
        self.outputs = outputs
        self.width = width
        self.streams = streams

    def ready(self) -> bool:
        """Whether :meth:`result` would return at once; never waits."""
        return self.slab.downloaded.done

    def result(self) -> tuple[Sequence[np.ndarray | PackedEdges], dict[str, float]]:
        """The batch's edge maps (a packed slab's as :class:`PackedEdges`), views of pinned
        memory that stay valid until :meth:`release`, and the GPU milliseconds of each stage
        for the whole batch (the packing is part of the kernel's; the deflate, where the GPU
        compresses, a stage of its own)."""
        slab = self.slab
        slab.downloaded.synchronize()  # also means the uploads are done with the inputs
        if self.width is not None:  # once: the streams' lengths are in only now
            zlib, sizes = self.streams or (None, None)
            lengths = [-1] * len(self.outputs) if sizes is None else sizes.tolist()
            self.outputs = [
                PackedEdges(frame, self.width, zlib[i, :size] if size >= 0 else None)
                for i, (frame, size) in enumerate(zip(self.outputs, lengths, strict=True))
            ]
            self.width = self.streams = None
        elapsed = cp.cuda.get_elapsed_time
        stages = {
            "upload": elapsed(slab.started, slab.uploaded),
            "kernel": elapsed(slab.uploaded, slab.rows_ready),
            "download": elapsed(slab.computed, slab.downloaded),
        }
        if slab.deflate is not None:
            stages["deflate"] = elapsed(slab.rows_ready, slab.computed)
        return self.outputs, stages

    def release(self) -> None:
        self.slab.free.set()


class SlabRing:
    """``size`` slabs used in turn.

    The caller keeps fewer than ``size`` batches in flight and collects them in order, so the
    slab it fills next is always the one whose batch it collected longest ago. ``launch(frames,
    edges, stream)`` runs the kernel (``launch(frames, edges, stream, work)`` with
    ``work_bytes``: ``work`` is the slab's device work space, that many bytes a pixel of the
    batch); ``pack(edges, rows, stream)``, if given, packs its output into 1-bit PNG scanlines,
    which the batches then give as :class:`PackedEdges`; with ``deflate`` too, with their zlib
    streams.
    """

    def __init__(
        self, size: int, device: int, launch, pack=None, deflate=None, work_bytes: int = 0
    ):
        with cp.cuda.Device(device):
            self.slabs = [
                Slab(packed=pack is not None, deflate=deflate, work_bytes=work_bytes)
                for _ in range(size)
            ]
        self.device = device
        self.launch, self.pack = launch, pack
        self.turn = 0

    def fill(self, shape: tuple[int, ...], capacity: int, host_input: bool = True) -> Filling:
        """The next slab, for a batch of up to ``capacity`` frames of ``shape`` (H, W, 3);
        waits until the encoders of its last batch are done with it."""
        slab = self.slabs[self.turn]
        self.turn = (self.turn + 1) % len(self.slabs)
        with cp.cuda.Device(self.device):
            return slab.fill(shape, capacity, self.device, self.launch, self.pack, host_input)
