"""The video stream of a file, read by the reader of its container: Matroska and WebM told
from MP4/QuickTime by their content (the EBML magic), not by the name."""

from __future__ import annotations

from pathlib import Path

from . import matroska, mp4
from .streams import VideoStream

_EBML_MAGIC = b"\x1a\x45\xdf\xa3"


def describe(path: Path) -> VideoStream | str:
    """The video stream cv2 decodes from the file at ``path``, or why it cannot be described
    or would not be decoded as its samples say (:func:`.mp4.describe`,
    :func:`.matroska.describe`)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return f"cannot read the file ({exc.strerror or exc})"
    if magic == _EBML_MAGIC:
        return matroska.describe(path)
    return mp4.describe(path)
