"""What a video file's stream is, as far as it decides whether NVDEC and the conversion kernel
give exactly cv2.VideoCapture's frames: its codec and sampling, its colour as FFmpeg resolves it
for the frames cv2 converts, and the turn cv2 gives each frame. Read from the container and the
codec's configuration, without decoding.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Colour:
    """A colour description by ITU-T H.273 code points; None where it is not given."""

    matrix: int | None = None  # matrix_coefficients
    full_range: bool | None = None  # video_full_range_flag
    primaries: int | None = None  # colour_primaries
    transfer: int | None = None  # transfer_characteristics


@dataclass(frozen=True)
class VideoStream:
    """The stream cv2 decodes from a file: ``codec`` by FFmpeg's name ("h264", "hevc", "vp9",
    "av1", ...), in ``container`` ("mp4": MP4/MOV/M4V; "matroska": MKV/WebM); its ``chroma``
    sampling ("4:2:0", "4:2:2", "4:4:4", "4:0:0"), luma bit ``depth`` and whether it is
    ``progressive``; its ``colour`` as FFmpeg resolves it for the frames cv2 converts (the
    codec's rules for what overrides the container already applied; None where nothing says);
    and ``rotation``, the clockwise turn cv2 gives each frame (0, 90, 180 or 270)."""

    codec: str
    container: str
    chroma: str
    depth: int
    progressive: bool
    colour: Colour
    rotation: int = 0
