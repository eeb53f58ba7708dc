"""Which decoder decodes what: ``--decode auto|cpu|gpu`` (no CuPy here).

``auto`` puts a JPEG on the GPU's JPEG engines (nvJPEG's hardware backend) and a video on NVDEC
wherever that gives exactly the CPU decoder's frames, per file (:func:`edgecli.decode.jpeg_header.
parse_header`, :func:`edgecli.decode.nvdec.plan_video`); ``gpu`` also uses nvJPEG's CUDA
backend on GPUs without JPEG engines (its IDCT differs from libjpeg-turbo's by up to 3 levels),
puts on NVDEC every video it can decode, converted as near cv2's frames as the kernel can where
not exactly, and fails (exit 4) where no GPU decoder can run; ``cpu`` never decodes on the GPU.
What opens the libraries is :mod:`.engines`; the decoders are :mod:`edgecli.decode.gpu`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import native
from ..errors import CudaUnavailableError
from . import engines
from .jpeg_header import JPEG_SUFFIXES
from .kinds import FOLDER_EXTENSIONS, VIDEO_EXTENSIONS

PNG_SUFFIX = ".png"

# Under --decode auto, JPEGs go to the engines only in runs of at least this many: opening
# nvJPEG's hardware decoder takes the better part of a second, which the CPU decoders fill with
# frames meanwhile, but which a run of a few files never earns back.
JPEG_MIN_FILES = 64


def open_early(options, inputs: list[str] | None = None, sources: list | None = None) -> None:
    """Start opening the JPEG engines' decoder where the run will decode JPEGs on them, as
    early as that is known, so that it opens while the sources are listed and CuPy starts:
    before listing (``inputs``), under ``--decode gpu`` where the INPUTs' names allow JPEGs
    (:func:`plan` opens it then) or where a folder INPUT holds JPEG_MIN_FILES JPEG names;
    after (``sources``), by :func:`plan`'s rule. Opening twice is not possible
    (:func:`.engines.open_jpeg_decoder`)."""
    if options.decode == "cpu" or options.backend == "cpu":
        return
    if options.decode == "auto" and native.jpeg_walk_missing() is not None:
        return  # auto keeps JPEGs on the CPU (plan)
    if sources is not None:
        wanted = _jpegs(sources) >= (1 if options.decode == "gpu" else JPEG_MIN_FILES)
    else:
        wanted = engines_wanted(options, inputs or [])
    if wanted:
        engines.open_jpeg_decoder("hardware", options.device)


def engines_wanted(options, inputs: list[str]) -> bool:
    """Whether a run of ``inputs`` will decode JPEGs on the engines, as far as their names
    tell before the sources are listed: under ``--decode gpu`` unless every INPUT names videos
    or PNGs only (a file or a glob: ``clip.mp4``, ``frames/*.png``; a folder of such names
    only); under ``auto`` where a folder INPUT holds JPEG_MIN_FILES JPEG names and their
    scans can be judged (:func:`edgecli.native.jpeg_walk_missing`)."""
    if options.decode == "cpu":
        return False
    if options.decode == "gpu":
        return not all(_names_no_jpegs(text) for text in inputs)
    return native.jpeg_walk_missing() is None and _jpeg_names_at_least(inputs, JPEG_MIN_FILES)


def _names_no_jpegs(text: str) -> bool:
    """Whether INPUT ``text`` names videos or PNGs only, as far as names tell: such a name, or
    a folder whose files of frames (:data:`edgecli.decode.kinds.FOLDER_EXTENSIONS`) all are."""
    others = (*VIDEO_EXTENSIONS, PNG_SUFFIX)
    if text.lower().endswith(others):
        return True
    try:
        with os.scandir(text) as entries:
            names = [entry.name.lower() for entry in entries if not entry.name.startswith(".")]
    except OSError:  # not a folder (an image, a glob, nothing)
        return False
    frames = [name for name in names if name.endswith(FOLDER_EXTENSIONS)]
    return bool(frames) and all(name.endswith(others) for name in frames)


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


def _opened(backend: str, device: int) -> str | None:
    """Waits for the decoder to open (:func:`.engines.open_jpeg_decoder`): None, or why it
    cannot. (One that failed earlier is tried again: the answer is the system's as it is now.)"""
    return engines.open_jpeg_decoder(backend, device).result()


def _jpegs(sources: list) -> int:
    return sum(not s.multi_frame and s.path.suffix.lower() in JPEG_SUFFIXES for s in sources)


def _pngs(sources: list) -> int:
    return sum(not s.multi_frame and s.path.suffix.lower() == PNG_SUFFIX for s in sources)


@dataclass(frozen=True)
class DecodePlan:
    """What one run decodes on the GPU (:class:`edgecli.decode.gpu.decoders.GpuDecoders`
    opens it): JPEGs on nvJPEG's ``jpeg_backend`` ("hardware": the engines, "cuda"; None: on
    the CPU), videos on NVDEC where ``video``, on CUDA device ``device``, frames of at most
    ``max_pixels``, only those NVDEC decodes exactly where ``exact_video`` (``--decode auto``);
    PNGs on the GPU's own PNG decoder where ``png``; ``notice``: what was left on the CPU, and
    why (None: nothing)."""

    device: int
    max_pixels: int
    jpeg_backend: str | None
    video: bool
    notice: str | None = None
    exact_video: bool = True
    png: bool = False


def plan(options, sources: list) -> DecodePlan | None:
    """What a run of ``sources`` decodes on the GPU under ``options.decode`` (None: nothing).
    Raises CudaUnavailableError for --decode gpu where no GPU decoder can run.

    Under ``auto`` the JPEG engines open while the run starts, and JPEGs decode on the CPU
    until they are open (or for the whole run, if they cannot open); ``gpu`` opens them here,
    so that a GPU without them is known before anything is written, except for a run without
    JPEGs that has videos or PNGs, which would wait for their slow opening for nothing."""
    wants_gpu = options.decode == "gpu"
    jpegs, pngs = _jpegs(sources), _pngs(sources)
    has_video = any(s.multi_frame and s.kind == "video" for s in sources)
    missing = []
    jpeg_backend = None
    if wants_gpu and (jpegs or not (has_video or pngs)):
        reason = _opened("hardware", options.device)
        if reason is None:
            jpeg_backend = "hardware"
        elif _opened("cuda", options.device) is None:
            jpeg_backend = "cuda"  # its IDCT is not libjpeg-turbo's: only when asked for
        else:
            missing.append(f"JPEG: {reason}")
    elif jpegs >= JPEG_MIN_FILES:
        # auto promises the CPU decoder's pixels, of a damaged file too: the walk judges that
        reason = engines.nvjpeg_missing() or native.jpeg_walk_missing()
        if reason is None:
            jpeg_backend = "hardware"
        else:
            missing.append(f"JPEG: {reason}")
    video = False
    if has_video or wants_gpu:
        reason = engines.video_unusable_reason()
        video = reason is None
        if reason:
            missing.append(f"video: {reason}")
    # The PNG decoder is CUDA kernels (inflate.cu, png.cu): any GPU the edge kernel runs on
    # runs them. They are exact but not shown to beat the CPU's decoders, so only --decode gpu
    # asks for them.
    png = wants_gpu and pngs > 0
    if wants_gpu and jpeg_backend is None and not video and not png:
        raise CudaUnavailableError(
            "--decode gpu: no GPU decoder can run here; " + "; ".join(missing)
        )
    jpeg_backend = jpeg_backend if jpegs else None
    video = video and has_video
    if jpeg_backend is None and not video and not png:
        return None
    notice = ("decoding on the CPU: " + "; ".join(missing)) if missing else None
    return DecodePlan(
        options.device, options.max_pixels, jpeg_backend, video, notice,
        exact_video=not wants_gpu, png=png,
    )  # fmt: skip
