"""The CUDA side of the pipeline: pinned frame buffers and a ring of slabs with streams.

Where the bytes go, per batch:

    decode worker: frame -> its own pinned buffer (PinnedFrames.stage; the copy runs on the
                   worker, in parallel, right after decoding, while the frame is in cache)
    main thread:   per frame, async H2D into the slab's device buffer; the kernel; one async
                   D2H into the slab's pinned output -- all on the slab's stream, with CUDA
                   events between the stages (they time them, and say when they are done)
    encode worker: PNG straight from the slab's pinned output; the last one releases the slab

So the host-side work that scales with pixels runs on the worker threads, and the main thread
only queues copies and launches. Imports CuPy: only :mod:`edgecli.gpu` imports this module.
"""

from __future__ import annotations

import threading
from collections import defaultdict

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


class PinnedFrames:
    """Recycled page-locked host buffers, one per frame in flight.

    Pinned memory is what makes the H2D copy asynchronous and fast, but allocating it is slow,
    so buffers go back to a free list keyed by size. The pipeline's bounded queues bound how
    many are in use; ``keep`` bounds how many idle ones are kept.
    """

    def __init__(self, keep: int, device: int):
        self.keep, self.device = keep, device
        self._lock = threading.Lock()
        self._free: dict[int, list[np.ndarray]] = defaultdict(list)
        self._idle = 0
        self._owner: dict[int, np.ndarray] = {}  # view address -> its buffer

    def stage(self, pixels: np.ndarray) -> np.ndarray:
        """A copy of ``pixels`` in pinned memory (release it once its upload is done)."""
        nbytes = pixels.nbytes
        with self._lock:
            free = self._free[nbytes]
            buffer = free.pop() if free else None
            self._idle -= buffer is not None
        if buffer is None:
            try:
                with cp.cuda.Device(self.device):  # worker threads have no current device
                    buffer = cupyx.empty_pinned(nbytes, dtype=np.uint8)
            except Exception as exc:  # cudaHostAlloc failing: out of page-locked memory
                raise _allocation_error("pinned host memory for a frame", nbytes, exc) from None
        view = buffer.reshape(pixels.shape)
        np.copyto(view, pixels)
        with self._lock:
            self._owner[view.ctypes.data] = buffer
        return view

    def release(self, view: np.ndarray) -> None:
        with self._lock:
            buffer = self._owner.pop(view.ctypes.data)
            if self._idle < self.keep:
                self._free[buffer.nbytes].append(buffer)
                self._idle += 1


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
            self.frames_dev = cp.empty(pixels * 3, dtype=np.uint8)
            self.edges_dev = cp.empty(pixels, dtype=np.uint8)
        except (cp.cuda.memory.OutOfMemoryError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise _allocation_error("GPU and pinned memory for a batch", pixels * 5, exc) from None
        self.capacity = pixels

    def submit(self, frames: list[np.ndarray], launch) -> InFlight:
        """Queue upload, kernel and download of same-shape ``frames`` on this slab's stream.

        The frames should be pinned (PinnedFrames.stage) for the upload to be asynchronous.
        """
        self.free.wait()  # the encoders of this slab's previous batch are done with it
        self.free.clear()
        n = len(frames)
        h, w = frames[0].shape[:2]
        self._reserve(n * h * w)
        # Prefix slices of fresh allocations: 16-byte aligned, as the kernel requires.
        frames_dev = self.frames_dev[: n * h * w * 3].reshape(n, h, w, 3)
        edges_dev = self.edges_dev[: n * h * w].reshape(n, h, w)
        edges_pinned = self.edges_pinned[: n * h * w].reshape(n, h, w)
        self.started.record(self.stream)
        for i, frame in enumerate(frames):
            frames_dev[i].set(frame, stream=self.stream)  # async from pinned memory
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


class SlabRing:
    """``size`` slabs used in turn, and the pinned buffers frames are staged in.

    The caller keeps fewer than ``size`` batches in flight and collects them in order, so the
    slab it reuses is always the one whose batch it collected longest ago.
    """

    def __init__(self, size: int, device: int, launch, keep_frames: int):
        with cp.cuda.Device(device):
            self.slabs = [Slab() for _ in range(size)]
        self.device = device
        self.launch = launch
        self.frames = PinnedFrames(keep_frames, device)
        self.turn = 0

    @property
    def size(self) -> int:
        return len(self.slabs)

    def submit(self, frames: list[np.ndarray]) -> InFlight:
        slab = self.slabs[self.turn]
        self.turn = (self.turn + 1) % len(self.slabs)
        with cp.cuda.Device(self.device):
            return slab.submit(frames, self.launch)
