"""Which decoder decodes what: ``--decode auto|cpu|gpu`` (no CuPy here).

``auto`` puts a JPEG on the GPU's JPEG engines (nvJPEG's hardware backend) and a video on NVDEC
wherever that gives exactly the CPU decoder's frames, per file (:func:`edgecli.decode.jpeg_header.
parse_header`, :func:`edgecli.decode.gpu.nvdec_reason`); ``gpu`` also uses nvJPEG's CUDA
backend on GPUs without JPEG engines (its IDCT differs from libjpeg-turbo's by up to 3 levels)
and fails (exit 4) where no GPU decoder can run; ``cpu`` never decodes on the GPU. The
decoders themselves are :mod:`edgecli.decode.gpu`.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass

JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")


@dataclass(frozen=True)
class EncodedJpeg:
    """A JPEG file read and found fit for the GPU decoder: its bytes and parsed header."""

    out_name: str
    source: str
    path: object  # Path
    data: bytes
    header: object  # jpeg_header.JpegHeader

    def key(self) -> tuple:
        """What the files of one batch share: size, sampling, orientation."""
        h = self.header
        return (h.width, h.height, h.subsampling, h.orientation)


# Under --decode auto, JPEGs go to the engines only in runs of at least this many: opening
# nvJPEG's hardware decoder took 0.62 s on the H200 (benchmarks/RESULTS.md), which the
# CPU decoders fill with frames meanwhile, but which a run of a few files never earns back.
JPEG_MIN_FILES = 64

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
        from ..driver import make_current

        try:
            make_current(device)
            future.set_result(jpeg_unusable_reason(backend, keep=True, device=device))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=opening, name="edgecli-nvjpeg-open", daemon=True).start()
    return future


def open_early(options, inputs: list[str] | None = None, sources: list | None = None) -> None:
    """Start opening the JPEG engines' decoder where the run will decode JPEGs on them, as
    early as that is known, so that it opens while the sources are listed and CuPy starts:
    before listing (``inputs``), under ``--decode gpu`` (:func:`plan` opens it then in any
    case) or where a folder INPUT holds JPEG_MIN_FILES JPEG names; after (``sources``), by
    :func:`plan`'s rule. Opening twice is not possible (:func:`open_jpeg_decoder`)."""
    if options.decode == "cpu" or options.backend == "cpu":
        return
    if sources is not None:
        wanted = _jpegs(sources) >= (1 if options.decode == "gpu" else JPEG_MIN_FILES)
    else:
        wanted = options.decode == "gpu" or _jpeg_names_at_least(inputs or [], JPEG_MIN_FILES)
    if wanted:
        open_jpeg_decoder("hardware", options.device)


def _jpeg_names_at_least(inputs: list[str], count: int) -> bool:
    """Whether the INPUTs that are folders hold ``count`` files or more named as JPEGs (their
    names only, not their contents: a guess, before the sources are listed)."""
    found = 0
    for text in inputs:
        try:
            with os.scandir(text) as entries:
                for entry in entries:
                    found += entry.name.lower().endswith(JPEG_SUFFIXES)
                    if found >= count:
                        return True
        except OSError:  # not a folder (a file, a glob, nothing): the listing says what
            continue
    return False


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


def _opened(backend: str, device: int) -> str | None:
    """Waits for the decoder to open (:func:`open_jpeg_decoder`): None, or why it cannot. (One
    that failed earlier is tried again: the answer is the system's as it is now.)"""
    return open_jpeg_decoder(backend, device).result()


def _jpegs(sources: list) -> int:
    return sum(not s.multi_frame and s.path.suffix.lower() in JPEG_SUFFIXES for s in sources)


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


def plan(options, sources: list):
    """What :class:`GpuDecoders` a run of ``sources`` gets under ``options.decode``, as a
    function that opens them (None: nothing to decode on the GPU). Raises
    CudaUnavailableError for --decode gpu where no GPU decoder can run.

    Under ``auto`` the JPEG engines open while the run starts, and JPEGs decode on the CPU
    until they are open (or for the whole run, if they cannot open); ``gpu`` opens them here,
    so that a GPU without them is known before anything is written."""
    from ..errors import CudaUnavailableError

    wants_gpu = options.decode == "gpu"
    jpegs = _jpegs(sources)
    has_video = any(s.multi_frame and s.kind == "video" for s in sources)
    missing = []
    jpeg_backend = None
    if wants_gpu:
        reason = _opened("hardware", options.device)
        if reason is None:
            jpeg_backend = "hardware"
        elif _opened("cuda", options.device) is None:
            jpeg_backend = "cuda"  # not exact (benchmarks/RESULTS.md): only when asked for
        else:
            missing.append(f"JPEG: {reason}")
    elif jpegs >= JPEG_MIN_FILES:
        reason = nvjpeg_missing()
        if reason is None:
            jpeg_backend = "hardware"
        else:
            missing.append(f"JPEG: {reason}")
    video = False
    if has_video or wants_gpu:
        reason = video_unusable_reason()
        video = reason is None
        if reason:
            missing.append(f"video: {reason}")
    if wants_gpu and jpeg_backend is None and not video:
        raise CudaUnavailableError(
            "--decode gpu: no GPU decoder can run here; " + "; ".join(missing)
        )
    jpeg_backend = jpeg_backend if jpegs else None
    video = video and has_video
    if jpeg_backend is None and not video:
        return None
    notice = ("decoding on the CPU: " + "; ".join(missing)) if missing else None

    def open_decoders():
        return _gpu_decoders()(options.device, options.max_pixels, jpeg_backend, video, notice)

    return open_decoders


def _gpu_decoders():
    """gpu_decode.GpuDecoders, imported only when a run decodes on the GPU (it imports CuPy)."""
    from .gpu import GpuDecoders

    return GpuDecoders
