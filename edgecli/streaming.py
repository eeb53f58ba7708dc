"""The CUDA side of the pipeline: a ring of slabs, each with pinned buffers and a stream.

Where the bytes go, per batch:

    gather:        the batch's decoded frames -> the slab's pinned input buffer, by the
                   ``gather`` the ring is given (the pipeline copies the frames in parallel on
                   threads of its own, and the main thread waits once per batch, not per frame)
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
from collections.abc import Callable, Sequence

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
    """Device buffers and a pinned output buffer for one batch, the stream that uses them,
    and the events that mark its stages. Buffers grow to the largest batch seen."""

    def __init__(self):
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.capacity = 0  # pixels (frames x height x width) the buffers hold
        self.started, self.uploaded, self.computed, self.downloaded = (
            cp.cuda.Event() for _ in range(4)
        )
        # Set while no one reads edges_pinned; cleared from submit until release().
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

    def submit(self, frames: Sequence[np.ndarray], launch, gather: Gather) -> InFlight:
        """Gather same-shape ``frames`` into this slab's pinned input, then queue upload,
        kernel and download on this slab's stream. The frames are free once this returns."""
        self.free.wait()  # the encoders of this slab's previous batch are done with it
        self.free.clear()
        n = len(frames)
        h, w = frames[0].shape[:2]
        self._reserve(n * h * w)
        # Prefix slices of fresh allocations: 16-byte aligned, as the kernel requires.
        frames_dev = self.frames_dev[: n * h * w * 3].reshape(n, h, w, 3)
        edges_dev = self.edges_dev[: n * h * w].reshape(n, h, w)
        edges_pinned = self.edges_pinned[: n * h * w].reshape(n, h, w)
        # The previous batch's upload from this buffer is done: its result was collected
        # before the slab was freed.
        frames_pinned = self.frames_pinned[: n * h * w * 3].reshape(n, h, w, 3)
        gather(frames, frames_pinned)
        self.started.record(self.stream)
        frames_dev.set(frames_pinned, stream=self.stream)  # one async copy from pinned memory
        self.uploaded.record(self.stream)
        launch(frames_dev, edges_dev, self.stream)
        self.computed.record(self.stream)
        edges_dev.get(stream=self.stream, out=edges_pinned)  # async into pinned memory
        self.downloaded.record(self.stream)
        return InFlight(self, edges_pinned)


class InFlight:
    """A submitted batch. ``result`` waits for it; ``release`` frees its slab for reuse."""

    def __init__(self, slab: Slab, edges_pinned: np.ndarray):
        self.slab = slab
        self.edges_pinned = edges_pinned

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


# gather(frames, out): copy same-shape frames into ``out`` (N, H, W, 3); return once done
# (edgecli.pipeline.gather_frames, on whichever thread the caller chooses).
Gather = Callable[[Sequence[np.ndarray], np.ndarray], None]


class SlabRing:
    """``size`` slabs used in turn; ``gather`` fills a slab's pinned input from a batch.

    The caller keeps fewer than ``size`` batches in flight and collects them in order, so the
    slab it reuses is always the one whose batch it collected longest ago.
    """

    def __init__(self, size: int, device: int, launch, gather: Gather):
        with cp.cuda.Device(device):
            self.slabs = [Slab() for _ in range(size)]
        self.device = device
        self.launch = launch
        self.gather = gather
        self.turn = 0

    @property
    def size(self) -> int:
        return len(self.slabs)

    def submit(self, frames: Sequence[np.ndarray]) -> InFlight:
        slab = self.slabs[self.turn]
        self.turn = (self.turn + 1) % len(self.slabs)
        with cp.cuda.Device(self.device):
            return slab.submit(frames, self.launch, self.gather)
