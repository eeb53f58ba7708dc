"""``edgecli preview`` (edgecli.pipeline.preview): every edge-map tile of the sheet is a ``run``
output for that frame and threshold, scaled by nearest-neighbour; the default thresholds spread
around the ``-t auto`` one; the frames shown are spread over the (selected) input; and the
command's exit codes, messages and file handling."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import Options
from edgecli.inputs.sampling import sample_positions
from edgecli.output.sheet import DEFAULT_WIDTH, Box, Row, Tile, layout
from edgecli.pipeline.preview import SPREAD, preview

from .helpers import H264_CLIP, invoke, make_frames
from .media import SAMPLE_FRAMES, photo

THRESHOLDS = [60, 100, 140]
CLIP_FRAMES = 24  # tests/data/pan_h264.mp4
PNG_END = b"IEND\xaeB`\x82"


def crop(image: np.ndarray, box: Box) -> np.ndarray:
    return image[box.y : box.y + box.h, box.x : box.x + box.w]


def nearest3(edges: np.ndarray, box: Box) -> np.ndarray:
    small = cv2.resize(edges, (box.w, box.h), interpolation=cv2.INTER_NEAREST)
    return np.repeat(small[:, :, np.newaxis], 3, axis=2)


def run_outputs(inputs, folder: Path, thresholds, **options) -> dict[int, Path]:
    """The folder ``edgecli.process`` writes for ``inputs`` at each threshold (CPU backend)."""
    folders = {}
    for t in thresholds:
        folders[t] = folder / f"run_t{t}"
        edgecli.process(inputs, folders[t], threshold=t, backend="cpu", **options)
    return folders


def read_output(folder: Path, name: str) -> np.ndarray:
    path = folder / name
    assert path.is_file(), f"the run wrote no {name} (the preview says it shows it)"
    edges = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert edges is not None and edges.dtype == np.uint8 and edges.ndim == 2, path
    return edges


def check_sheet(sheet: Path, shown: dict, folders: dict[int, Path], width=DEFAULT_WIDTH):
    """The sheet has the geometry sheet.layout gives for the tiles shown, and each edge tile is
    the run's output for that frame and threshold, nearest-resized into its box."""
    image = cv2.imread(str(sheet), cv2.IMREAD_COLOR)
    assert image is not None, f"{sheet} is not a readable image"
    thresholds = shown["thresholds"]
    assert sorted(folders) == sorted(thresholds)
    assert len(shown["outputs"]) == len(shown["frames"]) > 0
    edges = [{t: read_output(folders[t], name) for t in thresholds} for name in shown["outputs"]]
    rows = []
    for maps in edges:
        (h, w), *others = {e.shape for e in maps.values()}
        assert not others, "one frame's run outputs differ in size between thresholds"
        # Captions and labels do not move the boxes (sheet._plan): placeholders will do.
        tiles = [Tile(np.zeros((h, w, 3), np.uint8), "")]
        tiles += [Tile(np.zeros((h, w), np.uint8), "") for _ in thresholds]
        rows.append(Row("", tiles))
    height, boxes = layout(rows, width)
    assert image.shape == (height, width, 3)
    for k, (maps, row_boxes) in enumerate(zip(edges, boxes, strict=True)):
        for t, box in zip(thresholds, row_boxes[1:], strict=True):
            expected = nearest3(maps[t], box)
            got = crop(image, box)
            if not np.array_equal(got, expected):
                wrong = np.count_nonzero(np.any(got != expected, axis=2))
                pytest.fail(
                    f"row {k} ({shown['frames'][k]}), T={t}: {wrong} of {box.w * box.h} pixels"
                    f" of the tile differ from {shown['outputs'][k]} nearest-resized"
                )
    return image, boxes


def auto_threshold(inputs, folder: Path, threshold="auto", **options) -> int:
    """The number run -t picks by ``threshold``'s rule (auto, P%) for ``inputs``."""
    summary = edgecli.process(inputs, folder, threshold=threshold, backend="cpu", **options)
    return summary.params["threshold"]


def spread(auto: int) -> list[int]:
    return sorted({max(0, round(auto * factor)) for factor in SPREAD})


@pytest.fixture
def mixed_folder(tmp_path):
    """Frames of several sizes, odd ones among them."""
    shapes = [(37, 53), (120, 160), (64, 48), (21, 34), (53, 37)]
    return make_frames(tmp_path / "frames", shapes)


# 1. Exactness ---------------------------------------------------------------------------------


def test_folder_tiles_are_the_run_outputs(mixed_folder, tmp_path):
    sheet = tmp_path / "sheet.png"
    shown = preview([mixed_folder], sheet, Options(backend="cpu"), thresholds=THRESHOLDS, frames=3)
    assert shown["thresholds"] == THRESHOLDS and shown["backend"] == "cpu"
    # Five frames, three shown: positions 0, 2 and 4 of the run's order.
    assert shown["outputs"] == ["f000.png", "f002.png", "f004.png"]
    assert [Path(f).name for f in shown["frames"]] == ["f000.png", "f002.png", "f004.png"]
    image, boxes = check_sheet(sheet, shown, run_outputs(mixed_folder, tmp_path, THRESHOLDS))
    # The source tile: the PNG's own pixels, area-averaged when shrunk, nearest when enlarged.
    for name, row_boxes in zip(shown["outputs"], boxes, strict=True):
        source = cv2.imread(str(mixed_folder / name), cv2.IMREAD_COLOR)
        box = row_boxes[0]
        shrink = box.w < source.shape[1] or box.h < source.shape[0]
        how = cv2.INTER_AREA if shrink else cv2.INTER_NEAREST
        expected = cv2.resize(source, (box.w, box.h), interpolation=how)
        np.testing.assert_array_equal(crop(image, box), expected, err_msg=name)


def test_video_tiles_are_the_run_outputs(tmp_path):
    sheet = tmp_path / "sheet.png"
    shown = preview([H264_CLIP], sheet, Options(backend="cpu"), thresholds=THRESHOLDS, frames=3)
    assert shown["thresholds"] == THRESHOLDS
    positions = [(2 * k + 1) * CLIP_FRAMES // 6 for k in range(3)]  # 4, 12, 20
    assert shown["outputs"] == [f"pan_h264_{i:06d}.png" for i in positions]
    check_sheet(sheet, shown, run_outputs(H264_CLIP, tmp_path, THRESHOLDS))


@pytest.mark.parametrize("norm,border", [("l2", "replicate"), ("l1", "constant")])
def test_tiles_follow_norm_and_border(mixed_folder, tmp_path, norm, border):
    """Other edge options reach the tiles as they reach the run."""
    sheet = tmp_path / "sheet.png"
    options = Options(backend="cpu", norm=norm, border=border)
    shown = preview([mixed_folder], sheet, options, thresholds=THRESHOLDS, frames=2)
    folders = run_outputs(mixed_folder, tmp_path, THRESHOLDS, norm=norm, border=border)
    check_sheet(sheet, shown, folders)


# 2. Default thresholds ------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["folder", "video", "sample_frames"])
def test_default_thresholds_spread_around_auto(which, mixed_folder, tmp_path):
    inputs = {"folder": mixed_folder, "video": H264_CLIP, "sample_frames": SAMPLE_FRAMES}[which]
    auto = auto_threshold(inputs, tmp_path / "auto")
    sheet = tmp_path / "sheet.png"
    shown = preview([inputs], sheet, Options(backend="cpu"), frames=2)
    assert auto in shown["thresholds"]
    assert shown["thresholds"] == spread(auto), (auto, shown["thresholds"])
    assert len(shown["thresholds"]) == len(set(shown["thresholds"]))
    check_sheet(sheet, shown, run_outputs(inputs, tmp_path, shown["thresholds"]))


def test_default_thresholds_follow_the_selection(tmp_path):
    """With --start/--end the auto threshold is the one a run with the same selection picks."""
    selection = {"start": "5", "end": "15"}
    auto = auto_threshold(H264_CLIP, tmp_path / "auto", **selection)
    shown = preview([H264_CLIP], tmp_path / "s.png", Options(backend="cpu", **selection))
    assert shown["thresholds"] == spread(auto)


# 3. Frames spread over the input ---------------------------------------------------------------


def test_video_frames_are_spread_over_the_clip(tmp_path):
    positions = [(2 * k + 1) * CLIP_FRAMES // 8 for k in range(4)]
    assert positions == [3, 9, 15, 21] == sample_positions(CLIP_FRAMES, 4)
    sheet = tmp_path / "sheet.png"
    shown = preview([H264_CLIP], sheet, Options(backend="cpu"), thresholds=THRESHOLDS, frames=4)
    assert shown["outputs"] == [f"pan_h264_{i:06d}.png" for i in positions]
    assert len(shown["frames"]) == 4
    for source, i in zip(shown["frames"], positions, strict=True):
        assert "pan_h264.mp4" in source and re.search(rf"\bframe {i}\b", source), source
    # ... and they are those frames indeed (a seek that lands elsewhere shows another frame).
    check_sheet(sheet, shown, run_outputs(H264_CLIP, tmp_path, THRESHOLDS))


def test_more_frames_asked_than_there_are(mixed_folder, tmp_path):
    shown = preview(
        [mixed_folder], tmp_path / "s.png", Options(backend="cpu"), thresholds=[100], frames=50
    )
    assert shown["outputs"] == [f"f{i:03d}.png" for i in range(5)]


# 4. The command -------------------------------------------------------------------------------


def sheet_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_cli_writes_a_sheet_1600_wide(tmp_path):
    sheet = tmp_path / "X.png"
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--backend", "cpu")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    image = cv2.imread(str(sheet), cv2.IMREAD_UNCHANGED)
    assert image is not None and image.ndim == 3 and image.shape[1] == 1600
    assert sheet.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["X.png"]  # no temporary left beside it
    auto = auto_threshold(SAMPLE_FRAMES, tmp_path / "auto")
    expected = spread(auto)
    match = re.search(r"at thresholds ([\d, ]+)", result.stderr)
    assert match, result.stderr
    assert [int(t) for t in match.group(1).split(",")] == expected, result.stderr
    assert str(sheet) in result.stderr


def test_cli_width(tmp_path):
    sheet = tmp_path / "X.png"
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--backend", "cpu", "--width", 800)
    assert result.exit_code == 0, result.output
    assert cv2.imread(str(sheet)).shape[1] == 800
    assert [p.name for p in tmp_path.iterdir()] == ["X.png"]


def test_cli_explicit_thresholds_are_the_run_outputs(tmp_path):
    sheet = tmp_path / "out" / "X.png"
    sheet.parent.mkdir()
    args = ["-t", "140,60,100", "--samples", 3, "--width", 900, "--backend", "cpu"]
    result = invoke("preview", H264_CLIP, "-o", sheet, *args)
    assert result.exit_code == 0, result.output
    assert "at thresholds 60, 100, 140" in result.stderr
    shown = {
        "frames": ["4", "12", "20"],
        "outputs": [f"pan_h264_{i:06d}.png" for i in (4, 12, 20)],
        "thresholds": THRESHOLDS,
    }
    check_sheet(sheet, shown, run_outputs(H264_CLIP, tmp_path, THRESHOLDS), width=900)
    assert [p.name for p in sheet.parent.iterdir()] == ["X.png"]


def test_cli_quiet(tmp_path):
    result = invoke("preview", SAMPLE_FRAMES, "-o", tmp_path / "X.png", "--backend", "cpu", "-q")
    assert result.exit_code == 0 and result.output == ""
    assert (tmp_path / "X.png").is_file()


@pytest.mark.parametrize("name", ["X.jpg", "X", "X.png.jpg"])
def test_cli_refuses_a_sheet_that_is_not_png(tmp_path, name):
    sheet = tmp_path / name
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--backend", "cpu")
    assert result.exit_code == 2, result.output
    lines = sheet_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    assert str(sheet) in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["60,abc", "abc", "", "60,,100", "-5", "60;100", "1.5"])
def test_cli_refuses_bad_thresholds(tmp_path, value):
    result = invoke("preview", SAMPLE_FRAMES, "-o", tmp_path / "X.png", "-t", value)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_cli_missing_input(tmp_path):
    missing = tmp_path / "no such folder"
    out = tmp_path / "out"
    out.mkdir()
    result = invoke("preview", missing, "-o", out / "X.png", "--backend", "cpu")
    assert result.exit_code == 1, result.output
    lines = sheet_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert str(missing) in lines[0]
    assert list(out.iterdir()) == []


def test_cli_replaces_an_existing_sheet_whole(tmp_path):
    sheet = tmp_path / "X.png"
    old = b"\x89PNG\r\n\x1a\n" + b"old sheet " * 500_000  # longer than the new one
    sheet.write_bytes(old)
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--backend", "cpu", "-t", "100")
    assert result.exit_code == 0, result.output
    data = sheet.read_bytes()
    assert len(data) < len(old) and b"old sheet" not in data
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(PNG_END)
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None and image.shape[1] == 1600
    assert [p.name for p in tmp_path.iterdir()] == ["X.png"]


def test_cli_refuses_to_overwrite_an_input(tmp_path):
    folder = make_frames(tmp_path / "frames", [(30, 40), (40, 30)])
    target = folder / "f000.png"
    before = target.read_bytes()
    result = invoke("preview", folder, "-o", target, "--backend", "cpu", "-t", "100")
    assert result.exit_code == 2, result.output
    assert target.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["f000.png", "f001.png"]


def test_cli_too_many_thresholds_for_the_width(tmp_path):
    thresholds = ",".join(str(t) for t in range(21))  # 22 tiles a row: no room in 200 px
    result = invoke(
        "preview", SAMPLE_FRAMES, "-o", tmp_path / "X.png", "-t", thresholds, "--width", 200,
        "--backend", "cpu",
    )  # fmt: skip
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = sheet_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "given, rules",
    [
        ("auto", ["auto"]),
        ("5%", ["5%"]),
        ("60,auto,7.5%,140", ["auto", "7.5%"]),
    ],
)
def test_cli_thresholds_take_run_s_rules(given, rules, tmp_path):
    """preview -t takes auto and P% as run -t does, alone or among numbers: each shows the
    number run picks for that rule, labelled with the rule, beside the numbers given."""
    sheet, page = tmp_path / "X.png", tmp_path / "X.html"
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--html", page, "--backend", "cpu",
                    "-t", given)  # fmt: skip
    assert result.exit_code == 0, result.output
    picked = {
        rule: auto_threshold(SAMPLE_FRAMES, tmp_path / rule, threshold=rule) for rule in rules
    }
    numbers = [int(t) for t in given.split(",") if t.isdigit()]
    expected = sorted(set(numbers) | set(picked.values()))
    heads = re.findall(r"<th>(T=[^<]*)</th>", page.read_text(encoding="utf-8"))
    by_number = {t: [r for r in rules if picked[r] == t] for t in expected}
    assert heads == [
        f"T={t} ({', '.join(by_number[t])})" if by_number[t] else f"T={t}" for t in expected
    ]
    assert f"at thresholds {', '.join(map(str, expected))} (cpu)" in result.stderr


def test_preview_frames_means_what_run_frames_means(tmp_path):
    """preview --frames N, as run's: at most N frames of each video; --samples M: M frames
    shown, spread over those."""
    sheet = tmp_path / "X.png"
    result = invoke("preview", H264_CLIP, "-o", sheet, "--frames", 3, "--samples", 6, "-t", 100,
                    "--backend", "cpu")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{sheet}: 3 frame(s) at thresholds 100 (cpu)" in result.stderr
    shown = preview([H264_CLIP], sheet, Options(backend="cpu", max_frames=3), thresholds=[100],
                    frames=6)  # fmt: skip
    assert shown["outputs"] == [f"pan_h264_{i:06d}.png" for i in range(3)]


# 5. Selection ---------------------------------------------------------------------------------


def test_start_end_previews_only_the_selected_frames(tmp_path):
    selection = {"start": "5", "end": "15"}
    sheet = tmp_path / "sheet.png"
    options = Options(backend="cpu", **selection)
    shown = preview([H264_CLIP], sheet, options, thresholds=THRESHOLDS, frames=4)
    indices = [int(re.search(r"_(\d{6})\.png$", name).group(1)) for name in shown["outputs"]]
    assert all(5 <= i < 15 for i in indices), indices
    assert indices == [5 + p for p in sample_positions(10, 4)]  # 6, 8, 11, 13
    check_sheet(sheet, shown, run_outputs(H264_CLIP, tmp_path, THRESHOLDS, **selection))


def test_cli_start_end(tmp_path):
    sheet = tmp_path / "X.png"
    args = ["--start", 5, "--end", 15, "-t", "60,100,140", "--backend", "cpu"]
    result = invoke("preview", H264_CLIP, "-o", sheet, *args)
    assert result.exit_code == 0, result.output
    assert "4 frame(s)" in result.stderr
    shown = {
        "frames": ["6", "8", "11", "13"],
        "outputs": [f"pan_h264_{i:06d}.png" for i in (6, 8, 11, 13)],
        "thresholds": THRESHOLDS,
    }
    folders = run_outputs(H264_CLIP, tmp_path, THRESHOLDS, start="5", end="15")
    check_sheet(sheet, shown, folders)


def test_every_previews_only_kept_frames(tmp_path):
    selection = {"start": "2", "every": 5}
    shown = preview(
        [H264_CLIP], tmp_path / "s.png", Options(backend="cpu", **selection), thresholds=[100]
    )
    indices = [int(re.search(r"_(\d{6})\.png$", name).group(1)) for name in shown["outputs"]]
    kept = list(range(2, CLIP_FRAMES, 5))  # 2, 7, 12, 17, 22
    assert indices == [kept[p] for p in sample_positions(len(kept), 4)]
    check_sheet(tmp_path / "s.png", shown, run_outputs(H264_CLIP, tmp_path, [100], **selection))


def test_multi_page_tiff_with_a_selection(tmp_path):
    """A multi-frame image's frames are found by index through the selection too."""
    tiff = tmp_path / "m.tif"
    assert cv2.imwritemulti(str(tiff), [photo(30 + i, 41, seed=i) for i in range(7)])
    selection = {"start": "1", "every": 2}
    sheet = tmp_path / "s.png"
    shown = preview([tiff], sheet, Options(backend="cpu", **selection), thresholds=THRESHOLDS)
    assert shown["outputs"] == ["m_000001.png", "m_000003.png", "m_000005.png"]
    check_sheet(sheet, shown, run_outputs(tiff, tmp_path, THRESHOLDS, **selection))


# 6. Odd shapes --------------------------------------------------------------------------------


@pytest.mark.parametrize("thresholds", [THRESHOLDS, [0, 1], None])
def test_tiny_and_thin_frames(tmp_path, thresholds):
    folder = make_frames(tmp_path / "frames", [(1, 1), (1, 40), (40, 1)])
    sheet = tmp_path / "sheet.png"
    shown = preview([folder], sheet, Options(backend="cpu"), thresholds=thresholds, frames=3)
    assert shown["outputs"] == ["f000.png", "f001.png", "f002.png"]
    if thresholds is not None:
        assert shown["thresholds"] == thresholds
    else:
        assert shown["thresholds"] == spread(auto_threshold(folder, tmp_path / "auto"))
    check_sheet(sheet, shown, run_outputs(folder, tmp_path, shown["thresholds"]))


def test_thin_frames_in_a_narrow_sheet(tmp_path):
    folder = make_frames(tmp_path / "frames", [(1, 1), (1, 40), (40, 1), (3, 500)])
    sheet = tmp_path / "sheet.png"
    shown = preview([folder], sheet, Options(backend="cpu"), thresholds=THRESHOLDS, width=200)
    check_sheet(sheet, shown, run_outputs(folder, tmp_path, THRESHOLDS), width=200)


# 7. The HTML page ----------------------------------------------------------------------------


def test_the_html_page_holds_the_sheet_and_the_shares(tmp_path):
    """--html writes one self-contained page: the very sheet written beside it, embedded, and
    a row a frame of its shares of edge pixels, each as the run's PNG at that threshold has."""
    import base64
    from html.parser import HTMLParser

    sheet, page = tmp_path / "sheet.png", tmp_path / "sheet.html"
    result = invoke("preview", H264_CLIP, "-o", sheet, "--html", page, "--backend", "cpu",
                    "-t", "60,140", "--samples", "3")  # fmt: skip
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    embedded = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text).group(1)
    assert base64.b64decode(embedded) == sheet.read_bytes()

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.rows[-1].append(self.cell)
                self.cell = None

    cells = Cells()
    cells.feed(text)
    assert cells.rows[0] == ["frame", "T=60", "T=140"] and len(cells.rows) == 4
    for row, index in zip(cells.rows[1:], [4, 12, 20], strict=True):  # (2k+1)*24//6
        assert row[0] == f"{H264_CLIP} [frame {index}]"
        for t, cell in zip((60, 140), row[1:], strict=True):
            out = tmp_path / f"run{t}"
            if not out.exists():
                edgecli.process(H264_CLIP, out, backend="cpu", threshold=t)
            edges = cv2.imread(str(out / f"pan_h264_{index:06d}.png"), cv2.IMREAD_UNCHANGED)
            assert cell == f"{100 * np.count_nonzero(edges) / edges.size:.2f}%"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["sheet.html", "sheet.png"]


def test_the_page_needs_a_name_of_its_own(tmp_path):
    sheet = tmp_path / "sheet.png"
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, "--html", sheet, "--backend", "cpu")
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == f"Error: {sheet}: the page and the sheet need names of their own"
    )
    assert not sheet.exists()
