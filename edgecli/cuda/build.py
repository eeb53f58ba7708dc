"""Compiling and loading the kernels: NVRTC for the device at hand, a cache on disk.

``cuda/edges.cu`` (and ``canny.cu``, ``decode.cu``) are compiled once per variant and
machine, kept in edgecli's cache (:func:`edgecli.cuda.kernel.kernel_cache_dir`) and loaded once
per process: :func:`load_kernel` for the edge kernel (memoized on device and variant, with the
persistent grid that fits the device), :func:`load_canny` for the Canny kernels,
:func:`load_kernels` for any file's kernels. Also what a device is
(:func:`compute_capability`, :func:`device_description`) and whether the kernel runs on it
(:func:`unusable_reason`). Imports CuPy.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import cupy

from ..errors import KernelBuildError, KernelResourceError, OutputError
from ..sinks import write_atomic
from .canny import CannyKernels
from .kernel import (
    ARCH_ENV,
    CANNY_FILE,
    CANNY_KERNELS,
    CUDA13_MIN_ARCH,
    KERNEL_FILE,
    KERNEL_NAME,
    MIN_COMPUTE_CAPABILITY,
    PACK_KERNEL_NAME,
    SHARED_BYTES,
    THREADS,
    TILE_H,
    TILE_W,
    Variant,
    blocks_per_sm,
    cache_key,
    canny_defines,
    compile_options,
    forced_arch,
    kernel_cache_dir,
    kernel_defines,
    kernel_source,
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
    loaded once per process. Honours :data:`edgecli.cuda.kernel.ARCH_ENV`."""
    key = (device, variant, forced_arch())
    with _kernels_lock:
        loaded = _kernels.get(key)
        if loaded is None:
            loaded = _load(device, variant, key[2])
            _kernels[key] = loaded
    return loaded


def _device_arch(device: int, forced: int | None) -> int:
    """The compute capability of ``device`` as a number (90); KernelBuildError where
    :data:`edgecli.cuda.kernel.ARCH_ENV` forces a newer one."""
    major, minor = compute_capability(device)
    arch = 10 * major + minor
    if forced is not None and forced > arch:
        raise KernelBuildError(
            f"{ARCH_ENV}={forced} asks for a newer architecture than CUDA device {device} "
            f"(sm_{arch}) has"
        )
    return arch


def _load(device: int, variant: Variant, forced: int | None) -> LoadedKernel:
    arch = _device_arch(device, forced)
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
    from disk), loaded once per process. Honours :data:`edgecli.cuda.kernel.ARCH_ENV`."""
    forced = forced_arch()
    key = (device, norm, forced)
    with _kernels_lock:
        loaded = _canny.get(key)
        if loaded is None:
            arch = _device_arch(device, forced)
            with cupy.cuda.Device(device):
                functions, _ = load_kernels(
                    CANNY_FILE, CANNY_KERNELS, canny_defines(norm), forced or arch,
                    ptx=forced is not None, label=norm,
                )  # fmt: skip
            named = dict(zip(CANNY_KERNELS, functions, strict=True))
            loaded = _canny[key] = CannyKernels.from_functions(named, norm, device)
    return loaded


_named: dict[tuple[int, str, tuple[str, ...]], dict] = {}


def kernels_on(device: int, name: str, kernels: tuple[str, ...]) -> dict:
    """The ``kernels`` of the CUDA file ``name`` (one without variants) on ``device``, by
    name: compiled once per machine (then read from disk), loaded once per process, whichever
    thread asks first."""
    key = (device, name, kernels)
    with _kernels_lock:
        loaded = _named.get(key)
        if loaded is None:
            major, minor = compute_capability(device)
            with cupy.cuda.Device(device):
                functions, _ = load_kernels(name, kernels, (), 10 * major + minor)
            loaded = _named[key] = dict(zip(kernels, functions, strict=True))
    return loaded


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
    """The ``kernels`` of the CUDA file ``name`` (in this folder) compiled with ``defines`` for
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
    """A file holding ``name`` compiled with ``defines`` for ``arch`` (machine code, or
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
        write_atomic(cached, code, make_folder=True)  # the cache is edgecli's folder
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


def compute_capability(device: int) -> tuple[int, int]:
    props = cupy.cuda.runtime.getDeviceProperties(device)
    return props["major"], props["minor"]


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


def device_description(device: int) -> str:
    props = cupy.cuda.runtime.getDeviceProperties(device)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return f"{name} (device {device}, sm_{props['major']}{props['minor']})"
