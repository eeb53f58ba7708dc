"""The CUDA kernel source and its compile-time variants; no CuPy here.

``edges.cu`` (in the checkout's top-level ``cuda/``, found by :func:`cuda_dir`) is compiled once
per variant: the norm and the border mode are ``-D`` definitions (validated and emitted by
:func:`kernel_defines`), the threshold and the frame sizes are runtime arguments. One form of
the kernel runs on every GPU from compute capability 7.0 on; :mod:`edgecli.cuda.build` compiles
it for the device at hand through NVRTC and caches the result on disk. :mod:`edgecli.cuda.check`
(``make kernel-check``) compiles every variant for every architecture in :data:`CHECK_ARCHS` on a
machine without a GPU.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..cache import cache_dir
from ..errors import OptionError
from ..params import BORDERS, NORMS, is_whole_number

KERNEL_FILE = "edges.cu"
KERNEL_NAME = "edges_bgr"
PACK_KERNEL_NAME = "pack_rows_1bit"  # in the same file: edge maps into 1-bit PNG scanlines

# The work item one warp computes: 128 columns (32 lanes x 4 pixels) by 30 rows, staged as 32 rows
# of STAGE_STRIDE bytes in shared memory; WARPS warps a block, each on its own items. Fixed in
# edges.cu, which static_asserts the same numbers.
TILE_W = 128
TILE_H = 30
WARPS = 4
THREADS = 32 * WARPS
STAGE_STRIDE = 416
SHARED_BYTES = WARPS * (TILE_H + 2) * STAGE_STRIDE  # dynamic shared memory of one block
# The persistent grid's warps an SM, per norm: where more blocks fit, the grid is held to this
# many warps an SM (blocks_per_sm). On the H200 (benchmarks/kernel.py --blocks-per-sm), 3 blocks
# of 4 warps an SM were fastest for l1 (2.71 us a 1080p frame, against 3.13 at 2 and 2.79 at 4)
# and as fast as 4 for l2 (2.86 and 2.83).
WARPS_PER_SM = {"l1": 12, "l2": 12}

# deflate.cu (edgecli.cuda.deflate): its kernel, block size and per-block scratch (the size of
# its deflate_block, static_asserted there), and zlib's tokens a block at memLevel 9.
DEFLATE_FILE = "deflate.cu"
DEFLATE_KERNEL = "deflate_rle"
DEFLATE_THREADS = 512
DEFLATE_BLOCK_BYTES = 2920
DEFLATE_BLOCK_TOKENS = 32767


def deflate_blocks_for(frame_bytes: int) -> int:
    """Scratch blocks the zlib stream of a frame of ``frame_bytes`` may need: one per 32767
    tokens, plus the last (a token covers at least one byte)."""
    return frame_bytes // DEFLATE_BLOCK_TOKENS + 1


def deflate_out_bytes(frame_bytes: int) -> int:
    """Room for the zlib stream of a frame of ``frame_bytes``: every block coded shorter than
    stored, the header and the Adler-32; whole 32-bit words (deflate.cu's deflate_out_bytes)."""
    return (frame_bytes + 4 * deflate_blocks_for(frame_bytes) + 8 + 3) // 4 * 4


# canny.cu (edgecli.cuda.canny): its kernels, in launch order, and their geometry, which
# canny.cu static_asserts: 32 x 32 tiles, canny_local's threads, canny_merge's (a tile's top row
# and its side columns below it), and the per-pixel passes'. Its norm is a -D definition
# (canny_defines); Canny's border is always cv2's BORDER_REPLICATE.
CANNY_FILE = "canny.cu"
CANNY_KERNELS = ("canny_local", "canny_merge", "canny_flag", "canny_output")
CANNY_TILE = 32
CANNY_LOCAL_THREADS = 256
CANNY_MERGE_THREADS = CANNY_TILE + 2 * (CANNY_TILE - 1)
CANNY_PIXEL_THREADS = 256
_CANNY_NORM_DEFINES = {"l1": "CANNY_NORM_L1", "l2": "CANNY_NORM_L2"}


def canny_defines(norm: str) -> tuple[str, ...]:
    """The ``-D`` options that select ``norm`` in ``canny.cu``; raise naming a bad value."""
    if norm not in _CANNY_NORM_DEFINES:
        raise OptionError(f"Canny norm must be one of {', '.join(NORMS)}, got {norm!r}")
    return (f"-DCANNY_NORM={_CANNY_NORM_DEFINES[norm]}",)


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

_NORM_DEFINES = {"l1": "EDGES_NORM_L1", "l2": "EDGES_NORM_L2"}
_BORDER_DEFINES = {
    "replicate": "EDGES_BORDER_REPLICATE",
    "reflect101": "EDGES_BORDER_REFLECT101",
    "constant": "EDGES_BORDER_CONSTANT",
}


@dataclass(frozen=True)
class Variant:
    """One compiled form of the kernel: everything that is a ``-D`` definition."""

    norm: str = "l1"
    border: str = "replicate"

    def __post_init__(self) -> None:
        kernel_defines(self)  # validates

    @property
    def name(self) -> str:
        return f"{self.norm}-{self.border}"


def kernel_defines(variant: Variant) -> tuple[str, ...]:
    """The ``-D`` options that select ``variant`` in ``edges.cu``; raise naming a bad value."""
    if variant.norm not in _NORM_DEFINES:
        raise OptionError(f"kernel norm must be one of {', '.join(NORMS)}, got {variant.norm!r}")
    if variant.border not in _BORDER_DEFINES:
        raise OptionError(
            f"kernel border must be one of {', '.join(BORDERS)}, got {variant.border!r}"
        )
    return (
        f"-DEDGES_NORM={_NORM_DEFINES[variant.norm]}",
        f"-DEDGES_BORDER={_BORDER_DEFINES[variant.border]}",
    )


def compile_options(defines, arch: int, *, ptx: bool = False) -> tuple[str, ...]:
    """NVRTC's options for a kernel ``Variant`` (or a file's own ``defines``, a tuple) on
    compute capability ``arch`` (e.g. 90): machine code for that architecture, or with ``ptx``
    PTX for it (which the driver compiles for newer GPUs)."""
    if isinstance(defines, Variant):
        defines = kernel_defines(defines)
    target = f"compute_{arch}" if ptx else f"sm_{arch}"
    return ("--std=c++17", f"--gpu-architecture={target}", *defines)


def blocks_per_sm(variant: Variant, fitting: int) -> int:
    """Blocks the persistent grid puts on an SM where ``fitting`` fit at once: held to
    :data:`WARPS_PER_SM` warps for the variant's norm, at least one block."""
    return max(1, min(fitting, WARPS_PER_SM[variant.norm] // WARPS))


def all_variants() -> list[Variant]:
    """Every norm x border: what ``--check`` compiles."""
    return [Variant(norm, border) for norm, border in itertools.product(NORMS, BORDERS)]


def cuda_dir() -> Path:
    """Where the ``.cu`` files are: :data:`SHIPPED_KERNELS` inside the package where it exists
    (an installed wheel, which carries the checkout's ``cuda/`` there), else
    :data:`CHECKOUT_KERNELS`, the checkout's ``cuda/`` beside the package (the package run from a
    checkout or installed editable)."""
    return SHIPPED_KERNELS if SHIPPED_KERNELS.is_dir() else CHECKOUT_KERNELS


def kernel_path(name: str = KERNEL_FILE) -> Path:
    """The path of the CUDA source ``name`` (``edges.cu``, ``decode.cu``)."""
    path = cuda_dir() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"CUDA kernel source not found at {path}; reinstall edgecli (the wheel ships it)"
        )
    return path


@lru_cache(maxsize=4)
def kernel_source(name: str = KERNEL_FILE) -> str:
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
