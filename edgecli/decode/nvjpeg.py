"""nvJPEG's batched decoder through ctypes: JPEGs to Y, Cb, Cr planes in device memory.

edgecli needs the planes at their native sampling, which only nvJPEG's own C API hands over
for subsampled files (``NVJPEG_OUTPUT_YUV``): the upsampling and colour conversion that make
cv2.imdecode's frame are then done bit for bit by ``cuda/decode.cu``. The library comes with
the ``nvidia-nvjpeg`` wheel (CUDA 13: ``nvidia/cu13/lib/libnvjpeg.so.13``) or
``nvidia-nvjpeg-cu12``, which edgecli's cuda13 and cuda12 extras bring; a CUDA toolkit's copy on
the loader's path is used where no wheel is installed. It links its CUDA runtime statically,
so it runs beside CuPy's on the same driver context, and takes CuPy's streams.

One :class:`BatchDecoder` per thread: nvJPEG's decoder state is not thread-safe.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path

MAX_COMPONENT = 4
OUTPUT_YUV = 1
BACKEND_GPU_HYBRID = 2
BACKEND_HARDWARE = 3
BACKENDS = {"hardware": BACKEND_HARDWARE, "cuda": BACKEND_GPU_HYBRID}

_STATUS = {
    1: "not initialized",
    2: "invalid parameter",
    3: "bad JPEG",
    4: "JPEG not supported",
    5: "allocator failure",
    6: "execution failed",
    7: "architecture mismatch (no such backend on this GPU)",
    8: "internal error",
    9: "implementation not supported",
    10: "incomplete bitstream",
}

# Where the wheels put the library, relative to the ``nvidia`` namespace package.
_WHEEL_PATHS = ("cu13/lib/libnvjpeg.so.13", "nvjpeg/lib/libnvjpeg.so.12")
_SYSTEM_NAMES = ("libnvjpeg.so.13", "libnvjpeg.so.12")


class NvjpegError(RuntimeError):
    """An nvJPEG call failed: ``status`` is nvJPEG's code."""

    def __init__(self, call: str, status: int):
        super().__init__(f"{call}: {_STATUS.get(status, 'status')} ({status})")
        self.call, self.status = call, status


class NvjpegUnavailable(RuntimeError):
    """libnvjpeg cannot be loaded; the message says what to install."""


class Image(ctypes.Structure):
    """nvjpegImage_t: up to four planes, each a device pointer and a pitch in bytes."""

    _fields_ = [
        ("channel", ctypes.c_void_p * MAX_COMPONENT),
        ("pitch", ctypes.c_size_t * MAX_COMPONENT),
    ]


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _candidates() -> list[str]:
    found = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found += [str(Path(root) / p) for p in _WHEEL_PATHS if (Path(root) / p).is_file()]
    return found + list(_SYSTEM_NAMES)


def library() -> ctypes.CDLL:
    """libnvjpeg, loaded once, with the signatures used here; NvjpegUnavailable if absent."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        broken = None  # why a library that is there would not load
        for name in _candidates():
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as exc:
                if "/" in name:  # a wheel's file: it exists, so its error is the reason
                    broken = broken or str(exc)
        else:
            if broken is not None:
                raise NvjpegUnavailable(f"libnvjpeg does not load ({broken})")
            raise NvjpegUnavailable(
                "libnvjpeg is not installed (install edgecli[cuda13], which brings "
                "nvidia-nvjpeg, or edgecli[cuda12])"
            )
        p, i, u, z = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
        pp, pi = ctypes.POINTER(p), ctypes.POINTER(i)
        signatures = {
            "nvjpegCreateEx": (i, p, p, u, pp),
            "nvjpegDestroy": (p,),
            "nvjpegJpegStateCreate": (p, pp),
            "nvjpegJpegStateDestroy": (p,),
            "nvjpegDecodeBatchedInitialize": (p, p, i, i, i),
            "nvjpegDecodeBatched": (p, p, pp, ctypes.POINTER(z), ctypes.POINTER(Image), p),
            "nvjpegGetProperty": (i, pi),
        }
        for name, args in signatures.items():
            function = getattr(lib, name)
            function.argtypes, function.restype = args, ctypes.c_int
        _lib = lib
        return lib


def version() -> str:
    lib = library()
    parts = []
    for kind in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int()
        _check("nvjpegGetProperty", lib.nvjpegGetProperty(kind, ctypes.byref(value)))
        parts.append(str(value.value))
    return ".".join(parts)


def _check(call: str, status: int) -> None:
    if status:
        raise NvjpegError(call, status)


class BatchDecoder:
    """nvJPEG's batched decoder on one backend ("hardware": the JPEG engines; "cuda": CUDA
    cores with GPU-assisted Huffman decoding) to planar Y, Cb, Cr. Not thread-safe."""

    def __init__(self, backend: str = "hardware"):
        lib = self.lib = library()
        self.backend = backend
        self.handle = ctypes.c_void_p()
        _check("nvjpegCreateEx", lib.nvjpegCreateEx(BACKENDS[backend], None, None, 0,
                                                      ctypes.byref(self.handle)))  # fmt: skip
        self.state = ctypes.c_void_p()
        try:
            _check("nvjpegJpegStateCreate",
                   lib.nvjpegJpegStateCreate(self.handle, ctypes.byref(self.state)))  # fmt: skip
        except NvjpegError:
            self.close()
            raise
        self.batch_size = 0

    def decode(
        self, data: Sequence[bytes], planes: Sequence[Sequence[tuple[int, int]]], stream: int
    ) -> None:
        """Enqueue the decoding of every JPEG in ``data`` on CUDA ``stream`` (a pointer):
        file i's planes go to ``planes[i]``, a (device pointer, pitch) per component (Y; or
        Y, Cb, Cr). Raises NvjpegError for the whole batch if any file fails."""
        n = len(data)
        if n != self.batch_size:
            _check("nvjpegDecodeBatchedInitialize", self.lib.nvjpegDecodeBatchedInitialize(
                self.handle, self.state, n, 1, OUTPUT_YUV))  # fmt: skip
            self.batch_size = n
        images = (Image * n)()
        for image, components in zip(images, planes, strict=True):
            for c, (pointer, pitch) in enumerate(components):
                image.channel[c], image.pitch[c] = pointer, pitch
        buffers = (ctypes.c_void_p * n)(
            *(ctypes.cast(ctypes.c_char_p(d), ctypes.c_void_p) for d in data)
        )
        lengths = (ctypes.c_size_t * n)(*(len(d) for d in data))
        status = self.lib.nvjpegDecodeBatched(
            self.handle, self.state, buffers, lengths, images, ctypes.c_void_p(stream)
        )
        if status:
            self.batch_size = 0  # a failed batch needs initialising again
            raise NvjpegError("nvjpegDecodeBatched", status)

    def close(self) -> None:
        lib = self.lib
        if self.state:
            lib.nvjpegJpegStateDestroy(self.state)
            self.state = ctypes.c_void_p()
        if self.handle:
            lib.nvjpegDestroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __enter__(self) -> BatchDecoder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
