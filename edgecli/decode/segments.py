"""Which NVDEC session decodes which frames of a run's videos, and where a video may be cut
into segments that sessions decode side by side: at keyframes.

Sessions take the videos in turn; one with none left to start cuts the running segment with
the most frames left in two (:class:`Schedule`), so that one long video is shared by every
session, and the last videos of a folder are shared too. A decoder starting a segment seeks to
the keyframe at or before its first frame and decodes from there, throwing away the frames
before it (``seek_to_index``; its frames are exact wherever it starts). A segment that started
between keyframes would therefore cost the decode of the frames back to the keyframe before
it: up to a whole GOP (x264's default is 250 frames), spent before the session's first frame,
by the engines every session shares. Cuts are made only at keyframes; a video with none
inside the frames left is not cut.

The keyframes are the MP4/QuickTime track's sync samples (``stss``), numbered in decode order.
An H.264 IDR picture is output after every picture decoded before it and before every one
decoded after it, so its decode number is its frame index too. Were a file to list other
pictures (an open GOP's I pictures) or to cut frames with an edit list, a cut could land
between keyframes: that costs decoding time, never a wrong frame.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

from .mp4 import H264_ENTRIES, read_video_track, sync_samples

# A video is cut only where each part keeps at least this many frames.
MIN_SEGMENT = 60


def keyframes(path: Path) -> Sequence[int] | None:
    """The frame indices of the keyframes of the video at ``path`` (an MP4/QuickTime file of
    H.264), sorted; None where every frame is one (no ``stss`` box); () where the file does not
    say (no moov box, no single video track, unreadable, another codec): nowhere to cut."""

    def read(source, track, moov, rest) -> Sequence[int] | None:
        if any(kind not in H264_ENTRIES for kind, _ in track.entries):
            return ()  # an HEVC CRA's leading pictures, say, come before it: no cut is sure
        found = sync_samples(source, track.stbl)
        return None if found is None else found.tolist()

    return read_video_track(path, read, ())


def cut_at(claimed: int, stop: int, keyframes: Sequence[int] | None, shortest: int) -> int | None:
    """Where a segment ending at ``stop``, its frames up to ``claimed`` claimed by its session,
    may be cut in two for another session: the keyframe (``keyframes``: sorted frame indices;
    None: every frame is one) nearest the middle of the frames left (the earlier of two as
    near), each part at least ``shortest`` frames; None where there is none."""
    low, high = claimed + shortest, stop - shortest
    if low > high:
        return None
    middle = (claimed + stop) // 2
    if keyframes is None:
        return middle
    allowed = keyframes[bisect_left(keyframes, low) : bisect_right(keyframes, high)]
    if not allowed:
        return None
    at = bisect_left(allowed, middle)
    return min(allowed[max(at - 1, 0) : at + 1], key=lambda f: (abs(f - middle), f))


class Segment:
    """Frames ``start`` to ``stop`` of the video ``source`` (``stop`` None: to its end), one
    session's to decode. Once its session has opened it (:meth:`Schedule.started`), another
    may cut off its last part at a keyframe, past what its session has claimed."""

    def __init__(self, source, start: int = 0, stop: int | None = None):
        self.source, self.start, self.stop = source, start, stop
        self.claimed = start  # the frames before this are its session's
        self.keyframes: Sequence[int] | None = ()  # where it may be cut: nowhere yet

    def __repr__(self) -> str:
        return f"Segment({self.source!r}, {self.start}, {self.stop})"


class Schedule:
    """Which session decodes which frames of a run's videos. A session takes the next video
    as a segment (:meth:`take`), says where it ends once it has opened it (:meth:`started`),
    claims its frames a batch at a time (:meth:`claim`) and says when it is done
    (:meth:`done`). A session with no video left to start cuts the running segment with the
    most frames left in two at a keyframe (:func:`cut_at`) and takes the second part: one long
    video is shared by every session this way, and so are the last videos of a folder, while
    other sessions would idle."""

    def __init__(self, segments: Iterable[Segment], shortest: int | None = None):
        self._changed = threading.Condition()
        self._queue = deque(segments)
        self._running: list[Segment] = []
        self._pending = len(self._queue)  # segments queued or running
        self._closed = False
        self.shortest = MIN_SEGMENT if shortest is None else shortest  # cuts leave no less

    def take(self) -> Segment | None:
        """A segment to decode: the next video's, else one cut off a running segment, else
        (waiting until there is one) None once every frame is decoded or the schedule closed."""
        with self._changed:
            while not self._closed and self._pending:
                segment = self._queue.popleft() if self._queue else self._cut()
                if segment is not None:
                    self._running.append(segment)
                    return segment
                self._changed.wait()
            return None

    def started(self, segment: Segment, stop: int, keyframes: Sequence[int] | None) -> None:
        """``segment``'s session has opened its video: it ends at ``stop`` (at most), and may
        be cut at ``keyframes`` (None: at any frame)."""
        with self._changed:
            segment.stop = stop if segment.stop is None else min(segment.stop, stop)
            segment.keyframes = keyframes
            self._changed.notify_all()

    def claim(self, segment: Segment, index: int, frames: int) -> int:
        """Up to ``frames`` more frames of ``segment`` from ``index`` on, for its session;
        returns where they end (``index`` where the segment ends there)."""
        with self._changed:
            end = max(index, min(segment.stop, index + frames))
            segment.claimed = max(segment.claimed, end)
            return end

    def keep(self, segment: Segment) -> None:
        """No more cuts of ``segment``: its session decodes the rest some other way."""
        with self._changed:
            segment.keyframes = ()

    def done(self, segment: Segment) -> None:
        with self._changed:
            self._running.remove(segment)
            self._pending -= 1
            if not self._pending:
                self._changed.notify_all()

    def close(self) -> None:
        """Every session waiting, or taking a segment from now on, gets None."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _cut(self) -> Segment | None:
        best, most = None, 0
        for segment in self._running:
            if segment.stop is None:  # not opened yet
                continue
            at = cut_at(segment.claimed, segment.stop, segment.keyframes, self.shortest)
            if at is not None and segment.stop - at > most:
                best, most = (segment, at), segment.stop - at
        if best is None:
            return None
        segment, at = best
        part = Segment(segment.source, at, segment.stop)
        segment.stop = at
        self._pending += 1
        return part
