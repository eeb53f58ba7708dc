"""The contact sheet's renderer (edgecli.output.sheet): an edge-map tile is the run's output
resized by nearest-neighbour and nothing else, text stays out of the tiles and inside its column,
and the sizes follow the documented rule."""

from __future__ import annotations

import itertools

import cv2
import numpy as np
import pytest

from edgecli.output import sheet
from edgecli.output.sheet import Box, Row, Tile, layout, render
from tests.media import photo

SHAPES = [(1, 1), (1, 37), (37, 1), (17, 31), (270, 480)]
DARK = 128  # text is drawn at 30 on 235: anything darker than this is ink


def random_edges(shape, seed):
    rng = np.random.default_rng(seed)
    return np.where(rng.random(shape) < 0.3, 255, 0).astype(np.uint8)


def crop(image: np.ndarray, box: Box) -> np.ndarray:
    return image[box.y : box.y + box.h, box.x : box.x + box.w]


def nearest3(edges: np.ndarray, box: Box) -> np.ndarray:
    small = cv2.resize(edges, (box.w, box.h), interpolation=cv2.INTER_NEAREST)
    return np.repeat(small[:, :, np.newaxis], 3, axis=2)


def expected_size(h: int, w: int, cols: int, width: int) -> tuple[int, int]:
    """(th, tw) by the documented rule, from the module's margins."""
    tile_w = (width - 2 * sheet.MARGIN - (cols - 1) * sheet.GUTTER) // cols
    s = min(tile_w / w, tile_w / h)
    return max(1, round(h * s)), max(1, round(w * s))


@pytest.mark.parametrize("width", [1600, 640, 97])
def test_edge_tiles_are_the_nearest_resized_edge_maps(width):
    edges = [random_edges(shape, seed) for seed, shape in enumerate(SHAPES)]
    rows = [
        Row("all shapes in one row", [Tile(e, f"{e.shape}") for e in edges]),
        *(Row(f"alone {e.shape}", [Tile(e, "T=100  7.31%")]) for e in edges),
        Row("two", [Tile(edges[3], "a"), Tile(edges[4], "b")]),
    ]
    image = render(rows, width)
    height, boxes = layout(rows, width)
    assert image.shape == (height, width, 3) and image.dtype == np.uint8
    for row, row_boxes in zip(rows, boxes, strict=True):
        assert len(row_boxes) == len(row.tiles)
        for tile, box in zip(row.tiles, row_boxes, strict=True):
            h, w = tile.image.shape
            assert (box.h, box.w) == expected_size(h, w, len(SHAPES), width)
            np.testing.assert_array_equal(crop(image, box), nearest3(tile.image, box))


def test_sizes_follow_the_rule():
    """One factor for both axes, capped by a square tile, at least a pixel each way."""
    rows = [Row("", [Tile(np.zeros(shape, np.uint8), "") for shape in SHAPES])]
    _, (boxes,) = layout(rows, 1600)
    tile_w = (1600 - 2 * sheet.MARGIN - 4 * sheet.GUTTER) // 5
    by_shape = dict(zip(SHAPES, boxes, strict=True))
    assert (by_shape[(1, 1)].w, by_shape[(1, 1)].h) == (tile_w, tile_w)
    assert (by_shape[(1, 37)].w, by_shape[(1, 37)].h) == (tile_w, round(tile_w / 37))
    assert (by_shape[(37, 1)].w, by_shape[(37, 1)].h) == (round(tile_w / 37), tile_w)
    assert by_shape[(270, 480)].w == tile_w
    # A frame far wider than a tile still gets a row of pixels.
    _, ((box,),) = layout([Row("", [Tile(np.zeros((1, 5000), np.uint8), "")])], 400)
    assert box.h == 1


def test_boxes_are_disjoint_and_inside_the_sheet():
    rows = [
        Row("five", [Tile(random_edges(s, i), "x") for i, s in enumerate(SHAPES)]),
        Row("one", [Tile(random_edges((37, 1), 9), "y")]),
        Row("three", [Tile(random_edges((17, 31), 5), "z")] * 3),
    ]
    height, boxes = layout(rows, 800)
    flat = [b for row in boxes for b in row]
    for b in flat:
        assert b.w >= 1 and b.h >= 1
        # With a pixel to spare all round, for the frame drawn outside the box.
        assert 1 <= b.x and b.x + b.w <= 800 - 1 and 1 <= b.y and b.y + b.h <= height - 1
    for a, b in itertools.combinations(flat, 2):
        apart_x = a.x + a.w < b.x or b.x + b.w < a.x
        apart_y = a.y + a.h < b.y or b.y + b.h < a.y
        assert apart_x or apart_y, (a, b)
    # Shorter rows are left-aligned on the grid the longest row sets.
    pitch = (800 - 2 * sheet.MARGIN - 4 * sheet.GUTTER) // 5 + sheet.GUTTER
    assert boxes[1][0].x == boxes[0][2].x - 2 * pitch
    assert [b.x for b in boxes[2]] == [boxes[0][3].x + (c - 3) * pitch for c in range(3)]


@pytest.mark.parametrize("value", [0, 255])
def test_no_text_inside_a_box(value):
    rows = [
        Row(f"caption {i} " * 20, [Tile(np.full(s, value, np.uint8), "T=100  7.31% " * 5)] * 3)
        for i, s in enumerate(SHAPES)
    ]
    image = render(rows, 900)
    _, boxes = layout(rows, 900)
    outside = np.ones(image.shape[:2], bool)
    for b in (b for row in boxes for b in row):
        assert (crop(image, b) == value).all()
        outside[b.y : b.y + b.h, b.x : b.x + b.w] = False
    # The text is there, just not in the boxes.
    assert (image[outside] < DARK).any()


def test_labels_are_printed_under_their_tile():
    rows = [Row("", [Tile(np.full((20, 40), 255, np.uint8), "T=100  7.31%")] * 2)]
    image = render(rows)
    _, ((a, b),) = layout(rows)
    for box in (a, b):
        band = image[box.y + box.h + 1 :, box.x : box.x + box.w]
        assert (band < DARK).any()


def test_long_text_stays_in_its_column():
    """Wide frames fill their columns, so the columns are the boxes' x ranges: no ink between
    them or beyond the last, even with labels and a caption hundreds of characters long."""
    frame = np.zeros((10, 40), np.uint8)
    rows = [Row("C" * 600, [Tile(frame, "W" * 300), Tile(frame, "M" * 1000)])]
    image = render(rows, 700)
    _, ((a, b),) = layout(rows, 700)
    ink = (image < DARK).any(axis=2)
    ink[a.y : a.y + a.h, a.x : a.x + a.w] = False
    ink[b.y : b.y + b.h, b.x : b.x + b.w] = False
    # The labels, below the boxes: each within its own column.
    columns = ink[a.y :].any(axis=0)
    assert columns[a.x : a.x + a.w].any() and columns[b.x : b.x + b.w].any()
    assert not columns[: a.x].any()
    assert not columns[a.x + a.w : b.x].any()
    assert not columns[b.x + b.w :].any()
    # The caption, above them: across the grid, not into the margins.
    columns = ink[: a.y].any(axis=0)
    assert columns[a.x : b.x + b.w].any()
    assert not columns[: a.x].any() and not columns[b.x + b.w :].any()


def test_unicode_and_empty_text():
    rows = [Row("clip\u00e9.mp4 \u2026", [Tile(np.zeros((4, 4), np.uint8), "")])]
    image = render(rows, 300)
    assert image.shape == (layout(rows, 300)[0], 300, 3)


@pytest.mark.parametrize("shape", [(270, 480), (720, 400), (1, 1), (1, 37), (37, 1), (3, 5)])
def test_source_tiles(shape):
    source = photo(*shape, seed=1)
    rows = [Row("src", [Tile(source, "source"), Tile(random_edges(shape, 0), "T=1")])]
    image = render(rows, 1000)
    _, ((box, edge_box),) = layout(rows, 1000)
    assert (box.w, box.h) == (edge_box.w, edge_box.h)
    assert (box.h, box.w) == expected_size(*shape, 2, 1000)
    tile = crop(image, box).reshape(-1, 3).mean(axis=0)
    np.testing.assert_allclose(tile, source.reshape(-1, 3).mean(axis=0), atol=3)


def test_a_source_enlarged_is_not_smoothed():
    source = np.array([[[0, 0, 0], [255, 255, 255]]], np.uint8)
    rows = [Row("", [Tile(source, "")])]
    image = render(rows, 200)
    _, ((box,),) = layout(rows, 200)
    assert set(np.unique(crop(image, box))) == {0, 255}


def test_rejects_what_cannot_be_drawn():
    with pytest.raises(ValueError, match="at least one row"):
        render([])
    with pytest.raises(ValueError, match="at least one row"):
        layout([])
    with pytest.raises(ValueError, match="no tiles"):
        render([Row("empty", [])])
    with pytest.raises(ValueError, match="uint8"):
        render([Row("", [Tile(np.zeros((4, 4), np.float32), "")])])
    with pytest.raises(ValueError, match="no room"):
        render([Row("", [Tile(np.zeros((4, 4), np.uint8), "")] * 5)], width=40)


def test_a_label_a_little_too_wide_is_drawn_smaller_not_cut():
    """A label that fits at a smaller size keeps every character; one that fits at no legible
    size is cut with "...", at that smallest size; one that fits is left as it is."""
    label = "T=59,118 (auto)  5.10%"
    wide = sheet._text_width(label, sheet.LABEL_SCALE)
    assert sheet.fit_text(label, sheet.LABEL_SCALE, wide) == (label, sheet.LABEL_SCALE)
    text, scale = sheet.fit_text(label, sheet.LABEL_SCALE, wide * 9 // 10)
    assert text == label and scale < sheet.LABEL_SCALE
    assert sheet._text_width(text, scale) <= wide * 9 // 10
    text, scale = sheet.fit_text(label, sheet.LABEL_SCALE, wide // 2)
    assert text.endswith(sheet.ELLIPSIS) and scale == sheet.LABEL_SCALE * sheet.MIN_SCALE_SHARE
