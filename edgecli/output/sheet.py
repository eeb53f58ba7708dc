"""The contact sheet of ``edgecli preview``: rows of tiles (a source frame, then its edge maps at
several thresholds), each under a caption and over a label, on a light-grey page.

What the sheet shows must be the run's output, only made bigger or smaller: an edge-map tile is
the edge map resized with nearest-neighbour and nothing else (no smoothing, no re-thresholding,
white edges on black as the run writes them, copied into the three channels), so a test can
compare a tile's pixels with ``cv2.resize(edges, (w, h), interpolation=cv2.INTER_NEAREST)``.
Text therefore never touches a tile: captions and labels are drawn in bands of their own,
outside every tile's box, and clipped to their column.

Sizes (pixels, at any sheet width)::

    MARGIN | tile | GUTTER | tile | ... | MARGIN          across
    MARGIN, then per row: CAPTION_H, the tiles, LABEL_H, ROW_GAP (none after the last), MARGIN

All rows share one grid of ``cols`` columns (the most tiles in any row), so thresholds line up
from row to row; shorter rows are left-aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

DEFAULT_WIDTH = 1600
MARGIN = 16  # around the page
GUTTER = 12  # between the columns
ROW_GAP = 14  # between a row's label band and the next row's caption
CAPTION_H = 28  # the band above a row
LABEL_H = 24  # the band under a row's tiles
TEXT_PAD = 4  # text keeps this far from the ends of its band

BACKGROUND = 235  # light grey: the page, and the bands the text sits on
TEXT_COLOR = 30  # dark grey: the text
BORDER_COLOR = 170  # a one-pixel frame just outside each tile's box, so black tiles stand out

FONT = cv2.FONT_HERSHEY_SIMPLEX
LABEL_SCALE = 0.55  # about 12 px capitals: readable at 1600 px without crowding a tile
CAPTION_SCALE = 0.6
THICKNESS = 1
ELLIPSIS = "..."  # the Hershey fonts have no "\u2026"
# Text that does not fit its band is drawn smaller, down to this share of its scale (still
# legible), before it is cut: a Canny label ("T=59,118 (auto)  5.10%") is wider than Sobel's.
MIN_SCALE_SHARE = 0.7


@dataclass(frozen=True)
class Tile:
    """One picture of a row: an (H, W) uint8 edge map (0/255, shown as it is) or an (H, W, 3)
    uint8 BGR source frame, with the ``label`` printed under it (e.g. "T=100  7.31%")."""

    image: np.ndarray
    label: str


@dataclass(frozen=True)
class Row:
    """One frame's tiles, left to right, under a ``caption`` (e.g. "clip.mp4  frame 90 of 2400")."""

    caption: str
    tiles: list[Tile]


@dataclass(frozen=True)
class Box:
    """Where a tile's image lies in the sheet, in pixels: columns x..x+w-1, rows y..y+h-1.
    Nothing but the (resized) image is drawn inside it."""

    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True)
class _RowPlan:
    """Where one row's parts go: its caption band's top, its tiles' boxes, its label band's top
    (the tiles' area, as tall as its tallest tile, lies between the two bands)."""

    caption_y: int
    boxes: list[Box]
    label_y: int


def _check(rows: list[Row]) -> int:
    """The number of columns, after refusing what cannot be drawn: no rows, a row without
    tiles, an image that is not uint8 gray or BGR. Refusing here, rather than deep in OpenCV,
    names the row and tile at fault."""
    if not rows:
        raise ValueError("a contact sheet needs at least one row (no rows were given)")
    for r, row in enumerate(rows):
        if not row.tiles:
            raise ValueError(f"row {r} ({row.caption!r}) has no tiles")
        for t, tile in enumerate(row.tiles):
            image = tile.image
            ok_shape = image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)
            if image.dtype != np.uint8 or not ok_shape or image.size == 0:
                raise ValueError(
                    f"row {r} tile {t}: expected an (H, W) uint8 edge map or an (H, W, 3) uint8"
                    f" BGR frame, got shape {image.shape} dtype {image.dtype}"
                )
    return max(len(row.tiles) for row in rows)


def tile_width(cols: int, width: int) -> int:
    """The width of a column: what the margins and gutters leave, split evenly."""
    tile_w = (width - 2 * MARGIN - (cols - 1) * GUTTER) // cols
    if tile_w < 1:
        raise ValueError(f"a sheet {width} px wide has no room for {cols} tiles per row")
    return tile_w


def _fit(h: int, w: int, tile_w: int) -> tuple[int, int]:
    """(th, tw): the frame scaled by one factor to fit a tile_w x tile_w square, so a tall,
    narrow frame does not make a page-tall tile; never less than one pixel either way."""
    s = min(tile_w / w, tile_w / h)
    tw = min(tile_w, max(1, round(w * s)))
    th = min(tile_w, max(1, round(h * s)))
    return th, tw


def _plan(rows: list[Row], width: int) -> tuple[int, int, list[_RowPlan]]:
    """The sheet's height, the column width and every row's plan: the one computation both
    :func:`layout` and :func:`render` use, so the boxes reported are the boxes drawn."""
    cols = _check(rows)
    tile_w = tile_width(cols, width)
    plans = []
    y = MARGIN
    for r, row in enumerate(rows):
        if r:
            y += ROW_GAP
        caption_y = y
        y += CAPTION_H
        sizes = [_fit(t.image.shape[0], t.image.shape[1], tile_w) for t in row.tiles]
        area_h = max(th for th, _ in sizes)
        boxes = []
        for c, (th, tw) in enumerate(sizes):
            cell_x = MARGIN + c * (tile_w + GUTTER)
            # Centred in its cell, so a row's tiles line up whatever their aspect.
            boxes.append(Box(cell_x + (tile_w - tw) // 2, y + (area_h - th) // 2, tw, th))
        y += area_h
        plans.append(_RowPlan(caption_y, boxes, y))
        y += LABEL_H
    return y + MARGIN, tile_w, plans


def layout(rows: list[Row], width: int = DEFAULT_WIDTH) -> tuple[int, list[list[Box]]]:
    """The sheet's height and each tile's box (row by row), for a sheet ``width`` pixels wide:
    what :func:`render` draws, without drawing it (for callers and tests that check a crop)."""
    height, _, plans = _plan(rows, width)
    return height, [plan.boxes for plan in plans]


def _printable(text: str) -> str:
    """The text as the Hershey fonts can draw it: ASCII only (anything else would come out as
    "?" anyway, and measuring it first keeps the truncation honest), on one line."""
    text = text.replace("\u2026", ELLIPSIS)
    return "".join(ch if " " <= ch <= "~" else ("  " if ch == "\t" else "?") for ch in text)


def _text_width(text: str, scale: float) -> int:
    return cv2.getTextSize(text, FONT, scale, THICKNESS)[0][0]


def _truncate(text: str, scale: float, max_w: int) -> str:
    """The text, or its longest prefix followed by "..." that fits in ``max_w`` pixels.
    A binary search, since a label of any length must not make the sheet slow."""
    if _text_width(text, scale) <= max_w:
        return text
    lo, hi = 0, len(text)  # text[:lo] + "..." fits (or lo == 0); text[:hi] + "..." does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _text_width(text[:mid].rstrip() + ELLIPSIS, scale) <= max_w:
            lo = mid
        else:
            hi = mid
    return text[:lo].rstrip() + ELLIPSIS


def fit_text(text: str, scale: float, max_w: int) -> tuple[str, float]:
    """The text and the scale to draw it at within ``max_w`` pixels: whole at ``scale`` or,
    where it is too wide, whole at the largest smaller scale down to ``MIN_SCALE_SHARE`` of
    it; else cut (``_truncate``) at that smallest scale."""
    smallest = scale * MIN_SCALE_SHARE
    if _text_width(text, smallest) > max_w:
        return _truncate(text, smallest, max_w), smallest
    while _text_width(text, scale) > max_w:
        scale = max(smallest, scale - 0.05)
    return text, scale


def _band(text: str, w: int, h: int, scale: float, centre: bool) -> np.ndarray:
    """A (h, w) band of background with the text on it, vertically centred. Drawn on its own
    canvas and then pasted, so no stroke (anti-aliasing included) can spill past the band."""
    band = np.full((h, w), BACKGROUND, np.uint8)
    text, scale = fit_text(_printable(text), scale, w - 2 * TEXT_PAD)
    if not text or w <= 2 * TEXT_PAD:
        return band
    text_w = _text_width(text, scale)
    # Centre a capital-and-descender line by a fixed sample, so every band's text sits at the
    # same height whatever letters it happens to have.
    (_, cap_h), descent = cv2.getTextSize("Tg", FONT, scale, THICKNESS)
    x = (w - text_w) // 2 if centre else TEXT_PAD
    baseline = (h + cap_h - descent) // 2
    cv2.putText(band, text, (x, baseline), FONT, scale, TEXT_COLOR, THICKNESS, cv2.LINE_AA)
    return band


def _scaled(image: np.ndarray, box: Box) -> np.ndarray:
    """The tile's pixels for its box, (h, w, 3). Edge maps: nearest-neighbour only, so every
    pixel is one of the run's, in all three channels. Sources: area averaging when shrinking
    (a readable photo, not aliasing), nearest when enlarging (a 1x1 frame stays one colour)."""
    image = np.ascontiguousarray(image)
    size = (box.w, box.h)
    if image.ndim == 2:
        small = cv2.resize(image, size, interpolation=cv2.INTER_NEAREST)
        return np.repeat(small[:, :, np.newaxis], 3, axis=2)
    shrink = box.w < image.shape[1] or box.h < image.shape[0]
    interpolation = cv2.INTER_AREA if shrink else cv2.INTER_NEAREST
    return cv2.resize(image, size, interpolation=interpolation)


def render(rows: list[Row], width: int = DEFAULT_WIDTH) -> np.ndarray:
    """The sheet as (H, width, 3) uint8 BGR, H being :func:`layout`'s height."""
    height, tile_w, plans = _plan(rows, width)
    sheet = np.full((height, width, 3), BACKGROUND, np.uint8)
    text_w = width - 2 * MARGIN
    for row, plan in zip(rows, plans, strict=True):
        caption = _band(row.caption, text_w, CAPTION_H, CAPTION_SCALE, centre=False)
        sheet[plan.caption_y : plan.caption_y + CAPTION_H, MARGIN : MARGIN + text_w] = caption[
            :, :, np.newaxis
        ]
        for c, (tile, box) in enumerate(zip(row.tiles, plan.boxes, strict=True)):
            cell_x = MARGIN + c * (tile_w + GUTTER)
            label = _band(tile.label, tile_w, LABEL_H, LABEL_SCALE, centre=True)
            sheet[plan.label_y : plan.label_y + LABEL_H, cell_x : cell_x + tile_w] = label[
                :, :, np.newaxis
            ]
            # The frame lies one pixel outside the box: in the margin, gutter or band padding.
            x0, y0, x1, y1 = box.x - 1, box.y - 1, box.x + box.w, box.y + box.h
            sheet[y0, x0 : x1 + 1] = sheet[y1, x0 : x1 + 1] = BORDER_COLOR
            sheet[y0 : y1 + 1, x0] = sheet[y0 : y1 + 1, x1] = BORDER_COLOR
            sheet[box.y : box.y + box.h, box.x : box.x + box.w] = _scaled(tile.image, box)
    return sheet
