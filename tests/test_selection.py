"""--start, --end, --every and --frames: the frames a selected run writes are exactly a full
run's, names and bytes, filtered by frame index; bad values are usage errors in one line."""

from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.errors import EXIT_USAGE, OptionError
from edgecli.options.selection import FrameRange, Selection, parse_position

from .helpers import H264_CLIP, invoke, make_folder
from .media import photo, read_frames

CLIP_FRAMES = 24


@pytest.mark.parametrize(
    "text, index, seconds",
    [
        ("90", 90, None),
        ("0", 0, None),
        ("90s", None, Fraction(90)),
        ("90.5s", None, Fraction(181, 2)),
        ("1:30", None, Fraction(90)),
        ("1:30.25", None, Fraction(361, 4)),
        ("1:02:03.5", None, Fraction(7447, 2)),
    ],
)
def test_positions_are_indices_or_times(text, index, seconds):
    position = parse_position(text, "--start")
    assert (position.index, position.seconds) == (index, seconds)


@pytest.mark.parametrize(
    "text, message",
    [
        ("90.5", "a frame index is a whole number; for seconds write 90.5s"),
        ("x", "must be a frame index (90) or a time"),
        ("1:75", "minutes and seconds run from 0 to 59"),
        ("1:61:00", "minutes and seconds run from 0 to 59"),
        ("1:30s", "not both forms at once"),
        ("-3", "must be a frame index (90) or a time"),
    ],
)
def test_bad_positions_say_why(text, message):
    with pytest.raises(OptionError, match="--start") as error:
        parse_position(text, "--start")
    assert message in str(error.value)


def test_a_time_is_the_first_frame_at_or_after_it():
    """At 25 fps frame i is at i/25 s: 1 s is frame 25, 1.01 s frame 26; --end is exclusive."""
    selection = Selection.from_options("1s", "2.01s", 1, None)
    assert selection.resolve("clip.mp4", Fraction(25), 100) == FrameRange(25, 51, 1)
    ntsc = Selection.from_options("10s", None, 1, None)  # 30000/1001 fps: 299.7 -> frame 300
    assert ntsc.resolve("clip.mp4", Fraction(30000, 1001), None).start == 300


def test_a_frame_range_counts_what_it_keeps():
    kept = FrameRange(5, 17, 4)
    assert [i for i in range(30) if i in kept] == [5, 9, 13] and kept.count(30) == 3
    assert FrameRange(5, None, 4).count(14) == 3 and FrameRange(20, None, 1).count(10) == 0
    limited = Selection.from_options("2", None, 3, 4).resolve("c", None, 100)
    assert [i for i in range(100) if i in limited] == [2, 5, 8, 11]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    edgecli.process(H264_CLIP, out, backend="cpu")
    assert len(list(out.glob("*.png"))) == CLIP_FRAMES
    return out


def fps() -> Fraction:
    capture = cv2.VideoCapture(str(H264_CLIP))
    rate = capture.get(cv2.CAP_PROP_FPS)
    capture.release()
    return Fraction(rate).limit_denominator(1_000_000)


@pytest.mark.parametrize(
    "args, kept",
    [
        (["--every", "5"], range(0, 24, 5)),
        (["--start", "7"], range(7, 24)),
        (["--end", "3"], range(0, 3)),
        (["--start", "4", "--end", "20", "--every", "6"], [4, 10, 16]),
        (["--frames", "2"], [0, 1]),
        (["--start", "10", "--every", "4", "--frames", "3"], [10, 14, 18]),
        (["--start", "23"], [23]),
        (["--end", "500"], range(24)),
    ],
)
def test_selected_frames_are_a_full_runs_filtered_by_index(full_run, tmp_path, args, kept):
    out = tmp_path / "out"
    result = invoke("run", H264_CLIP, "-o", out, "--backend", "cpu", "-q", *args)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == [f"pan_h264_{i:06d}.png" for i in kept]
    for name in names:
        assert (out / name).read_bytes() == (full_run / name).read_bytes(), name


def test_times_select_by_the_videos_frame_rate(full_run, tmp_path):
    """--start and --end as times keep the frames from the first at or after --start up to
    the last before --end, at the clip's frame rate."""
    rate = fps()
    start, end = Fraction(1, 4), Fraction(3, 4)
    first, stop = -(-start * rate // 1), min(-(-end * rate // 1), CLIP_FRAMES)
    out = tmp_path / "out"
    result = invoke("run", H264_CLIP, "-o", out, "--backend", "cpu", "--start", "0.25s",
                    "--end", "0:00.75")  # fmt: skip
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == [f"pan_h264_{i:06d}.png" for i in range(int(first), int(stop))]
    assert 1 < len(names) < CLIP_FRAMES - 1
    for name in names:
        assert (out / name).read_bytes() == (full_run / name).read_bytes(), name


def test_the_progress_total_counts_only_the_kept_frames(tmp_path):
    from edgecli.inputs.sources import count_frames, discover, select_frames

    sources = select_frames(discover(str(H264_CLIP)), Selection.from_options("4", "20", 6, None))
    assert count_frames(sources) == 3


def test_frame_indices_are_checked_against_an_mp4s_table_without_a_decoder(monkeypatch):
    """--start, --every and --frames on an MP4 need only its frame count, read from its
    sample table (cv2 opens a decoder for it: 40-70 ms a video); a time still asks cv2 for
    the frame rate."""
    from edgecli.inputs.sources import discover, select_frames

    sources = list(discover(str(H264_CLIP)))
    opened = []
    real = cv2.VideoCapture

    def counted(*args):
        opened.append(args[0])
        return real(*args)

    monkeypatch.setattr(cv2, "VideoCapture", counted)
    (kept,) = select_frames(sources, Selection.from_options("4", None, 6, 3))
    assert kept.selection == FrameRange(4, 22, 6)
    with pytest.raises(OptionError, match=r"--start 24 is past the end of .* \(24 frames\)"):
        select_frames(sources, Selection.from_options("24", None, 1, None))
    assert opened == []
    (timed,) = select_frames(sources, Selection.from_options("0.5s", None, 1, None))
    assert timed.selection.start > 0 and opened == [str(H264_CLIP)]


def test_multi_page_tiffs_and_gifs_are_selected_too(tmp_path):
    pages = [photo(20, 30, seed=i) for i in range(7)]
    tiff = tmp_path / "in" / "stack.tiff"
    tiff.parent.mkdir()
    assert cv2.imwritemulti(str(tiff), pages)
    full, some = tmp_path / "full", tmp_path / "some"
    edgecli.process(tiff, full, backend="cpu")
    edgecli.process(tiff, some, backend="cpu", start="1", every=3)
    names = sorted(p.name for p in some.glob("*.png"))
    assert names == ["stack_000001.png", "stack_000004.png"]
    for name in names:
        assert (some / name).read_bytes() == (full / name).read_bytes()


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == EXIT_USAGE, result.output
    return lines[-1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--every", "0"], "Error: Invalid value for '--every': 0 is not in the range x>=1."),
        (["--frames", "0"], "Error: Invalid value for '--frames': 0 is not in the range x>=1."),
        (["--start", "20", "--end", "10"], "Error: --end 10 is not after --start 20"),
        (["--start", "5", "--end", "5"], "Error: --end 5 is not after --start 5"),
        (["--start", "2:00", "--end", "1:00"], "Error: --end 1:00 is not after --start 2:00"),
        (["--start", "24"], f"Error: --start 24 is past the end of {H264_CLIP} (24 frames)"),
        (["--start", "1:00"], f"Error: --start 1:00 is past the end of {H264_CLIP} (24 frames)"),
        (["--start", "soon"], "Error: --start must be a frame index (90) or a time (1:30, "),
    ],
)
def test_bad_selections_are_usage_errors_in_one_line(tmp_path, args, message):
    out = tmp_path / "out"
    result = invoke("run", H264_CLIP, "-o", out, "--backend", "cpu", *args)
    assert one_error_line(result).startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1 or message.startswith("Error: Invalid")
    assert not out.exists()


def test_a_time_needs_a_frame_rate(tmp_path):
    tiff = tmp_path / "stack.tiff"
    assert cv2.imwritemulti(str(tiff), [photo(8, 8, seed=i) for i in range(3)])
    result = invoke("run", tiff, "-o", tmp_path / "out", "--start", "1s")
    assert one_error_line(result) == (
        f"Error: --start 1s is a time, and {tiff} has no frame rate: give a frame index"
    )


def test_selecting_frames_of_still_images_only_is_refused(tmp_path):
    folder = make_folder(tmp_path / "in", 3)
    result = invoke("run", folder, "-o", tmp_path / "out", "--every", "2")
    assert one_error_line(result).startswith(
        "Error: --start, --end, --every and --frames select frames of videos and multi-frame "
        "files; the INPUTs have none"
    )
    assert not (tmp_path / "out").exists()


def test_still_images_beside_a_video_are_all_kept(tmp_path):
    folder = make_folder(tmp_path / "in", 2)
    out = tmp_path / "out"
    edgecli.process([folder, H264_CLIP], out, backend="cpu", every=10)
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == ["frame_0000.png", "frame_0001.png", "pan_h264_000000.png",
                     "pan_h264_000010.png", "pan_h264_000020.png"]  # fmt: skip


def test_the_summary_records_the_selection(tmp_path):
    summary = edgecli.process(H264_CLIP, tmp_path / "out", backend="cpu", start="3", every=2)
    assert summary.params["frames"] == {"start": "3", "end": None, "every": 2, "max": None}
    assert summary.frames == len(range(3, 24, 2))
    plain = edgecli.process(H264_CLIP, tmp_path / "plain", backend="cpu")
    assert "frames" not in plain.params


@pytest.mark.parametrize("gap", [0, 3, 1000])
@pytest.mark.parametrize(
    "clip", ["pan_h264.mp4", "nvdec_1918x1080.mp4", "nvdec_bframes.mkv", "nvdec_250x142.mp4"]
)
def test_sampled_video_frames_are_the_frames_read_in_order(clip, gap, monkeypatch):
    """The samples of -t auto and preview reach a video's frames by seeking (every gap here
    larger than SEEK_GAP) or by decoding on to them: either way exactly the frames that
    reading the video in order gives (B-frames, a GOP of 8, Matroska)."""
    from edgecli.decode import cpu

    from .helpers import DATA

    path = DATA / clip
    in_order = read_frames(path)
    monkeypatch.setattr(cpu, "SEEK_GAP", gap)
    n = len(in_order)
    indices = sorted({0, 1, n // 3, n // 3 + 1, n // 2, n - 2, n - 1})
    found = cpu.video_frames_at(path, indices, 1 << 30)
    assert sorted(found) == indices
    for i in indices:
        assert np.array_equal(found[i], in_order[i]), f"{clip} frame {i}"
