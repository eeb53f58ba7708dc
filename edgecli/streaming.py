"""The CUDA side of the pipeline: a ring of slabs, each with pinned buffers and a stream.

Where the bytes go, per batch:

    main thread:   takes the next slab for a batch (``SlabRing.fill``)
    worker:        each decoded frame -> its place in the slab's pinned input, as soon as the
                   main thread has it (a task per frame, in parallel; the pipeline does this)
    main thread:   one async H2D of the whole batch into the slab's device buffer; the kernel;
                   one async D2H into the slab's pinned output -- all on the slab's stream,
                   with CUDA events between the stages (they time them, and say when they are
                   done)
    encode worker: PNG straight from the slab's pinned output; the last one releases the slab

So the host-side work that scales with pixels runs on worker threads, and the main thread
makes a handful of CUDA calls per batch: each one gives up the GIL and has to win it back
from busy workers. Imports CuPy: only :mod:`edgecli.gpu` imports this module.
"""

from __future__ import annotations

import threading

import cupy as cp
import cupyx
import numpy as np

from .errors import EdgecliError


class GpuMemoryError(EdgecliError):
    """The GPU (or pinned host memory) could not hold a batch; the message says what to do."""


def _allocation_error(what: str, nbytes: int, exc: Exception) -> GpuMemoryError:
    return GpuMemoryError(
        f"cannot allocate {nbytes / 1e6:.0f} MB of {what} ({exc}); "
        "use a smaller --batch or fewer --streams"
    )


class Slab:
    """Pinned input and output buffers and device buffers for one batch, the stream that uses
    them, and the events that mark its stages. Buffers grow to the largest batch asked for."""

    def __init__(self):
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.capacity = 0  # pixels (frames x height x width) the buffers hold
        self.started, self.uploaded, self.computed, self.downloaded = (
            cp.cuda.Event() for _ in range(4)
        )
        # Set while no one reads edges_pinned; cleared from fill() until release().
        self.free = threading.Event()
        self.free.set()

    def _reserve(self, pixels: int) -> None:
        if pixels <= self.capacity:
            return
        try:
            self.edges_pinned = cupyx.empty_pinned(pixels, dtype=np.uint8)
            self.frames_pinned = cupyx.empty_pinned(pixels * 3, dtype=np.uint8)
            self.frames_dev = cp.empty(pixels * 3, dtype=np.uint8)
            self.edges_dev = cp.empty(pixels, dtype=np.uint8)
        except (cp.cuda.memory.OutOfMemoryError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise _allocation_error("GPU and pinned memory for a batch", pixels * 8, exc) from None
        self.capacity = pixels

    def fill(self, shape: tuple[int, ...], capacity: int, device: int, launch) -> Filling:
        """This slab, once the encoders of its previous batch are done with it, for a batch
        of up to ``capacity`` frames of ``shape`` (H, W, 3)."""
        self.free.wait()
        self.free.clear()
        h, w = shape[:2]
        self._reserve(capacity * h * w)
        # The previous batch's upload from frames_pinned is done: its result was collected
        # before the slab was freed.
        inputs = self.frames_pinned[: capacity * h * w * 3].reshape(capacity, h, w, 3)
        return Filling(self, inputs, device, launch)


class Filling:
    """A batch being put together in a slab: the caller copies its frames into ``inputs``
    (pinned memory; from any thread), then submits the first n of them."""

    def __init__(self, slab: Slab, inputs: np.ndarray, device: int, launch):
        self.slab, self.inputs, self.device, self.launch = slab, inputs, device, launch

    def submit(self, n: int) -> InFlight:
        """Queue the upload of ``inputs[:n]``, the kernel and the download on the slab's
        stream. The copies into those inputs must be done."""
        if not 1 <= n <= len(self.inputs):
            raise ValueError(f"a batch of {n} frames in a slab filled for {len(self.inputs)}")
        slab = self.slab
        h, w = self.inputs.shape[1:3]
        # Prefix slices of fresh allocations: 16-byte aligned, as the kernel requires.
        frames_dev = slab.frames_dev[: n * h * w * 3].reshape(n, h, w, 3)
        edges_dev = slab.edges_dev[: n * h * w].reshape(n, h, w)
        edges_pinned = slab.edges_pinned[: n * h * w].reshape(n, h, w)
        with cp.cuda.Device(self.device):
            slab.started.record(slab.stream)
            frames_dev.set(self.inputs[:n], stream=slab.stream)  # one async copy, from pinned
            slab.uploaded.record(slab.stream)
            self.launch(frames_dev, edges_dev, slab.stream)
            slab.computed.record(slab.stream)
            edges_dev.get(stream=slab.stream, out=edges_pinned)  # async into pinned memory
            slab.downloaded.record(slab.stream)
        return InFlight(slab, edges_pinned)

    def release(self) -> None:
        """Give the slab back (once done with the batch's result, or if never submitted)."""
        self.slab.free.set()


class InFlight:
    """A submitted batch. ``result`` waits for it; ``release`` frees its slab for reuse."""

    def __init__(self, slab: Slab, edges_pinned: np.ndarray):
        self.slab = slab
        self.edges_pinned = edges_pinned

    def ready(self) -> bool:
        """Whether :meth:`result` would return at once; never waits."""
        return self.slab.downloaded.done

    def result(self) -> tuple[np.ndarray, dict[str, float]]:
        """The batch's edge maps, as a view of pinned memory that stays valid until
        :meth:`release`, and the GPU milliseconds of each stage for the whole batch."""
        slab = self.slab
        slab.downloaded.synchronize()  # also means the uploads are done with the inputs
        elapsed = cp.cuda.get_elapsed_time
        stages = {
            "upload": elapsed(slab.started, slab.uploaded),
            "kernel": elapsed(slab.uploaded, slab.computed),
            "download": elapsed(slab.computed, slab.downloaded),
        }
        return self.edges_pinned, stages

    def release(self) -> None:
        self.slab.free.set()


class SlabRing:
    """``size`` slabs used in turn.

    The caller keeps fewer than ``size`` batches in flight and collects them in order, so the
    slab it fills next is always the one whose batch it collected longest ago.
    """

    def __init__(self, size: int, device: int, launch):
        with cp.cuda.Device(device):
            self.slabs = [Slab() for _ in range(size)]
        self.device = device
        self.launch = launch
        self.turn = 0

    def fill(self, shape: tuple[int, ...], capacity: int) -> Filling:
        """The next slab, for a batch of up to ``capacity`` frames of ``shape`` (H, W, 3);
        waits until the encoders of its last batch are done with it."""
        slab = self.slabs[self.turn]
        self.turn = (self.turn + 1) % len(self.slabs)
        with cp.cuda.Device(self.device):
            return slab.fill(shape, capacity, self.device, self.launch)
