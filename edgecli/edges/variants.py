"""The kernels' compile-time variants and geometry: what ``edges.cu``, ``canny.cu`` and
``deflate.cu`` take as ``-D`` definitions and launch with; no CuPy here.

``edges.cu`` is compiled once per variant: the norm and the border mode are ``-D`` definitions
(validated and emitted by :func:`kernel_defines`), the threshold and the frame sizes are
runtime arguments. One form of the kernel runs on every GPU from compute capability 7.0 on;
:mod:`edgecli.edges.kernels` has :mod:`edgecli.cuda.build` compile it for the device at hand
through NVRTC and cache the result on disk. ``make kernel-check`` (``scripts/kernel_check.py``)
compiles every variant for every architecture in
:data:`edgecli.cuda.compiling.CHECK_ARCHS` on a machine without a GPU.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..errors import OptionError
from ..options.params import BORDERS, NORMS

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
# many warps an SM (blocks_per_sm): 3 blocks of 4 warps, the fastest count for both norms
# where it was timed; more resident blocks do not run a frame sooner (benchmarks/kernel.py
# --blocks-per-sm times every count that fits, on the GPU at hand).
WARPS_PER_SM = {"l1": 12, "l2": 12}

# deflate.cu (edgecli.edges.cuda_deflate): its kernel, block size and per-block scratch (the size of
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


# canny.cu (edgecli.edges.cuda_canny): its kernels, in launch order, and their geometry, which
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


def blocks_per_sm(variant: Variant, fitting: int) -> int:
    """Blocks the persistent grid puts on an SM where ``fitting`` fit at once: held to
    :data:`WARPS_PER_SM` warps for the variant's norm, at least one block."""
    return max(1, min(fitting, WARPS_PER_SM[variant.norm] // WARPS))


def all_variants() -> list[Variant]:
    """Every norm x border: what ``--check`` compiles."""
    return [Variant(norm, border) for norm, border in itertools.product(NORMS, BORDERS)]
