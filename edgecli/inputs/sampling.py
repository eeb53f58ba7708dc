"""A few frames spread over a whole run, for ``-t auto`` and ``edgecli preview``.

The run's frames are taken in run order (every still image, and each multi-frame file's
frames that ``--start``/``--end``/``--every``/``--frames`` keep), and ``count`` positions are
spread evenly over them (:func:`sample_positions`). Frames are decoded by
the CPU decoders; a video's by seeking to them (:func:`edgecli.decode.cpu.video_frames_at`),
so sampling a two-hour video costs a few seeks, not a decode of the whole file.
"""

from __future__ import annotations

from ..decode.cpu import video_frames_at
from ..errors import FrameError
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
    return sample_frame_sets(sources, [count], max_pixels)[0]


def sample_frame_sets(sources: list, counts: list[int], max_pixels: int) -> list[list[Frame]]:
    """:func:`sample_frames` for each of ``counts``, every frame decoded once, and each video
    read in one pass (:func:`edgecli.decode.cpu.video_frames_at`)."""
    sizes = [frames_of(source) for source in sources]
    total = sum(sizes)
    sets = [sample_positions(total, count) for count in counts]
    wanted = sorted(set().union(*sets))
    frames: dict[int, Frame | None] = {}
    before = 0
    for source, size in zip(sources, sizes, strict=True):
        here = [p - before for p in wanted if before <= p < before + size]
        if here:
            for ordinal, frame in zip(here, _frames(source, here, max_pixels), strict=True):
                frames[before + ordinal] = frame
        before += size
    return [[frames[p] for p in positions if frames[p] is not None] for positions in sets]


def _frames(source, ordinals: list[int], max_pixels: int) -> list[Frame | None]:
    """The ``ordinals``-th frames (sorted) ``source`` gives the run; None for each that cannot
    be read."""
    if not source.multi_frame:
        try:
            return [source.decode(max_pixels)]
        except FrameError:
            return [None]
    kept = source.selection
    indices = [o if kept is None else kept.start + o * kept.step for o in ordinals]
    try:
        if source.kind == "video":
            pixels = video_frames_at(source.path, indices, max_pixels)
            return [
                Frame(source.frame_name(i), f"{source.path} [frame {i}]", pixels[i])
                if i in pixels
                else None
                for i in indices
            ]
        by_name = {source.frame_name(i): i for i in indices}
        read = {
            by_name[frame.out_name]: frame
            for frame in source.frames(max_pixels, indices[0], indices[-1] + 1)
            if not isinstance(frame, FrameError) and frame.out_name in by_name
        }
    except FrameError:
        return [None] * len(indices)
    return [read.get(i) for i in indices]
