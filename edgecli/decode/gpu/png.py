"""``png.cu``: PNGs' inflated scanlines to the contract's BGR frames, launched on a CuPy stream.

A batch is PNGs of one layout (width, height, colour type, bit depth; not interlaced) whose
image data has been inflated into one buffer, image i at ``i * image_stride``: per row a filter
byte, then the filtered scanline. :func:`launch_png_to_bgr` enqueues the kernel that undoes the
filters (in place) and writes each image's frame as ``cv2.imdecode(IMREAD_COLOR)`` gives it;
the rules it follows are in ``png.cu``'s header.

CuPy is imported only to load the kernel (:func:`kernel`): the launch takes the kernel as an
argument, so tests/cuda_host.py's host build runs it on the CPU, arguments and all.
"""

from __future__ import annotations

import numpy as np

from ..png_layout import PALETTE, check_colour, image_bytes

PNG_FILE = "png.cu"
KERNEL = "png_unfilter_to_bgr"
# png.cu's PNG_WARPS: the most warps a block (one image) has shared tiles for, and the warps a
# launch gives each image, so that an image's strips of 32 rows run in a deeper wavefront.
WARPS = 4
# A status of png.cu's: the image has a filter byte past 4 (a corrupt file).
BAD_FILTER = 1


def kernel(device: int):
    """png.cu's kernel on ``device`` (:func:`edgecli.cuda.build.kernels_on`)."""
    from ...cuda.build import kernels_on  # imports CuPy, which tests/cuda_host.py does without

    return kernels_on(device, PNG_FILE, (KERNEL,))[KERNEL]


def launch_png_to_bgr(
    function,
    data,
    image_stride: int,
    out,
    status,
    *,
    color_type: int,
    depth: int,
    palettes=None,
    orientation: int = 1,
    stream=None,
    warps: int = WARPS,
) -> None:
    """Enqueue, with ``function`` (:func:`kernel`'s, or a stand-in called the same way), the
    frames ``out`` (N, H, W, 3) uint8 of N PNGs of that size, ``color_type`` and ``depth``
    from their inflated data ``data`` (uint8, image i at ``i * image_stride``), which the kernel
    unfilters in place. ``orientation``: the files' EXIF orientation (their eXIf chunk's; 1 to
    8), which turns the frames as cv2 turns them; ``out`` is (N, W, H, 3) for 5 to 8.
    ``palettes``: (N, 256, 3) uint8 BGR (``PngLayout.palette_table``) for palette images,
    else None.
    ``status`` (N,) int32 gets 0 for each image decoded, or :data:`BAD_FILTER` for one with a
    corrupt filter byte (its frame is then incomplete). ``warps``: warps an image, 1 to
    :data:`WARPS`."""
    check_colour(color_type, depth)
    if out.dtype != np.uint8 or out.ndim != 4 or out.shape[3] != 3 or not out.flags.c_contiguous:
        raise ValueError(f"out must be contiguous uint8 (N, H, W, 3), got {out.dtype} {out.shape}")
    if orientation not in range(1, 9):
        raise ValueError(f"EXIF orientation must be 1 to 8, got {orientation!r}")
    n, height, width = out.shape[:3]
    if orientation >= 5:  # the frame is the image transposed
        height, width = width, height
    if n == 0:
        return
    if not (0 < height < 2**31 and 0 < width < 2**31):
        raise ValueError(f"a PNG is 1 to 2^31 - 1 pixels a side, got {width}x{height}")
    needed = image_bytes(width, height, color_type, depth)
    if image_stride < needed:
        raise ValueError(f"image_stride {image_stride} is shorter than an image's {needed} bytes")
    if data.dtype != np.uint8 or data.size < (n - 1) * image_stride + needed:
        raise ValueError(
            f"data must be uint8 holding {n} images {image_stride} bytes apart, "
            f"got {data.dtype} of {data.size} bytes"
        )
    if status.dtype != np.int32 or status.shape != (n,):
        raise ValueError(f"status must be int32 ({n},), got {status.dtype} {status.shape}")
    if color_type == PALETTE:
        if palettes is None or palettes.dtype != np.uint8 or palettes.shape != (n, 256, 3):
            got = "None" if palettes is None else f"{palettes.dtype} {palettes.shape}"
            raise ValueError(f"palette images need palettes uint8 ({n}, 256, 3), got {got}")
        if not palettes.flags.c_contiguous:
            raise ValueError("palettes must be contiguous")
        palette_arg = palettes
    else:
        palette_arg = np.uint64(0)  # never read
    if not 1 <= warps <= WARPS:
        raise ValueError(f"warps must be 1 to {WARPS}, got {warps!r}")
    args = (
        data, np.int64(image_stride), palette_arg, out, status, np.int32(width),
        np.int32(height), np.int32(color_type), np.int32(depth), np.int32(orientation),
    )  # fmt: skip
    function((n, 1, 1), (32, warps, 1), args, stream=stream)
