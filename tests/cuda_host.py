"""CUDA kernels run on the CPU: a ``.cu`` file's real source compiled by the host's C++ compiler.

``cuda_host_src/shim.h`` gives CUDA's kernel keywords and thread indices a meaning in C++ and
``EMULATE(kernel)`` a launcher that runs a grid's blocks in turn, each block's threads as
fibers (so shared memory, barriers, warp functions and atomics work);
``cuda_host_src/<name>.cpp`` includes the ``.cu`` file and names its kernels. :func:`load_file`
builds that into a shared library (once per source, compiler and flags: the library is kept
under the folder given, named by their hash) and returns its kernels as :class:`HostKernel`,
called as a ``cupy.RawKernel`` is, with NumPy arrays for device buffers. A kernel's
``order`` says in which order a block's threads run between two barriers (``ORDERS``); what a
GPU leaves undefined (a barrier some threads never reach, a warp function's mask naming a lane
that is elsewhere) raises :class:`HostLaunchError`. Blocks that wait for each other cannot run.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from edgecli.cuda.compiling import kernel_path

SOURCES = Path(__file__).resolve().parent / "cuda_host_src"
# Undefined behaviour (signed overflow, a shift too far, a misaligned read) traps, ending the
# test process where it happens: on a GPU the same code would go on with a wrong value.
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-fsanitize=undefined")
FLAGS += ("-fsanitize-undefined-trap-on-error",)

# A parameter's code (shim.h's cuda_host::code) -> its ctypes type, and the NumPy scalar type an
# argument must have: what CuPy packs for a kernel is the argument's own type, so a launch that
# passes another (a Python int is 64-bit) would misread on a GPU.
_SCALARS = {
    "i": (ctypes.c_int32, np.int32),
    "I": (ctypes.c_uint32, np.uint32),
    "q": (ctypes.c_int64, np.int64),
    "Q": (ctypes.c_uint64, np.uint64),
    "f": (ctypes.c_float, np.float32),
}


def compiler() -> str | None:
    """The C++ compiler ($CXX, else c++), or None where there is none."""
    return shutil.which(os.environ.get("CXX", "c++"))


def for_tests(
    tmp_path_factory, name: str, kernels: tuple[str, ...], driver: Path | None = None
) -> dict[str, HostKernel]:
    """:func:`load_file` for a session fixture: the ``kernels`` of ``cuda/<name>.cu``
    through ``driver`` (default ``cuda_host_src/<name>.cpp``), built once and kept between
    sessions beside pytest's temporary folders; a skip saying why where there is no C++
    compiler."""
    import pytest

    if compiler() is None:
        pytest.skip(f"no C++ compiler ($CXX or c++) to build {name}.cu for the host")
    folder = tmp_path_factory.getbasetemp().parent / "cuda-host"
    driver = driver or SOURCES / f"{name}.cpp"
    return load_file(kernel_path(f"{name}.cu"), driver, kernels, folder)


def load_file(
    kernel_file: Path, driver: Path, kernels: tuple[str, ...], folder: Path
) -> dict[str, HostKernel]:
    """The ``kernels`` of ``kernel_file``, built for the host through ``driver`` (the
    ``.cpp`` that includes it and names them) or found built in ``folder``, by name.
    RuntimeError with the compiler's message where it does not build."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler ($CXX or c++)")
    options = (*FLAGS, f'-DKERNEL_FILE="{kernel_file}"', "-x", "c++")
    digest = hashlib.sha256()
    for part in (cxx, *options):
        digest.update(part.encode() + b"\0")
    for source in (SOURCES / "shim.h", driver, kernel_file):
        digest.update(source.read_bytes() + b"\0")
    library = folder / f"{Path(kernel_file).stem}-{digest.hexdigest()[:16]}.so"
    if not library.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = library.with_suffix(f".{os.getpid()}.part")
        done = subprocess.run(
            [cxx, *options, str(driver), "-o", str(partial)], capture_output=True, text=True
        )
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"{kernel_file} did not build for the host:\n{done.stderr}")
        partial.replace(library)  # whole or absent, for a session building it at the same time
    lib = ctypes.CDLL(str(library))
    return {kernel: HostKernel(lib, kernel) for kernel in kernels}


# How a block's threads take turns between barriers: in index order, in reverse, or shuffled
# (a seed >= 2). A kernel that gives one result under every order has no race between them.
ORDERS = {"forward": 0, "reverse": 1}


class HostLaunchError(RuntimeError):
    """A launch did what a GPU leaves undefined (a barrier or warp function that cannot be met)."""


class HostKernel:
    """One kernel of a host build, called as ``cupy.RawKernel``: ``(grid, block, args)``. Arrays
    stand for device buffers (their data pointers), ``np.uint64`` for raw device pointers; every
    other argument must have the NumPy type of its parameter (TypeError naming it otherwise)."""

    def __init__(self, lib: ctypes.CDLL, name: str):
        self.name = name
        self._run = getattr(lib, f"emulate_{name}")
        self._run.restype = ctypes.c_char_p
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        self.order: str | int = "forward"
        signature = getattr(lib, f"signature_{name}")
        signature.restype = ctypes.c_char_p
        self.signature = signature().decode()

    def __call__(self, grid, block, args, *, stream=None, shared_mem: int = 0) -> None:
        if len(args) != len(self.signature):
            raise TypeError(f"{self.name}: {len(self.signature)} arguments, got {len(args)}")
        if shared_mem:
            raise ValueError(f"{self.name}: dynamic shared memory cannot run on the host")
        typed = enumerate(zip(self.signature, args, strict=True))
        values = [self._value(i, code, arg) for i, (code, arg) in typed]
        pointers = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
        dims = [(ctypes.c_uint * 3)(*(tuple(d) + (1,) * (3 - len(d)))) for d in (grid, block)]
        order = ORDERS.get(self.order, self.order)
        if not isinstance(order, int) or order < 0:
            raise ValueError(f"{self.name}: order {self.order!r} is not one of {ORDERS} or a seed")
        error = self._run(*dims, pointers, order)
        if error is not None:
            raise HostLaunchError(f"{self.name}: {error.decode()}")

    def _value(self, index: int, code: str, arg):
        where = f"{self.name} argument {index}"
        if code == "p":
            if isinstance(arg, np.ndarray):
                return ctypes.c_void_p(arg.ctypes.data)
            if isinstance(arg, np.uint64):
                return ctypes.c_void_p(int(arg))
            raise TypeError(f"{where} is a pointer: expected an array or np.uint64, got {arg!r}")
        ctype, numpy_type = _SCALARS[code]
        if type(arg) is not numpy_type:
            raise TypeError(f"{where}: expected {numpy_type.__name__}, got {type(arg).__name__}")
        return ctype(arg.item())
