"""Frame selection for videos and multi-frame files: ``--start``, ``--end``, ``--every`` and
``--frames``.

Each video or multi-frame file keeps the frames ``start <= i < end`` whose distance from
``start`` is a multiple of ``every``, at most ``frames`` of them; ``i`` is the frame's index in
the file, which its output name keeps (``clip_000090.png``), so a selected run writes exactly
the files, byte for byte, that a full run writes under those names. ``--start`` and ``--end``
are frame indices (``90``) or, for videos, times (``1:30``, ``1:02:03.5``, ``90.5s``); a time
is the first frame at or after it, at the video's average frame rate (frame ``i`` is at
``i / fps``), so ``--end 2s`` on a 25 fps video stops before frame 50. Still images are not
affected. Applied to a run's sources by :func:`edgecli.inputs.sources.select_frames`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from ..errors import OptionError
from .numerals import DECIMAL, WHOLE

SELECTION_FLAGS = "--start, --end, --every and --frames"
# [[H:]M:]S[s]
_TIME = re.compile(rf"(?:(?:({WHOLE}):)?({WHOLE}):)?({DECIMAL})(s?)")


@dataclass(frozen=True)
class Position:
    """A ``--start`` or ``--end``: a frame index, or a time in seconds (exact)."""

    text: str
    index: int | None = None
    seconds: Fraction | None = None

    def frame(self, fps: Fraction | None, name: str, what: str) -> int:
        """The first frame index at or after this position, in a file at ``fps`` frames a
        second (None: the file has no frame rate, so only an index will do)."""
        if self.index is not None:
            return self.index
        if fps is None:
            raise OptionError(
                f"{what} {self.text} is a time, and {name} has no frame rate: give a frame index"
            )
        return math.ceil(self.seconds * fps)


def parse_position(text: str, what: str) -> Position:
    """``90`` (frame 90), ``90s``, ``90.5s``, ``1:30``, ``1:30.5`` or ``1:02:03`` (times);
    OptionError naming ``what`` (the flag) otherwise."""
    raw = str(text).strip()
    match = _TIME.fullmatch(raw)
    if match is None:
        raise OptionError(
            f"{what} must be a frame index (90) or a time (1:30, 1:02:03.5, 90.5s), got {text!r}"
        )
    hours, minutes, seconds, unit = match.groups()
    if hours is None and minutes is None and not unit:
        if "." in seconds:
            raise OptionError(
                f"{what} {text!r}: a frame index is a whole number; for seconds write {raw}s"
            )
        return Position(raw, index=int(seconds))
    if minutes is not None and unit:
        raise OptionError(f"{what} {text!r}: write 1:30 or 90s, not both forms at once")
    too_many = Fraction(seconds) >= 60 or (hours is not None and int(minutes) >= 60)
    if minutes is not None and too_many:
        raise OptionError(f"{what} {text!r}: minutes and seconds run from 0 to 59")
    total = Fraction(seconds) + 60 * int(minutes or 0) + 3600 * int(hours or 0)
    return Position(raw, seconds=total)


@dataclass(frozen=True)
class FrameRange:
    """The frames of one file a run keeps: ``start <= i < stop`` (None: to the end), every
    ``step``-th from ``start``."""

    start: int = 0
    stop: int | None = None
    step: int = 1

    def __contains__(self, index: int) -> bool:
        if index < self.start or (self.stop is not None and index >= self.stop):
            return False
        return (index - self.start) % self.step == 0

    def count(self, total: int) -> int:
        """How many of a file's ``total`` frames are kept."""
        stop = total if self.stop is None else min(self.stop, total)
        return max(0, -(-(stop - self.start) // self.step))


@dataclass(frozen=True)
class Selection:
    """What ``--start``, ``--end``, ``--every`` and ``--frames`` ask of every multi-frame
    file; checked when made (``from_options``), resolved per file (``resolve``)."""

    start: Position | None = None
    end: Position | None = None
    every: int = 1
    limit: int | None = None

    @property
    def timed(self) -> bool:
        """Whether ``--start`` or ``--end`` is a time: resolving it needs the file's rate."""
        return any(p is not None and p.seconds is not None for p in (self.start, self.end))

    @classmethod
    def from_options(cls, start, end, every: int, limit: int | None) -> Selection | None:
        """The selection, or None where every frame is kept; OptionError for values that
        contradict each other whatever the file (``--end`` not after ``--start``)."""
        first = None if start is None else parse_position(start, "--start")
        last = None if end is None else parse_position(end, "--end")
        if last is not None and (last.index == 0 or last.seconds == 0):
            # Frame 0 comes first in every file, so nothing comes before it.
            raise OptionError(f"--end {last.text} keeps no frame: the end is not included")
        if first is not None and last is not None:
            both_index = first.index is not None and last.index is not None
            both_time = first.seconds is not None and last.seconds is not None
            if (both_index and last.index <= first.index) or (
                both_time and last.seconds <= first.seconds
            ):
                raise OptionError(f"--end {last.text} is not after --start {first.text}")
        if first is None and last is None and every == 1 and limit is None:
            return None
        return cls(first, last, every, limit)

    def resolve(self, name: str, fps: Fraction | None, total: int | None) -> FrameRange:
        """The frames of file ``name`` (``fps`` frames a second, None for none; ``total``
        frames where that is known exactly) this selection keeps."""
        start = 0 if self.start is None else self.start.frame(fps, name, "--start")
        stop = None if self.end is None else self.end.frame(fps, name, "--end")
        if stop is not None and stop <= start:
            # A time may come before --start's frame in one file and not in another; --end 0
            # (no frame in any file) is refused in from_options.
            raise OptionError(
                f"--end {self.end.text} is not after --start {self.start.text} in {name} "
                f"(frames {stop} and {start})"
            )
        if self.start is not None and total is not None and start >= total:
            raise OptionError(
                f"--start {self.start.text} is past the end of {name} ({total} frames)"
            )
        if self.limit is not None:
            last = start + self.every * self.limit
            stop = last if stop is None else min(stop, last)
        return FrameRange(start, stop, self.every)
