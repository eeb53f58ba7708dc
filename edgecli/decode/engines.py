"""The GPU's decoding libraries opened: nvJPEG's decoders (opened early, on a thread of their
own, and kept between runs: opening one is slow) and PyNvVideoCodec for NVDEC; and
whether each can run here. No CuPy; each library is loaded only when asked for.
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import Future
from pathlib import Path

from ..cuda.driver import make_current
from . import nvjpeg

_kept: dict = {}  # decoders opened by a check, by (backend, device), for a run to use
_opening: dict = {}  # (backend, device) -> the Future of a decoder opening on a thread
_kept_lock = threading.Lock()


def jpeg_unusable_reason(backend: str, keep: bool = False, device: int = 0) -> str | None:
    """None when nvJPEG's ``backend`` ("hardware", "cuda") opens here, else why not; with
    ``keep``, the decoder opened stays for :func:`take_jpeg_decoder` (on ``device``, which
    must be the calling thread's current one)."""
    try:
        decoder = nvjpeg.BatchDecoder(backend)
    except nvjpeg.NvjpegUnavailable as exc:
        return str(exc)
    except nvjpeg.NvjpegError as exc:
        what = "this GPU has no JPEG engines" if backend == "hardware" else "nvJPEG failed"
        return f"{what} ({exc})"
    if keep:
        with _kept_lock:
            _kept.setdefault((backend, device), []).append(decoder)
    else:
        decoder.close()
    return None


def open_jpeg_decoder(backend: str, device: int) -> Future:
    """Open nvJPEG's ``backend`` decoder for ``device`` on a thread of its own, to be kept for
    :func:`take_jpeg_decoder`; the Future of :func:`jpeg_unusable_reason`'s answer. Opening
    is slow, and this lets the run spend that time importing and starting CuPy instead of
    waiting. A decoder opening, or opened, for that device is not opened twice; one that
    could not open is tried again."""
    with _kept_lock:
        future = _opening.get((backend, device))
        if future is not None and not (future.done() and future.result() is not None):
            return future
        future = _opening[(backend, device)] = Future()

    def opening() -> None:
        try:
            make_current(device)
            future.set_result(jpeg_unusable_reason(backend, keep=True, device=device))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=opening, name="edgecli-nvjpeg-open", daemon=True).start()
    return future


def take_jpeg_decoder(backend: str, device: int = 0):
    """An nvjpeg.BatchDecoder for ``backend``: one opened for ``device`` by a check or by
    :func:`open_jpeg_decoder` (waited for, if it is still opening; RuntimeError with its
    reason if it could not open), or a new one, opened on the calling thread."""
    with _kept_lock:
        opening = _opening.pop((backend, device), None)
    if opening is not None:
        reason = opening.result()
        if reason is not None:  # it could not open: no second try, which would take as long
            raise RuntimeError(reason)
    with _kept_lock:
        if _kept.get((backend, device)):
            return _kept[(backend, device)].pop()
    return nvjpeg.BatchDecoder(backend)


def keep_jpeg_decoder(decoder, backend: str, device: int) -> None:
    """A run's decoder, kept open for the process's next run (a Dask worker's next task, a
    script's next call) rather than closed: opening one is slow, and it holds only its own
    small buffers meanwhile."""
    with _kept_lock:
        _kept.setdefault((backend, device), []).append(decoder)


def nvjpeg_missing() -> str | None:
    """Why libnvjpeg cannot be loaded, or None (a quick check: nothing is opened)."""
    try:
        nvjpeg.library()
    except nvjpeg.NvjpegUnavailable as exc:
        return str(exc)
    return None


def video_unusable_reason() -> str | None:
    """None when NVDEC can decode here (PyNvVideoCodec and the driver's libnvcuvid)."""

    try:
        ctypes.CDLL("libnvcuvid.so.1")
    except OSError:
        return "the driver's NVDEC library (libnvcuvid.so.1) is not installed"
    try:
        import_nvc()
    except Exception as exc:  # ImportError, or a library it loads failing
        return f"PyNvVideoCodec is not importable ({exc}); install edgecli[cuda13] or [cuda12]"
    return None


class _DecodeCaps(ctypes.Structure):
    """CUVIDDECODECAPS (the Video Codec SDK's cuviddec.h): what one NVDEC configuration is."""

    _fields_ = [
        ("eCodecType", ctypes.c_int), ("eChromaFormat", ctypes.c_int),
        ("nBitDepthMinus8", ctypes.c_uint), ("reserved1", ctypes.c_uint * 3),
        ("bIsSupported", ctypes.c_ubyte), ("nNumNVDECs", ctypes.c_ubyte),
        ("nOutputFormatMask", ctypes.c_ushort), ("nMaxWidth", ctypes.c_uint),
        ("nMaxHeight", ctypes.c_uint), ("nMaxMBCount", ctypes.c_uint),
        ("nMinWidth", ctypes.c_ushort), ("nMinHeight", ctypes.c_ushort),
        ("bIsHistogramSupported", ctypes.c_ubyte), ("nCounterBitDepth", ctypes.c_ubyte),
        ("nMaxHistogramBins", ctypes.c_ushort), ("reserved3", ctypes.c_uint * 10),
    ]  # fmt: skip


# cudaVideoCodec and cudaVideoChromaFormat (cuviddec.h), by FFmpeg's codec names.
CUVID_CODECS = {
    "mpeg1video": 0, "mpeg2video": 1, "mpeg4": 2, "vc1": 3, "h264": 4, "hevc": 8, "vp8": 9,
    "vp9": 10, "av1": 11,
}  # fmt: skip
CUVID_CHROMA = {"4:0:0": 0, "4:2:0": 1, "4:2:2": 2, "4:4:4": 3}
_NV12, _P016 = 1 << 0, 1 << 1  # cudaVideoSurfaceFormat bits of nOutputFormatMask
_caps: dict = {}
_caps_lock = threading.Lock()


def nvdec_missing(device: int, codec: str, chroma: str, depth: int) -> str | None:
    """None when the NVDEC of GPU ``device`` decodes ``codec`` (FFmpeg's name) with ``chroma``
    sampling at ``depth`` bits into NV12 (8-bit) or P016 (deeper), as the driver's
    cuvidGetDecoderCaps answers; else why not ("NVDEC on this GPU does not decode
    av1"). Hopper's decoders take H.264, HEVC, VP9, VP8, MPEG-1/2/4 and VC-1, not AV1; Ada's
    and Blackwell's take AV1 too: the driver's answer decides, never a list. Answers are kept
    for the process. Never raises: an answer that cannot be had is the reason."""
    name = f"{codec} {chroma} {depth}-bit"
    if codec not in CUVID_CODECS or chroma not in CUVID_CHROMA or not 8 <= depth <= 16:
        return f"NVDEC does not decode {name}"
    key = (device, codec, chroma, depth)
    with _caps_lock:
        caps = _caps.get(key)
        if caps is None:
            caps = _caps[key] = _query_caps(device, codec, chroma, depth)
    if isinstance(caps, str):
        return caps
    if not caps.bIsSupported:
        return f"NVDEC on this GPU does not decode {name}"
    if not caps.nOutputFormatMask & (_NV12 if depth == 8 else _P016):
        return f"NVDEC on this GPU gives no {'NV12' if depth == 8 else 'P016'} frames of {name}"
    return None


def _query_caps(device: int, codec: str, chroma: str, depth: int):
    """cuvidGetDecoderCaps' answer (a _DecodeCaps), or why there is none."""
    try:
        library = ctypes.CDLL("libnvcuvid.so.1")
    except OSError:
        return "the driver's NVDEC library (libnvcuvid.so.1) is not installed"
    make_current(device)  # the call needs a current context
    caps = _DecodeCaps(
        eCodecType=CUVID_CODECS[codec], eChromaFormat=CUVID_CHROMA[chroma],
        nBitDepthMinus8=depth - 8,
    )  # fmt: skip
    status = library.cuvidGetDecoderCaps(ctypes.byref(caps))
    if status != 0:
        return f"cuvidGetDecoderCaps failed (CUDA error {status})"
    return caps


def import_nvc():
    """PyNvVideoCodec, with its own logger quiet (it prints an [ERROR] line per damaged
    packet, and a line per frame read past the end) and, where edgecli's CLI quiets FFmpeg
    (without -v), the FFmpeg libraries it bundles too."""
    os.environ.setdefault("LOGGER_LEVEL", "FATAL")  # read by its logger at import
    import PyNvVideoCodec  # optional: absent without the cuda12/cuda13 extras

    if os.environ.get("OPENCV_FFMPEG_LOGLEVEL") == "-8":
        for found in Path(PyNvVideoCodec.__file__).parent.glob("libavutil.so*"):
            try:
                ctypes.CDLL(str(found)).av_log_set_level(-8)  # AV_LOG_QUIET
            except (OSError, AttributeError):
                pass
    return PyNvVideoCodec
