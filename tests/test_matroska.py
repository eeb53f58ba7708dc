"""edgecli.decode.matroska on Matroska and WebM files made by imageio-ffmpeg's ffmpeg (and a few
written element by element below, for what ffmpeg never writes: lacing, live streams of unknown
size, ContentEncodings, PixelCrop), checked against what cv2.VideoCapture and FFmpeg's decoder
do with them: the stream and its turn, the frame count, the keyframes."""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecli.decode import matroska as mkv
from edgecli.decode.streams import Colour, VideoStream

pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from tests.clips import FFMPEG, key_frames, probe  # noqa: E402

CODECS = {
    "h264": ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    # B-frames (decode order is not presentation order) and a keyframe every 10 frames.
    "h264_bframes": [
        *["-c:v", "libx264", "-preset", "fast", "-bf", "3", "-pix_fmt", "yuv420p"],
        *["-x264-params", "keyint=10:min-keyint=10:scenecut=0:aud=1"],
    ],
    "h264_open_gop": [
        *["-c:v", "libx264", "-preset", "fast", "-bf", "3", "-pix_fmt", "yuv420p"],
        *["-x264-params", "keyint=10:min-keyint=10:scenecut=0:open-gop=1:aud=1"],
    ],
    "hevc": [
        *["-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
        *["-x265-params", "log-level=none:keyint=10:min-keyint=10:scenecut=0:no-open-gop=1:aud=1"],
    ],
    "hevc_open_gop": [
        *["-c:v", "libx265", "-preset", "fast", "-pix_fmt", "yuv420p"],
        *["-x265-params", "log-level=none:keyint=10:min-keyint=10:scenecut=0:open-gop=1:aud=1"],
    ],
    "av1": [
        *["-c:v", "libaom-av1", "-cpu-used", "8", "-usage", "realtime", "-pix_fmt", "yuv420p"],
        *["-g", "10", "-keyint_min", "10"],
    ],
    "vp9": [
        *["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-pix_fmt", "yuv420p"],
        *["-g", "10", "-keyint_min", "10"],
    ],
}
AUDIO = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-shortest"]
# Frame i is shown at i/10 s, but frames 12 to 20 half a second later: a variable frame rate.
VFR = ["-fps_mode", "vfr", "-vf", "setpts='(N/10+if(gte(N,12),0.5,0))/TB'"]


def ffmpeg(*args) -> None:
    subprocess.run([FFMPEG, "-v", "error", *map(str, args), "-y"], check=True)


def make(path: Path, codec: str = "h264", size: str = "64x48", frames: int = 30, args=()) -> Path:
    """A clip of ``frames`` frames of ffmpeg's testsrc2 pattern at ``size``, 10 fps."""
    source = ["-f", "lavfi", "-i", f"testsrc2=size={size}:rate=10"]
    ffmpeg(*source, *args, "-frames:v", frames, *CODECS[codec], path)
    return path


def cv2_frames(path: Path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            return frames
        frames.append(frame)


def cv2_count(path: Path) -> int:
    capture = cv2.VideoCapture(str(path))
    count = 0
    while capture.grab():
        count += 1
    return count


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("matroska")


# ---------------------------------------------------------------------------------------------
# The stream


@pytest.mark.parametrize(
    "codec, suffix, size",
    [
        ("h264", ".mkv", "64x48"),
        ("h264_bframes", ".mkv", "1366x768"),
        ("hevc", ".mkv", "64x48"),
        ("vp9", ".webm", "854x480"),
        ("vp9", ".mkv", "64x48"),
        ("av1", ".webm", "64x48"),
    ],
)
def test_describe_names_codec_and_sampling(folder, codec, suffix, size):
    """Each codec, in either container and at odd sizes, is 8-bit 4:2:0 progressive, as
    ffmpeg encoded it."""
    clip = make(folder / f"describe_{codec}_{size}{suffix}", codec, size, frames=3)
    stream = mkv.describe(clip)
    name = "h264" if codec.startswith("h264") else codec
    assert stream == VideoStream(name, "matroska", "4:2:0", 8, True, stream.colour, 0)
    assert cv2_frames(clip)[0].shape[:2] == tuple(map(int, size.split("x")))[::-1]


@pytest.fixture(scope="module")
def untagged(folder) -> Path:
    """An H.264 clip in Matroska whose stream's SPS says nothing of its colour."""
    return make(folder / "untagged.mkv", frames=3)


@pytest.mark.parametrize(
    "tags, colour",
    [
        ([], Colour(None, False, None, None)),  # ffmpeg tags what it encodes limited range
        (["-colorspace", "bt709", "-color_range", "tv"], Colour(1, False, None, None)),
        (["-colorspace", "bt709", "-color_range", "pc"], Colour(1, True, None, None)),
        (
            ["-colorspace", "bt470bg", "-color_primaries", "bt709", "-color_trc", "bt709"],
            Colour(5, False, 1, 1),
        ),
    ],
)
def test_colour_element_stands_where_the_h264_stream_is_silent(folder, untagged, tags, colour):
    """An untagged H.264 stream, its Matroska Colour element retagged by a stream copy, has
    the colour FFmpeg reports for it: the Colour element's (Range 1 limited, 2 full)."""
    clip = folder / f"colour_{'_'.join(tags)}.mkv"
    ffmpeg("-i", untagged, "-c", "copy", *tags, clip)
    stream = mkv.describe(clip)
    assert stream.colour == colour
    info = probe(clip)
    assert info["color_range"] == {None: None, False: "tv", True: "pc"}[colour.full_range]
    assert info["color_space"] == {None: None, 1: "bt709", 5: "bt470bg"}[colour.matrix]


def test_colour_range_3_is_left_to_the_stream(folder, untagged):
    """Matroska's Range 3 ("defined by the matrix and transfer") is not a range FFmpeg takes:
    the stream's range stays unspecified."""
    clip = folder / "range2.mkv"
    ffmpeg("-i", untagged, "-c", "copy", "-color_range", "pc", clip)
    data = clip.read_bytes()
    assert data.count(b"\x55\xb9\x81\x02") == 1  # Range, 1 byte: 2 (full)
    patched = folder / "range3.mkv"
    patched.write_bytes(data.replace(b"\x55\xb9\x81\x02", b"\x55\xb9\x81\x03"))
    assert mkv.describe(clip).colour.full_range is True
    assert mkv.describe(patched).colour.full_range is None
    assert probe(patched)["color_range"] is None


def turned(frame: np.ndarray, rotation: int) -> np.ndarray:
    turns = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
    return frame if rotation == 0 else cv2.rotate(frame, turns[rotation])


@pytest.mark.parametrize(
    "flags, rotation",
    [
        (["-display_rotation", "90"], 270),
        (["-display_rotation", "180"], 180),
        (["-display_rotation", "270"], 90),
        (["-display_rotation", "-90"], 90),
        (["-display_rotation", "45"], 0),
        (["-display_rotation", "89.6"], 270),
        (["-display_hflip"], 180),
        (["-display_vflip"], 0),
        (["-display_hflip", "-display_rotation", "90"], 270),
    ],
)
def test_rotation_is_the_turn_cv2_gives(folder, flags, rotation):
    """A display rotation or mirror written as a Matroska Projection gives the turn cv2
    applies to every frame (a horizontal mirror as a half turn, 45° as none)."""
    source = folder / "upright.mp4"
    if not source.exists():
        make(source, size="64x48", frames=3)
    clip = folder / f"turned_{'_'.join(flags)}.mkv"
    ffmpeg(*flags, "-i", source, "-c", "copy", clip)
    stream = mkv.describe(clip)
    assert stream.rotation == rotation
    upright, shown = cv2_frames(source), cv2_frames(clip)
    assert len(shown) == len(upright) == 3
    for a, b in zip(upright, shown, strict=True):
        assert np.array_equal(turned(a, rotation), b)


def test_two_video_tracks_are_refused(folder):
    """cv2 takes the first video track and NVDEC's demuxer may rank another first: a file
    with two is refused, whichever comes first."""
    small = make(folder / "small.mp4", size="32x24", frames=3)
    large = make(folder / "large.mp4", size="64x48", frames=3)
    clip = folder / "two_tracks.mkv"
    ffmpeg("-i", small, "-i", large, "-map", 0, "-map", 1, "-c", "copy", clip)
    assert cv2_frames(clip)[0].shape == (24, 32, 3)  # the first track's frames
    assert mkv.describe(clip) == "2 video tracks"
    assert mkv.frame_count(clip) is None and mkv.keyframes(clip) == ()


def test_an_audio_track_first_is_no_video_track(folder):
    """The video track is found behind an audio track, and an audio-only file has none."""
    clip = folder / "audio_first.mkv"
    video = make(folder / "for_audio.mp4", frames=20)
    ffmpeg(*AUDIO[:4], "-i", video, "-map", 0, "-map", 1, "-t", 2, "-c:v", "copy", clip)
    assert isinstance(mkv.describe(clip), VideoStream)
    assert mkv.frame_count(clip) == cv2_count(clip) == 20
    audio_only = folder / "audio_only.mka"
    ffmpeg(*AUDIO[:4], "-t", 1, audio_only)
    assert mkv.describe(audio_only) == "no video track"


def test_a_file_appended_to_another_is_refused(folder):
    """FFmpeg, and so cv2, reads on into a second file appended after the Segment: its count
    is not the first file's, and the file is refused."""
    first, second = make(folder / "first.mkv", frames=30), make(folder / "second.mkv", frames=20)
    clip = folder / "appended.mkv"
    clip.write_bytes(first.read_bytes() + second.read_bytes())
    assert cv2_count(clip) == 50
    assert mkv.describe(clip) == "data after the Segment's end (another file appended?)"
    assert mkv.frame_count(clip) is None and mkv.keyframes(clip) == ()


@pytest.mark.parametrize("name", ["text.mkv", "empty.mkv", "riff.webm"])
def test_files_that_are_not_matroska_say_so(folder, name):
    """Bytes that are not Matroska give a reason, never an exception."""
    path = folder / name
    path.write_bytes({"text.mkv": b"hello\n", "empty.mkv": b"", "riff.webm": b"RIFF" * 40}[name])
    reason = mkv.describe(path)
    assert isinstance(reason, str) and reason
    assert mkv.frame_count(path) is None and mkv.keyframes(path) == ()


def test_a_missing_file_says_why(folder):
    """A file that cannot be opened gives the system's reason."""
    assert (
        mkv.describe(folder / "missing.mkv") == "cannot read the file (No such file or directory)"
    )


# ---------------------------------------------------------------------------------------------
# Frame counts and keyframes


@pytest.mark.parametrize(
    "codec, args",
    [
        ("h264_bframes", []),
        ("h264_bframes", AUDIO),
        ("h264_bframes", VFR),
        ("hevc", []),
        ("hevc_open_gop", AUDIO),
        ("vp9", AUDIO),
        ("vp9", VFR),
        ("av1", AUDIO),
    ],
)
def test_frame_count_is_cv2s(folder, codec, args):
    """frame_count() is the number of frames cv2 reads: with B-frames, an audio track, a
    variable frame rate."""
    clip = make(folder / f"count_{codec}_{len(args)}.mkv", codec, frames=37, args=args)
    assert mkv.frame_count(clip) == cv2_count(clip) == 37


@pytest.mark.parametrize("fraction", [0.3, 0.55, 0.8, 0.97])  # 0.97: in the Cues
@pytest.mark.parametrize("codec", ["h264_bframes", "vp9"])
def test_frame_count_of_a_truncated_file_is_cv2s(folder, codec, fraction):
    """A file cut short gives the frames cv2 still reads from it: every whole block."""
    clip = make(folder / f"whole_{codec}.mkv", codec, frames=60, args=AUDIO)
    data = clip.read_bytes()
    cut = folder / f"cut_{codec}_{fraction}.mkv"
    cut.write_bytes(data[: int(len(data) * fraction)])
    count = cv2_count(cut)
    assert 0 < count <= 60
    assert mkv.frame_count(cut) == count


def test_a_file_cut_before_its_first_block_has_no_video_block(folder):
    """A file that ends before its first Cluster has no frame to describe."""
    clip = make(folder / "early.mkv", frames=5)
    data = clip.read_bytes()
    cut = folder / "early_cut.mkv"
    cut.write_bytes(data[: data.index(mkv.CLUSTER.to_bytes(4, "big")) + 6])
    assert mkv.describe(cut) == "no video block"
    assert cv2_count(cut) == 0


@pytest.mark.parametrize("codec", ["h264_bframes", "hevc", "vp9", "av1"])
@pytest.mark.parametrize("args", [[], AUDIO])
def test_keyframes_are_ffmpegs_in_closed_gops(folder, codec, args):
    """Every keyframe of a closed-GOP clip is listed, at the index FFmpeg's decoder shows it."""
    clip = make(folder / f"keys_{codec}_{len(args)}.mkv", codec, frames=37, args=args)
    assert mkv.keyframes(clip) == key_frames(clip) == [0, 10, 20, 30]


@pytest.mark.parametrize("codec", ["h264_open_gop", "hevc_open_gop"])
def test_open_gop_keyframes_are_left_out(folder, codec):
    """An open GOP's keyframe, with frames after it in the file that are shown before it, is no
    place to start a decoder: it is left out of FFmpeg's keyframes."""
    clip = make(folder / f"open_{codec}.mkv", codec, frames=37)
    found = mkv.keyframes(clip)
    assert found[0] == 0 and set(found) < set(key_frames(clip))


# Per codec: a NAL unit's type from its header, the access unit delimiter's type, the
# parameter sets' types, and whether a type is a picture's slice (VCL).
NAL_TYPES = {
    "h264": (lambda header: header[0] & 0x1F, 9, (7, 8), lambda kind: 1 <= kind <= 5),
    "hevc": (lambda header: header[0] >> 1 & 0x3F, 35, (32, 33, 34), lambda kind: kind < 32),
}


def frames_from(clip: Path, codec: str, block: int) -> list[bytes]:
    """FFmpeg's decode (raw 4:2:0 planes, a frame each) of the clip's stream from its block
    ``block`` on, as a decoder started there sees it: the Annex B access units from there (the
    parameter sets put first), or the VP9 frames from there."""
    if codec == "vp9":
        ivf = clip.with_suffix(".ivf")
        ffmpeg("-i", clip, "-c", "copy", ivf)
        data, at, units = ivf.read_bytes(), 32, []
        while at < len(data):
            size = int.from_bytes(data[at : at + 4], "little")
            units.append(data[at : at + 12 + size])
            at += 12 + size
        stream, demuxer = data[:32] + b"".join(units[block:]), "ivf"
    else:
        annex_b = clip.with_suffix(".annexb")
        ffmpeg("-i", clip, "-c", "copy", "-f", codec, annex_b)
        nal_type, delimiter, parameters, slice_ = NAL_TYPES[codec]
        data = annex_b.read_bytes()
        starts = [m.end() for m in re.finditer(b"\x00\x00\x01", data)]
        ends = [*starts[1:], len(data) + 3]
        units: list[list[bytes]] = [[]]
        for a, b in zip(starts, ends, strict=True):
            nal = data[a : b - 3].rstrip(b"\0")  # a 4-byte start code's zero is not its NAL's
            if nal_type(nal) == delimiter and any(slice_(nal_type(n)) for n in units[-1]):
                units.append([])
            units[-1].append(nal)
        first = [n for n in units[0] if nal_type(n) in parameters]
        chosen = first + [nal for unit in units[block:] for nal in unit]
        stream, demuxer = b"".join(b"\0\0\0\1" + nal for nal in chosen), codec
    raw = subprocess.run(
        [FFMPEG, "-v", "error", "-f", demuxer, "-i", "-", "-f", "rawvideo", "-pix_fmt", "yuv420p"]
        + ["-fps_mode", "passthrough", "-"],
        input=stream,
        capture_output=True,
        check=True,
    ).stdout
    size = 64 * 48 * 3 // 2
    return [raw[i : i + size] for i in range(0, len(raw), size)]


@pytest.mark.parametrize("codec", ["h264_bframes", "h264_open_gop", "hevc", "vp9"])
def test_a_decoder_started_at_a_keyframe_gives_the_frames_from_there(folder, codec):
    """Decoding from each listed keyframe's block on gives exactly the whole decode's frames
    from that index on: the index is the keyframe's place in decode and presentation order,
    and nothing after it needs a frame before it."""
    clip = make(folder / f"started_{codec}.mkv", codec, frames=37)
    found = mkv.keyframes(clip)
    name = codec.split("_")[0]
    whole = frames_from(clip, name, 0)
    assert len(whole) == 37 and len(found) > 1
    for keyframe in found[1:]:
        assert frames_from(clip, name, keyframe) == whole[keyframe:], keyframe


@pytest.mark.parametrize(
    "codec, muxer", [("vp9", ["-f", "webm", "-live", 1]), ("h264", ["-f", "matroska"])]
)
def test_a_stream_written_to_a_pipe_is_read(folder, codec, muxer):
    """ffmpeg writing to a pipe leaves the Segment's size unknown: the count and the keyframes
    are still cv2's and FFmpeg's."""
    source = ["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-frames:v", "30"]
    codec_args = [*CODECS[codec], "-g", "10", "-bf", "2"] if codec == "h264" else CODECS[codec]
    clip = folder / f"piped_{codec}.{muxer[1]}"
    command = [FFMPEG, "-v", "error", *source, *codec_args, *map(str, muxer), "-"]
    clip.write_bytes(subprocess.run(command, capture_output=True, check=True).stdout)
    assert mkv.SEGMENT.to_bytes(4, "big") + b"\x01" + b"\xff" * 7 in clip.read_bytes()[:64]
    assert mkv.frame_count(clip) == cv2_count(clip) == 30
    assert mkv.keyframes(clip) == key_frames(clip) == [0, 10, 20]


def test_every_frame_a_keyframe_is_none(folder):
    """An all-intra clip may be cut anywhere: None."""
    clip = make(folder / "intra.mkv", "h264", frames=12, args=["-g", "1"])
    assert mkv.keyframes(clip) is None
    assert mkv.frame_count(clip) == cv2_count(clip) == 12


# ---------------------------------------------------------------------------------------------
# Files written element by element: what ffmpeg's muxer never writes


def element(kind: int, body: bytes = b"", unknown: bool = False) -> bytes:
    """An EBML element with an 8-byte size (all ones: unknown)."""
    size = (1 << 56) - 1 if unknown else len(body)
    return (
        kind.to_bytes((kind.bit_length() + 7) // 8, "big")
        + (size | 1 << 56).to_bytes(8, "big")
        + body
    )


def uint(kind: int, value: int) -> bytes:
    return element(kind, value.to_bytes(8, "big"))


def vp9_frames(folder: Path, count: int = 20) -> list[tuple[bool, bytes]]:
    """(keyframe, frame) of a VP9 stream, from ffmpeg's IVF output (12-byte frame headers)."""
    ivf = folder / "frames.ivf"
    source = make(folder / "frames.webm", "vp9", frames=count)
    ffmpeg("-i", source, "-c", "copy", ivf)
    data, at, frames = ivf.read_bytes(), 32, []
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "little")
        frame = data[at + 12 : at + 12 + size]
        frames.append((frame[0] & 0x04 == 0, frame))  # VP9 frame_type 0: a keyframe
        at += 12 + size
    return frames


def lace(frames: list[bytes], kind: int) -> bytes:
    """The lace sizes and frames of a block laced Xiph (1), fixed-size (2) or EBML (3)."""
    head = bytes([len(frames) - 1])
    sizes = [len(f) for f in frames[:-1]]
    if kind == 1:
        for size in sizes:
            head += b"\xff" * (size // 255) + bytes([size % 255])
    elif kind == 3:
        head += (sizes[0] | 1 << 28).to_bytes(4, "big")  # 4-byte vints: 28 value bits
        for before, size in itertools.pairwise(sizes):
            head += ((size - before + (1 << 27) - 1) | 1 << 28).to_bytes(4, "big")
    return head + b"".join(frames)


def matroska(
    frames: list[tuple[bool, bytes]],
    *,
    track: bytes = b"",
    video: bytes = b"",
    live: bool = False,
    lacing: int = 0,
    groups: bool = False,
    audio: int = 0,
) -> bytes:
    """A WebM file of one VP9 track with ``frames`` (keyframe, bytes) at 10 fps, 5 a Cluster:
    ``track`` and ``video`` added to its TrackEntry and Video elements, the Segment and
    Clusters of unknown size where ``live``, 5 frames a block laced where ``lacing``, frames
    in BlockGroups (with a ReferenceBlock where not a keyframe) where ``groups``, and
    ``audio`` blocks of a second track after each frame."""
    header = element(mkv.EBML, element(mkv.DOCTYPE, b"webm"))
    entry = uint(mkv.TRACK_NUMBER, 1) + uint(mkv.TRACK_TYPE, 1) + element(mkv.CODEC_ID, b"V_VP9")
    entry += element(mkv.VIDEO, uint(mkv.PIXEL_WIDTH, 64) + uint(mkv.PIXEL_HEIGHT, 48) + video)
    body = [element(mkv.INFO, uint(mkv.TIMESTAMP_SCALE, 1_000_000))]
    sound = uint(mkv.TRACK_NUMBER, 2) + uint(mkv.TRACK_TYPE, 2) + element(mkv.CODEC_ID, b"A_OPUS")
    tracks = element(mkv.TRACK_ENTRY, entry + track)
    body.append(element(mkv.TRACKS, tracks + (element(mkv.TRACK_ENTRY, sound) if audio else b"")))
    sounds = element(mkv.SIMPLE_BLOCK, b"\x82\0\0\x80" + bytes(100)) * audio
    for start in range(0, len(frames), 5):
        part = frames[start : start + 5]
        blocks = uint(mkv.CLUSTER_TIMESTAMP, start * 100)
        if lacing:
            flags = 0x80 if part[0][0] else 0
            blocks += element(
                mkv.SIMPLE_BLOCK,
                b"\x81\x00\x00" + bytes([flags | lacing << 1]) + lace([f for _, f in part], lacing),
            )
        for i, (key, frame) in enumerate(part if not lacing else ()):
            head = b"\x81" + (i * 100).to_bytes(2, "big")
            if groups:
                refs = b"" if key else element(mkv.REFERENCE_BLOCK, b"\xff\x9c")
                blocks += element(mkv.BLOCK_GROUP, element(mkv.BLOCK, head + b"\0" + frame) + refs)
            else:
                blocks += element(mkv.SIMPLE_BLOCK, head + (b"\x80" if key else b"\0") + frame)
            blocks += sounds
        body.append(element(mkv.CLUSTER, blocks, unknown=live))
    return header + element(mkv.SEGMENT, b"".join(body), unknown=live)


@pytest.fixture(scope="module")
def frames(folder) -> list[tuple[bool, bytes]]:
    return vp9_frames(folder)


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize("groups", [False, True])
def test_hand_written_files_read_as_cv2_reads_them(folder, frames, live, groups):
    """A Segment and Clusters of unknown size (a live stream), and BlockGroups, are walked:
    the stream, the frame count and the keyframes are cv2's and FFmpeg's."""
    clip = folder / f"written_{live}_{groups}.webm"
    clip.write_bytes(matroska(frames, live=live, groups=groups))
    stream = mkv.describe(clip)
    assert isinstance(stream, VideoStream) and stream.codec == "vp9", stream
    assert mkv.frame_count(clip) == cv2_count(clip) == len(frames)
    assert mkv.keyframes(clip) == key_frames(clip) == [0, 10]


def test_walking_a_long_file_is_bounded(folder, frames):
    """108,000 frames (an hour at 30 fps), two audio blocks beside each, are walked in
    seconds."""
    clip = folder / "hour.webm"
    clip.write_bytes(matroska(frames * (108_000 // len(frames)), audio=2))
    start = time.perf_counter()
    count, keys = mkv.frame_count(clip), mkv.keyframes(clip)
    assert time.perf_counter() - start < 10
    assert count == 108_000 and keys == list(range(0, 108_000, 10))


@pytest.mark.parametrize("lacing", [1, 3])
def test_laced_video_frames_are_counted(folder, frames, lacing):
    """Frames laced into blocks (Xiph, EBML) are each a frame cv2 reads, the first lace is the
    stream's first frame, and where the frames go is left unsaid (no keyframes)."""
    clip = folder / f"laced_{lacing}.webm"
    clip.write_bytes(matroska(frames, lacing=lacing))
    stream = mkv.describe(clip)
    assert isinstance(stream, VideoStream), stream
    assert mkv.frame_count(clip) == cv2_count(clip) == len(frames)
    assert mkv.keyframes(clip) == ()


def test_fixed_size_lacing_splits_evenly():
    """Fixed-size lacing's first frame is the block's share; an uneven block is unreadable."""
    assert mkv.first_lace(b"abcdefghi", 2, 3) == b"abc"
    with pytest.raises(mkv.Unreadable, match="does not divide"):
        mkv.first_lace(b"abcdefgh", 2, 3)


@pytest.mark.parametrize(
    "track, video, reason",
    [
        (
            element(mkv.CONTENT_ENCODINGS, element(0x6240, uint(0x5031, 0))),
            b"",
            "ContentEncodings on the video track (compressed or encrypted frames)",
        ),
        (b"", uint(mkv.PIXEL_CROPS[2], 2), "a PixelCrop on the video track"),
        (element(mkv.CODEC_ID, b"V_MPEG4/ISO/ASP"), b"", "codec 'V_MPEG4/ISO/ASP'"),
    ],
)
def test_tracks_that_ffmpeg_transforms_are_refused(folder, frames, track, video, reason):
    """ContentEncodings, a PixelCrop and a codec NVDEC does not take give their reason."""
    clip = folder / f"refused_{len(track)}_{len(video)}.webm"
    clip.write_bytes(matroska(frames, track=track, video=video))
    assert mkv.describe(clip) == reason
    assert mkv.frame_count(clip) is None and mkv.keyframes(clip) == ()


def test_a_track_number_given_twice_is_refused(folder, frames):
    """A video track sharing its number with another track may lose its blocks to it."""
    clip = folder / "shared_number.webm"
    clip.write_bytes(matroska(frames, track=uint(mkv.TRACK_NUMBER, 2), audio=1))
    assert mkv.describe(clip) == "track number 2 given to more than one track"


@pytest.mark.parametrize("groups", [False, True])
def test_a_first_block_that_is_no_keyframe_is_refused(folder, frames, groups):
    """A first block not marked a keyframe (a SimpleBlock's flag, a BlockGroup's
    ReferenceBlock) is refused: FFmpeg's decoders skip to a keyframe, NVDEC does not."""
    clip = folder / f"headless_{groups}.webm"
    clip.write_bytes(matroska(frames[1:], groups=groups))
    assert mkv.describe(clip) == "the first frame is not a keyframe"


# ---------------------------------------------------------------------------------------------
# Hostile bytes


@pytest.fixture(scope="module")
def hostile_source(folder) -> bytes:
    return make(folder / "hostile.mkv", "h264_bframes", frames=24, args=AUDIO).read_bytes()


_names = itertools.count()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    cut=st.floats(0, 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), max_size=6),
    header_flips=st.lists(st.tuples(st.integers(0, 800), st.integers(0, 7)), max_size=4),
)
def test_hostile_bytes_give_a_reason_never_an_exception(
    folder, hostile_source, cut, flips, header_flips
):
    """Any truncation and bit flips of a clip (its headers too) give a stream or a reason, a
    count or None, keyframes or () — never an exception — within a bounded time."""
    data = bytearray(hostile_source[: max(1, int(len(hostile_source) * cut))])
    for where, bit in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= 1 << bit
    for where, bit in header_flips:  # the EBML header, Info and Tracks
        data[min(where, len(data) - 1)] ^= 1 << bit
    path = folder / f"hostile_{next(_names)}.mkv"
    path.write_bytes(bytes(data))
    start = time.perf_counter()
    stream = mkv.describe(path)
    count = mkv.frame_count(path)
    keys = mkv.keyframes(path)
    assert time.perf_counter() - start < 2
    assert isinstance(stream, (VideoStream, str))
    assert count is None or (isinstance(count, int) and count > 0)
    assert keys is None or keys == () or (isinstance(keys, list) and keys[0] == 0)
    path.unlink()
