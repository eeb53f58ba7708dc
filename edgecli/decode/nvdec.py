"""Whether NVDEC, and the conversion kernel after it, give a video's frames exactly as
cv2.VideoCapture gives them, and how to convert them (no CuPy here).

Decoding by the standards is bit-exact, so NVDEC's planes equal FFmpeg's software decoder's;
what can differ is what happens around the decoding:

- the conversion to BGR, which cv2 does with swscale by the stream's matrix and range:
  :mod:`.yuv` reproduces it for 8-bit frames of the matrices, ranges, primaries and transfers
  :func:`.yuv.conversion_for` admits, where its check confirms it on this OpenCV build and CPU
  (:func:`.yuv.verified`); deeper frames it does not reproduce;
- the turn cv2 gives each frame by the container's display matrix, which the kernel applies
  as it writes the frame (:attr:`.streams.VideoStream.rotation`);
- which frames come out, in which order: the container decides what FFmpeg shows (edit lists,
  a first frame that is no keyframe, a truncated file), which :func:`.video_file.describe`
  refuses, and PyNvVideoCodec's decoder decides what NVDEC returns, which only a GPU can
  show: :data:`ORDER_CHECKED` lists the codecs and containers whose frames it returned in
  cv2's order and count on the GPU host, and nothing else is called exact;
- what the GPU's decoder can decode at all, which the driver says (:func:`.engines.nvdec_missing`).

Under ``--decode auto`` a video goes to NVDEC only where all of these give cv2's frames; under
``--decode gpu`` every video NVDEC can decode goes there, with the conversion nearest to cv2's
where none is exact (the difference is in docs/gpu-decoding.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import yuv
from .cpu import matroska_sizes
from .streams import Colour, VideoStream
from .video_file import describe

# (codec, container) whose frames PyNvVideoCodec's SimpleDecoder returned in cv2's order and
# count on a GPU host, B-frames, odd sizes, cut segments and seeks included:
# these are decoded by it, and cut at keyframes for sessions side by side.
SIMPLE_DECODER = frozenset({("h264", "mp4")})
# (codec, container) whose frames NVDEC returned in cv2's order and count on a GPU host:
# H.264 in MP4 through the SimpleDecoder, and every pair through PyNvVideoCodec's demuxer and a
# decoder fed packet by packet (benchmarks/nvdec_order.py; B-frames, open GOPs, variable frame
# rates, audio tracks, rotations and truncated files included). The SimpleDecoder repeats or
# drops frames of HEVC, VP9 and Matroska, so those go packet by packet.
ORDER_CHECKED = frozenset(
    (codec, container) for codec in ("h264", "hevc", "vp9") for container in ("mp4", "matroska")
)
# The containers given to NVDEC at all.
NVDEC_CONTAINERS = frozenset({"mp4", "matroska"})


@dataclass(frozen=True)
class NvdecPlan:
    """How NVDEC's frames of one video become the contract's: converted with ``conversion``
    from ``depth``-bit planes (NV12, or P016 above 8 bits) and turned by ``rotation``;
    ``inexact``: why they may differ from cv2's (None: they are cv2's, bit for bit)."""

    conversion: yuv.Conversion
    depth: int
    rotation: int
    inexact: str | None = None
    packets: bool = False  # fed packet by packet from the demuxer, not by the SimpleDecoder

    @property
    def exact(self) -> bool:
        return self.inexact is None


def plan_video(
    path: Path,
    missing: Callable[[str, str, int], str | None],
    exact_only: bool,
    describe_stream: Callable[[Path], VideoStream | str] = describe,
) -> NvdecPlan | str:
    """How NVDEC decodes the video at ``path``, or why the CPU decodes it. ``missing(codec,
    chroma, depth)`` is why NVDEC cannot decode such a stream here, or None
    (:func:`.engines.nvdec_missing`, for the run's GPU); with ``exact_only`` (``--decode
    auto``) only a plan whose frames are cv2's is returned."""
    try:
        stream = describe_stream(path)
    except Exception as exc:  # a file the readers missed a case of: the CPU decodes it
        return f"unreadable stream ({type(exc).__name__})"
    if isinstance(stream, str):
        return stream
    if stream.container not in NVDEC_CONTAINERS:
        return f"{stream.codec} in {stream.container}: NVDEC's frame order there is unchecked"
    if stream.container == "matroska":
        sizes = matroska_sizes(path)  # cut short: the CPU decoder says how many frames it lost
        if sizes is not None and sizes[0] < sizes[1]:
            return f"truncated: the file has {sizes[0]} of the {sizes[1]} bytes its header declares"
    if stream.chroma != "4:2:0":
        return f"{stream.chroma} chroma"  # the kernel converts NV12 and P016 only
    reason = missing(stream.codec, stream.chroma, stream.depth)
    if reason is not None:
        return reason
    conversion = yuv.conversion_for(stream.colour)
    inexact = None
    if isinstance(conversion, str):
        inexact, conversion = conversion, nearest_conversion(stream.colour)
    elif not yuv.verified(conversion):
        inexact = f"{conversion.name} is not cv2's conversion on this OpenCV build"
    if inexact is None and stream.depth != 8:
        inexact = f"{stream.depth}-bit"  # cv2 filters deeper chroma across rows (.yuv notes)
    if inexact is None and not stream.progressive:
        inexact = "interlaced"  # NVDEC deinterlaces; FFmpeg returns the woven frames
    if inexact is None and (stream.codec, stream.container) not in ORDER_CHECKED:
        inexact = f"NVDEC's frame order for {stream.codec} in {stream.container} is unchecked"
    if inexact is not None and exact_only:
        return inexact
    packets = (stream.codec, stream.container) not in SIMPLE_DECODER
    return NvdecPlan(conversion, stream.depth, stream.rotation, inexact, packets)


def nearest_conversion(colour: Colour) -> yuv.Conversion:
    """The conversion by ``colour``'s matrix and range alone, for --decode gpu where cv2's is
    none of :data:`.yuv.CONVERSIONS` (it maps BT.2020 or P3 primaries, PQ or HLG transfers to
    other colours; a matrix swscale has no coefficients for converts as BT.601)."""
    matrix = yuv.MATRICES.get(colour.matrix, "bt601")
    return yuv.Conversion(matrix, bool(colour.full_range))
