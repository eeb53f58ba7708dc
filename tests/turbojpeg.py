"""A JPEG's component planes as libjpeg-turbo decodes them, before upsampling (tests only).

TurboJPEG's ``tjDecompressToYUVPlanes`` runs the decoder with ``raw_data_out``: Y, Cb and Cr
after the (ISLOW) IDCT, each at its own sampling, cropped to the component's size - what
nvJPEG's ``NVJPEG_OUTPUT_YUV`` hands over. The library is the system's libturbojpeg (Debian:
``libturbojpeg0``, which ``make test`` installs where it can); the TurboJPEG 2 API used here
is kept by libjpeg-turbo 3. ``load()`` returns None where the library is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools

import numpy as np

# TJSAMP_* in turbojpeg.h (441 from libjpeg-turbo 3.0 on).
SUBSAMPLINGS = {0: "444", 1: "422", 2: "420", 3: "gray", 4: "440", 5: "411", 6: "441"}


# turbojpeg.h: TJPF_BGR, TJFLAG_STOPONWARNING, and tjGetErrorCode's TJERR_WARNING.
_BGR, _STOP_ON_WARNING, _WARNING = 1, 8192, 0


class TurboJPEGError(RuntimeError):
    pass


@functools.cache
def load() -> ctypes.CDLL | None:
    """The system's libturbojpeg, or None where it is not installed."""
    for name in (ctypes.util.find_library("turbojpeg"), "libturbojpeg.so.0"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.tjInitDecompress.restype = ctypes.c_void_p
        lib.tjDestroy.argtypes = [ctypes.c_void_p]
        lib.tjGetErrorStr2.restype = ctypes.c_char_p
        lib.tjGetErrorStr2.argtypes = [ctypes.c_void_p]
        lib.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong]
        lib.tjDecompressHeader3.argtypes += [ctypes.POINTER(ctypes.c_int)] * 4
        lib.tjPlaneWidth.argtypes = lib.tjPlaneHeight.argtypes = [ctypes.c_int] * 3
        lib.tjDecompressToYUVPlanes.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
            ctypes.c_int,
        ]
        lib.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong]
        lib.tjDecompress2.argtypes += [ctypes.c_void_p] + [ctypes.c_int] * 5
        lib.tjGetErrorCode.argtypes = [ctypes.c_void_p]
        return lib
    return None


def decode_planes(data: bytes) -> tuple[list[np.ndarray], str, int, int]:
    """``([Y] or [Y, Cb, Cr], subsampling, width, height)`` of a baseline JPEG."""
    with _decompressor() as (lib, handle):
        header = _header(lib, handle, data)
        if isinstance(header, str):
            raise TurboJPEGError(header)
        width, height, samp = header
        count = 1 if SUBSAMPLINGS[samp] == "gray" else 3
        shapes = [
            (lib.tjPlaneHeight(i, height, samp), lib.tjPlaneWidth(i, width, samp))
            for i in range(count)
        ]
        planes = [np.zeros(shape, np.uint8) for shape in shapes]
        pointers = (ctypes.c_void_p * 3)(*(p.ctypes.data for p in planes))
        strides = (ctypes.c_int * 3)(*(p.shape[1] for p in planes))
        if lib.tjDecompressToYUVPlanes(handle, data, len(data), pointers, 0, strides, 0, 0):
            raise TurboJPEGError(lib.tjGetErrorStr2(handle).decode())
        # TurboJPEG pads the Y plane to whole chroma samples (a 15 x 15 4:2:0 file has a
        # 16 x 16 Y plane, its chroma planes 8 x 8): crop it to the image.
        planes[0] = planes[0][:height, :width]
        return planes, SUBSAMPLINGS[samp], width, height


def decode_complaint(data: bytes) -> str | None:
    """What libjpeg-turbo says decoding ``data`` whole into BGR, stopping at its first
    warning: ``"warning: ..."`` or ``"error: ..."`` in its words, None where it says nothing."""
    with _decompressor() as (lib, handle):
        header = _header(lib, handle, data)
        if isinstance(header, str):
            return f"error: {header}"
        width, height, _ = header
        pixels = ctypes.create_string_buffer(width * height * 3)
        if lib.tjDecompress2(
            handle, data, len(data), pixels, width, 0, height, _BGR, _STOP_ON_WARNING
        ):
            kind = "warning" if lib.tjGetErrorCode(handle) == _WARNING else "error"
            return f"{kind}: {lib.tjGetErrorStr2(handle).decode()}"
        return None


@contextlib.contextmanager
def _decompressor():
    """(the library, a TurboJPEG decompressor handle), destroyed after the block."""
    lib = load()
    if lib is None:
        raise TurboJPEGError("libturbojpeg is not installed")
    handle = lib.tjInitDecompress()
    try:
        yield lib, handle
    finally:
        lib.tjDestroy(handle)


def _header(lib, handle, data: bytes) -> tuple[int, int, int] | str:
    """(width, height, subsampling) from the JPEG's header, or libjpeg-turbo's error."""
    width, height, samp, colorspace = (ctypes.c_int() for _ in range(4))
    if lib.tjDecompressHeader3(handle, data, len(data), width, height, samp, colorspace):
        return lib.tjGetErrorStr2(handle).decode()
    return width.value, height.value, samp.value
