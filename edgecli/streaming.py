"""The CUDA side of the pipeline: a ring of pinned slabs, each with its own stream.

Per batch, on its slab's stream: async H2D from pinned memory, the fused kernel, async D2H
into pinned memory, with CUDA events between the stages (they time the stages and say when
the slab may be reused). While the GPU works on one slab, the host fills the next, so the
copies and the kernel hide behind decoding and encoding on the worker threads.

Imports CuPy: only :mod:`edgecli.gpu` imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import cupy as cp
import cupyx
import numpy as np

from .errors import EdgecliError


class GpuMemoryError(EdgecliError):
    """The GPU could not hold a batch; the message says how much and what to change."""


class Slab:
    """Pinned host and device buffers for one batch, the stream that uses them, and the
    events that mark its stages. Buffers grow to the largest batch seen, never shrink."""

    def __init__(self, device: int):
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.capacity = 0  # pixels (frames x height x width) the buffers hold
        self.started, self.uploaded, self.computed, self.downloaded = (
            cp.cuda.Event() for _ in range(4)
        )
        self.device = device

    def _reserve(self, pixels: int) -> None:
        if pixels <= self.capacity:
            return
        try:
            self.frames_pinned = cupyx.empty_pinned(pixels * 3, dtype=np.uint8)
            self.edges_pinned = cupyx.empty_pinned(pixels, dtype=np.uint8)
            self.frames_dev = cp.empty(pixels * 3, dtype=np.uint8)
            self.edges_dev = cp.empty(pixels, dtype=np.uint8)
        except (cp.cuda.memory.OutOfMemoryError, cp.cuda.runtime.CUDARuntimeError) as exc:
            mb = pixels * 8 / 1e6  # 4 bytes a pixel on the host and on the device
            raise GpuMemoryError(
                f"cannot allocate {mb:.0f} MB of GPU/pinned memory for a batch ({exc}); "
                "use a smaller --batch or fewer --streams"
            ) from None
        self.capacity = pixels

    def submit(self, frames: list[np.ndarray], launch) -> InFlight:
        """Copy ``frames`` into this slab's pinned memory and queue the GPU work."""
        n = len(frames)
        h, w = frames[0].shape[:2]
        self._reserve(n * h * w)
        frames_pinned = self.frames_pinned[: n * h * w * 3].reshape(n, h, w, 3)
        edges_pinned = self.edges_pinned[: n * h * w].reshape(n, h, w)
        frames_dev = self.frames_dev[: n * h * w * 3].reshape(n, h, w, 3)
        edges_dev = self.edges_dev[: n * h * w].reshape(n, h, w)
        # The host copy happens before anything is queued: the previous use of this slab
        # finished (InFlight.result waited on its 'downloaded' event) before we got here.
        np.stack(frames, out=frames_pinned)
        self.started.record(self.stream)
        frames_dev.set(frames_pinned, stream=self.stream)  # async: the source is pinned
        self.uploaded.record(self.stream)
        launch(frames_dev, edges_dev, self.stream)
        self.computed.record(self.stream)
        edges_dev.get(stream=self.stream, out=edges_pinned)  # async into pinned memory
        self.downloaded.record(self.stream)
        return InFlight(self, edges_pinned)


@dataclass
class InFlight:
    slab: Slab
    edges_pinned: np.ndarray

    def result(self) -> tuple[np.ndarray, dict[str, float]]:
        """Wait for the batch; return its edge maps (a copy: the slab is free again once
        this returns) and the GPU milliseconds of each stage for the whole batch."""
        slab = self.slab
        slab.downloaded.synchronize()
        edges = self.edges_pinned.copy()
        elapsed = cp.cuda.get_elapsed_time
        stages = {
            "upload": elapsed(slab.started, slab.uploaded),
            "kernel": elapsed(slab.uploaded, slab.computed),
            "download": elapsed(slab.computed, slab.downloaded),
        }
        return edges, stages


class SlabRing:
    """``size`` slabs used in turn. The caller keeps at most ``size`` batches in flight and
    collects them in order, which is what makes reusing the oldest slab safe."""

    def __init__(self, size: int, device: int, launch):
        with cp.cuda.Device(device):
            self.slabs = [Slab(device) for _ in range(size)]
        self.device = device
        self.launch = launch
        self.turn = 0

    @property
    def size(self) -> int:
        return len(self.slabs)

    def submit(self, frames: list[np.ndarray]) -> InFlight:
        slab = self.slabs[self.turn]
        self.turn = (self.turn + 1) % len(self.slabs)
        with cp.cuda.Device(self.device):
            return slab.submit(frames, self.launch)
