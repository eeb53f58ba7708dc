"""A few frames spread over a whole run, for ``-t auto`` and ``edgecli preview``.

The run's frames are taken in run order (every still image, and each multi-frame file's
frames that ``--start``/``--end``/``--every``/``--frames`` keep), and ``count`` positions are
spread evenly over them (:func:`sample_positions`). Frames are decoded by
the CPU decoders; a video's by seeking to them (:func:`edgecli.decode.cpu.video_frame_at`),
so sampling a two-hour video costs a few seeks, not a decode of the whole file.
"""

from __future__ import annotations

from .errors import FrameError
from .sources import Frame, count_frames


def sample_positions(total: int, count: int) -> list[int]:
    """``count`` positions spread evenly over ``total`` frames, each once, in order."""
    return sorted({(2 * k + 1) * total // (2 * count) for k in range(count)}) if total else []


def frames_of(source) -> int:
    """How many frames ``source`` gives the run (at least one: a video that cannot say how
    many it has is sampled at its first)."""
    if not source.multi_frame:
        return 1
    return max(count_frames([source]) or 1, 1)


def sample_frames(sources: list, count: int, max_pixels: int) -> list[Frame]:
    """``count`` frames (fewer in a shorter run) spread over ``sources``, in run order; a
    frame that cannot be decoded is left out (the run reports it)."""
    sizes = [frames_of(source) for source in sources]
    positions = sample_positions(sum(sizes), count)
    frames: list[Frame] = []
    before = 0
    turn = iter(positions)
    position = next(turn, None)
    for source, size in zip(sources, sizes, strict=True):
        while position is not None and position < before + size:
            frame = _frame(source, position - before, max_pixels)
            if frame is not None:
                frames.append(frame)
            position = next(turn, None)
        before += size
    return frames


def _frame(source, ordinal: int, max_pixels: int) -> Frame | None:
    """The ``ordinal``-th frame ``source`` gives the run, or None where it cannot be read."""
    from .decode.cpu import video_frame_at

    try:
        if not source.multi_frame:
            return source.decode(max_pixels)
        selection = source.selection
        index = ordinal if selection is None else selection.start + ordinal * selection.step
        if source.kind == "video":
            pixels = video_frame_at(source.path, index, max_pixels)
            return Frame(source.frame_name(index), f"{source.path} [frame {index}]", pixels)
        for frame in source.frames(max_pixels, index, index + 1):
            return None if isinstance(frame, FrameError) else frame
    except FrameError:
        return None
    return None
