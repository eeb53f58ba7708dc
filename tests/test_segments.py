"""edgecli.decode.segments: a video's keyframes as its MP4 tables list them (checked against
FFmpeg's decode), and the cuts of a video into segments for NVDEC sessions side by side."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from edgecli.decode.segments import Schedule, Segment, cut_at, keyframes

from .helpers import DATA

# The H.264 clips whose samples FFmpeg shows as frames: those cut by an edit list, or begun
# without a keyframe, are never cut into segments (they stay off NVDEC), and FFmpeg's frame
# numbers of their keyframes are not their sample numbers.
OTHER_CODECS = ("nvdec_hevc.mp4", "nvdec_hevc10.mp4", "nvdec_vp9.mp4", "nvdec_av1.mp4")
MP4_CLIPS = sorted(
    p.name
    for p in DATA.glob("*.mp4")
    if p.name not in ("nvdec_cut.mp4", "nvdec_headless.mp4", *OTHER_CODECS)
)


@pytest.fixture(scope="module")
def clips():
    """tests.clips (FFmpeg's encoder and its view of a clip), or a skip without imageio-ffmpeg."""
    pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
    from tests import clips

    return clips


@pytest.mark.parametrize("clip", MP4_CLIPS)
def test_keyframes_of_the_test_clips_are_ffmpegs(clips, clip):
    found = keyframes(DATA / clip)
    assert list(found) == clips.key_frames(DATA / clip) and found[0] == 0


@pytest.mark.parametrize("clip", OTHER_CODECS)
def test_other_codecs_have_nowhere_to_cut(clips, clip):
    """Only an H.264 IDR picture is sure to be shown after every picture decoded before it: an
    HEVC clip's sync samples are not its keyframes' frame numbers (a CRA's leading pictures
    come before it), so videos of other codecs are never cut."""
    assert keyframes(DATA / clip) == ()
    if clip == "nvdec_hevc.mp4":
        assert clips.key_frames(DATA / clip) == [0, 12]  # its stss says [0, 9]


@pytest.mark.parametrize("bframes", [0, 2])
@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_keyframes_every_gop_with_and_without_b_frames(clips, tmp_path, bframes, suffix):
    rng = np.random.default_rng(bframes)
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(37)]
    params = f"keyint=10:min-keyint=10:scenecut=0:bframes={bframes}"
    clip = clips.encode(tmp_path / f"gop{suffix}", frames, args=["-x264-params", params])
    assert list(keyframes(clip)) == clips.key_frames(clip) == [0, 10, 20, 30]


def test_a_track_without_a_sync_sample_table_has_every_frame_a_keyframe(tmp_path):
    data = (DATA / "nvdec_250x142.mp4").read_bytes()
    at = data.index(b"stss")
    assert data.count(b"stss") == 1
    clip = tmp_path / "no_stss.mp4"
    clip.write_bytes(data[:at] + b"free" + data[at + 4 :])  # the box kept, as padding
    assert keyframes(clip) is None


def test_files_that_do_not_say_have_nowhere_to_cut(tmp_path):
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(bytes(range(256)) * 8)
    no_moov = tmp_path / "no_moov.mp4"
    no_moov.write_bytes(b"\0\0\0\x10ftypisom\0\0\0\0" + b"\0\0\0\x08mdat")
    assert keyframes(garbage) == ()
    assert keyframes(no_moov) == ()
    assert keyframes(DATA / "nvdec_bframes.mkv") == ()
    assert keyframes(tmp_path / "missing.mp4") == ()


GOP_240 = list(range(0, 2400, 240))  # benchmarks' pan_long.mp4: a keyframe every 240 frames
GOP_12 = list(range(0, 90, 12))  # tests/data/nvdec_250x142.mp4


@pytest.mark.parametrize(
    "claimed, stop, keys, shortest, expected",
    [
        (0, 2400, GOP_240, 60, 1200),
        (0, 1200, GOP_240, 60, 480),  # 480 and 720 as near the middle: the earlier
        (1200, 2400, GOP_240, 60, 1680),
        (500, 2400, GOP_240, 60, 1440),  # the middle of what is left, not of the segment
        (31, 90, GOP_12, 7, 60),
        (0, 90, None, 7, 45),  # every frame a keyframe
        (0, 100, None, 60, None),  # too short to leave two parts of 60
        (0, 240, [0], 60, None),  # no keyframe inside
        (0, 240, (), 60, None),  # the file did not say
        (0, 2400, [0, 2350], 60, None),  # the only cut would leave 50 frames
        (0, 2400, [0, 2000], 60, 2000),
    ],
)
def test_cut_at(claimed, stop, keys, shortest, expected):
    assert cut_at(claimed, stop, keys, shortest) == expected


def test_one_long_video_is_shared_by_every_session_at_its_keyframes():
    schedule = Schedule([Segment("long")], shortest=60)
    first = schedule.take()
    assert (first.start, first.stop) == (0, None)
    schedule.started(first, 2400, GOP_240)
    taken = [first]
    for _ in range(3):  # three more sessions, each cutting the segment with the most left
        segment = schedule.take()
        schedule.started(segment, 2400, GOP_240)
        taken.append(segment)
    bounds = sorted((s.start, s.stop) for s in taken)
    assert bounds == [(0, 480), (480, 1200), (1200, 1680), (1680, 2400)]


def test_cuts_leave_the_frames_a_session_claimed():
    schedule = Schedule([Segment("v")], shortest=10)
    segment = schedule.take()
    schedule.started(segment, 100, None)
    assert schedule.claim(segment, 0, 80) == 80
    part = schedule.take()
    assert (part.start, part.stop, segment.stop) == (90, 100, 90)
    assert schedule.claim(segment, 80, 16) == 90
    assert schedule.claim(segment, 90, 16) == 90  # its end: nothing more to claim


def test_videos_are_taken_in_order_before_any_is_cut():
    schedule = Schedule([Segment(name) for name in "abc"], shortest=10)
    first = schedule.take()
    schedule.started(first, 1000, None)
    assert [first.source, schedule.take().source, schedule.take().source] == ["a", "b", "c"]
    assert first.stop == 1000


def test_the_last_videos_are_cut_for_a_session_that_finished_its_own():
    """Five clips of 90 frames (a keyframe every 12) for 2 sessions: once the queue is empty,
    the session that finishes its clip cuts the last one, which the other session has begun,
    at the keyframe nearest the middle of what that session has not claimed."""
    schedule = Schedule([Segment(f"c{i}") for i in range(5)], shortest=7)

    def finish(segment: Segment) -> None:
        schedule.started(segment, 90, GOP_12)
        assert schedule.claim(segment, segment.start, 90) == 90
        schedule.done(segment)

    first, second = schedule.take(), schedule.take()
    finish(first)
    third = schedule.take()
    finish(second)
    fourth = schedule.take()
    finish(third)
    last = schedule.take()  # nothing left to start after it
    assert [s.source for s in (first, second, third, fourth, last)] == [
        "c0",
        "c1",
        "c2",
        "c3",
        "c4",
    ]
    schedule.started(last, 90, GOP_12)
    assert schedule.claim(last, 0, 16) == 16
    finish(fourth)
    thread, got = taker(schedule)  # on a thread: a schedule that never cuts fails, not hangs
    thread.join(10)
    assert [(s.source, s.start, s.stop) for s in got] == [("c4", 48, 90)] and last.stop == 48


def taker(schedule: Schedule) -> tuple[threading.Thread, list]:
    """A thread waiting in ``schedule.take()``; the list gets what it returned."""
    got: list = []
    thread = threading.Thread(target=lambda: got.append(schedule.take()), daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("how", ["never started", "kept", "no keyframe inside"])
def test_a_segment_that_may_not_be_cut_leaves_the_others_waiting_until_it_is_done(how):
    schedule = Schedule([Segment("v")], shortest=10)
    segment = schedule.take()
    if how == "kept":  # NVDEC opened it, then failed: the CPU decodes the rest
        schedule.started(segment, 1000, None)
        schedule.keep(segment)
    elif how == "no keyframe inside":
        schedule.started(segment, 1000, [0])
    thread, got = taker(schedule)
    thread.join(0.2)
    assert thread.is_alive()
    schedule.done(segment)
    thread.join(10)
    assert not thread.is_alive() and got == [None]


def test_a_session_waiting_takes_a_cut_once_the_segment_is_started():
    schedule = Schedule([Segment("v")], shortest=10)
    segment = schedule.take()
    thread, got = taker(schedule)
    thread.join(0.1)
    assert thread.is_alive()  # nothing to cut while the video is not open
    schedule.started(segment, 100, None)
    thread.join(10)
    assert [(s.start, s.stop) for s in got] == [(50, 100)] and segment.stop == 50


def test_close_ends_the_wait():
    schedule = Schedule([Segment("v")], shortest=10)
    schedule.take()
    thread, got = taker(schedule)
    schedule.close()
    thread.join(10)
    assert got == [None] and schedule.take() is None


def test_nothing_to_decode():
    assert Schedule([]).take() is None


@settings(max_examples=60, deadline=None)
@given(
    videos=st.lists(
        st.tuples(st.integers(0, 700), st.none() | st.integers(1, 200), st.integers(0, 40)),
        min_size=1,
        max_size=6,
    ),
    sessions=st.integers(1, 6),
    shortest=st.integers(1, 80),
    batch=st.integers(1, 20),
)
def test_sessions_side_by_side_decode_every_frame_once(videos, sessions, shortest, batch):
    """Sessions on threads, taking, claiming and finishing as edgecli's do: every frame of
    every video (from its --start) is decoded exactly once, cut only at keyframes, into parts
    of at least ``shortest`` frames."""
    keys = {i: None if every is None else list(range(0, total, every)) for i, (total, every, _) in
            enumerate(videos)}  # fmt: skip
    schedule = Schedule(
        [Segment(i, start=min(first, total)) for i, (total, _, first) in enumerate(videos)],
        shortest=shortest,
    )
    decoded, starts, lock = [], [], threading.Lock()

    def session():
        while (segment := schedule.take()) is not None:
            total = videos[segment.source][0]
            schedule.started(segment, total, keys[segment.source])
            with lock:
                starts.append((segment.source, segment.start))
            index = segment.start
            while (end := schedule.claim(segment, index, batch)) > index:
                with lock:
                    decoded.extend((segment.source, f) for f in range(index, end))
                time.sleep(0.0002)  # a batch's decode: the other sessions get to cut meanwhile
                index = end
            with lock:
                parts.append((segment.source, segment.start, segment.stop))
            schedule.done(segment)

    parts: list = []
    threads = [threading.Thread(target=session, daemon=True) for _ in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    expected = [(i, f) for i, (total, _, first) in enumerate(videos) for f in
                range(min(first, total), total)]  # fmt: skip
    assert sorted(decoded) == expected
    for video, start in starts:
        first = min(videos[video][2], videos[video][0])
        assert start == first or keys[video] is None or start in keys[video]
    cut = [video for video, _, _ in parts if sum(v == video for v, _, _ in parts) > 1]
    event(f"videos cut: {bool(cut)}")
    for video, start, stop in parts:  # a video cut in parts: none shorter than ``shortest``
        if sum(v == video for v, _, _ in parts) > 1:
            assert stop - start >= shortest
