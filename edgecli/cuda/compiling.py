"""What compiling a CUDA source needs, whichever it is; no CuPy here.

Where the ``.cu`` files are (:func:`cuda_dir`: the checkout's top-level ``cuda/``, or the
wheel's copy inside the package), a source read with a ``#line`` directive, NVRTC's options for
a file's ``-D`` definitions on an architecture, the architectures edgecli runs on and
``make kernel-check`` compiles for, the override that compiles for an older one
(:data:`ARCH_ENV`), and where compiled code is cached under which key. What the kernels'
definitions are is their owners' (:mod:`edgecli.edges.variants` for ``edges.cu``,
``canny.cu`` and ``deflate.cu``); :mod:`edgecli.cuda.build` compiles and loads.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from ..errors import OptionError
from ..options.numerals import is_whole_number
from ..output.cache import cache_dir

# The oldest GPUs the kernel runs on (it uses warp shuffles with masks, dp2a, 16-byte loads; and
# cp.async from sm_80 on), and the architectures --check compiles for: Volta, Turing, Ampere
# (A100, and A10/RTX 30), Ada (L4, RTX 40), Hopper, Blackwell (B200, RTX 50).
MIN_COMPUTE_CAPABILITY = (7, 0)
CHECK_ARCHS = (70, 75, 80, 86, 89, 90, 100, 120)
# Where NVRTC 13 stops: CUDA 13 compiles for sm_75 and newer only, so Volta needs CUDA 12's.
CUDA13_MIN_ARCH = 75

# The kernel sources: the checkout's top-level cuda/, which pyproject.toml's package-dir ships in
# the wheel as the package's kernels/ (data only, no module). The installed folder is looked for
# first: beside an installed package is site-packages, whose cuda/ is NVIDIA's.
_PACKAGE = Path(__file__).resolve().parent.parent
SHIPPED_KERNELS = _PACKAGE / "kernels"
CHECKOUT_KERNELS = _PACKAGE.parent / "cuda"

# An environment setting for tests and benchmarks: compile the kernel as PTX for this older
# compute capability (e.g. "75" or "80"), which the driver then compiles for the device, so that
# a newer GPU runs the code path an older one would (without cp.async below 80).
ARCH_ENV = "EDGECLI_CUDA_ARCH"


def compile_options(defines: tuple[str, ...], arch: int, *, ptx: bool = False) -> tuple[str, ...]:
    """NVRTC's options for a file's ``defines`` on compute capability ``arch`` (e.g. 90):
    machine code for that architecture, or with ``ptx`` PTX for it (which the driver compiles
    for newer GPUs)."""
    target = f"compute_{arch}" if ptx else f"sm_{arch}"
    return ("--std=c++17", f"--gpu-architecture={target}", *defines)


def cuda_dir() -> Path:
    """Where the ``.cu`` files are: :data:`SHIPPED_KERNELS` inside the package where it exists
    (an installed wheel, which carries the checkout's ``cuda/`` there), else
    :data:`CHECKOUT_KERNELS`, the checkout's ``cuda/`` beside the package (the package run from a
    checkout or installed editable)."""
    return SHIPPED_KERNELS if SHIPPED_KERNELS.is_dir() else CHECKOUT_KERNELS


def kernel_path(name: str) -> Path:
    """The path of the CUDA source ``name`` (``edges.cu``, ``decode.cu``)."""
    path = cuda_dir() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"CUDA kernel source not found at {path}; reinstall edgecli (the wheel ships it)"
        )
    return path


@lru_cache(maxsize=4)
def kernel_source(name: str) -> str:
    """A kernel source, with a #line directive so compiler messages name the real file."""
    path = kernel_path(name)
    return f'#line 1 "{path.as_posix()}"\n' + path.read_text(encoding="utf-8")


def forced_arch() -> int | None:
    """The compute capability :data:`ARCH_ENV` asks the kernel to be compiled for, or None;
    OptionError for a value that is not one of :data:`CHECK_ARCHS`."""
    value = os.environ.get(ARCH_ENV, "").strip()
    if not value:
        return None
    digits = value.removeprefix("sm_").removeprefix("compute_")
    if not is_whole_number(digits) or int(digits) not in CHECK_ARCHS:
        listed = ", ".join(str(a) for a in CHECK_ARCHS)
        raise OptionError(f"{ARCH_ENV} must be one of {listed}, got {value!r}")
    return int(digits)


def kernel_cache_dir() -> Path:
    """Where compiled kernels are kept across runs: ``$XDG_CACHE_HOME/edgecli/kernels`` (by
    default ``~/.cache/edgecli/kernels``)."""
    return cache_dir() / "kernels"


def cache_key(source: str, options: tuple[str, ...], compiler: str) -> str:
    """A file name for the compiled code of ``source`` under ``options`` by ``compiler``: a
    hash of all three, so that any change compiles anew."""
    digest = hashlib.sha256("\0".join((source, *options, compiler)).encode()).hexdigest()
    return digest[:40]
