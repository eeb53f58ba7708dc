"""``edgecli preview``: a contact sheet for choosing a threshold by looking.

A few frames spread over the input (:func:`edgecli.sampling.sample_frames`, the frames a
``run`` with the same selection options would process), each shown as the source frame and
its edge maps at several thresholds, computed by the backend ``run`` uses (so each tile is a
``run`` output, scaled with nearest-neighbour: :mod:`edgecli.sheet`), with the threshold and
the share of edge pixels under each tile. By default the thresholds spread around the one
``-t auto`` chooses for the same input.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from .errors import InputError, OptionError
from .params import Options, check_path
from .sheet import DEFAULT_WIDTH, Row, Tile, render, tile_width

PREVIEW_FRAMES = 4
# The default thresholds: the automatic one times these (rounded, each once).
SPREAD = (0.5, 0.75, 1.0, 1.5)


def default_thresholds(sources: list, options: Options, notify) -> tuple[list[int], int]:
    """A spread around the threshold ``-t auto`` chooses for ``sources``, and that one."""
    from .threshold import resolve

    chosen = resolve(replace(options, threshold="auto"), sources, notify).threshold
    return sorted({max(0, round(chosen * factor)) for factor in SPREAD}), chosen


def preview(
    inputs, sheet: str | Path, options: Options, *, thresholds: list[int] | None = None,
    frames: int = PREVIEW_FRAMES, width: int = DEFAULT_WIDTH, notify=None,
) -> dict:  # fmt: skip
    """Write the contact sheet of ``inputs`` to ``sheet`` (a .png path, written atomically);
    return what it shows: ``{"frames": [source, ...], "thresholds": [...], "backend": ...}``."""
    from .sampling import sample_frames
    from .selection import select_frames
    from .sinks import write_atomic
    from .sources import discover_inputs

    notify = notify or (lambda message: None)
    sheet = Path(check_path("sheet path", sheet))
    if sheet.suffix.lower() != ".png":
        raise OptionError(f"{sheet}: the sheet is a PNG; name it something.png")
    sources = select_frames(discover_inputs(inputs, recursive=options.recursive), options.selection)
    if any(source.path.resolve() == sheet.resolve() for source in sources):
        raise OptionError(f"{sheet} is an input; write the sheet elsewhere")
    if frames < 1:
        raise OptionError(f"frames must be >= 1, got {frames}")
    auto = None
    if thresholds is None:
        thresholds, auto = default_thresholds(sources, options, notify)
    if not thresholds:
        raise OptionError("no thresholds to show: give at least one")
    try:
        tile_width(1 + len(thresholds), width)  # before any edge map is computed
    except ValueError as exc:
        raise OptionError(f"{exc}: give a larger --width or fewer thresholds") from None
    sample = sample_frames(sources, frames, options.max_pixels)
    if not sample:
        raise InputError("no frame of the input could be decoded for the preview")
    edges_at, backend = _edges(sample, options, thresholds, notify)
    rows = []
    for k, frame in enumerate(sample):
        tiles = [Tile(frame.pixels, "source")]
        for t in thresholds:
            edges = edges_at[t][k]
            share = 100 * np.count_nonzero(edges) / edges.size
            name = f"T={t} (auto)" if t == auto else f"T={t}"
            tiles.append(Tile(edges, f"{name}: {share:.2f}%"))  # the share of edge pixels
        height, width_px = frame.pixels.shape[:2]
        rows.append(Row(f"{frame.source}  ({width_px}x{height})", tiles))
    import cv2

    ok, encoded = cv2.imencode(".png", render(rows, width))
    if not ok:
        raise InputError(f"{sheet}: the sheet could not be encoded")
    write_atomic(sheet, encoded.tobytes())
    return {
        "frames": [frame.source for frame in sample],
        "outputs": [frame.out_name for frame in sample],
        "thresholds": thresholds,
        "backend": backend,
    }


def _edges(sample: list, options: Options, thresholds: list[int], notify):
    """The edge maps of ``sample`` at each threshold, by the backend ``run`` would use (one
    frame at a time: the sample's frames may differ in size); and that backend's name."""
    from .backends import select_backend

    choice = select_backend(replace(options, threshold=thresholds[0]))
    if choice.notice:
        notify(choice.notice)
    name = choice.backend.name
    edges_at = {}
    for t in thresholds:
        at = choice.backend if t == thresholds[0] else None
        at = at or select_backend(replace(options, threshold=t, backend=name)).backend
        edges_at[t] = [at.detect(frame.pixels[np.newaxis])[0] for frame in sample]
    return edges_at, name
