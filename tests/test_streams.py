"""edgecli.decode.video_file.describe on MP4/MOV clips of H.264, HEVC, VP9 and AV1 made by
imageio-ffmpeg's ffmpeg, checked against cv2.VideoCapture: the colour it describes, converted
with swscale's closed form, and the turn it describes, applied with np.rot90, give exactly the
frames cv2 returns; clips whose container and bitstream disagree pin each decoder's rule.
"""

from __future__ import annotations

import itertools
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecli.decode import av1, byte_source, h264, hevc, mp4, streams, video_file, vp9, yuv
from edgecli.decode.streams import Colour, VideoStream

pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from tests.clips import FFMPEG, box_chain, decode_planes  # noqa: E402
from tests.media import read_frames  # noqa: E402
from tests.test_h264 import BitWriter, nal_of_bits  # noqa: E402

ENCODERS = {
    "h264": ["-c:v", "libx264", "-preset", "ultrafast"],
    "hevc": ["-c:v", "libx265", "-tag:v", "hvc1", "-x265-params", "log-level=none"],
    "vp9": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"],
    "av1": ["-c:v", "libsvtav1", "-preset", "12", "-svtav1-params", "log-level=0"],
}
# The containers each codec is muxed into (FFmpeg writes VP9 and AV1 in MP4 only, M4V only
# for H.264).
CONTAINERS = {
    "h264": ("mp4", "mov", "m4v"),
    "hevc": ("mp4", "mov"),
    "vp9": ("mp4",),
    "av1": ("mp4",),
}
CODEC_CONTAINERS = [(c, x) for c, xs in CONTAINERS.items() for x in xs]

# ffmpeg's names of a colour (matrix, primaries and transfer) by its H.273 matrix code point.
TAGS = {5: "bt470bg", 6: "smpte170m", 1: "bt709"}
TAG_OPTIONS = {
    5: ["-colorspace", "bt470bg", "-color_primaries", "bt470bg", "-color_trc", "gamma28"],
    6: ["-colorspace", "smpte170m", "-color_primaries", "smpte170m", "-color_trc", "smpte170m"],
    1: ["-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709"],
}
COLR = ["-movflags", "+write_colr"]  # this ffmpeg writes no colr box without it


def run_ffmpeg(*args) -> None:
    subprocess.run([FFMPEG, "-v", "error", *map(str, args)], check=True, capture_output=True)


def encode(path: Path, codec: str, *, matrix: int | None = None, full_range=None, args=()) -> Path:
    """Three 64x48 frames of ffmpeg's test pattern in ``codec``, tagged with ``matrix`` (its
    primaries and transfer alike) and ``full_range`` where given, in encoder and container;
    ``args`` adds encoder options."""
    tags = TAG_OPTIONS[matrix] if matrix is not None else []
    if full_range is not None:
        tags = [*tags, "-color_range", "pc" if full_range else "tv"]
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 3]
    run_ffmpeg(*source, *ENCODERS[codec], *args, "-pix_fmt", "yuv420p", *tags, *COLR, "-y", path)
    return path


def remux(source: Path, path: Path, *, before=(), after=()) -> Path:
    run_ffmpeg(*before, "-i", source, "-c", "copy", *after, *COLR, "-y", path)
    return path


# ---------------------------------------------------------------------------------------------
# Boxes, rewritten in place (moov after mdat: no chunk offset moves)

CONTAINER_BOXES = (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stsd")


def sample_entry(data: bytes) -> list[tuple[int, int]]:
    return box_chain(data, (*CONTAINER_BOXES, None))


def with_colr(path: Path, matrix: int, full_range: bool) -> Path:
    """The clip with its sample entry's colr box (made where there is none) an nclx naming
    ``matrix`` (its primaries and transfer alike) and ``full_range``."""
    data = bytearray(path.read_bytes())
    assert data.index(b"mdat") < data.index(b"moov"), "moov first: chunk offsets would move"
    nclx = b"nclx" + struct.pack(">HHHB", matrix, matrix, matrix, 0x80 if full_range else 0)
    at = data.find(b"colrnclx")
    if at >= 0:
        data[at + 4 : at + 4 + len(nclx)] = nclx
    else:
        chain = sample_entry(bytes(data))
        end = chain[-1][0] + chain[-1][1]
        data[end:end] = struct.pack(">I4s", 8 + len(nclx), b"colr") + nclx
        for pos, size in chain:
            struct.pack_into(">I", data, pos, size + 8 + len(nclx))
    path.write_bytes(bytes(data))
    return path


# ---------------------------------------------------------------------------------------------
# cv2's frames against the description

SWS_MATRICES = {None: "bt601", 5: "bt601", 6: "bt601", 1: "bt709", 9: "bt2020"}
TURNS = {0: 0, 90: 3, 180: 2, 270: 1}  # clockwise degrees -> np.rot90's counterclockwise k


def described_frames(path: Path, stream: VideoStream) -> list[np.ndarray]:
    """FFmpeg's planes converted as ``stream.colour`` says and turned as its rotation says."""
    colour = stream.colour
    table = yuv.closed_form_table(SWS_MATRICES[colour.matrix], full_range=bool(colour.full_range))
    frames = [yuv.yuv420_to_bgr(y, u, v, table) for y, u, v in decode_planes(path)]
    return [np.rot90(f, TURNS[stream.rotation]) for f in frames]


def assert_cv2_matches(path: Path) -> VideoStream:
    """describe(path) is an 8-bit 4:2:0 progressive stream whose description gives exactly
    cv2's frames."""
    stream = video_file.describe(path)
    assert isinstance(stream, VideoStream), stream
    assert (stream.chroma, stream.depth, stream.progressive) == ("4:2:0", 8, True)
    frames, expected = read_frames(path), described_frames(path, stream)
    assert len(frames) == len(expected) == 3
    for frame, want in zip(frames, expected, strict=True):
        assert frame.shape == want.shape and np.array_equal(frame, want)
    return stream


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """made(codec, container, matrix, full_range) -> that clip, encoded once."""
    folder = tmp_path_factory.mktemp("streams")
    clips: dict[tuple, Path] = {}

    def get(codec: str, container: str, matrix=None, full_range=None) -> Path:
        key = (codec, container, matrix, full_range)
        if key not in clips:
            name = f"{codec}-{matrix}-{full_range}.{container}"
            clips[key] = encode(folder / name, codec, matrix=matrix, full_range=full_range)
        return clips[key]

    return get


@pytest.mark.parametrize("codec, container", CODEC_CONTAINERS)
@pytest.mark.parametrize("matrix", [None, 6, 1])
@pytest.mark.parametrize("full_range", [None, False, True])
def test_tagged_clips_convert_as_described(made, codec, container, matrix, full_range):
    """Every codec and container, matrix and range: the described colour converts FFmpeg's
    planes to exactly cv2's frames, and it is the colour the clip was tagged with."""
    stream = assert_cv2_matches(made(codec, container, matrix, full_range))
    assert stream.codec == codec and stream.container == "mp4" and stream.rotation == 0
    assert stream.colour.matrix == matrix
    assert bool(stream.colour.full_range) == bool(full_range)


# Clips whose container and bitstream disagree: (codec, the container's nclx (matrix, full
# range), the bitstream's tags as a bitstream filter retags them (None: as encoded, untagged),
# the colour FFmpeg resolves (matrix, full range)).
BITSTREAM_FILTERS = {
    "h264": "h264_metadata=matrix_coefficients={m}:video_full_range_flag={r:d}",
    "hevc": "hevc_metadata=matrix_coefficients={m}:video_full_range_flag={r:d}",
    "vp9": "vp9_metadata=color_space={m}:color_range={r}",
    "av1": "av1_metadata=matrix_coefficients={m}:color_range={r}",
}
RANGE_ONLY = {
    "h264": "h264_metadata=video_full_range_flag=1",
    "hevc": "hevc_metadata=video_full_range_flag=1",
    "vp9": "vp9_metadata=color_space=unknown:color_range=pc",
    "av1": "av1_metadata=color_range=pc",
}
UNSPECIFIED = {
    "h264": "h264_metadata=matrix_coefficients=2:colour_primaries=2:transfer_characteristics=2",
    "hevc": "hevc_metadata=matrix_coefficients=2:colour_primaries=2:transfer_characteristics=2",
    "av1": "av1_metadata=matrix_coefficients=2:color_primaries=2:transfer_characteristics=2",
}
VP9_SPACES = {5: "bt601", 6: "smpte170", 1: "bt709"}


def retag(codec: str, matrix: int, full_range: bool) -> str:
    m = VP9_SPACES[matrix] if codec == "vp9" else matrix
    r = ("pc" if full_range else "tv") if codec in ("vp9", "av1") else full_range
    return BITSTREAM_FILTERS[codec].format(m=m, r=r)


DISAGREEING = [
    # The bitstream names both: it wins everywhere.
    *[(c, (1, True), retag(c, 5, False), (5, False)) for c in CONTAINERS],
    *[(c, (5, False), retag(c, 1, True), (1, True)) for c in CONTAINERS],
    # The bitstream says nothing: H.264 takes the container's; HEVC's decoder sets limited
    # range and no matrix; VP9's header always holds both (libvpx: unknown, limited); AV1's
    # sequence header always holds its range, and FFmpeg keeps the container's matrix.
    ("h264", (1, True), None, (1, True)),
    ("hevc", (1, True), None, (None, False)),
    ("vp9", (1, True), None, (None, False)),
    ("av1", (1, True), None, (1, False)),
    # The range alone (VP9: an unknown colour space): the matrix as when nothing is said.
    ("h264", (1, False), RANGE_ONLY["h264"], (1, True)),
    ("hevc", (1, False), RANGE_ONLY["hevc"], (None, True)),
    ("vp9", (1, False), RANGE_ONLY["vp9"], (None, True)),
    ("av1", (1, False), RANGE_ONLY["av1"], (1, True)),
    # A colour description that says "unspecified": it overrides the container's.
    *[(c, (1, True), UNSPECIFIED[c], (None, False)) for c in UNSPECIFIED],
]


@pytest.mark.parametrize(
    "codec, container_colour, bitstream, resolved, container",
    [(*case, x) for case in DISAGREEING for x in CONTAINERS[case[0]]],
    ids=[f"{c}-{i}-{x}" for i, (c, *_) in enumerate(DISAGREEING) for x in CONTAINERS[c]],
)
def test_container_and_bitstream_disagree(
    made, tmp_path, codec, container_colour, bitstream, resolved, container
):
    """Each codec's rule of what overrides the container's colour, as cv2 converts: the
    description names the colour FFmpeg resolves and gives exactly cv2's frames."""
    source = made(codec, container)
    after = ["-bsf:v", bitstream] if bitstream else []
    path = remux(source, tmp_path / f"retagged.{container}", after=after)
    with_colr(path, *container_colour)
    stream = assert_cv2_matches(path)
    assert (stream.colour.matrix, stream.colour.full_range) == resolved


def with_primaries(path: Path, out: Path, box: bytes, primaries: int) -> Path:
    """The clip with the colour primaries of its colr or vpcC box replaced; for vpcC, its colr
    box (which FFmpeg would read after it) becomes a free box."""
    data = bytearray(path.read_bytes())
    if box == b"vpcC":
        data[data.index(b"vpcC") + 4 + 7] = primaries
        if (at := data.find(b"colrnclx")) >= 0:
            data[at : at + 4] = b"free"
    else:
        struct.pack_into(">H", data, data.index(b"colrnclx") + 8, primaries)
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize(
    "codec, box, described",
    [("vp9", b"vpcC", 9), ("vp9", b"colr", 9), ("h264", b"colr", None), ("hevc", b"colr", None),
     ("av1", b"colr", None)],
)  # fmt: skip
def test_container_primaries(made, tmp_path, codec, box, described):
    """BT.2020 primaries in the container: VP9's bitstream has none, so the container's (colr,
    or vpcC) reach cv2, which then converts otherwise than any closed form; the others' colour
    descriptions override them, and cv2 converts as BT.709."""
    path = with_primaries(made(codec, "mp4", 1, False), tmp_path / "p.mp4", box, 9)
    stream = video_file.describe(path)
    assert stream.colour.primaries == described and stream.colour.matrix == 1
    if described is None:
        assert_cv2_matches(path)
    else:
        frames, converted = read_frames(path), described_frames(path, stream)
        assert len(frames) == len(converted) == 3
        assert not any(np.array_equal(f, c) for f, c in zip(frames, converted, strict=True))


# ---------------------------------------------------------------------------------------------
# Rotation


@pytest.mark.parametrize("codec", CONTAINERS)
@pytest.mark.parametrize("matrix, full_range", [(6, False), (6, True), (1, False), (1, True)])
@pytest.mark.parametrize(
    "display, turn",
    [((), 0), (("-display_rotation", 90), 270), (("-display_rotation", 180), 180),
     (("-display_rotation", 270), 90), (("-display_rotation", -90), 90),
     (("-display_hflip",), 180), (("-display_vflip",), 0),
     (("-display_rotation", 90, "-display_hflip"), 270)],
    ids=["none", "90", "180", "270", "-90", "hflip", "vflip", "90-hflip"],
)  # fmt: skip
def test_rotated_clips_turn_as_described(made, tmp_path, codec, matrix, full_range, display, turn):
    """Every codec, matrix and range under each display matrix: the described turn, applied
    to FFmpeg's upright frames converted as described, is exactly cv2's frames (a horizontal
    mirror is a half turn to cv2, a vertical one no turn)."""
    upright = made(codec, "mp4", matrix, full_range)
    path = remux(upright, tmp_path / "turned.mp4", before=display)
    assert assert_cv2_matches(path).rotation == turn


@pytest.fixture(scope="module")
def h264_upright(made):
    return made("h264", "mp4")


def cv2_turn(frames: list[np.ndarray], upright: list[np.ndarray]) -> int | None:
    """The clockwise turn that makes ``upright`` into ``frames``; None where none does."""
    for turn, k in TURNS.items():
        if all(np.array_equal(f, np.rot90(u, k)) for f, u in zip(frames, upright, strict=True)):
            return turn
    return None


def test_every_display_rotation(h264_upright, tmp_path):
    """ffmpeg's -display_rotation at every whole degree and at the roundings around the right
    angles: cv2 turns the frames by exactly cv2_rotation of the matrix, and no other way."""
    upright = read_frames(h264_upright)
    angles = [*range(0, 360), 45, 89.4, 89.6, 89.9, 90.4, 90.6, 179.6, 180.4, 269.6, -0.4, 0.4]
    for angle in angles:
        path = remux(h264_upright, tmp_path / "turned.mp4", before=["-display_rotation", angle])
        stream = video_file.describe(path)
        assert cv2_turn(read_frames(path), upright) == stream.rotation, angle


ONE = 1 << 16


def with_matrix(path: Path, out: Path, box: bytes, matrix: tuple[int, ...]) -> Path:
    """The clip with the tkhd's or mvhd's (version 0) display matrix replaced by ``matrix``."""
    data = bytearray(path.read_bytes())
    start = data.index(box) + 4
    assert data[start] == 0, f"a version 1 {box} box"
    at = start + (40 if box == b"tkhd" else 36)
    struct.pack_into(">9i", data, at, *matrix)
    out.write_bytes(bytes(data))
    return out


def matrix(a: float, b: float, c: float, d: float, w: float = 1.0) -> tuple[int, ...]:
    return (round(a * ONE), round(b * ONE), 0, round(c * ONE), round(d * ONE), 0, 0, 0,
            round(w * (1 << 30)))  # fmt: skip


HAND_MADE = {
    "scaled": ("tkhd", matrix(2, 0, 0, 2), 0),
    "scaled-quarter": ("tkhd", matrix(0, 3, -0.5, 0), 90),  # a quarter turn, unequal scales
    "sheared": ("tkhd", matrix(1, 0.5, 0, 1), 0),  # 26.6 degrees of shear: rounds to 27
    "near-quarter-89": ("tkhd", matrix(0.02, 1, -1, 0), 0),  # 88.9 degrees: rounds to 89
    "near-quarter-90": ("tkhd", matrix(0.008, 1, -1, 0), 90),  # 89.54 degrees: rounds to 90
    "degenerate": ("tkhd", matrix(0, 0, 0, 0), 0),
    "column-zero": ("tkhd", matrix(1, 0, 0, 0), 0),
    "movie-turn": ("mvhd", matrix(0, 1, -1, 0), 90),  # the movie's matrix, the track's identity
    "w-zero": ("tkhd", matrix(-1, 0, 0, -1, 0), 180),
}


@pytest.mark.parametrize("name", HAND_MADE)
def test_hand_patched_display_matrices(h264_upright, tmp_path, name):
    """Display matrices written by hand into tkhd or mvhd (scales, shears, degenerate ones):
    cv2 turns the frames by exactly the described rotation."""
    box, values, turn = HAND_MADE[name]
    path = with_matrix(h264_upright, tmp_path / "patched.mp4", box.encode(), values)
    stream = video_file.describe(path)
    assert stream.rotation == turn
    assert cv2_turn(read_frames(path), read_frames(h264_upright)) == turn


def test_track_and_movie_matrices_multiply(h264_upright, tmp_path):
    """A quarter turn in tkhd and another in mvhd make a half turn, as FFmpeg multiplies them."""
    once = with_matrix(h264_upright, tmp_path / "once.mp4", b"tkhd", matrix(0, 1, -1, 0))
    twice = with_matrix(once, tmp_path / "twice.mp4", b"mvhd", matrix(0, 1, -1, 0))
    assert video_file.describe(twice).rotation == 180
    assert cv2_turn(read_frames(twice), read_frames(h264_upright)) == 180


@pytest.mark.parametrize(
    "values, turn",
    [((ONE, 0, 0, 0, ONE, 0, 0, 0, 1 << 30), 0), ((0, ONE, 0, -ONE, 0, 0, 0, 0, 1 << 30), 90),
     ((0, -ONE, 0, ONE, 0, 0, 0, 0, 1 << 30), 270), ((-ONE, 0, 0, 0, ONE, 0, 0, 0, 1 << 30), 180),
     ((ONE, 0, 0, 0, -ONE, 0, 0, 0, 1 << 30), 0), ((0,) * 9, 0),
     ((-(1 << 31), 0, 0, 0, -(1 << 31), 0, 0, 0, 0), 180)],
)  # fmt: skip
def test_cv2_rotation_of_matrices(values, turn):
    """cv2_rotation on matrices whose turn is known: quarter turns either way, mirrors, a
    degenerate matrix, the extremes of 16.16."""
    assert streams.cv2_rotation(values) == turn


# ---------------------------------------------------------------------------------------------
# Formats and codecs


@pytest.mark.parametrize(
    "codec, options, chroma, depth",
    [
        ("hevc", ["-pix_fmt", "yuv420p10le"], "4:2:0", 10),
        ("hevc", ["-pix_fmt", "yuv422p"], "4:2:2", 8),
        ("hevc", ["-pix_fmt", "yuv444p"], "4:4:4", 8),
        ("hevc", ["-pix_fmt", "gray"], "4:0:0", 8),
        ("vp9", ["-pix_fmt", "yuv420p10le"], "4:2:0", 10),
        ("vp9", ["-pix_fmt", "yuv444p"], "4:4:4", 8),
        ("vp9", ["-pix_fmt", "yuv422p12le"], "4:2:2", 12),
        ("av1", ["-pix_fmt", "yuv420p10le"], "4:2:0", 10),
        ("h264", ["-pix_fmt", "yuv422p10le"], "4:2:2", 10),
        ("h264", ["-pix_fmt", "yuv444p", "-flags", "+ildct"], "4:4:4", 8),
    ],
)
def test_formats(tmp_path, codec, options, chroma, depth):
    """Chroma sampling and bit depth as FFmpeg decodes them (its pix_fmt), for each codec."""
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 2]
    path = tmp_path / "format.mp4"
    run_ffmpeg(*source, *ENCODERS[codec], *options, "-y", path)
    stream = video_file.describe(path)
    assert (stream.codec, stream.chroma, stream.depth) == (codec, chroma, depth)


def test_interlaced_h264(tmp_path):
    """An interlaced H.264 stream (field coding) is described as not progressive."""
    path = tmp_path / "interlaced.mp4"
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 2]
    run_ffmpeg(*source, *ENCODERS["h264"], "-flags", "+ildct+ilme", "-x264-params",
               "interlaced=1", "-y", path)  # fmt: skip
    assert video_file.describe(path).progressive is False


@pytest.mark.parametrize(
    "options, reason",
    [
        (["-c:v", "mpeg4"], "codec mp4v"),
        (["-c:v", "mjpeg"], "codec jpeg"),
    ],
)
def test_other_codecs(tmp_path, options, reason):
    """A codec other than the four is named by its sample entry."""
    path = tmp_path / "other.mov"
    run_ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 2, *options,
               "-y", path)  # fmt: skip
    assert video_file.describe(path) == reason


def test_from_codec_names_other_codecs():
    """from_codec gives a reason for a codec it has no reader for."""
    assert streams.from_codec("mpeg4", None, None, Colour(), "matroska", 0) == "codec mpeg4"


def test_in_band_parameter_sets_win(made, tmp_path):
    """An hev1/avc3 stream's SPS sent in the first sample overrides the record's: the
    description follows the one the decoder activates last before the first slice."""
    for codec, module, record in (("h264", h264, b"avcC"), ("hevc", hevc, b"hvcC")):
        untagged, tagged = made(codec, "mp4"), made(codec, "mp4", 1, True)
        config = config_record(untagged, record)
        length_size, nals = (h264.avcc_sps if codec == "h264" else hevc.hvcc_sps)(
            config_record(tagged, record)
        )
        sample = first_sample(untagged)
        in_band = struct.pack(">I", len(nals[0])) + nals[0] + sample
        assert length_size == 4
        stream = streams.from_codec(codec, config, in_band, Colour(), "mp4", 0)
        assert (stream.colour.matrix, stream.colour.full_range) == (1, True)
        assert module.first_sps(config, sample) is not None


IN_BAND_TAGS = {"h264": "avc3", "hevc": "hev1"}


@pytest.mark.parametrize("codec", IN_BAND_TAGS)
def test_in_band_parameter_sets_reach_cv2(made, tmp_path, codec):
    """A stream whose first sample carries its parameter sets (BT.709 full range) while its
    record's SPS is an untagged one and its colr box says BT.601 limited: cv2 converts as the
    in-band SPS says, and so does the description."""
    raw = tmp_path / f"in-band.{codec}"  # an elementary stream: its parameter sets in-band
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 3]
    run_ffmpeg(*source, *ENCODERS[codec], "-pix_fmt", "yuv420p", *TAG_OPTIONS[1],
               "-color_range", "pc", "-y", raw)  # fmt: skip
    after = ["-tag:v", IN_BAND_TAGS[codec], "-use_editlist", "0"]
    path = remux(raw, tmp_path / "in-band.mp4", after=after)
    kind = b"avcC" if codec == "h264" else b"hvcC"
    record_sps = h264.avcc_sps if codec == "h264" else hevc.hvcc_sps
    untagged = record_sps(config_record(made(codec, "mp4"), kind))[1][0]
    with_colr(with_record_sps(path, path, untagged), 5, False)
    assert record_sps(config_record(path, kind))[1] == [untagged]
    stream = assert_cv2_matches(path)
    assert (stream.colour.matrix, stream.colour.full_range) == (1, True)


def config_record(path: Path, kind: bytes) -> bytes:
    data = path.read_bytes()
    at = data.index(kind)
    (size,) = struct.unpack_from(">I", data, at - 4)
    return data[at + 4 : at - 4 + size]


def first_sample(path: Path) -> bytes:
    with open(path, "rb") as f:
        source = byte_source.FileSource(f)
        moov = next(b for b in mp4.top_level(source) if b.type == b"moov")
        track = mp4.video_track(mp4.moov_streams(source, moov))
        return mp4._first_sample(source, track.stbl)


# ---------------------------------------------------------------------------------------------
# The parsers against FFmpeg's own (trace_headers)

TRACE_FIELD = re.compile(r"^\[trace_headers @ \S+\] \d+\s+(\S+)\s+[01]+ = (-?\d+)$")


def traced(path: Path) -> dict[str, int]:
    """The first value of each field FFmpeg's trace_headers prints for the stream's headers."""
    stderr = subprocess.run(
        [FFMPEG, "-i", str(path), "-c", "copy", "-bsf:v", "trace_headers", "-f", "null", "-"],
        capture_output=True,
        check=True,
    ).stderr.decode()
    fields: dict[str, int] = {}
    for line in stderr.splitlines():
        if field := TRACE_FIELD.match(line):
            fields.setdefault(field[1], int(field[2]))
    return fields


def parsed(codec: str, path: Path) -> dict[str, int | None]:
    """The header's fields as this module's parsers read them, by trace_headers' names."""
    config = config_record(path, {"hevc": b"hvcC", "av1": b"av1C", "vp9": b"vpcC"}[codec])
    if codec == "hevc":
        sps = hevc.first_sps(config, None)
        return {
            "general_profile_idc": sps.profile_idc, "chroma_format_idc": sps.chroma_format_idc,
            "bit_depth_luma_minus8": sps.bit_depth_luma - 8,
            "bit_depth_chroma_minus8": sps.bit_depth_chroma - 8,
            "video_full_range_flag": sps.full_range, "colour_primaries": sps.primaries,
            "transfer_characteristics": sps.transfer, "matrix_coefficients": sps.matrix,
            "field_seq_flag": int(sps.field_seq),
        }  # fmt: skip
    if codec == "av1":
        header = av1.find_sequence_header(av1.parse_av1c(config)[1])
        return {
            "seq_profile": header.profile, "high_bitdepth": int(header.bit_depth > 8),
            "color_primaries": header.primaries, "transfer_characteristics": header.transfer,
            "matrix_coefficients": header.matrix, "color_range": int(header.full_range),
        }  # fmt: skip
    header = vp9.parse_header(first_sample(path))
    return {
        "profile_low_bit": header.profile & 1, "profile_high_bit": header.profile >> 1,
        "color_space": vp9._MATRICES.index(header.matrix),
        "color_range": int(header.full_range), "subsampling_x": header.subsampling[0],
        "subsampling_y": header.subsampling[1],
    }  # fmt: skip


PARSED = {
    "hevc-plain": ("hevc", []),
    "hevc-tagged-cropped": ("hevc", ["-s", "66x50", "-colorspace", "smpte170m",
                                     "-color_primaries", "bt470bg", "-color_range", "pc"]),
    "hevc-scaling-lists-sar-chromaloc": ("hevc", ["-x265-params",
        "log-level=none:scaling-list=default:chromaloc=2:sar=3\\:2:colormatrix=bt709"]),
    "hevc-main10-sublayers": ("hevc", ["-pix_fmt", "yuv420p10le", "-x265-params",
        "log-level=none:temporal-layers=3:b-pyramid=1:bframes=4"]),
    "hevc-444-range-ext": ("hevc", ["-pix_fmt", "yuv444p12le", "-colorspace", "bt709"]),
    "hevc-short-term-sets": ("hevc", ["-x265-params", "log-level=none:bframes=8:ref=6"]),
    "av1-svt": ("av1", ["-colorspace", "bt709", "-color_range", "pc"]),
    "av1-svt-10bit": ("av1", ["-pix_fmt", "yuv420p10le"]),
    "av1-aom-444": ("av1-aom", ["-pix_fmt", "yuv444p", "-colorspace", "smpte170m"]),
    "av1-aom-timing": ("av1-aom", ["-pix_fmt", "yuv420p", "-aom-params", "timing-info=constant"]),
    "vp9-422-10bit": ("vp9", ["-pix_fmt", "yuv422p10le", "-colorspace", "bt709"]),
    "vp9-rgb": ("vp9", ["-pix_fmt", "gbrp"]),
}  # fmt: skip
ENCODERS["av1-aom"] = ["-c:v", "libaom-av1", "-cpu-used", "8"]


@pytest.mark.parametrize("name", PARSED)
def test_headers_parse_as_ffmpeg_parses_them(tmp_path, name):
    """HEVC SPS, AV1 sequence header and VP9 frame header fields equal trace_headers' on
    streams that exercise the structures before them (cropping, scaling lists, sub-layers,
    reference picture sets, range extensions, timing info, 4:4:4, RGB)."""
    encoder, options = PARSED[name]
    codec = encoder.removesuffix("-aom")
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 4]
    path = tmp_path / "p.mp4"
    run_ffmpeg(*source, *ENCODERS[encoder], *options, "-y", path)
    fields, expected = parsed(codec, path), traced(path)
    assert fields.keys() & expected.keys()
    for key, value in fields.items():
        # A field the header leaves out: None here, or (VP9's RGB) the value it implies.
        assert value == expected.get(key, value if codec == "vp9" else None), key


def hand_made_hevc_sps() -> bytes:
    """An HEVC SPS with every structure before the VUI that x265 leaves out: two temporal
    sub-layers with their profile and level, scaling lists (predicted and coded), PCM, three
    short-term reference picture sets (two predicted from the one before), long-term
    pictures; then a VUI with a SAR, overscan, BT.2020 PQ full range, chroma location and
    field_seq_flag set."""
    w = BitWriter().u(4, 0).u(3, 1).u(1, 1)  # VPS id, max_sub_layers_minus1, nesting
    w.u(3, 0).u(5, 1).u(32, 0x60000000).u(4, 0b1001).u(44, 0).u(8, 60)  # general PTL
    w.u(1, 1).u(1, 1).u(14, 0)  # sub-layer 0: profile and level present; reserved_zero_2bits
    w.u(3, 0).u(5, 1).u(32, 0x60000000).u(4, 0b1001).u(44, 0).u(8, 30)  # sub-layer PTL
    w.ue(0).ue(1).ue(64).ue(48).u(1, 0).ue(0).ue(0).ue(4)  # id, 4:2:0, size, depths, poc bits
    w.u(1, 1).ue(4).ue(2).ue(0).ue(4).ue(2).ue(0)  # ordering info for both sub-layers
    w.ue(0).ue(1).ue(0).ue(2).ue(1).ue(1)  # block sizes, transform hierarchy depths
    w.u(1, 1).u(1, 1)  # scaling lists enabled, coded in the SPS
    for size_id in range(4):
        for matrix_id in range(0, 6, 3 if size_id == 3 else 1):
            if matrix_id % 2:
                w.u(1, 0).ue(matrix_id and 1)  # predicted from the list before it
                continue
            w.u(1, 1)
            if size_id > 1:
                w.se(5)  # scaling_list_dc_coef_minus8
            for i in range(min(64, 1 << (4 + 2 * size_id))):
                w.se((-1) ** i * (i % 7))
    w.u(1, 1).u(1, 1).u(1, 1).u(4, 7).u(4, 7).ue(0).ue(1).u(1, 0)  # AMP, SAO, PCM
    w.ue(3)  # num_short_term_ref_pic_sets
    w.ue(2).ue(1).ue(0).u(1, 1).ue(1).u(1, 1).ue(0).u(1, 1)  # set 0: two before, one after
    # Predicted sets whose pictures never land on POC 0, where FFmpeg's decoder and its
    # trace_headers would count them differently.
    w.u(1, 1).u(1, 0).ue(1)  # set 1: predicted from set 0 (-1, -3, +1), delta POC +2
    w.u(1, 1).u(1, 0).u(1, 1).u(1, 0).u(1, 0).u(1, 1)  # +1, -1, (+3), +2: 3 kept
    w.u(1, 1).u(1, 1).ue(2)  # set 2: predicted from set 1 (-1, +1, +2), delta POC -3
    w.u(1, 1).u(1, 1).u(1, 0).u(1, 0).u(1, 0).u(1, 1)  # -4, -2, (-1), -3: 3 kept
    w.u(1, 1).ue(2).u(8, 17).u(1, 1).u(8, 33).u(1, 0)  # two long-term pictures
    w.u(1, 1).u(1, 1).u(1, 1)  # temporal MVP, strong intra smoothing, VUI
    w.u(1, 1).u(8, 255).u(16, 4).u(16, 3).u(1, 1).u(1, 1)  # Extended SAR, overscan
    w.u(1, 1).u(3, 5).u(1, 1).u(1, 1).u(8, 9).u(8, 16).u(8, 9)  # signal type, BT.2020 PQ
    w.u(1, 1).ue(1).ue(1).u(1, 0).u(1, 1).u(1, 0)  # chroma location, neutral, field_seq
    w.u(1, 0).u(1, 0).u(1, 0).u(1, 0)  # frame field info, display window, timing, restriction
    w.u(1, 0)  # sps_extension_present_flag
    return nal_of_bits("0100001000000001" + "".join(map(str, w.bits)))


def with_record_sps(path: Path, out: Path, nal: bytes) -> Path:
    """The clip with ``nal`` for the (first) SPS of its avcC or hvcC record, the boxes holding
    it resized."""
    data = bytearray(path.read_bytes())
    chain = sample_entry(bytes(data))
    entry = chain[-1][0] + 8 + 78  # the sample entry's child boxes
    kind = b"avcC" if data.find(b"avcC", entry) >= 0 else b"hvcC"
    record = data.index(kind, entry) - 4
    chain.append((record, struct.unpack_from(">I", data, record)[0]))
    if kind == b"avcC":
        at = record + 8 + 6  # the first SPS's length
    else:  # the arrays: type, count, then each unit's length; one unit each
        at = record + 8 + 23
        while data[at] & 0x3F != 33:
            at += 5 + struct.unpack_from(">H", data, at + 3)[0]
        at += 3
    (length,) = struct.unpack_from(">H", data, at)
    data[at : at + 2 + length] = struct.pack(">H", len(nal)) + nal
    for pos, size in chain:
        struct.pack_into(">I", data, pos, size + len(nal) - length)
    out.write_bytes(bytes(data))
    return out


def test_hand_made_hevc_sps_parses_as_ffmpeg_parses_it(tmp_path):
    """Every structure of an HEVC SPS before its VUI: the fields after them equal
    trace_headers' (so each was skipped bit for bit as FFmpeg reads it)."""
    nal = hand_made_hevc_sps()
    assert b"\x00\x00\x03" in nal  # the scaling lists' zero runs: emulation prevention
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 2]
    kvazaar = tmp_path / "kvazaar.mp4"  # its VPS allows two sub-layers, x265's one
    run_ffmpeg(*source, "-c:v", "libkvazaar", "-tag:v", "hvc1", "-y", kvazaar)
    path = with_record_sps(kvazaar, tmp_path / "sps.mp4", nal)
    stderr = subprocess.run(
        [FFMPEG, "-i", str(path), "-c", "copy", "-bsf:v", "trace_headers", "-f", "null", "-"],
        capture_output=True,
    ).stderr.decode()
    traced = {}
    for line in stderr.splitlines():
        if field := TRACE_FIELD.match(line):
            traced.setdefault(field[1], int(field[2]))
    assert traced["num_short_term_ref_pic_sets"] == 3 and traced["num_long_term_ref_pics_sps"] == 2
    assert traced["inter_ref_pic_set_prediction_flag"] == 1
    assert hevc.parse_sps(nal) == hevc.Sps(1, 1, 8, 8, True, True, 9, 16, 9)
    assert (traced["colour_primaries"], traced["transfer_characteristics"]) == (9, 16)
    assert (traced["matrix_coefficients"], traced["field_seq_flag"]) == (9, 1)
    assert traced["video_full_range_flag"] == 1


# ---------------------------------------------------------------------------------------------
# What the container keeps from the frames, and other files


def test_container_refusals_are_kept(made, tmp_path):
    """The refusals of the MP4 layout stand for every codec: an edit list that drops frames,
    a first frame that is no keyframe, a fragmented file, a file cut short."""
    for codec in CONTAINERS:
        clip = made(codec, "mp4")
        long = tmp_path / f"{codec}-long.mp4"
        source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 30]
        run_ffmpeg(*source, *ENCODERS[codec], "-g", 10, "-pix_fmt", "yuv420p", "-y", long)
        cut = remux(long, tmp_path / "cut.mp4", before=["-ss", "1.5"])
        assert video_file.describe(cut) == "an edit list that starts after the first frame"
        headless = remux(long, tmp_path / "headless.mp4", after=["-bsf:v", "noise=drop=lt(n\\,1)"])
        assert video_file.describe(headless) == "the first frame is not a keyframe"
        fragmented = remux(clip, tmp_path / "frag.mp4", after=["-movflags", "+frag_keyframe"])
        assert video_file.describe(fragmented) == "fragmented MP4"
        faststart = remux(long, tmp_path / "fast.mp4", after=["-movflags", "+faststart"])
        short = tmp_path / "short.mp4"
        short.write_bytes(faststart.read_bytes()[: faststart.stat().st_size - 100])
        assert video_file.describe(short) == "samples past the end of the file (truncated?)"


def test_files_that_are_not_mp4(tmp_path):
    """Matroska by its magic (whatever the name), an empty file, text, a missing file."""
    webm = tmp_path / "clip.mp4"
    run_ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", 2,
               *ENCODERS["vp9"], "-f", "webm", "-y", webm)  # fmt: skip
    try:
        from edgecli.decode import matroska
    except ImportError:
        assert video_file.describe(webm) == "Matroska"
    else:
        assert video_file.describe(webm) == matroska.describe(webm)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    assert video_file.describe(empty) == "empty file"
    text = tmp_path / "text.mp4"
    text.write_bytes(b"\x00\x00\x00\x10\x01\x02\x03\x04" + bytes(8))
    assert video_file.describe(text) == "not an MP4/QuickTime file"
    assert video_file.describe(tmp_path / "missing.mp4").startswith("cannot read the file")


# ---------------------------------------------------------------------------------------------
# Hostile bytes


@pytest.fixture(scope="module")
def records(made):
    """(codec, configuration record, first sample) of a clip of each codec."""
    kinds = {"h264": b"avcC", "hevc": b"hvcC", "vp9": b"vpcC", "av1": b"av1C"}
    out = []
    for codec, kind in kinds.items():
        clip = made(codec, "mp4", 1, True)
        out.append((codec, config_record(clip, kind), first_sample(clip)))
    return out


def damage(data: bytes, cut: int, flips: list[int]) -> bytes:
    damaged = bytearray(data[: cut % (len(data) + 1)])
    for bit in flips:
        if damaged:
            damaged[(bit // 8) % len(damaged)] ^= 1 << (bit % 8)
    return bytes(damaged)


HOSTILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                   HealthCheck.function_scoped_fixture])  # fmt: skip


@HOSTILE
@given(
    which=st.integers(0, 3),
    cut=st.integers(0, 1 << 16),
    flips=st.lists(st.integers(0, 1 << 16), max_size=4),
    damage_frame=st.booleans(),
)
def test_damaged_records_give_a_stream_or_a_reason(records, which, cut, flips, damage_frame):
    """Truncated and bit-flipped configuration records and first frames: from_codec returns
    a VideoStream or a reason, never raises."""
    codec, config, frame = records[which]
    if damage_frame:
        frame = damage(frame, cut, flips)
    else:
        config = damage(config, cut, flips)
    result = streams.from_codec(codec, config, frame, Colour(), "mp4", 0)
    assert isinstance(result, VideoStream | str)


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9", "av1"])
def test_every_truncation_of_the_records(records, codec):
    """Each record and first frame cut at every byte: a stream or a short reason."""
    _, config, frame = next(r for r in records if r[0] == codec)
    for end in range(len(config) + 1):
        result = streams.from_codec(codec, config[:end], frame, Colour(), "mp4", 0)
        assert isinstance(result, VideoStream) or len(result) < 80
    for end in itertools.chain(range(min(len(frame), 200)), [len(frame) - 1]):
        result = streams.from_codec(codec, config, frame[:end], Colour(), "mp4", 0)
        assert isinstance(result, VideoStream) or len(result) < 80


@pytest.mark.parametrize(
    "reader, data, reason",
    [
        (hevc.parse_sps, b"\x42\x01" + b"\xff" * 40, "unreadable HEVC SPS"),
        (hevc.parse_sps, b"\x40\x01", "unreadable HEVC SPS"),  # a VPS
        (vp9.parse_header, b"\x00" * 10, "unreadable VP9 frame header"),
        (av1.parse_sequence_header, b"\xe0", "unreadable AV1 sequence header"),
        (av1.find_sequence_header, b"\x0a" + b"\xff" * 8, "unreadable AV1 OBU size"),
        (av1.find_sequence_header, b"\x0a\x7f", "truncated AV1 OBU"),
    ],
)  # fmt: skip
def test_unreadable_headers(reader, data, reason):
    """Headers that are not what they claim raise Unreadable with a short reason."""
    with pytest.raises(byte_source.Unreadable, match=f"^{reason}$"):
        reader(data)


@pytest.fixture(scope="module")
def whole_files(made):
    return [made(codec, "mp4", 1, True).read_bytes() for codec in CONTAINERS]


@HOSTILE
@given(
    which=st.integers(0, 3),
    cut=st.integers(0, 1 << 20),
    flips=st.lists(st.integers(0, 1 << 23), max_size=6),
)
def test_damaged_files_give_a_stream_or_a_reason(whole_files, tmp_path_factory, which, cut, flips):
    """Whole MP4 files truncated and bit-flipped (in their moov box mostly: it is at the end)
    give describe() a VideoStream or a reason, never an exception."""
    data = whole_files[which]
    moov = data.index(b"moov") - 4
    tail = damage(data[moov:], cut, flips)
    path = tmp_path_factory.mktemp("damaged") / "damaged.mp4"
    path.write_bytes(data[:moov] + tail)
    assert isinstance(video_file.describe(path), VideoStream | str)
