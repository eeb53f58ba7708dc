"""``edgecli._native``, the C half of the worker threads' work on each PNG, where it was built.

It encodes a 1-bit PNG and writes a file atomically, each in one call that lets go of the GIL
for all of it (``_native.c``); :mod:`edgecli.output.png` and :mod:`edgecli.output.sinks` call it
where :data:`c` is a module, and do the same work in Python where it is None (no C compiler or
zlib's header when edgecli was installed: setup.py builds it optionally). The results are the
same, the PNGs byte for byte where both link one zlib. It also reads a JPEG's Huffman codes as
libjpeg-turbo does, for :func:`edgecli.decode.jpeg_header.scan_damage`, which without it checks
only the markers in the scans (so ``--decode auto`` then keeps JPEGs on the CPU); and it decodes
PNGs of 8 and 16 bits for :func:`edgecli.decode.cpu.png_frame`, which without it leaves every
PNG to cv2, inflating them (and checking their chunks' CRCs) with the ``deflate`` package's
libdeflate, else the system's, else zlib."""

from __future__ import annotations

import importlib.util
from pathlib import Path

try:
    import edgecli._native as c
except ImportError:
    c = None


def deflate_library() -> Path | None:
    """The library of the ``deflate`` package (a dependency, which carries libdeflate whole),
    found without importing it; None where it is not installed."""
    try:
        spec = importlib.util.find_spec("deflate")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for library in sorted(Path(folder).glob("_deflate*.so")):
            return library
    return None


def _take_libdeflate() -> None:
    """The deflate package's libdeflate for the C half, before any PNG is decoded or walked:
    it inflates and checks CRCs faster than zlib, and comes with edgecli where the system may
    have no libdeflate."""
    library = deflate_library() if c is not None else None
    if library is not None:
        c.use_libdeflate(str(library))


_take_libdeflate()


def description() -> str:
    """What ``edgecli info`` says of it."""
    if c is None:
        return (
            "Python (edgecli._native is not built: reinstall edgecli where a C compiler and "
            "zlib's header are, such as Debian's build-essential and zlib1g-dev)"
        )
    return f"C, without the GIL (edgecli._native, zlib {c.zlib_version()})"


def jpeg_walk_missing() -> str | None:
    """Why a JPEG's scans cannot be judged here as libjpeg-turbo reads them (None: they can).
    Without that walk, damage libjpeg-turbo reads in a way of its own passes for whole, and the
    JPEG engines would give other pixels of such a file than the CPU decoder: so ``--decode
    auto`` keeps JPEGs on the CPU where this gives a reason."""
    if getattr(c, "jpeg_scan_damage", None) is None:
        return "edgecli._native, which reads a JPEG's scans as libjpeg-turbo does, is not built"
    return None


def png_description() -> str:
    """What ``edgecli info`` says of decoding PNGs on the CPU."""
    inflater = getattr(c, "png_inflater", None)
    if inflater is None:
        return "cv2 (libpng)"
    return f"C for gray and RGB(A), inflated by {inflater()}; cv2 (libpng) for the rest"
