"""The CUDA backend: ``cuda/edges.cu`` compiled through NVRTC and launched on CuPy streams.

This module imports CuPy; :mod:`edgecli.backends` imports it only when the CUDA backend is
asked for, so the CLI and the CPU path never need CuPy.

Layers, top-down:

- :class:`CudaBackend` ``.detect(frames)``: host frames in, host edge maps out (synchronous),
  through pinned staging buffers and a non-default stream.
- :func:`launch_edges`: the kernel on device arrays, on a given stream, no synchronisation --
  what the streaming pipeline reuses.
- :func:`load_kernel`: one variant for one device, memoized on (device, variant); compiled
  once per machine and kept on disk (:func:`edgecli.kernels.kernel_cache_dir`).
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import cupy
import numpy as np

from . import reference
from .errors import KernelBuildError, KernelResourceError, OutputError
from .kernels import (
    ARCH_ENV,
    CUDA13_MIN_ARCH,
    KERNEL_FILE,
    KERNEL_NAME,
    MIN_COMPUTE_CAPABILITY,
    PACK_KERNEL_NAME,
    SHARED_BYTES,
    THREADS,
    TILE_H,
    TILE_W,
    WARPS,
    Variant,
    blocks_per_sm,
    cache_key,
    compile_options,
    forced_arch,
    kernel_cache_dir,
    kernel_defines,
    kernel_source,
)
from .params import MAX_L1_MAGNITUDE, Options
from .png import png_row_bytes_1bit
from .sinks import write_atomic
from .streaming import SlabRing

# The kernel stages input rows in 16-byte chunks relative to the buffer's start.
FRAMES_ALIGNMENT = 16
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class LoadedKernel:
    """One compiled variant on one device, with the persistent grid size that fits it."""

    function: cupy.RawKernel
    pack: cupy.RawKernel  # pack_rows_1bit, from the same module (launch_pack_rows)
    variant: Variant
    device: int
    target: str  # what NVRTC compiled for: "sm_90" (machine code) or "compute_75" (PTX)
    resident_blocks: int  # the persistent grid: blocks_per_sm an SM, over every SM
    fitting_blocks: int  # blocks the whole device could run at once (the occupancy limit)


_kernels: dict[tuple[int, Variant, int | None], LoadedKernel] = {}
_kernels_lock = threading.Lock()


def load_kernel(device: int, variant: Variant) -> LoadedKernel:
    """The kernel ``variant`` for ``device``: compiled once per machine (then read from disk),
    loaded once per process. Honours :data:`edgecli.kernels.ARCH_ENV`."""
    key = (device, variant, forced_arch())
    with _kernels_lock:
        loaded = _kernels.get(key)
        if loaded is None:
            loaded = _load(device, variant, key[2])
            _kernels[key] = loaded
    return loaded


def _load(device: int, variant: Variant, forced: int | None) -> LoadedKernel:
    major, minor = compute_capability(device)
    arch = 10 * major + minor
    if forced is not None and forced > arch:
        raise KernelBuildError(
            f"{ARCH_ENV}={forced} asks for a newer architecture than CUDA device {device} "
            f"(sm_{arch}) has"
        )
    with cupy.cuda.Device(device):
        attributes = cupy.cuda.Device(device).attributes
        limit = attributes["MaxSharedMemoryPerBlockOptin"]
        if SHARED_BYTES > limit:
            raise KernelResourceError(
                f"{KERNEL_FILE} needs {SHARED_BYTES} bytes of shared memory per block; CUDA "
                f"device {device} allows {limit}"
            )
        function, pack, target = _module(variant, forced or arch, ptx=forced is not None)
        # Past 48 KB a kernel must opt in to its dynamic shared memory.
        function.max_dynamic_shared_size_bytes = SHARED_BYTES
        fitting = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            function.kernel.ptr, THREADS, SHARED_BYTES
        )
        if fitting < 1:
            raise KernelResourceError(
                f"{KERNEL_FILE} ({variant.name}) needs more registers per block than CUDA "
                f"device {device} has"
            )
        sms = attributes["MultiProcessorCount"]
    per_sm = blocks_per_sm(variant, fitting)
    return LoadedKernel(function, pack, variant, device, target, per_sm * sms, fitting * sms)


def _module(variant: Variant, arch: int, *, ptx: bool):
    """The two kernels of ``variant`` compiled for ``arch``, loaded on the current device, and
    the target they were compiled for."""
    (function, pack), target = load_kernels(
        KERNEL_FILE, (KERNEL_NAME, PACK_KERNEL_NAME), kernel_defines(variant), arch, ptx=ptx,
        label=variant.name,
    )  # fmt: skip
    return function, pack, target


def load_kernels(
    name: str, kernels: tuple[str, ...], defines: tuple[str, ...], arch: int, *,
    ptx: bool = False, label: str = "",
):  # fmt: skip
    """The ``kernels`` of the CUDA file ``name`` (in cuda/) compiled with ``defines`` for
    ``arch`` through the disk cache (:func:`compiled_file`), loaded on the current device; and
    the target they were compiled for. A cache entry that does not load (corrupt, or another
    machine's) is compiled anew, once."""
    try:
        return _load_kernels(name, kernels, defines, arch, ptx=ptx, fresh=False, label=label)
    except KernelBuildError:
        raise
    except Exception:
        return _load_kernels(name, kernels, defines, arch, ptx=ptx, fresh=True, label=label)


def _load_kernels(name, kernels, defines, arch, *, ptx: bool, fresh: bool, label: str):
    path, target = compiled_file(name, defines, arch, ptx=ptx, fresh=fresh, label=label)
    try:
        module = cupy.RawModule(path=str(path))
        functions = [module.get_function(kernel) for kernel in kernels]
        for function in functions:
            function.kernel  # noqa: B018 -- load the module now, while the file exists
        return functions, target
    finally:
        if not path.is_relative_to(kernel_cache_dir()):
            path.unlink(missing_ok=True)  # a temporary: the cache could not be written


def compiled_file(
    name: str, defines: tuple[str, ...], arch: int, *, ptx: bool, fresh: bool = False,
    label: str = "",
) -> tuple[Path, str]:  # fmt: skip
    """A file holding cuda/``name`` compiled with ``defines`` for ``arch`` (machine code, or
    PTX), and the target it holds. Read from the cache when an earlier run compiled it; else
    compiled by NVRTC now and kept there (or, where the cache cannot be written, in a
    temporary file). Cached files are named ``<key>.<target>.<cubin|ptx>``: the key of what
    was asked for, and what NVRTC made of it (PTX for an older architecture, where the GPU is
    newer than NVRTC knows). CuPy's own cache is not used: it runs NVRTC in every process to
    key its entries."""
    source = kernel_source(name)
    key = cache_key(source, compile_options(defines, arch, ptx=ptx), "nvrtc")
    folder = kernel_cache_dir()
    if not fresh:
        for cached in folder.glob(f"{key}.*"):
            return cached, cached.name.split(".")[1]
    code, target = _nvrtc_compile(source, name, defines, arch, ptx=ptx, label=label)
    suffix = ".cubin" if target.startswith("sm_") else ".ptx"
    for stale in folder.glob(f"{key}.*"):  # a broken entry, being replaced
        stale.unlink(missing_ok=True)
    try:
        cached = folder / f"{key}.{target}{suffix}"
        write_atomic(cached, code)
        return cached, target
    except OutputError:
        fd, temp = tempfile.mkstemp(prefix="edgecli-kernel-", suffix=suffix)
        with os.fdopen(fd, "wb") as handle:
            handle.write(code)
        return Path(temp), target


def _nvrtc_compile(
    source: str, name: str, defines: tuple[str, ...], arch: int, *, ptx: bool, label: str
) -> tuple[bytes, str]:
    """Compile with the NVRTC CuPy uses: machine code for ``arch``, or PTX. A GPU newer than
    this NVRTC knows gets PTX for the newest architecture it knows, which the driver compiles
    for it; a GPU older than it supports is refused with what to install."""
    from cupy.cuda import nvrtc

    try:
        supported = nvrtc.getSupportedArchs()
        version = ".".join(map(str, nvrtc.getVersion()))
    except Exception as exc:  # libnvrtc missing or unloadable
        raise KernelBuildError(f"NVRTC is not usable ({type(exc).__name__}: {exc})") from exc
    if arch < min(supported):
        extra = "cuda12" if arch < CUDA13_MIN_ARCH else "cuda12 or cuda13"
        raise KernelBuildError(
            f"NVRTC {version} cannot compile for sm_{arch} (it supports sm_{min(supported)} and "
            f"newer); install edgecli[{extra}]"
        )
    if arch > max(supported):
        arch, ptx = max(supported), True
    options = compile_options(defines, arch, ptx=ptx)
    program = nvrtc.createProgram(source, name, (), ())
    try:
        try:
            nvrtc.compileProgram(program, options)
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(program).strip()
            what = f"{name} ({label})" if label else name
            raise KernelBuildError(
                f"{what} does not compile with NVRTC {version}: {log or exc}"
            ) from exc
        code = nvrtc.getPTX(program) if ptx else nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    return code, f"compute_{arch}" if ptx else f"sm_{arch}"


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
    ``rows_dev`` (N, H, 1 + ceil(W / 8)) uint8 (``edgecli.png.png_rows_1bit`` on the host)
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


def compute_capability(device: int) -> tuple[int, int]:
    props = cupy.cuda.runtime.getDeviceProperties(device)
    return props["major"], props["minor"]


def unusable_reason(device: int = 0, variant: Variant | None = None) -> str | None:
    """None when CUDA device ``device`` can run the kernel (``variant``, by default the default
    one, which is then compiled and cached), else a one-line reason. Never raises."""
    try:
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            return f"no usable CUDA driver or device ({exc})"
        if count == 0:
            return "no CUDA device found"
        if not 0 <= device < count:
            return f"CUDA device {device} does not exist ({count} present: 0..{count - 1})"
        capability = compute_capability(device)
        if capability < MIN_COMPUTE_CAPABILITY:
            need = "{}.{}".format(*MIN_COMPUTE_CAPABILITY)
            return (
                f"{device_description(device)} has compute capability "
                f"{capability[0]}.{capability[1]}; the kernel needs {need} or newer (Volta)"
            )
        load_kernel(device, variant or Variant())
    except (KernelBuildError, KernelResourceError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "install edgecli[" in first:
            return first
        return f"{first} (NVRTC comes with edgecli's cuda12/cuda13 extra)"
    except Exception as exc:  # anything CUDA can throw at start-up: report, never raise
        return f"CUDA unusable: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def kernel_description(kernel: LoadedKernel) -> str:
    """What ``edgecli info`` says of a loaded kernel: its form, how it stages rows on this
    device, and what NVRTC compiled it for."""
    arch = int(kernel.target.split("_")[1])
    staging = "cp.async" if arch >= 80 else "16-byte loads"
    code = "machine code" if kernel.target.startswith("sm_") else "PTX, compiled by the driver"
    return (
        f"portable shared-memory form ({TILE_W}x{TILE_H} tiles, rows staged with {staging}), "
        f"{kernel.target} {code}"
    )


def device_description(device: int) -> str:
    props = cupy.cuda.runtime.getDeviceProperties(device)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return f"{name} (device {device}, sm_{props['major']}{props['minor']})"


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
        self.kernel = load_kernel(self.device, Variant(options.norm, options.border))
        self.device_name = device_description(self.device)
        self._detect_ring: SlabRing | None = None

    def launch(
        self, frames_dev: cupy.ndarray, edges_dev: cupy.ndarray, stream: cupy.cuda.Stream
    ) -> None:
        """:func:`launch_edges` with this backend's kernel and threshold."""
        launch_edges(self.kernel, frames_dev, edges_dev, self.options.effective_threshold, stream)

    def pack(self, edges_dev: cupy.ndarray, rows_dev: cupy.ndarray, stream) -> None:
        """:func:`launch_pack_rows` with this backend's module."""
        launch_pack_rows(self.kernel, edges_dev, rows_dev, stream)

    def gpu_decoders(self, options: Options, sources: list):
        """What decodes on the GPU in a run of ``sources`` (:func:`edgecli.decode.plan.plan`)."""
        from .decode.plan import plan

        return plan(options, sources)

    def slab_ring(self, slabs: int) -> SlabRing:
        """``slabs`` buffer sets, each with its own stream, for the pipeline. For 1-bit PNGs its
        batches come back packed as PNG scanlines (an eighth of the bytes to copy back, and
        nothing for the encoders to pack: np.packbits holds the GIL)."""
        pack = self.pack if self.options.png_bits == 1 else None
        return SlabRing(slabs, self.device, self.launch, pack)

    def detect(self, frames_bgr: np.ndarray) -> np.ndarray:
        """Edge maps of (N, H, W, 3) uint8 BGR frames: (N, H, W) uint8 of 0/255."""
        frames = reference.check_frames(frames_bgr)
        if self._detect_ring is None:
            self._detect_ring = SlabRing(1, self.device, self.launch)
        filling = self._detect_ring.fill(frames.shape[1:], len(frames))
        try:
            np.copyto(filling.inputs[: len(frames)], frames)
            edges, _ = filling.submit(len(frames)).result()
            return edges.copy()
        finally:
            filling.release()
