"""The GPU's decoding libraries opened: nvJPEG's decoders (opened early, on a thread of their
own, and kept between runs: opening one takes 0.6-0.9 s) and PyNvVideoCodec for NVDEC; and
whether each can run here. No CuPy; each library is loaded only when asked for.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future

_kept: dict = {}  # decoders opened by a check, by (backend, device), for a run to use
_opening: dict = {}  # (backend, device) -> the Future of a decoder opening on a thread
_kept_lock = threading.Lock()


def jpeg_unusable_reason(backend: str, keep: bool = False, device: int = 0) -> str | None:
    """None when nvJPEG's ``backend`` ("hardware", "cuda") opens here, else why not; with
    ``keep``, the decoder opened stays for :func:`take_jpeg_decoder` (on ``device``, which
    must be the calling thread's current one)."""
    from . import nvjpeg

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
    takes 0.6-0.9 s on the H200 host, which this lets the run spend importing and starting
    CuPy instead of waiting. A decoder opening, or opened, for that device is not opened
    twice; one that could not open is tried again."""
    with _kept_lock:
        future = _opening.get((backend, device))
        if future is not None and not (future.done() and future.result() is not None):
            return future
        future = _opening[(backend, device)] = Future()

    def opening() -> None:
        from ..cuda.driver import make_current

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
    from . import nvjpeg

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
    script's next call) rather than closed: opening one takes 0.6-0.9 s, and it holds only
    its own small buffers meanwhile."""
    with _kept_lock:
        _kept.setdefault((backend, device), []).append(decoder)


def nvjpeg_missing() -> str | None:
    """Why libnvjpeg cannot be loaded, or None (a quick check: nothing is opened)."""
    from . import nvjpeg

    try:
        nvjpeg.library()
    except nvjpeg.NvjpegUnavailable as exc:
        return str(exc)
    return None


def video_unusable_reason() -> str | None:
    """None when NVDEC can decode here (PyNvVideoCodec and the driver's libnvcuvid)."""
    import ctypes

    try:
        ctypes.CDLL("libnvcuvid.so.1")
    except OSError:
        return "the driver's NVDEC library (libnvcuvid.so.1) is not installed"
    try:
        import_nvc()
    except Exception as exc:  # ImportError, or a library it loads failing
        return f"PyNvVideoCodec is not importable ({exc}); install edgecli[cuda13] or [cuda12]"
    return None


def import_nvc():
    """PyNvVideoCodec, with its own logger quiet (it prints an [ERROR] line per damaged
    packet, and a line per frame read past the end) and, where edgecli's CLI quiets FFmpeg
    (without -v), the FFmpeg libraries it bundles too."""
    import ctypes
    from pathlib import Path

    os.environ.setdefault("LOGGER_LEVEL", "FATAL")  # read by its logger at import
    import PyNvVideoCodec

    if os.environ.get("OPENCV_FFMPEG_LOGLEVEL") == "-8":
        for found in Path(PyNvVideoCodec.__file__).parent.glob("libavutil.so*"):
            try:
                ctypes.CDLL(str(found)).av_log_set_level(-8)  # AV_LOG_QUIET
            except (OSError, AttributeError):
                pass
    return PyNvVideoCodec
