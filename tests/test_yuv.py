"""swscale's yuv420p -> BGR, which streams it covers, and its check, against cv2.VideoCapture on
hand-made Matroska and y4m frames and H.264, HEVC and VP9 clips."""

from __future__ import annotations

import json
import platform
import subprocess
import threading

import cv2
import numpy as np
import pytest

from edgecli.decode import yuv
from edgecli.decode.streams import Colour

# The clips are made and decoded to planes by imageio-ffmpeg's ffmpeg (a dev extra, so make
# test has it; the GPU host has not, and runs only the gpu-marked tests).
pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from tests.clips import FFMPEG, decode_planes, encode, probe  # noqa: E402
from tests.media import REPO, photo, read_frames  # noqa: E402

x86_only = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the closed form is swscale's x86 SIMD arithmetic",
)

CONVERSIONS = yuv.CONVERSIONS
# FFmpeg's names of the admitted matrices (setparams' colorspace), by H.273 code point.
MATRIX_NAMES = {1: "bt709", 4: "fcc", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m", 9: "bt2020nc"}


@pytest.fixture(scope="session")
def cache_home(tmp_path_factory):
    """A private XDG_CACHE_HOME for the whole session, so each conversion is checked once."""
    home = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        mp.setattr(yuv, "_verdicts", {})
        yield home


@pytest.fixture(scope="session")
def verdicts(cache_home):
    """verified() of every conversion, checked once for the session (about 5 s)."""
    return {conversion: yuv.verified(conversion) for conversion in CONVERSIONS}


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache folder and no verdicts in memory: verified() must check again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(yuv, "_verdicts", {})
    return tmp_path


def write_y4m(path, frames):
    height, width = frames[0][0].shape
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F25:1 Ip A1:1 C420jpeg\n".encode())
        for planes in frames:
            f.write(b"FRAME\n")
            for plane in planes:
                f.write(plane.tobytes())
    return path


def random_planes(rng, height, width):
    cw, ch = (width + 1) // 2, (height + 1) // 2
    return (
        rng.integers(0, 256, (height, width), dtype=np.uint8),
        rng.integers(0, 256, (ch, cw), dtype=np.uint8),
        rng.integers(0, 256, (ch, cw), dtype=np.uint8),
    )


def noise(rng, height, width):
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def gradient(height, width):
    blue = np.broadcast_to(np.linspace(0, 255, width)[None, :], (height, width))
    green = np.broadcast_to(np.linspace(255, 0, height)[:, None], (height, width))
    return np.stack([blue, green, (blue + green) / 2], -1).astype(np.uint8)


def encode_tagged(path, frames, codec, **params):
    """Encode BGR frames with ``codec``, the yuv420p frames relabelled (not converted) with
    setparams' ``params`` (colorspace, range, color_primaries, color_trc)."""
    height, width = frames[0].shape[:2]
    labels = "".join(f",setparams={k}={v}" for k, v in params.items())
    command = [FFMPEG, "-v", "error", "-f", "rawvideo", "-pix_fmt", "bgr24"]
    command += ["-s", f"{width}x{height}", "-r", "10", "-i", "-", "-vf", "format=yuv420p" + labels]
    command += ["-c:v", codec, "-y", str(path)]
    subprocess.run(command, input=b"".join(f.tobytes() for f in frames), check=True)
    return path


def assert_cv2_frames(clip, conversion):
    """Every frame cv2 reads from ``clip`` is ``conversion`` of FFmpeg's planes, exactly."""
    planes, decoded = decode_planes(clip), read_frames(clip)
    assert len(planes) == len(decoded) > 0
    for (y, u, v), frame in zip(planes, decoded, strict=True):
        assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, conversion), frame)


@pytest.mark.parametrize(
    "conversion, coefficients",
    [
        (yuv.Conversion("bt601", False), (9539, 128, 13075, -6660, -3209, 16525)),
        (yuv.Conversion("bt601", True), (8192, 0, 11485, -5850, -2819, 14516)),
        (yuv.Conversion("bt709", False), (9539, 128, 14686, -4366, -1747, 17305)),
        (yuv.Conversion("bt709", True), (8192, 0, 12901, -3835, -1534, 15201)),
        (yuv.Conversion("bt2020", False), (9539, 128, 13752, -5328, -1535, 17545)),
    ],
    ids=lambda c: c.name if isinstance(c, yuv.Conversion) else None,
)
def test_coefficients_are_swscales(conversion, coefficients):
    """The kernel's six integers are those swscale's sws_setColorspaceDetails computes."""
    assert conversion.coefficients() == coefficients


def test_unknown_matrix_is_refused():
    """A Conversion of a matrix swscale has no coefficients for raises, naming it."""
    with pytest.raises(ValueError, match="matrix 'ycgco': expected one of bt601, bt709"):
        yuv.Conversion("ycgco")


@x86_only
def test_every_conversion_is_verified_and_cached(verdicts, cache_home):
    """On this build all ten conversions pass the check, and the verdicts land in one file."""
    assert all(verdicts.values()), [c.name for c, ok in verdicts.items() if not ok]
    assert list((cache_home / "edgecli").iterdir()) == [yuv.cache_path()]
    cached = json.loads(yuv.cache_path().read_text())
    assert cached == {c.name: True for c in CONVERSIONS}


def test_blue_and_red_depend_on_one_chroma_plane_each():
    """B is a function of (Y, U) and R of (Y, V): the factored form is exact."""
    table = yuv.closed_form_table("bt709")
    assert (table[..., 0] == table[:, :, :1, 0]).all()
    assert (table[..., 2] == table[:, :1, :, 2]).all()


@pytest.mark.parametrize(
    "height, width",
    [(64, 256), (6, 250), (4, 1918), (4, 1920), (18, 33), (2, 1), (2, 3), (10, 7)],
)
def test_y4m_frames_depend_only_on_each_pixel_and_its_block(tmp_path, rng, height, width):
    """cv2's BGR of random planes is the closed form of each pixel and its 2x2 block's chroma."""
    frames = [random_planes(rng, height, width) for _ in range(2)]
    decoded = read_frames(write_y4m(tmp_path / "r.y4m", frames))
    assert len(decoded) == 2
    for planes, frame in zip(frames, decoded, strict=True):
        assert np.array_equal(yuv.yuv420_to_bgr(*planes), frame)


def test_odd_heights_are_not_per_pixel_and_are_refused(tmp_path, rng):
    """With an odd height cv2 mixes neighbouring chroma rows, so the reference refuses it."""
    y, u, v = random_planes(rng, 5, 64)
    u2 = u.copy()
    u2[1] = 255 - u2[1]  # the chroma of luma rows 2 and 3
    first = read_frames(write_y4m(tmp_path / "a.y4m", [(y, u, v)]))[0]
    second = read_frames(write_y4m(tmp_path / "b.y4m", [(y, u2, v)]))[0]
    changed_rows = np.flatnonzero((first != second).any(axis=(1, 2))).tolist()
    assert changed_rows != [2, 3]  # what a per-pixel conversion would give
    with pytest.raises(ValueError, match="height 5 is odd"):
        yuv.yuv420_to_bgr(y, u, v)


@pytest.mark.parametrize("height, width", [(142, 250), (1080, 1918), (18, 34), (2, 2), (66, 130)])
def test_h264_clips_at_odd_sizes_match_cv2(tmp_path, rng, height, width):
    """FFmpeg's planes of H.264 clips (noise, gradient, photo) convert to cv2's frames exactly."""
    frames = [noise(rng, height, width), gradient(height, width), photo(height, width, seed=1)]
    clip = encode(tmp_path / "c.mp4", frames)
    assert_cv2_frames(clip, yuv.Conversion())


def test_pan_clip_matches_cv2():
    """Every frame of tests/data/pan_h264.mp4 converts from its planes to cv2's frame exactly."""
    clip = REPO / "tests" / "data" / "pan_h264.mp4"
    assert len(read_frames(clip)) == 24
    assert_cv2_frames(clip, yuv.Conversion())


def test_nv12_matches_planar(rng):
    """Interleaving U and V as NVDEC does gives the same BGR as the planar reference."""
    y, u, v = random_planes(rng, 6, 9)
    uv = np.stack([u, v], -1).reshape(3, 10)
    conversion = yuv.Conversion("bt709", True)
    assert np.array_equal(
        yuv.nv12_to_bgr(y, uv, conversion), yuv.yuv420_to_bgr(y, u, v, conversion)
    )


# Every admitted matrix x range x encoder, but FCC in VP9: its colour_space field has no FCC
# (a WebM whose container says FCC decodes to frames of an unspecified matrix).
CLIP_CASES = [
    (codec, suffix, matrix, full_range)
    for codec, suffix in (("libx264", "mp4"), ("libx265", "mp4"), ("libvpx-vp9", "webm"))
    for matrix in (None, *MATRIX_NAMES)
    for full_range in (False, True)
    if not (codec == "libvpx-vp9" and matrix == 4)
]


@pytest.mark.parametrize("codec, suffix, matrix, full_range", CLIP_CASES)
def test_tagged_clips_convert_as_conversion_for_says(
    tmp_path, rng, codec, suffix, matrix, full_range
):
    """For each admitted matrix and range, cv2's frames of H.264, HEVC and VP9 clips so tagged
    are the closed form of the conversion conversion_for picks, and no other conversion's."""
    params = {"range": "pc" if full_range else "tv"}
    if matrix is not None:
        params["colorspace"] = MATRIX_NAMES[matrix]
    frames = [noise(rng, 34, 48), photo(34, 48, seed=2)]
    clip = encode_tagged(tmp_path / f"t.{suffix}", frames, codec, **params)
    assert probe(clip)["color_range"] in (("pc",) if full_range else ("tv", None))
    conversion = yuv.conversion_for(Colour(matrix, full_range))
    assert conversion == yuv.Conversion(yuv.MATRICES[matrix], full_range)
    assert_cv2_frames(clip, conversion)
    (y, u, v), frame = decode_planes(clip)[0], read_frames(clip)[0]
    others = [c for c in CONVERSIONS if c != conversion]
    assert not any(np.array_equal(yuv.yuv420_to_bgr(y, u, v, c), frame) for c in others)


ADMITTED = (
    [Colour(m, False) for m in yuv.MATRICES]
    + [Colour(1, True, primaries=p) for p in yuv.PRIMARIES]
    + [Colour(6, False, transfer=t) for t in yuv.TRANSFERS]
)
# The matrices and log transfers cv2 cannot read at all; of the gamuts and HDR transfers it
# maps (each costs cv2 5 s on two cores), BT.2020 and PQ.
REFUSED = (
    [Colour(m, False) for m in (8, 10, 11, 12, 13, 14)]
    + [Colour(1, False, primaries=9), Colour(6, True, transfer=16)]
    + [Colour(6, True, transfer=t) for t in (9, 10)]
)


def colour_id(colour):
    if isinstance(colour, Colour):
        return f"m{colour.matrix}-p{colour.primaries}-t{colour.transfer}"
    return None  # pytest's own id


@pytest.mark.parametrize("colour", ADMITTED, ids=colour_id)
def test_admitted_tags_convert_by_the_closed_form(tmp_path, rng, colour):
    """Every matrix, primaries and transfer code point conversion_for admits: cv2's frame of a
    clip so tagged (an odd width) is the closed form of the conversion it names."""
    y, u, v = random_planes(rng, 34, 63)
    yuv.write_matroska(tmp_path / "t.mkv", y, u, v, colour)
    conversion = yuv.conversion_for(colour)
    frame = yuv.read_first_frame(tmp_path / "t.mkv")
    assert np.array_equal(frame, yuv.yuv420_to_bgr(y, u, v, conversion))


@pytest.mark.parametrize("colour", REFUSED, ids=colour_id)
def test_refused_tags_do_not_convert_by_the_closed_form(tmp_path, rng, colour):
    """Each code point conversion_for refuses for cv2's sake (wide gamut, HDR or log
    transfers, other matrices): cv2 reads no frame, or one that is no conversion's closed
    form; conversion_for names the code point."""
    y, u, v = random_planes(rng, 34, 64)
    yuv.write_matroska(tmp_path / "t.mkv", y, u, v, colour)
    frames = read_frames(tmp_path / "t.mkv")
    assert not any(
        np.array_equal(frame, yuv.yuv420_to_bgr(y, u, v, c))
        for frame in frames[:1]
        for c in CONVERSIONS
    )
    reason = yuv.conversion_for(colour)
    assert isinstance(reason, str) and "reserved" not in reason


@pytest.mark.parametrize(
    "colour, reason",
    [
        (Colour(9, False, 9, 14), "primaries 9 (bt2020)"),
        (Colour(9, False, 9, 16), "primaries 9 (bt2020)"),
        (Colour(1, False, 1, 18), "transfer 18 (arib-std-b67)"),
        (Colour(10, False), "matrix 10 (bt2020c)"),
        (Colour(3, False), "matrix 3 (reserved)"),
        (Colour(0, True), "matrix 0 (gbr)"),
        (Colour(1, False, 0), "primaries 0 (reserved)"),
    ],
)
def test_conversion_for_names_what_it_does_not_reproduce(colour, reason):
    """A stream's colour that is not converted by the closed form, or is reserved, gets the
    reason naming the code point."""
    assert yuv.conversion_for(colour) == reason


@pytest.mark.parametrize(
    "codec, colour",
    [
        ("libx264", Colour(1, False, 1, 1)),  # HD camera
        ("libx265", Colour(5, False, 5, 5)),  # PAL
        ("libx264", Colour(6, True, 6, 6)),  # phone, full range
        ("libvpx-vp9", Colour(1, False, 1, 13)),  # screen recording, sRGB transfer
    ],
    ids=colour_id,
)
def test_camera_tags_convert_by_the_closed_form(tmp_path, rng, codec, colour):
    """Clips tagged as cameras, phones and screen recorders tag them (matrix, primaries and
    transfer alike) convert by the closed form of the conversion conversion_for picks."""
    names = {1: "bt709", 5: "bt470bg", 6: "smpte170m"}
    trc = {1: "bt709", 5: "bt470bg", 6: "smpte170m", 13: "iec61966-2-1"}[colour.transfer]
    params = {"colorspace": names[colour.matrix], "color_primaries": names[colour.primaries]}
    params.update(color_trc=trc, range="pc" if colour.full_range else "tv")
    clip = encode_tagged(tmp_path / "t.mkv", [noise(rng, 34, 48)], codec, **params)
    assert_cv2_frames(clip, yuv.conversion_for(colour))


def test_ten_bit_chroma_reaches_beyond_its_block(tmp_path, rng):
    """cv2 converts yuv420p10le by the scaled path: one chroma sample changes pixels rows
    away from its 2x2 block, so no per-pixel conversion of NVDEC's P016 planes can be exact."""
    y = rng.integers(0, 1024, (32, 64), dtype=np.uint16)
    u, v = rng.integers(0, 1024, (2, 16, 32), dtype=np.uint16)
    frames = []
    for u_plane in (u, np.where(np.arange(16)[:, None] == 5, u ^ 0x200, u)):
        raw = b"".join(p.astype("<u2").tobytes() for p in (y, u_plane, v))
        path = tmp_path / f"ten{len(frames)}.mkv"
        command = [FFMPEG, "-v", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p10le"]
        command += ["-s", "64x32", "-i", "-", "-c:v", "ffv1", "-y", str(path)]
        subprocess.run(command, input=raw, check=True)
        frames.append(read_frames(path)[0])
    changed_rows = np.flatnonzero((frames[0] != frames[1]).any(axis=(1, 2))).tolist()
    assert changed_rows[0] < 10 and changed_rows[-1] > 11  # beyond rows 10 and 11


def test_bad_planes_are_refused_with_the_shapes():
    """Planes of the wrong size or type raise ValueError naming what was expected."""
    y = np.zeros((4, 5), np.uint8)
    with pytest.raises(ValueError, match=r"u: expected uint8 \(2, 3\) for a 5x4 frame"):
        yuv.yuv420_to_bgr(y, np.zeros((2, 2), np.uint8), np.zeros((2, 3), np.uint8))
    with pytest.raises(ValueError, match="y: expected a 2-D uint8 plane"):
        yuv.yuv420_to_bgr(y.astype(np.uint16), y, y)
    with pytest.raises(ValueError, match="table: expected uint8"):
        yuv.yuv420_to_bgr(y, y[:2, :3], y[:2, :3], np.zeros((2, 256, 256, 3), np.uint8))


@pytest.mark.parametrize("conversion", CONVERSIONS, ids=lambda c: c.name)
def test_table_and_closed_form_agree(rng, conversion):
    """Converting by the closed form's table gives what converting by the conversion gives."""
    y, u, v = random_planes(rng, 6, 9)
    table = yuv.closed_form_table(conversion.matrix, full_range=conversion.full_range)
    assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, table), yuv.yuv420_to_bgr(y, u, v, conversion))


# --- verified(): the check, its cache, its failures --------------------------------------------


def test_wrong_coefficients_fail_the_check(fresh, monkeypatch):
    """A coefficient set off by one in one place is caught, and verified() says False."""
    conversion = yuv.Conversion("bt709", False)
    right = conversion.coefficients()
    monkeypatch.setattr(yuv.Conversion, "coefficients", lambda self: (*right[:5], right[5] + 1))
    assert yuv.verified(conversion) is False
    assert json.loads(yuv.cache_path().read_text()) == {"bt709-limited": False}


class UnreadableCapture:
    def __init__(self, *args):
        pass

    def read(self):
        return False, None

    def release(self):
        pass


def raising_capture(*args):
    raise cv2.error("no FFmpeg backend")


@x86_only
@pytest.mark.parametrize("capture", [UnreadableCapture, raising_capture])
def test_a_failed_check_is_false_and_not_cached(fresh, monkeypatch, capture):
    """Where cv2 cannot read the measuring clip, verified() returns False without raising,
    caches nothing, and a later process (memory cleared) checks again."""
    conversion = yuv.Conversion("bt601", True)
    with monkeypatch.context() as broken:
        broken.setattr(yuv.cv2, "VideoCapture", capture)
        assert yuv.verified(conversion) is False
        assert yuv.verified(conversion) is False  # remembered for the process
    assert not (fresh / "edgecli").exists()
    monkeypatch.setattr(yuv, "_verdicts", {})
    assert yuv.verified(conversion) is True


def test_cached_verdicts_are_used_and_damage_is_repaired(fresh, monkeypatch):
    """verified() takes a verdict from the cache file without checking; over a damaged file
    it checks and writes the file whole again."""
    calls = []
    monkeypatch.setattr(yuv, "check", lambda c: calls.append(c) or True)
    path = yuv.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"fcc-full": False}))
    assert yuv.verified(yuv.Conversion("fcc", True)) is False
    assert calls == []
    path.write_text('{"fcc-full": tr')
    monkeypatch.setattr(yuv, "_verdicts", {})
    assert yuv.verified(yuv.Conversion("fcc", True)) is True
    assert calls == [yuv.Conversion("fcc", True)]
    assert json.loads(path.read_text()) == {"fcc-full": True}
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_threads_asking_at_once_share_one_check(fresh, monkeypatch):
    """Sixteen threads asking for the same conversion at once get one check's verdict."""
    calls = []
    started = threading.Barrier(16)

    def slow_check(conversion):
        calls.append(conversion)
        threading.Event().wait(0.2)
        return True

    monkeypatch.setattr(yuv, "check", slow_check)
    results = []

    def ask():
        started.wait()
        results.append(yuv.verified(yuv.Conversion("smpte240m", False)))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 16
    assert len(calls) == 1
