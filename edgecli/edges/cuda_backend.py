"""The CUDA backend: the edge kernel launched on CuPy streams.

This module imports CuPy; :mod:`edgecli.edges.backends` imports it only when the CUDA backend is
asked for, so the CLI and the CPU path never need CuPy.

Layers, top-down:

- :class:`CudaBackend` ``.detect(frames)``: host frames in, host edge maps out (synchronous),
  through pinned staging buffers and a non-default stream; ``.slab_ring()`` for the pipeline
  (:mod:`edgecli.edges.ring`).
- :func:`launch_edges`, :func:`launch_pack_rows`, and :func:`edgecli.edges.cuda_canny.launch_canny`
  for ``--operator canny``: the kernels on device arrays, on a given stream, no
  synchronisation, every argument checked and typed.
- :func:`edgecli.edges.kernels.load_kernel`, :func:`edgecli.edges.kernels.load_canny`: the compiled
  kernels they launch.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..cuda.build import device_description
from ..errors import KernelResourceError
from ..options.params import MAX_L1_MAGNITUDE, Options
from ..output.png import png_row_bytes_1bit
from . import reference
from .cuda_canny import LABEL_BYTES, launch_canny
from .cuda_deflate import deflater
from .kernels import LoadedKernel, load_canny, load_kernel
from .ring import SlabRing
from .variants import CANNY_FILE, KERNEL_FILE, SHARED_BYTES, THREADS, TILE_H, TILE_W, WARPS, Variant

# The kernel stages input rows in 16-byte chunks relative to the buffer's start.
FRAMES_ALIGNMENT = 16
_INT32_MAX = 2**31 - 1


def grid_for(kernel: LoadedKernel, n_frames: int, height: int, width: int) -> tuple[int, int, int]:
    """(blocks, tiles_x, tiles_per_frame) for a launch over n_frames frames of height x width."""
    tiles_x = -(-width // TILE_W)
    tiles_per_frame = tiles_x * -(-height // TILE_H)
    n_items = n_frames * tiles_per_frame
    if n_items > _INT32_MAX:
        raise ValueError(
            f"{n_frames} frames of {height}x{width} make {n_items} tiles, more than one launch "
            f"indexes ({_INT32_MAX}); launch fewer frames at a time"
        )
    blocks = -(-n_items // WARPS)  # one warp per work item at most
    return min(blocks, kernel.resident_blocks), tiles_x, tiles_per_frame


def _check_arrays(
    kernel: LoadedKernel, source, source_name: str, out, out_name: str, shape
) -> None:
    """Refuse an output ``out`` that is not uint8 of ``shape``, and a ``source`` and ``out``
    that are not both C-contiguous and on the kernel's device: a launch's own checks."""
    if out.dtype != np.uint8 or out.shape != shape:
        raise ValueError(f"{out_name} must be uint8 shaped {shape}, got {out.dtype} {out.shape}")
    if not (source.flags.c_contiguous and out.flags.c_contiguous):
        raise ValueError(f"{source_name} and {out_name} must be C-contiguous")
    if source.device.id != kernel.device or out.device.id != kernel.device:
        raise ValueError(
            f"arrays are on devices {source.device.id}/{out.device.id}, "
            f"the kernel on {kernel.device}"
        )


def launch_edges(
    kernel: LoadedKernel,
    frames_dev: cupy.ndarray,
    edges_dev: cupy.ndarray,
    threshold: int,
    stream: cupy.cuda.Stream,
) -> None:
    """Enqueue edge detection of ``frames_dev`` (N, H, W, 3) uint8 BGR into ``edges_dev``
    (N, H, W) uint8 on ``stream``. Asynchronous: nothing here waits for the device.

    ``threshold`` is the effective one (``Options.effective_threshold``, at most 2040).
    """
    if frames_dev.dtype != np.uint8 or frames_dev.ndim != 4 or frames_dev.shape[3] != 3:
        raise ValueError(
            "frames_dev must be uint8 shaped (N, H, W, 3), "
            f"got {frames_dev.dtype} {frames_dev.shape}"
        )
    n_frames, height, width = frames_dev.shape[:3]
    _check_arrays(
        kernel, frames_dev, "frames_dev", edges_dev, "edges_dev", (n_frames, height, width)
    )
    if frames_dev.data.ptr % FRAMES_ALIGNMENT:
        raise ValueError(
            f"frames_dev must start {FRAMES_ALIGNMENT}-byte aligned (a fresh allocation or a "
            f"[:n] slice of one), got address {frames_dev.data.ptr:#x}"
        )
    if not 0 <= threshold <= MAX_L1_MAGNITUDE:
        raise ValueError(f"threshold must be in 0..{MAX_L1_MAGNITUDE}, got {threshold}")
    if min(n_frames, height, width) == 0:
        return
    blocks, tiles_x, tiles_per_frame = grid_for(kernel, n_frames, height, width)
    args = (
        frames_dev,
        edges_dev,
        np.int32(n_frames),
        np.int32(height),
        np.int32(width),
        np.int32(tiles_x),
        np.int32(tiles_per_frame),
        np.int32(threshold),
    )
    try:
        with cupy.cuda.Device(kernel.device):
            kernel.function(
                (blocks,),
                (THREADS,),
                args,
                stream=stream,
                shared_mem=SHARED_BYTES,
            )
    except cupy.cuda.driver.CUDADriverError as exc:
        raise KernelResourceError(
            f"{KERNEL_FILE} ({kernel.variant.name}) failed to launch {blocks} blocks of "
            f"{THREADS} threads on CUDA device {kernel.device}: {exc}"
        ) from exc


# pack_rows_1bit: a thread an output byte, in blocks of PACK_THREADS, at most PACK_BLOCKS blocks
# (grid-stride past that).
PACK_THREADS = 256
PACK_BLOCKS = 4096


def launch_pack_rows(
    kernel: LoadedKernel, edges_dev: cupy.ndarray, rows_dev: cupy.ndarray, stream
) -> None:
    """Enqueue the packing of ``edges_dev`` (N, H, W) uint8 into 1-bit PNG scanlines in
    ``rows_dev`` (N, H, 1 + ceil(W / 8)) uint8 (``edgecli.output.png.png_rows_1bit`` on the host)
    on ``stream``. Asynchronous."""
    if edges_dev.dtype != np.uint8 or edges_dev.ndim != 3:
        raise ValueError(
            f"edges_dev must be uint8 shaped (N, H, W), got {edges_dev.dtype} {edges_dev.shape}"
        )
    n_frames, height, width = edges_dev.shape
    row_bytes = png_row_bytes_1bit(width)
    _check_arrays(
        kernel, edges_dev, "edges_dev", rows_dev, "rows_dev", (n_frames, height, row_bytes)
    )
    total = rows_dev.size
    if total == 0:
        return
    blocks = min(-(-total // PACK_THREADS), PACK_BLOCKS)
    args = (edges_dev, rows_dev, np.int64(n_frames * height), np.int32(width), np.int32(row_bytes))
    with cupy.cuda.Device(kernel.device):
        kernel.pack((blocks,), (PACK_THREADS,), args, stream=stream)


class CudaBackend:
    """The edge contract on a CUDA device; same interface as ``backends.CpuBackend``, plus
    :meth:`slab_ring` for the streaming pipeline.

    Not thread-safe: one ``detect`` at a time per instance (it reuses its buffers).
    """

    name = "cuda"
    runs_on_host = False  # the pipeline batches frames and streams them through slab_ring()

    def __init__(self, options: Options):
        self.options = options
        self.device = options.device
        # The edge kernel's module also packs the rows of 1-bit PNGs, whichever operator runs.
        self.kernel = load_kernel(self.device, Variant(options.norm, options.border))
        self.canny = load_canny(self.device, options.norm) if options.operator == "canny" else None
        # The Canny kernels' union-find labels, a pixel each, in every slab.
        self.work_bytes = LABEL_BYTES if self.canny is not None else 0
        self.device_name = device_description(self.device)
        self._detect_ring: SlabRing | None = None

    def launch(
        self,
        frames_dev: cupy.ndarray,
        edges_dev: cupy.ndarray,
        stream: cupy.cuda.Stream,
        work_dev: cupy.ndarray | None = None,
    ) -> None:
        """:func:`launch_edges` with this backend's kernel and threshold, or for Canny
        :func:`launch_canny` with its limits, its labels in ``work_dev`` (a slab's work space:
        ``work_bytes`` a pixel)."""
        if self.canny is None:
            threshold = self.options.effective_threshold
            launch_edges(self.kernel, frames_dev, edges_dev, threshold, stream)
            return
        labels_dev = work_dev.view(np.uint32).reshape(edges_dev.shape)
        try:
            with cupy.cuda.Device(self.device):
                launch_canny(
                    self.canny, frames_dev, edges_dev, labels_dev, self.options.canny_limits, stream
                )
        except cupy.cuda.driver.CUDADriverError as exc:
            raise KernelResourceError(
                f"{CANNY_FILE} ({self.canny.norm}) failed to launch on CUDA device "
                f"{self.device}: {exc}"
            ) from exc

    def pack(self, edges_dev: cupy.ndarray, rows_dev: cupy.ndarray, stream) -> None:
        """:func:`launch_pack_rows` with this backend's module."""
        launch_pack_rows(self.kernel, edges_dev, rows_dev, stream)

    def slab_ring(self, slabs: int) -> SlabRing:
        """``slabs`` buffer sets, each with its own stream, for the pipeline. For 1-bit PNGs its
        batches come back packed as PNG scanlines (an eighth of the bytes to copy back, and
        nothing for the encoders to pack: np.packbits holds the GIL), and compressed where
        the GPU's deflate gives this host's bytes (:func:`edgecli.edges.cuda_deflate.deflater`)."""
        pack = self.pack if self.options.png_bits == 1 else None
        deflate = deflater(self.device) if pack is not None else None
        return SlabRing(slabs, self.device, self.launch, pack, deflate, self.work_bytes)

    def detect(self, frames_bgr: np.ndarray) -> np.ndarray:
        """Edge maps of (N, H, W, 3) uint8 BGR frames: (N, H, W) uint8 of 0/255."""
        frames = reference.check_frames(frames_bgr)
        if self._detect_ring is None:
            self._detect_ring = SlabRing(1, self.device, self.launch, work_bytes=self.work_bytes)
        filling = self._detect_ring.fill(frames.shape[1:], len(frames))
        try:
            np.copyto(filling.inputs[: len(frames)], frames)
            edges, _ = filling.submit(len(frames)).result()
            return edges.copy()
        finally:
            filling.release()
