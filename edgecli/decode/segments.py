"""Where one video is cut into segments that NVDEC sessions decode side by side: at keyframes.

A decoder starting a segment seeks to the keyframe at or before its first frame and decodes
from there, throwing away the frames before it (``seek_to_index``; its frames are exact
wherever it starts). A segment that starts between keyframes therefore costs the decode of the
frames back to the keyframe before it: up to a whole GOP (x264's default is 250 frames), spent
before the session's first frame, by the engines every session shares. Cutting only at
keyframes costs none; a video with none inside the frames to cut is left whole.

The keyframes are the MP4/QuickTime track's sync samples (``stss``), numbered in decode order.
An H.264 IDR picture is output after every picture decoded before it and before every one
decoded after it, so its decode number is its frame index too. Were a file to list other
pictures (an open GOP's I pictures) or to cut frames with an edit list, a cut could land
between keyframes: that costs decoding time, never a wrong frame.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from pathlib import Path

from .h264 import video_track
from .mp4 import FileSource, Unreadable, moov_streams, sync_samples, top_level

# A video is split into segments, decoded side by side, only where each gets this many frames.
MIN_SEGMENT = 60


def keyframes(path: Path) -> Sequence[int] | None:
    """The frame indices of the keyframes of the video at ``path`` (an MP4/QuickTime file),
    sorted; None where every frame is one (no ``stss`` box); () where the file does not say
    (no moov box, no single video track, unreadable): nowhere to cut."""
    try:
        with open(path, "rb") as f:
            source = FileSource(f)
            for box in top_level(source):
                if box.type == b"moov":
                    track = video_track(moov_streams(source, box))
                    if isinstance(track, str) or track.stbl is None:
                        return ()
                    found = sync_samples(source, track.stbl)
                    return None if found is None else found.tolist()
    except (OSError, Unreadable, struct.error, IndexError, ValueError, OverflowError):
        pass
    return ()


def segment_bounds(
    start: int, stop: int, parts: int, keyframes: Sequence[int] | None, shortest: int
) -> list[int]:
    """Where to cut frames ``start`` to ``stop`` of a video into at most ``parts`` segments:
    ``[start, ..., stop]``, each segment at least ``shortest`` frames, every inner bound a
    keyframe (``keyframes``: sorted frame indices; None: every frame is one), each the keyframe
    nearest to where ``parts`` equal segments would be cut (the earlier of two as near).
    ``[start, stop]`` where no keyframe allows a cut."""
    bounds = [start]
    for k in range(1, parts):
        ideal = start + (stop - start) * k // parts
        low, high = bounds[-1] + shortest, stop - shortest
        if low > high:
            break
        if keyframes is None:
            bounds.append(min(max(ideal, low), high))
            continue
        allowed = keyframes[bisect_left(keyframes, low) : bisect_right(keyframes, high)]
        if not allowed:  # no keyframe where this cut may go: perhaps the next one
            continue
        at = bisect_left(allowed, ideal)
        nearest = min(allowed[max(at - 1, 0) : at + 1], key=lambda f: (abs(f - ideal), f))
        bounds.append(nearest)
    bounds.append(stop)
    return bounds
