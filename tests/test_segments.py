"""edgecli.decode.segments: a video's keyframes as its MP4 tables list them (checked against
FFmpeg's decode), and the cuts of a video into segments for NVDEC sessions side by side."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecli.decode.segments import keyframes, segment_bounds

from .helpers import DATA

MP4_CLIPS = sorted(p.name for p in DATA.glob("*.mp4"))


@pytest.fixture(scope="module")
def clips():
    """tests.clips (FFmpeg's encoder and its view of a clip), or a skip without imageio-ffmpeg."""
    pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
    from . import clips

    return clips


@pytest.mark.parametrize("clip", MP4_CLIPS)
def test_keyframes_of_the_test_clips_are_ffmpegs(clips, clip):
    found = keyframes(DATA / clip)
    assert list(found) == clips.key_frames(DATA / clip) and found[0] == 0


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


@pytest.mark.parametrize(
    "start, stop, parts, keys, shortest, expected",
    [
        (0, 2400, 4, GOP_240, 60, [0, 480, 1200, 1680, 2400]),  # ties go to the earlier
        (0, 2400, 8, GOP_240, 60, [0, 240, 480, 960, 1200, 1440, 1680, 2160, 2400]),
        (0, 2400, 2, GOP_240, 60, [0, 1200, 2400]),
        (0, 90, 4, None, 7, [0, 22, 45, 67, 90]),  # every frame a keyframe: equal parts
        (0, 90, 4, list(range(0, 90, 12)), 7, [0, 24, 48, 72, 90]),
        (31, 71, 4, list(range(0, 90, 12)), 7, [31, 48, 60, 71]),  # from --start 31
        (0, 240, 4, [0], 60, [0, 240]),  # one keyframe: left whole
        (0, 240, 4, (), 60, [0, 240]),  # the file did not say
        (0, 2400, 4, [0, 2350], 60, [0, 2400]),  # the only cut would leave 50 frames
        (0, 2400, 4, [0, 2000], 60, [0, 2000, 2400]),
        (0, 2400, 1, GOP_240, 60, [0, 2400]),
        (0, 100, 4, None, 60, [0, 100]),
    ],
)
def test_segment_bounds(start, stop, parts, keys, shortest, expected):
    assert segment_bounds(start, stop, parts, keys, shortest) == expected


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 500),
    frames=st.integers(0, 3000),
    parts=st.integers(1, 12),
    shortest=st.integers(1, 300),
    every=st.none() | st.integers(1, 400),
    offset=st.integers(0, 399),
)
def test_segment_bounds_cut_only_at_keyframes_and_keep_segments_long(
    start, frames, parts, shortest, every, offset
):
    stop = start + frames
    keys = None if every is None else list(range(offset % every, stop + every, every))
    bounds = segment_bounds(start, stop, parts, keys, shortest)
    assert bounds[0] == start and bounds[-1] == stop and len(bounds) <= parts + 1
    inner = bounds[1:-1]
    assert keys is None or set(inner) <= set(keys)
    if inner:
        assert all(b - a >= shortest for a, b in itertools.pairwise(bounds))
    if every is not None and every <= shortest and frames >= 2 * parts * shortest + 2 * every:
        assert len(bounds) == parts + 1  # keyframes dense enough: every cut is made
