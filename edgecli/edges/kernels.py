"""The edge kernels loaded on a device: ``edges.cu`` in the variant a run asks for, with the
persistent grid that fits the device (:func:`load_kernel`), ``canny.cu``'s kernels
(:func:`load_canny`), and whether they run on a device at all (:func:`unusable_reason`). Each
is compiled once per machine and loaded once per process through :mod:`edgecli.cuda.build`.
Imports CuPy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import cupy

from ..cuda.build import compute_capability, device_arch, device_description, load_kernels
from ..cuda.compiling import MIN_COMPUTE_CAPABILITY, forced_arch
from ..errors import KernelBuildError, KernelResourceError
from .cuda_canny import CannyKernels
from .variants import (
    CANNY_FILE,
    CANNY_KERNELS,
    KERNEL_FILE,
    KERNEL_NAME,
    PACK_KERNEL_NAME,
    SHARED_BYTES,
    THREADS,
    TILE_H,
    TILE_W,
    Variant,
    blocks_per_sm,
    canny_defines,
    kernel_defines,
)


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
    loaded once per process. Honours :data:`edgecli.cuda.compiling.ARCH_ENV`."""
    key = (device, variant, forced_arch())
    with _kernels_lock:
        loaded = _kernels.get(key)
        if loaded is None:
            loaded = _load(device, variant, key[2])
            _kernels[key] = loaded
    return loaded


def _load(device: int, variant: Variant, forced: int | None) -> LoadedKernel:
    arch = device_arch(device, forced)
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


_canny: dict[tuple[int, str, int | None], CannyKernels] = {}


def load_canny(device: int, norm: str) -> CannyKernels:
    """``canny.cu``'s kernels for ``norm`` on ``device``: compiled once per machine (then read
    from disk), loaded once per process. Honours :data:`edgecli.cuda.compiling.ARCH_ENV`."""
    forced = forced_arch()
    key = (device, norm, forced)
    with _kernels_lock:
        loaded = _canny.get(key)
        if loaded is None:
            arch = device_arch(device, forced)
            with cupy.cuda.Device(device):
                functions, _ = load_kernels(
                    CANNY_FILE, CANNY_KERNELS, canny_defines(norm), forced or arch,
                    ptx=forced is not None, label=norm,
                )  # fmt: skip
            named = dict(zip(CANNY_KERNELS, functions, strict=True))
            loaded = _canny[key] = CannyKernels.from_functions(named, norm, device)
    return loaded


def _module(variant: Variant, arch: int, *, ptx: bool):
    """The two kernels of ``variant`` compiled for ``arch``, loaded on the current device, and
    the target they were compiled for."""
    (function, pack), target = load_kernels(
        KERNEL_FILE, (KERNEL_NAME, PACK_KERNEL_NAME), kernel_defines(variant), arch, ptx=ptx,
        label=variant.name,
    )  # fmt: skip
    return function, pack, target


def unusable_reason(
    device: int = 0, variant: Variant | None = None, canny_norm: str | None = None
) -> str | None:
    """None when CUDA device ``device`` can run the kernel (``variant``, by default the default
    one, which is then compiled and cached) and, with ``canny_norm``, the Canny kernels of that
    norm; else a one-line reason. Never raises."""
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
        if canny_norm is not None:
            load_canny(device, canny_norm)
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
