"""H.264 in MP4/MOV on clips made by imageio-ffmpeg's ffmpeg and edited box by box: the SPS
parser (edgecli.decode.h264) against FFmpeg's own, and the stream edgecli.decode.mp4.describe
reads and the NVDEC plan edgecli.decode.nvdec.plan_video makes of it, checked against what
cv2.VideoCapture does: an exact plan's conversion and turn give cv2's frames, and each refusal
of the file's layout is a file cv2 shows otherwise than its samples say.
"""

from __future__ import annotations

import re
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli.decode import h264, mp4, nvdec, yuv
from edgecli.decode.streams import Colour, VideoStream

pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from tests.clips import FFMPEG, box_chain, decode_planes  # noqa: E402
from tests.helpers import DATA, H264_CLIP  # noqa: E402
from tests.media import read_frames  # noqa: E402

X264 = ["-c:v", "libx264", "-preset", "ultrafast"]
HEVC = ["-c:v", "libx265", "-x265-params", "log-level=none"]
YUV420 = [*X264, "-pix_fmt", "yuv420p"]
COLR = ["-movflags", "+write_colr"]  # this ffmpeg writes no colr box without it, even in .mov
# Four 4x4 scaling lists (raster order) that x264 codes every way scaling_list() allows: deltas
# then a trailing run ended by nextScale 0; the JVT default (delta -8: "use the default", an
# early stop); sixteen deltas; sixteen deltas ending in a run of zeros.
CQM = ":".join(
    [
        "cqm4iy=10" + ",30" * 15,
        "cqm4ic=6,13,20,28,13,20,28,32,20,28,32,37,28,32,37,42",
        "cqm4py=" + ",".join(map(str, range(5, 21))),
        "cqm4pc=16" + ",16" * 14 + ",17",
    ]
)
# With the 8x8 transform: two 8x8 lists (64 values) in the PPS as well.
CQM8 = ":".join(
    [
        "8x8dct=1",
        "cqm8i=" + ",".join(str(4 + i) for i in range(64)),  # 64 deltas, no run
        "cqm8p=20" + ",21" * 63,  # a delta, then a run to the end
    ]
)

BT601 = yuv.Conversion("bt601", False)
BT601_FULL = yuv.Conversion("bt601", True)
BT709 = yuv.Conversion("bt709", False)

# name: (file name, ffmpeg output options, the conversion cv2 applies[, frame size])
CONVERTED = {
    "plain": ("plain.mp4", YUV420, BT601),  # moov after mdat
    "faststart": ("faststart.mp4", [*YUV420, "-movflags", "+faststart"], BT601),
    "mov": ("plain.mov", YUV420, BT601),
    "bt470bg": ("bt470bg.mp4", [*YUV420, "-colorspace", "bt470bg"], BT601),
    "smpte170m": ("smpte170m.mp4", [*YUV420, "-colorspace", "smpte170m"], BT601),
    "bt470bg-colr": ("bt470bg-colr.mp4", [*YUV420, "-colorspace", "bt470bg", *COLR], BT601),
    "smpte170m-mov-colr": (
        "smpte170m.mov",
        [*YUV420, "-colorspace", "smpte170m", *COLR],
        BT601,
    ),
    "tv-range": ("tv.mp4", [*YUV420, "-color_range", "tv", *COLR], BT601),
    # Scaling matrices: this x264 (core 165) writes them into the PPS, not the SPS, whatever
    # the lists; test_scaling_lists_in_the_sps moves them into the SPS.
    "cqm-jvt": ("cqm-jvt.mp4", [*YUV420, "-x264-params", "cqm=jvt"], BT601),
    "cqm-custom": ("cqm.mp4", [*YUV420, "-colorspace", "smpte170m", "-x264-params", CQM], BT601),
    "cropped-sar-overscan": (
        "cropped.mp4",  # frame cropping (44 rows), an Extended_SAR, overscan info, then colour
        [*YUV420, "-vf", "setsar=7/5", "-colorspace", "bt470bg", "-x264-params", "overscan=show"],
        BT601,
        (64, 44),
    ),
    "bt709": ("bt709.mp4", [*YUV420, "-colorspace", "bt709", *COLR], BT709),
    "bt709-vui": ("bt709-vui.mp4", [*YUV420, "-x264-params", "colormatrix=bt709"], BT709),
    "bt709-colr": (  # the SPS says nothing: FFmpeg takes the container's nclx
        "bt709-colr.mp4",
        [*YUV420, "-colorspace", "bt709", "-x264-params", "colormatrix=undef", *COLR],
        BT709,
    ),
    "bt709-mov": ("bt709.mov", [*YUV420, "-colorspace", "bt709"], BT709),
    "bt709-mov-nclc": (  # QuickTime's nclc box
        "bt709-colr.mov",
        [*YUV420, "-colorspace", "bt709", "-x264-params", "colormatrix=undef", *COLR],
        BT709,
    ),
    "bt2020nc": ("bt2020.mp4", [*YUV420, "-colorspace", "bt2020nc"], yuv.Conversion("bt2020")),
    "full-range": ("pc.mp4", [*YUV420, "-color_range", "pc"], BT601_FULL),
    "yuvj420p": ("yuvj.mp4", [*X264, "-pix_fmt", "yuvj420p"], BT601_FULL),
    "full-range-colr": (
        "pc-colr.mp4",
        [*YUV420, "-color_range", "pc", "-x264-params", "fullrange=off", *COLR],
        BT601_FULL,
    ),
    # Container and SPS disagree: FFmpeg's h264 decoder lets the SPS win, so cv2 converts as the
    # SPS says although ffprobe shows the container's tag.
    "sps-bt709-colr-bt470bg": (
        "conflict709.mp4",
        [*YUV420, "-colorspace", "bt470bg", "-x264-params", "colormatrix=bt709", *COLR],
        BT709,
    ),
    "sps-bt470bg-colr-bt709": (
        "conflict601.mp4",
        [*YUV420, "-colorspace", "bt709", "-x264-params", "colormatrix=bt470bg", *COLR],
        BT601,
    ),
}

# name: (file name, ffmpeg options, (codec, chroma, depth, progressive) or None where there is no
# description, --decode auto's reason)
FORMATS = {
    "yuv422p": ("422.mp4", [*X264, "-pix_fmt", "yuv422p"], ("h264", "4:2:2", 8, True),
                "4:2:2 chroma"),
    "yuv444p": ("444.mp4", [*X264, "-pix_fmt", "yuv444p"], ("h264", "4:4:4", 8, True),
                "4:4:4 chroma"),
    "interlaced": ("il.mp4", [*YUV420, "-flags", "+ildct+ilme"], ("h264", "4:2:0", 8, False),
                   "interlaced"),
    "yuv420p10le": ("10bit.mp4", [*X264, "-pix_fmt", "yuv420p10le"], ("h264", "4:2:0", 10, True),
                    "10-bit"),
    "gray": ("gray.mp4", [*X264, "-pix_fmt", "gray"], ("h264", "4:0:0", 8, True), "4:0:0 chroma"),
    "hev1": ("hev1.mp4", [*HEVC, "-pix_fmt", "yuv420p"],
             ("hevc", "4:2:0", 8, True), None),
    "hvc1": ("hvc1.mp4", [*HEVC, "-tag:v", "hvc1", "-pix_fmt", "yuv420p"],
             ("hevc", "4:2:0", 8, True), None),
    "mpeg4": ("mpeg4.mp4", ["-c:v", "mpeg4", "-pix_fmt", "yuv420p"], None, "codec mp4v"),
}  # fmt: skip
# Clips this ffmpeg may lack the encoder (or the pixel format) for: skipped, saying why.
OPTIONAL = {"yuv420p10le", "gray", "hev1", "hvc1"}


def encode(path: Path, options: list[str], size: tuple[int, int] = (64, 48), frames=3) -> Path:
    width, height = size
    source = [
        "-f",
        "lavfi",
        "-i",
        f"testsrc=size={width}x{height}:rate=10",
        "-frames:v",
        str(frames),
    ]
    made = subprocess.run(
        [FFMPEG, "-v", "error", *source, *options, "-y", str(path)],
        check=True,
        capture_output=True,
    )
    # libx264 logs an -x264-params option it cannot parse, and encodes without it.
    assert not made.stderr, made.stderr.decode(errors="replace")
    return path


@pytest.fixture(scope="session")
def clip(tmp_path_factory):
    """clip(name) -> the path of that clip of CONVERTED or FORMATS, made once."""
    folder = tmp_path_factory.mktemp("h264-clips")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            if name in CONVERTED:
                file, options, _, *size = CONVERTED[name]
            else:
                file, options, *_ = FORMATS[name]
                size = []
            made[name] = encode(folder / file, options, *size)
        return made[name]

    return get


def auto_plan(path: Path) -> nvdec.NvdecPlan | str:
    """What --decode auto makes of the file, on a GPU whose decoder takes every stream."""
    return nvdec.plan_video(path, lambda *stream: None, exact_only=True)


def exact(conversion: yuv.Conversion = BT601, rotation: int = 0) -> nvdec.NvdecPlan:
    return nvdec.NvdecPlan(conversion, 8, rotation)


def bgr_of_planes(path: Path, conversion: yuv.Conversion) -> list[np.ndarray]:
    return [yuv.yuv420_to_bgr(y, u, v, conversion) for y, u, v in decode_planes(path)]


def same_frames(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) > 0 and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def top_level_types(data: bytes) -> list[bytes]:
    types, pos = [], 0
    while pos + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, pos)
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, pos + 8)
        types.append(kind)
        pos += size or len(data)
    return types


# ---------------------------------------------------------------------------------------------
# Clips and what cv2 does with them


@pytest.mark.parametrize("name", CONVERTED)
def test_clips_are_planned_with_cv2s_conversion(clip, name):
    """Each 8-bit 4:2:0 clip, whatever its tags and wherever they are, is NVDEC's under auto
    with the conversion that turns FFmpeg's planes into exactly cv2's frames; where that is
    not BT.601 limited range, BT.601 limited range would not give them (the tag matters)."""
    path = clip(name)
    conversion = CONVERTED[name][2]
    assert auto_plan(path) == exact(conversion)
    frames = read_frames(path)
    assert len(frames) == 3
    assert same_frames(bgr_of_planes(path, conversion), frames)
    assert same_frames(bgr_of_planes(path, BT601), frames) == (conversion == BT601)


@pytest.mark.parametrize("name", FORMATS)
def test_formats_are_described_and_planned_as_ffmpeg_decodes_them(clip, name):
    """Other chroma samplings, depths, field coding and codecs are described as FFmpeg decodes
    them (MPEG-4 Part 2 by its sample entry alone), and --decode auto leaves each to the CPU
    with its reason; 8-bit 4:2:0 HEVC (reason None) goes to NVDEC, packet by packet."""
    _, _, format_, reason = FORMATS[name]
    try:
        path = clip(name)
    except subprocess.CalledProcessError as exc:
        if name not in OPTIONAL:
            raise
        pytest.skip(f"this ffmpeg cannot make it: {exc.stderr.decode(errors='replace').strip()}")
    stream = mp4.describe(path)
    if format_ is None:
        assert stream == reason
    else:
        assert (stream.codec, stream.chroma, stream.depth, stream.progressive) == format_
    if reason is None:
        assert auto_plan(path).packets
    else:
        assert auto_plan(path) == reason


def test_faststart_and_moov_at_the_end_are_both_covered(clip):
    """The two plain clips really put moov before and after mdat."""
    plain = top_level_types(clip("plain").read_bytes())
    fast = top_level_types(clip("faststart").read_bytes())
    assert plain.index(b"moov") > plain.index(b"mdat")
    assert fast.index(b"moov") < fast.index(b"mdat")


# The clips the GPU tests use: what --decode auto makes of each (scripts/make_test_media.py).
REPOSITORY_CLIPS = {
    H264_CLIP.name: exact(),
    "nvdec_1918x1080.mp4": exact(),
    "nvdec_250x142.mp4": exact(),
    "nvdec_66x18.mp4": exact(),
    "nvdec_1366x768.mp4": exact(BT709),
    "nvdec_bt709.mp4": exact(BT709),
    "nvdec_full.mp4": exact(BT601_FULL),
    "nvdec_bt709_full.mov": exact(yuv.Conversion("bt709", True)),
    "nvdec_rotated.mp4": exact(rotation=270),
    "nvdec_cut.mp4": "an edit list that starts after the first frame",
    "nvdec_headless.mp4": "the first frame is not a keyframe",
}


@pytest.mark.parametrize("name", REPOSITORY_CLIPS)
def test_repository_clips(name):
    """The clips the GPU tests use get the plans those tests expect of them."""
    assert auto_plan(DATA / name) == REPOSITORY_CLIPS[name]


# ---------------------------------------------------------------------------------------------
# The SPS parser against FFmpeg's own (the trace_headers bitstream filter)


TRACE_FIELD = re.compile(r"^\[\S+ @ \S+\] (\d+)\s+(\S+)\s+[01]+ = (-?\d+)$")


def trace(path: Path) -> dict[str, list[tuple[int, str, int]]]:
    """The first SPS's and PPS's fields as FFmpeg's trace_headers prints them: (bit position in
    the unescaped NAL unit, name, value)."""
    stderr = subprocess.run(
        [FFMPEG, "-i", str(path), "-c", "copy", "-bsf:v", "trace_headers", "-f", "null", "-"],
        capture_output=True,
        check=True,
    ).stderr.decode()
    blocks: dict[str, list[tuple[int, str, int]]] = {}
    current = None
    for line in stderr.splitlines():
        field = TRACE_FIELD.match(line)
        if field and current is not None:
            blocks[current].append((int(field[1]), field[2], int(field[3])))
            continue
        current = None
        for block, title in (("sps", "Sequence Parameter Set"), ("pps", "Picture Parameter Set")):
            if line.endswith(title) and block not in blocks:
                current, blocks[block] = block, []
    return blocks


def traced_sps(path: Path) -> dict[str, int]:
    return {name: value for _, name, value in trace(path)["sps"]}


def assert_parsed_as_ffmpeg_does(path: Path) -> h264.Sps:
    """parse_sps of the clip's SPS agrees with trace_headers on every field it returns."""
    traced = traced_sps(path)
    sps = h264.parse_sps(avcc_nals(path)[0])
    assert sps.profile_idc == traced["profile_idc"]
    assert sps.chroma_format_idc == traced.get("chroma_format_idc", 1)
    assert sps.bit_depth_luma == 8 + traced.get("bit_depth_luma_minus8", 0)
    assert sps.bit_depth_chroma == 8 + traced.get("bit_depth_chroma_minus8", 0)
    assert sps.frame_mbs_only == bool(traced["frame_mbs_only_flag"])
    range_flag = traced.get("video_full_range_flag")
    assert sps.full_range == (None if range_flag is None else bool(range_flag))
    assert sps.matrix == traced.get("matrix_coefficients")
    return sps


def avcc_nals(path: Path) -> tuple[bytes, bytes]:
    """The (first) SPS and PPS of the clip's avcC box."""
    data = path.read_bytes()
    start = data.index(b"avcC") + 4
    (length,) = struct.unpack_from(">H", data, start + 6)
    sps = data[start + 8 : start + 8 + length]
    pps_at = start + 8 + length + 1
    (length,) = struct.unpack_from(">H", data, pps_at)
    return sps, data[pps_at + 2 : pps_at + 2 + length]


# name: (ffmpeg options, SPS fields the clip must have for the case to test what it says)
TRACED = {
    "plain": (YUV420, {"profile_idc": 66}),
    "interlaced": (
        [*YUV420, "-flags", "+ildct+ilme", "-colorspace", "smpte240m"],
        {"frame_mbs_only_flag": 0, "mb_adaptive_frame_field_flag": 1},
    ),
    "sar": (
        [*YUV420, "-vf", "setsar=7/5", "-color_range", "pc", "-colorspace", "bt709"],
        {"aspect_ratio_idc": 255, "sar_width": 7, "sar_height": 5},
    ),
    "overscan": (
        [*YUV420, "-x264-params", "overscan=crop:colormatrix=bt2020c"],
        {"overscan_info_present_flag": 1},
    ),
    "10bit": ([*X264, "-pix_fmt", "yuv420p10le", "-colorspace", "bt2020nc"], {}),
    "422-range": ([*X264, "-pix_fmt", "yuv422p", "-color_range", "tv"], {"profile_idc": 122}),
    "444": ([*X264, "-pix_fmt", "yuv444p", "-colorspace", "fcc"], {"profile_idc": 244}),
}


@pytest.mark.parametrize("name", TRACED)
def test_sps_fields_match_ffmpegs_parser(tmp_path, name):
    """chroma format, bit depths, frame_mbs_only, range and matrix as FFmpeg reads them, for
    SPSs of several profiles, with interlacing, an Extended_SAR, overscan info, and frame
    cropping (all: 44 rows are 3 macroblock rows less 4)."""
    options, fields = TRACED[name]
    try:
        path = encode(tmp_path / "t.mp4", options, (64, 44))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"this ffmpeg cannot make it: {exc.stderr.decode(errors='replace').strip()}")
    traced = traced_sps(path)
    assert {k: traced.get(k) for k in fields} == fields
    assert traced["frame_cropping_flag"] == 1
    assert_parsed_as_ffmpeg_does(path)


def rbsp_bits(nal: bytes) -> str:
    return "".join(f"{byte:08b}" for byte in nal.replace(b"\x00\x00\x03", b"\x00\x00"))


def escape(rbsp: bytes) -> bytes:
    """Emulation prevention (7.4.1): a 03 byte after two zeros where a byte <= 3 follows."""
    escaped, zeros = bytearray(), 0
    for byte in rbsp:
        if zeros >= 2 and byte <= 3:
            escaped.append(3)
            zeros = 0
        escaped.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(escaped)


def nal_of_bits(bits: str) -> bytes:
    """A NAL unit (header bits included) from its syntax bits, with new trailing bits."""
    bits += "1" + "0" * (-(len(bits) + 1) % 8)  # rbsp_stop_one_bit and alignment
    return escape(int(bits, 2).to_bytes(len(bits) // 8, "big"))


def without_trailing_bits(bits: str) -> str:
    return bits.rstrip("0")[:-1]


def scaling_lists_moved_to_the_sps(path: Path, out: Path) -> Path:
    """The clip with its PPS's scaling lists moved into its SPS (the PPS then says none, so the
    SPS's apply: the same lists, decoding to the same frames)."""
    blocks = trace(path)
    sps_flag = next(p for p, n, _ in blocks["sps"] if n == "seq_scaling_matrix_present_flag")
    pps_flag = next(p for p, n, _ in blocks["pps"] if n == "pic_scaling_matrix_present_flag")
    pps_end = next(p for p, n, _ in blocks["pps"] if n == "second_chroma_qp_index_offset")
    present = sum(n.startswith("pic_scaling_list_present_flag") for _, n, _ in blocks["pps"])
    chroma = traced_sps(path).get("chroma_format_idc", 1)
    sps, pps = avcc_nals(path)
    sps_bits, pps_bits = without_trailing_bits(rbsp_bits(sps)), rbsp_bits(pps)
    lists = pps_bits[pps_flag + 1 : pps_end] + "0" * ((12 if chroma == 3 else 8) - present)
    new_sps = nal_of_bits(sps_bits[:sps_flag] + "1" + lists + sps_bits[sps_flag + 1 :])
    new_pps = nal_of_bits(pps_bits[:pps_flag] + "0" + without_trailing_bits(pps_bits)[pps_end:])

    data = path.read_bytes()
    chain = box_chain(data, [*ENTRY, b"avcC"])
    start, end = chain[-1][0] + 8, sum(chain[-1])
    avcc = data[start:end]
    tail = avcc[6 + 2 + len(sps) + 1 + 2 + len(pps) :]  # the High profiles' extension
    record = avcc[:6] + struct.pack(">H", len(new_sps)) + new_sps
    record += b"\x01" + struct.pack(">H", len(new_pps)) + new_pps + tail
    out.write_bytes(splice(data, chain, start, end, record))
    return out


@pytest.mark.parametrize(
    "pix_fmt, tags, lists, described",
    [
        ("yuv420p", [], CQM, ("4:2:0", None)),
        ("yuv420p", ["-colorspace", "smpte170m"], f"{CQM}:{CQM8}", ("4:2:0", 6)),
        ("yuv420p", ["-colorspace", "bt709"], CQM, ("4:2:0", 1)),
        ("yuv420p", ["-colorspace", "bt709"], f"{CQM}:{CQM8}", ("4:2:0", 1)),
        ("yuv444p", ["-colorspace", "bt709"], CQM, ("4:4:4", 1)),  # 12 lists
        ("yuv444p", ["-colorspace", "bt709"], f"{CQM}:{CQM8}", ("4:4:4", 1)),
    ],
    ids=["420", "420-8x8", "420-bt709", "420-8x8-bt709", "444-bt709", "444-8x8-bt709"],
)
def test_scaling_lists_in_the_sps(tmp_path, pix_fmt, tags, lists, described):
    """seq_scaling_matrix_present_flag with 4x4 and 8x8 lists coded every way scaling_list()
    allows, in an SPS that FFmpeg decodes (to the frames of the original); the VUI after them
    is read right, and the file is described by it (chroma sampling, matrix)."""
    options = [*X264, "-pix_fmt", pix_fmt, *tags, "-x264-params", lists]
    original = encode(tmp_path / "pps.mp4", options, (64, 44))
    moved = scaling_lists_moved_to_the_sps(original, tmp_path / "sps.mp4")
    assert traced_sps(original)["seq_scaling_matrix_present_flag"] == 0
    assert traced_sps(moved)["seq_scaling_matrix_present_flag"] == 1
    assert {n: v for _, n, v in trace(moved)["pps"]}["pic_scaling_matrix_present_flag"] == 0
    assert same_frames(read_frames(moved), read_frames(original))
    assert assert_parsed_as_ffmpeg_does(moved) == h264.parse_sps(avcc_nals(original)[0])
    stream = mp4.describe(moved)
    assert (stream.chroma, stream.colour.matrix) == described


# ---------------------------------------------------------------------------------------------
# Hand-made SPSs: what x264 never writes (pic_order_cnt_type 1, emulation prevention)


class BitWriter:
    def __init__(self):
        self.bits: list[int] = []

    def u(self, n: int, value: int) -> BitWriter:
        self.bits += [(value >> (n - 1 - i)) & 1 for i in range(n)]
        return self

    def ue(self, value: int) -> BitWriter:
        code = value + 1
        return self.u(code.bit_length() - 1, 0).u(code.bit_length(), code)

    def se(self, value: int) -> BitWriter:
        return self.ue(2 * value - 1 if value > 0 else -2 * value)

    def nal(self) -> bytes:
        return nal_of_bits("01100111" + "".join(map(str, self.bits)))  # nal_unit_type 7


def hand_made_sps(*, profile=100, chroma=1, depth=8, poc_type=1, frame_mbs_only=1, vui=True,
                  sar=(0, 0), matrix=6, full_range=0) -> bytes:  # fmt: skip
    w = BitWriter().u(8, profile).u(8, 0).u(8, 40).ue(0)
    if profile in (100, 244):
        w.ue(chroma)
        if chroma == 3:
            w.u(1, 0)
        w.ue(depth - 8).ue(depth - 8).u(1, 0)
        w.u(1, 1)  # seq_scaling_matrix_present_flag
        for i in range(12 if chroma == 3 else 8):
            w.u(1, int(i in (1, 2, 7)))  # seq_scaling_list_present_flag[i]
            if i == 1:  # six deltas, then one making nextScale 0: the list ends early
                for delta in [5, -3, 0, 120, -128, 7, -9]:
                    w.se(delta)
            elif i in (2, 7):  # every value coded: 16 (4x4) and 64 (8x8) deltas
                for j in range(16 if i < 6 else 64):
                    w.se(1 if j % 2 == 0 else -1)
    w.ue(0).ue(poc_type)
    if poc_type == 0:
        w.ue(2)
    elif poc_type == 1:
        w.u(1, 0).se(-2).se(3).ue(3).se(1).se(-70000).se(0)
    w.ue(4).u(1, 0).ue(3).ue(2).u(1, frame_mbs_only)
    if not frame_mbs_only:
        w.u(1, 1)
    w.u(1, 1).u(1, 1).ue(0).ue(0).ue(0).ue(2)  # direct_8x8, frame cropping: bottom 2
    w.u(1, int(vui))
    if vui:
        w.u(1, 1).u(8, 255).u(16, sar[0]).u(16, sar[1])  # Extended_SAR
        w.u(1, 1).u(1, 0)  # overscan
        w.u(1, 1).u(3, 5).u(1, full_range).u(1, 1).u(8, 1).u(8, 1).u(8, matrix)
        w.u(1, 0).u(1, 0)  # chroma_loc_info, timing_info: the parser stops before these
    return w.nal()


def test_emulation_prevention_bytes_are_removed():
    """A zero SAR gives 00 00 runs: the escaped SPS has 03 bytes that the parser drops."""
    nal = hand_made_sps(sar=(0, 0))
    assert b"\x00\x00\x03" in nal
    assert h264.parse_sps(nal) == h264.Sps(100, 1, 8, 8, True, False, 6, 1, 1)


@pytest.mark.parametrize("poc_type", [0, 1, 2])
@pytest.mark.parametrize("profile, chroma", [(66, 1), (100, 1), (100, 0), (244, 3), (244, 2)])
def test_hand_made_sps(poc_type, profile, chroma):
    sps = h264.parse_sps(hand_made_sps(profile=profile, chroma=chroma, poc_type=poc_type))
    assert sps == h264.Sps(profile, chroma if profile != 66 else 1, 8, 8, True, False, 6, 1, 1)


def with_sps(data: bytes, nal: bytes) -> bytes:
    """The clip (moov at the end: no sample moves) with ``nal`` for the first SPS of its avcC."""
    chain = box_chain(data, [*ENTRY, b"avcC"])
    avcc = chain[-1][0] + 8
    (length,) = struct.unpack_from(">H", data, avcc + 6)
    return splice(data, chain, avcc + 6, avcc + 8 + length, struct.pack(">H", len(nal)) + nal)


# What the plain clip with a hand_made_sps() of default fields is described as.
HAND_MADE = VideoStream("h264", "mp4", "4:2:0", 8, True, Colour(6, False, 1, 1))


@pytest.mark.parametrize(
    "fields, described",
    [
        ({}, {}),
        ({"matrix": 5}, {"colour": Colour(5, False, 1, 1)}),
        ({"matrix": 2}, {"colour": Colour(None, False, 1, 1)}),  # unspecified
        ({"matrix": 1}, {"colour": Colour(1, False, 1, 1)}),
        ({"matrix": 0}, {"colour": Colour(0, False, 1, 1)}),
        ({"matrix": 9}, {"colour": Colour(9, False, 1, 1)}),
        ({"matrix": 77}, {"colour": Colour(77, False, 1, 1)}),
        ({"full_range": 1}, {"colour": Colour(6, True, 1, 1)}),
        ({"vui": False}, {"colour": Colour()}),  # nor does the container say anything
        ({"depth": 10}, {"depth": 10}),
        ({"chroma": 2}, {"chroma": "4:2:2"}),
        ({"chroma": 3, "profile": 244}, {"chroma": "4:4:4"}),
        ({"frame_mbs_only": 0}, {"progressive": False}),
        ({"sar": (4, 3), "matrix": 7}, {"colour": Colour(7, False, 1, 1)}),
    ],
)
def test_hand_made_sps_describes_the_file(clip, tmp_path, fields, described):
    """A clip whose avcC holds a hand-made SPS (scaling lists, pic_order_cnt_type 1, an
    Extended_SAR) is described by that SPS's chroma, depth, scan and colour."""
    path = tmp_path / "sps.mp4"
    path.write_bytes(with_sps(clip("plain").read_bytes(), hand_made_sps(**fields)))
    assert mp4.describe(path) == replace(HAND_MADE, **described)


def test_truncated_or_foreign_sps_is_unreadable():
    nal = hand_made_sps()
    for cut in range(len(nal) - 1):  # the matrix ends in one of the last two bytes
        with pytest.raises(ValueError, match="unreadable SPS"):
            h264.parse_sps(nal[:cut])
    with pytest.raises(ValueError, match="unreadable SPS"):
        h264.parse_sps(bytes([0x68]) + nal[1:])  # a PPS
    with pytest.raises(ValueError, match="unreadable SPS"):
        h264.parse_sps(bytes([0x67, 100, 0, 40]) + b"\x00" * 8)  # an exp-Golomb code too long


# ---------------------------------------------------------------------------------------------
# Files edited box by box (moov at the end, so no chunk offset moves)

ENTRY = [b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stsd", b"avc1"]


def splice(data: bytes, chain: list[tuple[int, int]], start: int, end: int, new: bytes) -> bytes:
    """data[start:end] replaced with ``new`` inside every box of ``chain``, their sizes fixed."""
    out = bytearray(data[:start] + new + data[end:])
    for pos, size in chain:
        struct.pack_into(">I", out, pos, size + len(new) - (end - start))
    return bytes(out)


def insert(data: bytes, chain: list[tuple[int, int]], at: int, extra: bytes) -> bytes:
    return splice(data, chain, at, at, extra)


def sample_entry_end(data: bytes) -> tuple[list[tuple[int, int]], int]:
    chain = box_chain(data, ENTRY)
    pos, size = chain[-1]
    return chain, pos + size


def with_colr(data: bytes, payload: bytes) -> bytes:
    chain, end = sample_entry_end(data)
    return insert(data, chain, end, struct.pack(">I", 8 + len(payload)) + b"colr" + payload)


@pytest.mark.parametrize(
    "payload, conversion",
    [
        (b"nclc" + struct.pack(">HHH", 1, 1, 1), BT709),
        (b"nclx" + struct.pack(">HHHB", 2, 2, 2, 0x80), BT601_FULL),
        (b"nclx" + struct.pack(">HHHB", 6, 6, 6, 0), BT601),
        (b"prof" + bytes(range(64)), BT601),  # an ICC profile: not converted by
    ],
    ids=["nclc-bt709", "nclx-full", "nclx-smpte170m", "prof"],
)
def test_colr_boxes(clip, tmp_path, payload, conversion):
    """A colr box added to a clip whose SPS names no colour: its nclc or nclx matrix and range
    are cv2's conversion and the plan's; an ICC profile changes nothing."""
    path = tmp_path / "colr.mp4"
    path.write_bytes(with_colr(clip("plain").read_bytes(), payload))
    assert auto_plan(path) == exact(conversion)
    assert same_frames(bgr_of_planes(path, conversion), read_frames(path))


def test_the_last_sps_is_described(clip, tmp_path):
    """A second SPS (same id, BT.709) after the first in avcC: FFmpeg keeps the later one and
    cv2 converts with BT.709, and so does the plan."""
    plain = clip("plain").read_bytes()
    second = avcc_nals(clip("bt709-vui"))[0]
    chain = box_chain(plain, [*ENTRY, b"avcC"])
    avcc = chain[-1][0] + 8
    (first_length,) = struct.unpack_from(">H", plain, avcc + 6)
    data = bytearray(
        insert(plain, chain, avcc + 8 + first_length, struct.pack(">H", len(second)) + second)
    )
    data[avcc + 5] = (data[avcc + 5] & 0xE0) | 2
    path = tmp_path / "two-sps.mp4"
    path.write_bytes(data)
    assert auto_plan(path) == exact(BT709)
    assert same_frames(bgr_of_planes(path, BT709), read_frames(path))


def test_several_sample_entries_are_refused(clip, tmp_path):
    """A second sample entry (of another codec) after the avc1 one: the samples may switch to
    it, so the file is not described."""
    plain = clip("plain").read_bytes()
    chain, end = sample_entry_end(plain)
    pos, size = chain[-1]
    entry = plain[pos : pos + 4] + b"mp4v" + plain[pos + 8 : end]
    data = bytearray(insert(plain, chain[:-1], end, entry))
    struct.pack_into(">I", data, chain[-2][0] + 12, 2)  # stsd's entry_count
    path = tmp_path / "two-entries.mp4"
    path.write_bytes(data)
    assert mp4.describe(path) == "2 sample entries"


def test_sample_entry_type_patched_to_hevc(clip, tmp_path):
    """The sample entry's type names the codec: avc3 is H.264 as avc1 is; hvc1 makes the stream
    HEVC, and no HEVC SPS is in the avcC record or the first sample."""
    data = bytearray(clip("plain").read_bytes())
    pos = box_chain(bytes(data), ENTRY)[-1][0]
    for kind, described in ((b"hvc1", "no SPS"), (b"avc3", mp4.describe(clip("plain")))):
        data[pos + 4 : pos + 8] = kind
        path = tmp_path / f"{kind.decode()}.mp4"
        path.write_bytes(data)
        assert mp4.describe(path) == described


def test_largesize_and_size_zero_boxes(clip, tmp_path):
    """mdat with a 64-bit size (in place of free + mdat's header) and a last moov of size 0."""
    data = bytearray(clip("plain").read_bytes())
    free = data.index(b"free") - 4
    assert data[free : free + 4] == b"\0\0\0\x08" and data[free + 12 : free + 16] == b"mdat"
    (mdat_size,) = struct.unpack_from(">I", data, free + 8)
    data[free : free + 16] = struct.pack(">I4sQ", 1, b"mdat", 8 + mdat_size)
    moov = data.index(b"moov") - 4
    assert struct.unpack_from(">I", data, moov)[0] == len(data) - moov
    struct.pack_into(">I", data, moov, 0)
    path = tmp_path / "sizes.mp4"
    path.write_bytes(data)
    assert top_level_types(bytes(data))[-1] == b"moov"
    assert auto_plan(path) == exact()
    assert same_frames(bgr_of_planes(path, BT601), read_frames(path))


def test_track_selection(clip, tmp_path):
    """cv2 decodes FFmpeg's first video stream: iTunes cover art placed before the track is one
    (cv2 then reads the picture), a second video track may be NVDEC's pick, and a track with
    another handler but an avc1 entry is video to FFmpeg (and checked like one)."""
    cover = encode(tmp_path / "cover.png", ["-frames:v", "1"], (32, 32))
    plain = clip("plain")
    after = tmp_path / "cover-after.mp4"
    subprocess.run(
        [FFMPEG, "-v", "error", "-i", plain, "-i", cover, "-map", "0", "-map", "1", "-c", "copy",
         "-disposition:v:1", "attached_pic", "-y", after],
        check=True,
    )  # fmt: skip
    assert auto_plan(after) == exact()
    assert len(read_frames(after)) == 3

    data = after.read_bytes()
    moov, size = box_chain(data, [b"moov"])[0]
    children, pos = {}, moov + 8
    while pos < moov + size:
        length, kind = struct.unpack_from(">I4s", data, pos)
        children[kind] = data[pos : pos + length]
        pos += length
    assert list(children) == [b"mvhd", b"trak", b"udta"]
    before = tmp_path / "cover-before.mp4"
    before.write_bytes(data[: moov + 8] + children[b"mvhd"] + children[b"udta"] + children[b"trak"])
    assert mp4.describe(before) == "cover art before the video track"
    frames = read_frames(before)
    assert len(frames) == 1 and frames[0].shape == (32, 32, 3)

    two = tmp_path / "two.mp4"
    subprocess.run(
        [FFMPEG, "-v", "error", "-i", plain, "-map", "0", "-map", "0", "-c", "copy", "-y", two],
        check=True,
    )
    assert mp4.describe(two) == "2 video tracks"

    data = bytearray(plain.read_bytes())
    hdlr = box_chain(bytes(data), [b"moov", b"trak", b"mdia", b"hdlr"])[-1][0]
    assert data[hdlr + 16 : hdlr + 20] == b"vide"
    data[hdlr + 16 : hdlr + 20] = b"xxxx"
    other = tmp_path / "handler.mp4"
    other.write_bytes(data)
    assert len(read_frames(other)) == 3
    assert auto_plan(other) == exact()


# ---------------------------------------------------------------------------------------------
# Files that are not (whole) MP4 videos


def test_files_without_a_usable_video(clip, tmp_path):
    """Empty, cut before or inside moov, text, a PNG, audio only, missing, a folder: each is
    not described, with its reason."""
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    assert mp4.describe(empty) == "empty file"

    plain = clip("plain").read_bytes()
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(plain[: plain.index(b"moov") - 4])
    assert mp4.describe(truncated) == "no moov box"
    truncated.write_bytes(plain[:-10])
    assert mp4.describe(truncated) == "truncated moov box"

    text = tmp_path / "notes.mp4"
    text.write_text("these are not the frames you are looking for\n" * 20)
    assert mp4.describe(text) == "no moov box"
    png = encode(tmp_path / "picture.png", ["-frames:v", "1"])
    assert mp4.describe(png) == "not an MP4/QuickTime file"

    audio = tmp_path / "audio.m4a"
    subprocess.run(
        [FFMPEG, "-v", "error", "-f", "lavfi", "-i", "sine=duration=0.2", "-c:a", "aac", "-y",
         audio],
        check=True,
    )  # fmt: skip
    assert mp4.describe(audio) == "no video track"

    missing = mp4.describe(tmp_path / "missing.mp4")
    assert missing == "cannot read the file (No such file or directory)"
    assert mp4.describe(tmp_path).startswith("cannot read the file (")


@pytest.mark.parametrize("name", ["plain", "faststart"])
def test_truncations_never_raise_and_never_admit_a_cut_file(clip, name):
    """The clip cut at every 7th byte: never described, and with its moov whole refused for its
    samples."""
    data = clip(name).read_bytes()
    moov_end = data.index(b"moov") - 4 + struct.unpack_from(">I", data, data.index(b"moov") - 4)[0]
    path = clip(name).with_name(f"cut-{name}.mp4")
    for length in [*range(0, len(data), 7), len(data) - 1]:
        path.write_bytes(data[:length])
        reason = mp4.describe(path)
        assert isinstance(reason, str), length
        if length >= moov_end:  # a whole moov (faststart): the samples tell
            assert reason == TRUNCATED, length


def test_corruption_never_raises(clip, tmp_path):
    """Random bytes over moov (sizes, types, avcC, the SPS): always a description or a reason,
    never an error."""
    rng = np.random.default_rng(7)
    data = clip("plain").read_bytes()
    moov = data.index(b"moov") - 4
    path = tmp_path / "corrupt.mp4"
    verdicts = set()
    for _ in range(1500):
        damaged = bytearray(data)
        for pos in rng.integers(moov, len(data), rng.integers(1, 4)):
            damaged[pos] = rng.integers(0, 256)
        path.write_bytes(damaged)
        described = mp4.describe(path)
        assert isinstance(described, VideoStream | str)
        verdicts.add(described)
    assert len(verdicts) > 5  # the damage reached different parts of the file


def test_a_clip_with_large_sample_tables(tmp_path):
    """A clip with a large moov (the sample tables of 3000 frames, and an stss of 1500 key
    frames) is admitted whole, and refused once its last sample would end past the file."""
    path = tmp_path / "long.mp4"
    subprocess.run(
        [FFMPEG, "-v", "error", "-f", "lavfi", "-i", "testsrc=size=32x32:rate=100",
         "-frames:v", "3000", *YUV420, "-g", "2", "-movflags", "+faststart", "-y", path],
        check=True,
    )  # fmt: skip
    data = path.read_bytes()
    assert box_chain(data, [*STBL, b"stsz"])[-1][1] == 20 + 4 * 3000
    assert box_chain(data, [*STBL, b"stss"])[-1][1] > 6_000
    assert auto_plan(path) == exact()
    path.write_bytes(data[:-1])
    assert mp4.describe(path) == TRUNCATED


# ---------------------------------------------------------------------------------------------
# Where the samples lie: files cut short, appended to, fragmented, or with patched tables

TRUNCATED = "samples past the end of the file (truncated?)"
STBL = [b"moov", b"trak", b"mdia", b"minf", b"stbl"]
FRAMES = 30
CUTS = {"50%": lambda n: n // 2, "90%": lambda n: n * 9 // 10, "len-1": lambda n: n - 1}


@pytest.fixture(scope="session")
def long_clip(tmp_path_factory):
    """long_clip(name) -> a 30-frame clip: "faststart" (moov before mdat), "plain" (moov after
    it) or "fragmented" (an empty moov with mvex, then moof/mdat pairs)."""
    folder = tmp_path_factory.mktemp("h264-long")
    options = {
        "faststart": ["-movflags", "+faststart"],
        "plain": [],
        "fragmented": ["-movflags", "frag_keyframe+empty_moov"],
    }
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = encode(folder / f"{name}.mp4", [*YUV420, *options[name]], frames=FRAMES)
        return made[name]

    return get


def cut(path: Path, tmp_path: Path, length: int) -> Path:
    out = tmp_path / f"cut-{length}-{path.name}"
    out.write_bytes(path.read_bytes()[:length])
    return out


def declared(path: Path) -> int:
    capture = cv2.VideoCapture(str(path))
    try:
        return int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    finally:
        capture.release()


def declared_and_decoded(path: Path) -> tuple[int, int]:
    """(the frame count cv2 reports from the moov, the frames cv2.VideoCapture decodes)."""
    return declared(path), len(read_frames(path))


def test_whole_clips_are_admitted(long_clip):
    for name in ("faststart", "plain"):
        assert auto_plan(long_clip(name)) == exact()
        assert declared_and_decoded(long_clip(name)) == (FRAMES, FRAMES)


@pytest.mark.parametrize("at", CUTS)
def test_truncated_faststart_clip(long_clip, tmp_path, at):
    path = long_clip("faststart")
    assert top_level_types(path.read_bytes())[-1] == b"mdat"
    assert mp4.describe(cut(path, tmp_path, CUTS[at](path.stat().st_size))) == TRUNCATED


@pytest.mark.parametrize("at", CUTS)
def test_truncated_faststart_clip_loses_frames_in_cv2(long_clip, tmp_path, at):
    """The reason is real: on each cut clip cv2 decodes fewer frames than the moov declares
    (so cv2 ends the video early, and NVDEC would conceal a frame or two more)."""
    path = long_clip("faststart")
    declared, decoded = declared_and_decoded(cut(path, tmp_path, CUTS[at](path.stat().st_size)))
    assert declared == FRAMES and decoded < declared, (declared, decoded)


@pytest.mark.parametrize("at", CUTS)
def test_truncated_clip_with_moov_at_the_end(long_clip, tmp_path, at):
    path = long_clip("plain")
    assert top_level_types(path.read_bytes())[-1] == b"moov"
    reason = mp4.describe(cut(path, tmp_path, CUTS[at](path.stat().st_size)))
    assert reason in ("no moov box", "truncated moov box")


@pytest.mark.parametrize(
    "options, reason",
    [
        ([*X264, "-pix_fmt", "yuv422p"], TRUNCATED),
        (CONVERTED["bt709"][1], TRUNCATED),
        (FORMATS["mpeg4"][1], "codec mp4v"),
    ],
    ids=["422", "bt709", "mpeg4"],
)
def test_a_cut_file_is_refused_for_its_samples_before_its_format(tmp_path, options, reason):
    """A file cut short is not described whatever its format or colour, so --decode auto gives
    the truncation as the reason; only a codec it cannot read is named first."""
    path = encode(tmp_path / "clip.mp4", [*options, "-movflags", "+faststart"])
    short = cut(path, tmp_path, path.stat().st_size - 1)
    assert mp4.describe(short) == reason
    assert auto_plan(short) == reason


def test_fragmented_mp4(long_clip, tmp_path):
    """Refused for its mvex box, and (with mvex removed) for its moof boxes."""
    path = long_clip("fragmented")
    data = path.read_bytes()
    assert b"moof" in top_level_types(data)
    assert mp4.describe(path) == "fragmented MP4"
    chain = box_chain(data, [b"moov", b"mvex"])
    pos, size = chain[-1]
    without = tmp_path / "no-mvex.mp4"
    without.write_bytes(splice(data, chain[:-1], pos, pos + size, b""))
    assert b"mvex" not in without.read_bytes()
    assert mp4.describe(without) == "fragmented MP4"


@pytest.mark.parametrize(
    "extra",
    [
        bytes(np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)),
        b"\0\0\0\x04junk" * 10,  # a box too small for its header
        b"\0\0\0\x10free" + bytes(8),  # a whole box
        b"\xff" * 100,  # a box far longer than the file
    ],
    ids=["random", "malformed-box", "free-box", "long-box"],
)
def test_bytes_appended_after_the_end_are_harmless(long_clip, tmp_path, extra):
    for name in ("faststart", "plain"):
        path = tmp_path / f"appended-{name}.mp4"
        path.write_bytes(long_clip(name).read_bytes() + extra)
        assert auto_plan(path) == exact()
        assert declared_and_decoded(path) == (FRAMES, FRAMES)


def table(data: bytes, kind: bytes) -> tuple[list[tuple[int, int]], int]:
    """The chain of boxes down to the video track's ``kind`` table, and its payload's offset."""
    chain = box_chain(data, [*STBL, kind])
    return chain, chain[-1][0] + 8


def replace_box(data: bytes, kind: bytes, new: bytes) -> bytes:
    """The clip (moov at the end: no sample moves) with its ``kind`` table replaced by ``new``
    (a whole box)."""
    chain, _ = table(data, kind)
    pos, size = chain[-1]
    return splice(data, chain[:-1], pos, pos + size, new)


def moved_chunk(data: bytes, chunk: bytes, short: int, kind: bytes = b"stco") -> bytes:
    """The clip (moov at the end, its samples in one chunk) with ``chunk`` appended after its
    end less its last ``short`` bytes, and the chunk's offset in its ``kind`` table (stco or
    co64) pointing there."""
    patched = bytearray(data)
    _, at = table(data, kind)
    assert struct.unpack_from(">I", patched, at + 4) == (1,)  # one chunk, of the 3 samples
    struct.pack_into(">Q" if kind == b"co64" else ">I", patched, at + 8, len(data))
    return bytes(patched) + chunk[: len(chunk) - short]


def slice_samples(sizes: list[int]) -> bytes:
    """Samples of ``sizes`` bytes whose first is one NAL unit of a slice (describe reads the
    first sample's parameter sets), the rest zeros."""
    return struct.pack(">I", sizes[0] - 4) + b"\x01" + bytes(sum(sizes) - 5)


def test_chunk_offsets_past_the_end(clip, tmp_path):
    """stco and (converted to it) co64 offsets: as written, pointing past the end, and pointing
    at a copy of the samples after the end, whole or a byte short."""
    data = clip("plain").read_bytes()
    _, stco = table(data, b"stco")
    (count,) = struct.unpack_from(">I", data, stco + 4)
    offsets = struct.unpack_from(f">{count}I", data, stco + 8)
    co64 = replace_box(
        data, b"stco", struct.pack(f">I4sII{count}Q", 16 + 8 * count, b"co64", 0, count, *offsets)
    )
    samples = data[offsets[0] : data.index(b"moov") - 4]  # mdat holds the one chunk
    for kind, clean in ((b"stco", data), (b"co64", co64)):
        path = tmp_path / f"{kind.decode()}.mp4"
        path.write_bytes(clean)
        assert auto_plan(path) == exact()
        assert len(read_frames(path)) == 3
        patched = bytearray(clean)
        _, at = table(clean, kind)
        if kind == b"stco":
            struct.pack_into(">I", patched, at + 8, len(clean))
        else:
            struct.pack_into(">Q", patched, at + 8, len(clean) + (1 << 40))
        path.write_bytes(patched)
        assert mp4.describe(path) == TRUNCATED, kind
        for short, planned in ((0, exact()), (1, TRUNCATED)):
            path.write_bytes(moved_chunk(clean, samples, short, kind))
            assert auto_plan(path) == planned, (kind, short)


def test_compact_sample_sizes(clip, tmp_path):
    """stz2 (16-bit sizes here) in place of stsz counts the same bytes."""
    data = clip("plain").read_bytes()
    _, stsz = table(data, b"stsz")
    sizes = struct.unpack_from(">3I", data, stsz + 12)
    assert struct.unpack_from(">II", data, stsz + 4) == (0, 3) and max(sizes) < 1 << 16
    stz2 = struct.pack(">I4sIII3H", 26, b"stz2", 0, 16, 3, *sizes)
    path = tmp_path / "stz2.mp4"
    compact = replace_box(data, b"stsz", stz2)
    path.write_bytes(compact)
    assert auto_plan(path) == exact()
    assert len(read_frames(path)) == 3
    # The last sample as long as itself, moov and one byte more: one byte past the end.
    longer = sizes[2] + len(compact) - (compact.index(b"moov") - 4) + 1
    path.write_bytes(replace_box(data, b"stsz", stz2[:-2] + struct.pack(">H", longer)))
    assert mp4.describe(path) == TRUNCATED
    path.write_bytes(replace_box(data, b"stsz", stz2[:-2] + struct.pack(">H", longer - 1)))
    assert auto_plan(path) == exact()  # ends exactly at the end


@pytest.mark.parametrize(
    "bits, sizes, packed",
    [
        (8, [200, 7, 255], bytes([200, 7, 255])),
        (4, [10, 3, 15], bytes([0xA3, 0xF0])),  # two a byte, the first in the high nibble
        (16, [1000, 1, 300], struct.pack(">3H", 1000, 1, 300)),
    ],
    ids=["8-bit", "4-bit", "16-bit"],
)
def test_stz2_field_sizes(clip, tmp_path, bits, sizes, packed):
    """stz2 with 4-, 8- and 16-bit sizes counts each sample's bytes: a chunk of them that ends
    exactly at the end of the file is planned, one a byte short is not."""
    data = clip("plain").read_bytes()
    stz2 = struct.pack(">I4sIII", 20 + len(packed), b"stz2", 0, bits, len(sizes)) + packed
    compact = replace_box(data, b"stsz", stz2)
    path = tmp_path / "stz2.mp4"
    for short, planned in ((0, exact()), (1, TRUNCATED)):
        path.write_bytes(moved_chunk(compact, slice_samples(sizes), short))
        assert auto_plan(path) == planned, short


def test_constant_sample_size(clip, tmp_path):
    """stsz with one sample_size for all: the chunk holds count * size bytes."""
    data = clip("plain").read_bytes()
    constant = replace_box(data, b"stsz", struct.pack(">I4sIII", 20, b"stsz", 0, 100, 3))
    path = tmp_path / "constant.mp4"
    for short, planned in ((0, exact()), (1, TRUNCATED)):
        path.write_bytes(moved_chunk(constant, slice_samples([100] * 3), short))
        assert auto_plan(path) == planned, short


@pytest.mark.parametrize(
    "kind, at, value, reason",
    [
        (b"stsc", 12, 2, "inconsistent sample tables"),  # 2 samples a chunk: 2 of 3
        (b"stsc", 12, 4, "inconsistent sample tables"),
        (b"stsc", 8, 2, "inconsistent sample tables"),  # the first entry not for chunk 1
        (b"stsc", 4, 2, "truncated stsc box"),  # two entries in a box with one
        (b"stsz", 8, 4, "truncated stsz box"),  # 4 sizes in a box with 3
        (b"stsz", 8, 2, "inconsistent sample tables"),  # 2 samples in a chunk of 3
        (b"stco", 4, 2, "truncated stco box"),
        (b"stco", 4, 0, "inconsistent sample tables"),  # no chunk for stsc's chunk 1
    ],
)
def test_inconsistent_sample_tables(clip, tmp_path, kind, at, value, reason):
    data = bytearray(clip("plain").read_bytes())
    _, start = table(bytes(data), kind)
    struct.pack_into(">I", data, start + at, value)
    path = tmp_path / "inconsistent.mp4"
    path.write_bytes(data)
    assert mp4.describe(path) == reason


def test_missing_sample_tables(clip, tmp_path):
    data = clip("plain").read_bytes()
    for kind in (b"stsz", b"stsc", b"stco"):
        path = tmp_path / f"no-{kind.decode()}.mp4"
        path.write_bytes(replace_box(data, kind, b""))
        assert mp4.describe(path) == f"no {kind.decode()} box"


# ---------------------------------------------------------------------------------------------
# Frame counts (mp4.frame_count, the progress bar's): the sample table's, as cv2 declares them


@pytest.mark.parametrize("name", [*CONVERTED, *(n for n in FORMATS if n not in OPTIONAL)])
def test_frame_count_is_the_count_cv2_declares(clip, name):
    assert mp4.frame_count(clip(name)) == declared(clip(name)) == 3


@pytest.mark.parametrize("name", ["faststart", "plain"])
def test_frame_count_of_longer_clips_appended_to_or_cut_short(long_clip, tmp_path, name):
    path = long_clip(name)
    assert mp4.frame_count(path) == declared(path) == FRAMES
    appended = tmp_path / f"appended-{name}.mp4"
    appended.write_bytes(path.read_bytes() + b"\xff" * 100)
    assert mp4.frame_count(appended) == FRAMES
    short = cut(path, tmp_path, path.stat().st_size // 2)
    # moov first: still whole, and cv2 declares what it says; moov last: gone, nothing to say.
    assert mp4.frame_count(short) == (FRAMES if name == "faststart" else None)
    if name == "faststart":
        assert declared(short) == FRAMES


@pytest.mark.parametrize(
    "options",
    [["-bf", "3"], ["-bf", "0"], ["-vf", "setpts=N*N/TB"]],
    ids=["b-frames", "no-b-frames", "variable-rate"],
)
def test_frame_count_with_b_frames_and_variable_rates(tmp_path, options):
    path = encode(tmp_path / "clip.mp4", [*YUV420, *options], frames=17)
    assert mp4.frame_count(path) == declared(path) == 17


def test_frame_count_of_a_clip_cut_with_an_edit_list(tmp_path):
    """A stream copy from 1 s in keeps the GOP before it, hidden by an edit list: cv2 declares
    the samples but shows fewer frames, so frame_count gives no count."""
    source = encode(tmp_path / "gop.mp4", [*YUV420, "-g", "10", "-bf", "2"], frames=30)
    path = tmp_path / "cut.mp4"
    subprocess.run(
        [FFMPEG, "-v", "error", "-ss", "1.05", "-i", str(source), "-c", "copy", "-y", str(path)],
        check=True,
    )
    assert b"elst" in path.read_bytes()
    assert declared(path) == 20 and len(read_frames(path)) < 20
    assert mp4.frame_count(path) is None


def test_frame_count_of_compact_sample_sizes(clip, tmp_path):
    data = clip("plain").read_bytes()
    _, stsz = table(data, b"stsz")
    sizes = struct.unpack_from(">3I", data, stsz + 12)
    path = tmp_path / "stz2.mp4"
    stz2 = struct.pack(">I4sIII3H", 26, b"stz2", 0, 16, 3, *sizes)
    path.write_bytes(replace_box(data, b"stsz", stz2))
    assert mp4.frame_count(path) == 3


def test_files_whose_tables_do_not_count_the_frames(long_clip, tmp_path):
    """Fragmented (the samples are in moof boxes), no moov, not MP4, missing: None, for cv2."""
    assert mp4.frame_count(long_clip("fragmented")) is None
    no_moov = tmp_path / "no_moov.mp4"
    no_moov.write_bytes(b"\0\0\0\x10ftypisom\0\0\0\0" + b"\0\0\0\x08mdat")
    assert mp4.frame_count(no_moov) is None
    assert mp4.frame_count(DATA / "nvdec_bframes.mkv") is None
    assert mp4.frame_count(tmp_path / "missing.mp4") is None


def test_repository_clips_are_counted_without_a_decoder(monkeypatch):
    """count_frames (the progress bar's total) of MP4s opens no cv2 decoder, but for those whose
    samples are not all shown (counted by cv2, as the Matroska clip is)."""
    from edgecli.inputs.sources import count_frames, discover

    mkv = DATA / "nvdec_bframes.mkv"
    counted = [p for p in sorted(DATA.glob("*.mp4")) if mp4.frame_count(p) is not None]
    assert {p.name for p in DATA.glob("*.mp4")} - {p.name for p in counted} == {
        "nvdec_cut.mp4",
        "nvdec_headless.mp4",
    }
    expected = {p: declared(p) for p in [*counted, mkv]}
    mp4s = [source for p in expected if p != mkv for source in discover(str(p))]
    real = cv2.VideoCapture

    def no_decoder(path, *args):
        assert Path(path) == mkv, f"{path} opened in cv2"
        return real(path, *args)

    monkeypatch.setattr(cv2, "VideoCapture", no_decoder)
    assert count_frames(mp4s * 10) == 10 * sum(n for p, n in expected.items() if p != mkv)
    assert count_frames([*mp4s, *discover(str(mkv))]) == sum(expected.values())


# ---------------------------------------------------------------------------------------------
# What FFmpeg does to a stream's frames beyond decoding them: turns, edits, the first keyframe

# A 64x48 clip of 30 frames with B-frames (libx264's default preset): the mp4 muxer writes an
# edit list whose start is the first frame's composition offset, which drops nothing.
BFRAMES = [*YUV420[:2], "-pix_fmt", "yuv420p", "-g", "10"]


def remux(source: Path, path: Path, *, before=(), after=()) -> Path:
    """``source`` stream-copied into ``path`` (no re-encode), with input options ``before``
    (``-display_rotation``, ``-ss``) and output options ``after`` (bitstream filters)."""
    command = [FFMPEG, "-v", "error", *before, "-i", str(source), "-c", "copy", *after]
    subprocess.run([*command, "-y", str(path)], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def bframes(tmp_path_factory):
    return encode(tmp_path_factory.mktemp("edits") / "bframes.mp4", BFRAMES, frames=30)


def test_bframe_clips_keep_every_sample(bframes):
    """A B-frame clip's edit list drops no frame: cv2 returns one upright frame per sample."""
    assert auto_plan(bframes) == exact()
    frames = read_frames(bframes)
    assert len(frames) == mp4.frame_count(bframes) == 30
    assert frames[0].shape == (48, 64, 3)


def test_a_start_delay_is_admitted(bframes, tmp_path):
    """An empty edit before the media's (``-itsoffset``) only delays it: every frame is kept."""
    delayed = remux(bframes, tmp_path / "delayed.mp4", before=["-itsoffset", "1"])
    assert auto_plan(delayed) == exact()
    assert len(read_frames(delayed)) == mp4.frame_count(delayed) == 30


@pytest.mark.parametrize(
    ("display", "turn", "rotate"),
    [
        (["-display_rotation", "90"], 270, cv2.ROTATE_90_COUNTERCLOCKWISE),
        (["-display_rotation", "180"], 180, cv2.ROTATE_180),
        (["-display_rotation", "-90"], 90, cv2.ROTATE_90_CLOCKWISE),
        (["-display_hflip"], 180, cv2.ROTATE_180),  # cv2 reads a mirror as a half turn
    ],
    ids=["90", "180", "-90", "hflip"],
)
def test_turned_clips_are_planned_with_cv2s_turn(bframes, tmp_path, display, turn, rotate):
    """A display matrix that turns the frames (a phone's portrait clip) or mirrors them is
    planned with the turn cv2 gives them: cv2's frames are the upright ones turned so."""
    turned = remux(bframes, tmp_path / "turned.mp4", before=display)
    assert auto_plan(turned) == exact(rotation=turn)
    upright = read_frames(bframes)
    assert same_frames(read_frames(turned), [cv2.rotate(u, rotate) for u in upright])


def test_clips_cut_by_an_edit_list_are_refused(bframes, tmp_path):
    """``ffmpeg -ss 1 -c copy`` keeps the samples from the keyframe before 1 s and an edit list
    that starts at 1 s: cv2 drops the frames before it, NVDEC would decode them all."""
    cut = remux(bframes, tmp_path / "cut.mp4", before=["-ss", "1.5"])
    assert mp4.describe(cut) == "an edit list that starts after the first frame"
    assert len(read_frames(cut)) < declared(cut)


def test_clips_that_start_without_a_keyframe_are_refused(bframes, tmp_path):
    """A clip whose first packets (its first keyframe) were dropped: cv2 returns no frame before
    the next keyframe, NVDEC would conceal and return them."""
    headless = remux(bframes, tmp_path / "headless.mp4", after=["-bsf:v", "noise=drop=lt(n\\,3)"])
    assert mp4.describe(headless) == "the first frame is not a keyframe"
    assert len(read_frames(headless)) < declared(headless)


def edit_list_clip(tmp_path, bframes, edits: list[tuple[int, int]], version: int = 0) -> Path:
    """``bframes`` with its elst box rewritten to ``edits`` ((duration in the movie's timescale,
    media time) each; the box grows or shrinks, and the boxes holding it with it)."""
    data = bytearray(bframes.read_bytes())
    layout = ">QqhH" if version else ">IihH"
    body = bytes([version, 0, 0, 0]) + struct.pack(">I", len(edits))
    body += b"".join(struct.pack(layout, d, t, 1, 0) for d, t in edits)
    start = data.index(b"elst") - 4
    (old,) = struct.unpack_from(">I", data, start)
    new = struct.pack(">I4s", 8 + len(body), b"elst") + body
    grow = len(new) - old
    for parent in (b"edts", b"trak", b"moov"):  # each holds the elst box: one size each
        at = data.index(parent) - 4
        struct.pack_into(">I", data, at, struct.unpack_from(">I", data, at)[0] + grow)
    data[start : start + old] = new
    assert data.index(b"mdat") < data.index(b"moov"), "moov moved: chunk offsets would be off"
    path = tmp_path / f"edits-{version}-{len(edits)}.mp4"
    path.write_bytes(data)
    return path


def test_edit_lists_are_read_as_ffmpeg_reads_them(bframes, tmp_path):
    """Rewritten edit lists: a clip is planned for NVDEC exactly where cv2 returns one frame a
    sample, in either version of the box; else describe names the edit list."""
    scale = 1000  # mvhd's timescale as this muxer writes it; the clip is 3 s at 10 fps
    full = (3 * scale, _first_composition_time(bframes))
    cases = [
        ([full], 0, exact()),
        ([full], 1, exact()),
        ([(0, -1), full], 0, exact()),  # an empty edit first: a delay
        ([(2 * scale, full[1])], 0, "an edit list that ends before the last frame"),
        ([full, full], 0, "an edit list of 2 edits"),  # cv2 plays the clip twice
    ]
    for edits, version, planned in cases:
        path = edit_list_clip(tmp_path, bframes, edits, version)
        assert auto_plan(path) == planned, edits
        kept = len(read_frames(path))
        assert (kept == 30) == (planned == exact()), (edits, kept)


def _first_composition_time(path: Path) -> int:
    """The clip's edit start as its muxer wrote it (the first frame's composition offset)."""
    data = path.read_bytes()
    at = data.index(b"elst") + 4
    return struct.unpack_from(">i", data, at + 12)[0]


@pytest.mark.parametrize("name", ["nvdec_cut.mp4", "nvdec_headless.mp4"])
def test_clips_that_show_fewer_frames_than_samples_are_not_truncated(name, tmp_path):
    """A clip cut by an edit list or begun without a keyframe holds more samples than cv2 shows
    frames: the CPU decoder takes it whole (no "ended early") and the frame count is unknown."""
    import edgecli

    path = DATA / name
    assert mp4.frame_count(path) is None
    summary = edgecli.process(path, tmp_path / "out", backend="cpu")
    assert summary.failed == [] and summary.frames == len(read_frames(path))
