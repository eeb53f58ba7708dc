"""edgecli.decode.nvdec: which videos NVDEC decodes, exactly or not, and how they are converted
(no GPU: the stream descriptions and the driver's answers are stand-ins here; the files'
own descriptions are tests/test_streams.py's)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgecli.decode import engines, nvdec, yuv
from edgecli.decode.streams import Colour, VideoStream

from .helpers import DATA

CLIP = Path("clip.mp4")
UNCHECKED = "NVDEC's frame order there is unchecked"
H264 = VideoStream("h264", "mp4", "4:2:0", 8, True, Colour(), 0)


def decodes_all(codec: str, chroma: str, depth: int) -> str | None:
    return None


def plan(stream: VideoStream | str, exact_only: bool = True, missing=decodes_all):
    return nvdec.plan_video(CLIP, missing, exact_only, describe_stream=lambda path: stream)


@pytest.fixture(autouse=True)
def every_conversion_verified(monkeypatch):
    """yuv.verified's answer for this OpenCV build is its own test's (test_yuv.py)."""
    monkeypatch.setattr(yuv, "verified", lambda conversion: True)


@pytest.mark.parametrize(
    ("colour", "conversion"),
    [
        (Colour(), yuv.Conversion("bt601", False)),
        (Colour(matrix=1, primaries=1, transfer=1), yuv.Conversion("bt709", False)),
        (Colour(matrix=1, full_range=True), yuv.Conversion("bt709", True)),
        (Colour(matrix=6, full_range=True), yuv.Conversion("bt601", True)),
        (Colour(matrix=9, full_range=False, primaries=1), yuv.Conversion("bt2020", False)),
    ],
)
@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_h264_in_mp4_is_exact_in_every_admitted_colour_and_turn(colour, conversion, rotation):
    """8-bit 4:2:0 H.264 in MP4 goes to NVDEC under auto with the stream's conversion and
    turn, whatever its matrix, range or rotation."""
    got = plan(replace(H264, colour=colour, rotation=rotation))
    assert got == nvdec.NvdecPlan(conversion, 8, rotation) and got.exact


@pytest.mark.parametrize("codec", ["h264", "hevc", "vp9"])
@pytest.mark.parametrize("container", ["mp4", "matroska"])
@pytest.mark.parametrize("rotation", [0, 90])
def test_camera_and_web_codecs_and_containers_are_exact_packet_by_packet(
    codec, container, rotation
):
    """H.264, HEVC and VP9 in MP4 and in Matroska go to NVDEC under auto; all but H.264 in MP4
    (which the SimpleDecoder gives in cv2's order, and cuts at keyframes) go packet by
    packet, where the SimpleDecoder repeats or drops frames."""
    stream = replace(H264, codec=codec, container=container, colour=Colour(matrix=1),
                     rotation=rotation)  # fmt: skip
    got = plan(stream)
    assert got == nvdec.NvdecPlan(
        yuv.Conversion("bt709", False), 8, rotation, None, (codec, container) != ("h264", "mp4")
    )


def test_a_truncated_matroska_file_stays_on_the_cpu(tmp_path):
    """A Matroska file shorter than its Segment declares is decoded by the CPU, whose error
    says how many frames it lost; the whole file goes to NVDEC."""
    whole = DATA / "nvdec_bframes.mkv"
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    assert nvdec.plan_video(cut, decodes_all, True) == (
        f"truncated: the file has {cut.stat().st_size} of the {whole.stat().st_size} bytes "
        "its header declares"
    )
    assert isinstance(nvdec.plan_video(whole, decodes_all, True), nvdec.NvdecPlan)


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (replace(H264, depth=10), "10-bit"),
        (replace(H264, progressive=False), "interlaced"),
        (replace(H264, colour=Colour(primaries=9)), "primaries 9 (bt2020)"),
        (replace(H264, colour=Colour(matrix=1, transfer=16)), "transfer 16 (smpte2084)"),
    ],
)
def test_what_is_not_exact_goes_to_nvdec_under_gpu_only(stream, reason):
    """A stream NVDEC decodes but whose frames may not be cv2's stays on the CPU under auto,
    with the reason, and goes to NVDEC under --decode gpu, marked inexact."""
    assert plan(stream) == reason
    got = plan(stream, exact_only=False)
    assert isinstance(got, nvdec.NvdecPlan) and got.inexact == reason and not got.exact
    assert got.depth == stream.depth and got.rotation == stream.rotation


def test_a_conversion_this_build_does_not_confirm_is_not_exact(monkeypatch):
    """Where yuv.verified says cv2 converts otherwise on this build, auto leaves it to the CPU."""
    monkeypatch.setattr(yuv, "verified", lambda conversion: conversion.matrix != "bt709")
    bt709 = replace(H264, colour=Colour(matrix=1))
    assert plan(bt709) == "bt709-limited is not cv2's conversion on this OpenCV build"
    assert plan(bt709, exact_only=False).conversion == yuv.Conversion("bt709", False)
    assert plan(H264).exact


@pytest.mark.parametrize(
    ("colour", "nearest"),
    [
        (Colour(matrix=9, primaries=9, transfer=16), yuv.Conversion("bt2020", False)),
        (Colour(matrix=1, full_range=True, primaries=12), yuv.Conversion("bt709", True)),
        (Colour(matrix=0), yuv.Conversion("bt601", False)),
        (Colour(matrix=14, full_range=True), yuv.Conversion("bt601", True)),
    ],
)
def test_gpu_converts_what_cv2_maps_by_its_matrix_and_range(colour, nearest):
    """Under --decode gpu a colour cv2 gamut- or tone-maps, or a matrix swscale has no
    coefficients for, converts by its matrix and range alone."""
    got = plan(replace(H264, colour=colour), exact_only=False)
    assert got.conversion == nearest and not got.exact


@pytest.mark.parametrize("exact_only", [True, False])
@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        ("the first frame is not a keyframe", "the first frame is not a keyframe"),
        (replace(H264, container="avi"), f"h264 in avi: {UNCHECKED}"),
        (replace(H264, chroma="4:2:2"), "4:2:2 chroma"),
        (replace(H264, chroma="4:4:4"), "4:4:4 chroma"),
    ],
)
def test_what_nvdec_cannot_give_stays_on_the_cpu_in_both_modes(stream, reason, exact_only):
    """A file whose frames NVDEC would not give in cv2's number and order, or whose planes the
    kernel does not convert, is the CPU's under either mode."""
    assert plan(stream, exact_only) == reason


@pytest.mark.parametrize("exact_only", [True, False])
def test_the_drivers_answer_decides_the_codec(exact_only):
    """A codec, sampling or depth the GPU's decoder does not take (AV1 on Hopper) stays on the
    CPU with the driver's reason, in either mode; the driver is asked what the stream is."""
    asked = []

    def no_av1(codec, chroma, depth):
        asked.append((codec, chroma, depth))
        return "NVDEC on this GPU does not decode av1 4:2:0 8-bit" if codec == "av1" else None

    av1 = replace(H264, codec="av1")
    assert plan(av1, exact_only, no_av1) == "NVDEC on this GPU does not decode av1 4:2:0 8-bit"
    assert asked == [("av1", "4:2:0", 8)]


def test_a_description_that_raises_leaves_the_video_to_the_cpu():
    """A reader's bug on a strange file costs a CPU decode, never the run."""

    def broken(path):
        raise IndexError("a case the reader missed")

    assert nvdec.plan_video(CLIP, decodes_all, True, broken) == "unreadable stream (IndexError)"


codes = st.one_of(st.none(), st.integers(0, 30))


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(["h264", "hevc", "vp9", "av1", "vp8", "mpeg4"]),
    container=st.sampled_from(["mp4", "matroska", "avi"]),
    chroma=st.sampled_from(["4:0:0", "4:2:0", "4:2:2", "4:4:4"]),
    depth=st.sampled_from([8, 10, 12]),
    progressive=st.booleans(),
    colour=st.builds(Colour, codes, st.one_of(st.none(), st.booleans()), codes, codes),
    rotation=st.sampled_from([0, 90, 180, 270]),
)
def test_auto_admits_only_what_every_rule_admits(
    codec, container, chroma, depth, progressive, colour, rotation
):
    """Over every description: auto gives a plan only for 8-bit 4:2:0 progressive streams of a
    checked codec and container whose colour cv2 converts by the closed form, and the plan is
    exact; --decode gpu gives one for every 4:2:0 stream NVDEC's container takes."""
    stream = VideoStream(codec, container, chroma, depth, progressive, colour, rotation)
    auto, gpu = plan(stream), plan(stream, exact_only=False)
    admitted = (
        (codec, container) in nvdec.ORDER_CHECKED
        and chroma == "4:2:0"
        and depth == 8
        and progressive
        and isinstance(yuv.conversion_for(colour), yuv.Conversion)
    )
    assert isinstance(auto, nvdec.NvdecPlan) == admitted
    if admitted:
        assert auto.exact and auto.conversion == yuv.conversion_for(colour)
        assert auto.packets == ((codec, container) not in nvdec.SIMPLE_DECODER)
    takes = container in nvdec.NVDEC_CONTAINERS and chroma == "4:2:0"
    assert isinstance(gpu, nvdec.NvdecPlan) == takes
    if takes:
        assert gpu.rotation == rotation and gpu.depth == depth
        assert gpu.exact == admitted


def test_codecs_nvdec_never_decodes_are_not_asked_of_the_driver(monkeypatch):
    """ProRes, or 4:1:1, is refused by name without loading the driver's NVDEC library."""
    monkeypatch.setattr(engines, "_query_caps", None)  # any call would fail
    assert engines.nvdec_missing(0, "prores", "4:2:2", 10) == (
        "NVDEC does not decode prores 4:2:2 10-bit"
    )
    assert engines.nvdec_missing(0, "h264", "4:1:1", 8) == "NVDEC does not decode h264 4:1:1 8-bit"


def test_without_the_drivers_nvdec_library_the_cpu_decodes(monkeypatch):
    """Where libnvcuvid is not installed the driver cannot be asked: that is the reason, and
    the query's layout is the SDK's (CUVIDDECODECAPS, 88 bytes)."""
    real = engines.ctypes.CDLL

    def no_nvcuvid(name, *args, **kwargs):
        if "nvcuvid" in str(name):
            raise OSError(f"{name}: cannot open shared object file")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(engines.ctypes, "CDLL", no_nvcuvid)
    monkeypatch.setattr(engines, "_caps", {})
    reason = engines.nvdec_missing(0, "hevc", "4:2:0", 8)
    assert reason == "the driver's NVDEC library (libnvcuvid.so.1) is not installed"
    assert engines.ctypes.sizeof(engines._DecodeCaps) == 88
