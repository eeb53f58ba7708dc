"""The yuv420p -> BGR reference against cv2.VideoCapture on y4m frames and H.264 clips."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from edgecli.decode import yuv

# The clips are made and decoded to planes by imageio-ffmpeg's ffmpeg (a dev extra, so make
# test has it; the GPU host has not, and runs only the gpu-marked tests).
pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from tests.clips import decode_planes, encode, probe  # noqa: E402
from tests.media import REPO, photo, read_frames  # noqa: E402


@pytest.fixture(scope="session")
def cache_home(tmp_path_factory):
    """A private XDG_CACHE_HOME for the whole session, so the table is measured once here."""
    home = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def table(cache_home):
    return yuv.load_table()


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


def test_table_is_cached_per_build(table, cache_home):
    """The measured table lands in $XDG_CACHE_HOME/edgecli/ and a second load reads it back."""
    files = list((cache_home / "edgecli").iterdir())
    assert files == [yuv.cache_path()]
    assert np.array_equal(yuv.load_table(), table)


def test_cached_table_is_used_and_damage_is_repaired(tmp_path, monkeypatch, table):
    """load_table returns whatever table the cache holds, and re-measures over a damaged file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = yuv.cache_path()
    path.parent.mkdir(parents=True)
    np.save(path, np.zeros(yuv.TABLE_SHAPE, np.uint8))
    assert not yuv.load_table().any()
    path.write_bytes(path.read_bytes()[:1000])
    assert np.array_equal(yuv.load_table(), table)
    assert np.array_equal(np.load(path), table)
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the closed form is swscale's x86 SIMD arithmetic",
)
def test_measured_table_equals_closed_form(table):
    """All 2**24 conversions cv2 measures equal swscale's 16-bit fixed-point BT.601 formula."""
    assert np.array_equal(table, yuv.closed_form_table())


def test_blue_and_red_depend_on_one_chroma_plane_each(table):
    """B is a function of (Y, U) and R of (Y, V): the factored form is exact."""
    assert (table[..., 0] == table[:, :, :1, 0]).all()
    assert (table[..., 2] == table[:, :1, :, 2]).all()


@pytest.mark.parametrize(
    "height, width",
    [(64, 256), (6, 250), (4, 1918), (4, 1920), (18, 33), (2, 1), (2, 3), (10, 7)],
)
def test_y4m_frames_depend_only_on_each_pixel_and_its_block(tmp_path, rng, table, height, width):
    """cv2's BGR of random planes is table[Y, U, V] of each pixel and its 2x2 block's chroma."""
    frames = [random_planes(rng, height, width) for _ in range(2)]
    decoded = read_frames(write_y4m(tmp_path / "r.y4m", frames))
    assert len(decoded) == 2
    for planes, frame in zip(frames, decoded, strict=True):
        assert np.array_equal(yuv.yuv420_to_bgr(*planes, table), frame)


def test_odd_heights_are_not_per_pixel_and_are_refused(tmp_path, rng, table):
    """With an odd height cv2 mixes neighbouring chroma rows, so the reference refuses it."""
    y, u, v = random_planes(rng, 5, 64)
    u2 = u.copy()
    u2[1] = 255 - u2[1]  # the chroma of luma rows 2 and 3
    first = read_frames(write_y4m(tmp_path / "a.y4m", [(y, u, v)]))[0]
    second = read_frames(write_y4m(tmp_path / "b.y4m", [(y, u2, v)]))[0]
    changed_rows = np.flatnonzero((first != second).any(axis=(1, 2))).tolist()
    assert changed_rows != [2, 3]  # what a per-pixel conversion would give
    with pytest.raises(ValueError, match="height 5 is odd"):
        yuv.yuv420_to_bgr(y, u, v, table)


def noise(rng, height, width):
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def gradient(height, width):
    blue = np.broadcast_to(np.linspace(0, 255, width)[None, :], (height, width))
    green = np.broadcast_to(np.linspace(255, 0, height)[:, None], (height, width))
    return np.stack([blue, green, (blue + green) / 2], -1).astype(np.uint8)


@pytest.mark.parametrize("height, width", [(142, 250), (1080, 1918), (18, 34), (2, 2), (66, 130)])
def test_h264_clips_at_odd_sizes_match_cv2(tmp_path, rng, table, height, width):
    """FFmpeg's planes of H.264 clips (noise, gradient, photo) convert to cv2's frames exactly."""
    frames = [noise(rng, height, width), gradient(height, width), photo(height, width, seed=1)]
    clip = encode(tmp_path / "c.mp4", frames)
    assert yuv.reproducible(probe(clip))
    planes, decoded = decode_planes(clip), read_frames(clip)
    assert len(planes) == len(decoded) == 3
    for (y, u, v), frame in zip(planes, decoded, strict=True):
        assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, table), frame)


def test_pan_clip_matches_cv2(table):
    """Every frame of tests/data/pan_h264.mp4 converts from its planes to cv2's frame exactly."""
    clip = REPO / "tests" / "data" / "pan_h264.mp4"
    assert yuv.reproducible(probe(clip))
    planes, decoded = decode_planes(clip), read_frames(clip)
    assert len(planes) == len(decoded) == 24
    for (y, u, v), frame in zip(planes, decoded, strict=True):
        assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, table), frame)


def test_nv12_matches_planar(rng, table):
    """Interleaving U and V as NVDEC does gives the same BGR as the planar reference."""
    y, u, v = random_planes(rng, 6, 9)
    uv = np.stack([u, v], -1).reshape(3, 10)
    assert np.array_equal(yuv.nv12_to_bgr(y, uv, table), yuv.yuv420_to_bgr(y, u, v, table))


@pytest.mark.parametrize(
    "args, pix_fmt, matrix, full_range",
    [
        (["-colorspace", "bt709"], "yuv420p", "bt709", False),
        (
            ["-x264-params", "colormatrix=bt709:colorprim=bt709:transfer=bt709"],
            "yuv420p",
            "bt709",
            False,
        ),
        (["-colorspace", "bt2020nc"], "yuv420p", "bt2020", False),
        (["-color_range", "pc"], "yuv420p", "bt601", True),
        ([], "yuvj420p", "bt601", True),
    ],
)
def test_tagged_streams_follow_their_tags_and_are_not_reproducible(
    tmp_path, rng, table, args, pix_fmt, matrix, full_range
):
    """cv2 honours a BT.709/BT.2020 matrix or full range: the BT.601 table misses, the tag's
    closed form hits, and reproducible() keeps such streams on the CPU."""
    clip = encode(tmp_path / "t.mp4", [noise(rng, 32, 48)], pix_fmt=pix_fmt, args=args)
    assert not yuv.reproducible(probe(clip))
    (y, u, v), frame = decode_planes(clip)[0], read_frames(clip)[0]
    assert not np.array_equal(yuv.yuv420_to_bgr(y, u, v, table), frame)
    tagged = yuv.closed_form_table(matrix, full_range=full_range)
    assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, tagged), frame)


@pytest.mark.parametrize("args", [["-colorspace", "bt470bg"], ["-colorspace", "smpte170m"]])
def test_bt601_tags_are_reproducible(tmp_path, rng, table, args):
    """Streams tagged with a BT.601 matrix convert like untagged ones."""
    clip = encode(tmp_path / "t.mp4", [noise(rng, 32, 48)], args=args)
    assert yuv.reproducible(probe(clip))
    (y, u, v), frame = decode_planes(clip)[0], read_frames(clip)[0]
    assert np.array_equal(yuv.yuv420_to_bgr(y, u, v, table), frame)


@pytest.mark.parametrize("pix_fmt", ["yuv420p10le", "yuv422p", "yuv444p"])
def test_other_pixel_formats_are_not_reproducible(tmp_path, rng, pix_fmt):
    """10-bit, 4:2:2 and 4:4:4 streams stay on the CPU."""
    clip = encode(tmp_path / "t.mp4", [noise(rng, 16, 16)], pix_fmt=pix_fmt)
    info = probe(clip)
    assert info["pix_fmt"] == pix_fmt
    assert not yuv.reproducible(info)


def test_reproducible_needs_an_even_height():
    """An odd (coded) height is refused even for untagged yuv420p."""
    assert yuv.reproducible({"pix_fmt": "yuv420p", "height": 1080, "coded_height": 1088})
    assert not yuv.reproducible({"pix_fmt": "yuv420p", "height": 17})
    assert not yuv.reproducible({"pix_fmt": "yuv420p"})


def test_bad_planes_are_refused_with_the_shapes(table):
    """Planes of the wrong size or type raise ValueError naming what was expected."""
    y = np.zeros((4, 5), np.uint8)
    with pytest.raises(ValueError, match=r"u: expected uint8 \(2, 3\) for a 5x4 frame"):
        yuv.yuv420_to_bgr(y, np.zeros((2, 2), np.uint8), np.zeros((2, 3), np.uint8), table)
    with pytest.raises(ValueError, match="y: expected a 2-D uint8 plane"):
        yuv.yuv420_to_bgr(y.astype(np.uint16), y, y, table)
    with pytest.raises(ValueError, match="table: expected uint8"):
        yuv.yuv420_to_bgr(y, y[:2, :3], y[:2, :3], table[:2])
