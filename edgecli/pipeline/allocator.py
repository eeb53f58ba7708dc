"""glibc's malloc, set to keep the memory a run frees for the frames that follow.

A run allocates and frees the same large buffers every frame: a decoded 1080p frame is 6 MB,
the CPU backend's temporaries are up to 8 MB each, a PNG's rows a quarter of a megabyte. With
glibc's defaults many of them are handed back to the kernel when freed (``munmap``, or a heap
trimmed with ``madvise``) and faulted in, page by page, when the next frame allocates them
again, most of all when one thread frees what another allocated, as the GPU path's frames are.
:func:`keep_freed_memory` sets two of glibc's malloc parameters (``mallopt``) so that they
stay in the heap for reuse:

- ``M_MMAP_THRESHOLD`` 32 MB (glibc's ceiling for it): blocks up to that size come from a
  heap, not from ``mmap``;
- ``M_TRIM_THRESHOLD`` 1 GB: a heap gives memory back only when that much of it is free.

The process's memory then stays near its peak instead of shrinking between frames; the peak
itself is still set by the options.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses more
TRIM_THRESHOLD = 1 << 30
# Settings a user may have made for glibc's malloc, which are then left as they are.
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory for reuse (see the module's text), once for
    the whole process and for good. Return whether it was set: not where the C library is
    not glibc, nor where the environment sets malloc's parameters already (those stay)."""
    if any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: its mallopt, if any, differs
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
