"""Compiling and loading CUDA sources: NVRTC for the device at hand, a cache on disk.

A ``.cu`` file of the top-level ``cuda/`` (found by :mod:`edgecli.cuda.compiling`) is compiled
with its ``-D`` definitions once per machine, kept in edgecli's cache
(:func:`edgecli.cuda.compiling.kernel_cache_dir`) and loaded once per process:
:func:`load_kernels` for any file's kernels, :func:`kernels_on` for a file without variants
(the decoders' ``decode.cu``, ``inflate.cu``, ``png.cu``). Also what a device is
(:func:`compute_capability`, :func:`device_arch`, :func:`device_description`). The edge
kernels' variants are loaded by :mod:`edgecli.edges.kernels`. Imports CuPy.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import cupy

from ..errors import KernelBuildError, OutputError
from ..output.sinks import write_atomic
from .compiling import (
    ARCH_ENV,
    CUDA13_MIN_ARCH,
    cache_key,
    compile_options,
    kernel_cache_dir,
    kernel_source,
)

_named: dict[tuple[int, str, tuple[str, ...]], dict] = {}
_named_lock = threading.Lock()


def device_arch(device: int, forced: int | None) -> int:
    """The compute capability of ``device`` as a number (90); KernelBuildError where
    :data:`edgecli.cuda.compiling.ARCH_ENV` forces a newer one."""
    major, minor = compute_capability(device)
    arch = 10 * major + minor
    if forced is not None and forced > arch:
        raise KernelBuildError(
            f"{ARCH_ENV}={forced} asks for a newer architecture than CUDA device {device} "
            f"(sm_{arch}) has"
        )
    return arch


def kernels_on(device: int, name: str, kernels: tuple[str, ...]) -> dict:
    """The ``kernels`` of the CUDA file ``name`` (one without variants) on ``device``, by
    name: compiled once per machine (then read from disk), loaded once per process, whichever
    thread asks first."""
    key = (device, name, kernels)
    with _named_lock:
        loaded = _named.get(key)
        if loaded is None:
            major, minor = compute_capability(device)
            with cupy.cuda.Device(device):
                functions, _ = load_kernels(name, kernels, (), 10 * major + minor)
            loaded = _named[key] = dict(zip(kernels, functions, strict=True))
    return loaded


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
    from cupy.cuda import nvrtc  # only a compile needs it, not a kernel read from the cache

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


def device_description(device: int) -> str:
    props = cupy.cuda.runtime.getDeviceProperties(device)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return f"{name} (device {device}, sm_{props['major']}{props['minor']})"
