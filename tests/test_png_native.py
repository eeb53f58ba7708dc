"""The CPU's own PNG decoder (edgecli._native.png_decode, through
edgecli.decode.cpu.decode_image): on every PNG of the tests' corpora (every colour type, bit
depth, filter, zlib level and strategy, odd sizes, files written by libpng through cv2, by
Pillow and by FFmpeg), decode_image's frame is cv2.imdecode's, array for array, and the gray,
gray+alpha, RGB and RGBA ones of 8 and 16 bits come from the C decoder; on corrupt and cut
variants, it gives a frame only where cv2 gives the same one, and libpng's word where the C
decoder gives none (an Adler-32, a zlib header, data past the last row), each with zlib, with
the deflate package's libdeflate and with the system's."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import zlib
from array import array
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli import native
from edgecli.decode import cpu
from edgecli.decode.png_layout import read_layout
from edgecli.errors import FrameError

from .png_corpus import corpus, mutations, own_files

pytestmark = pytest.mark.skipif(
    native.c is None and not os.environ.get("CI"), reason="edgecli._native is not built here"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, bytes]:
    return corpus(tmp_path_factory.mktemp("pngs"))


def cv2_frame(data: bytes):
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def natively(data: bytes) -> bool:
    """Whether the C decoder takes the file (gray, gray+alpha, RGB, RGBA of 8 or 16 bits)."""
    layout = read_layout(data)
    return cpu.png_frame(data, layout) is not None


def test_every_file_decodes_to_cv2s_frame(files):
    native_files = 0
    for name, data in files.items():
        expected = cv2_frame(data)
        got = cpu.decode_image(Path(f"{name}.png"), data, 10**9)
        assert np.array_equal(got, expected), name
        native_files += natively(data)
    # Every gray, gray+alpha, RGB and RGBA file of 8 or 16 bits the corpora hold, but the
    # interlaced, turned and animated ones.
    eligible = [
        name for name, data in files.items()
        if (layout := read_layout(data)).bit_depth in (8, 16)
        and layout.colour_type in (0, 2, 4, 6) and not layout.interlaced
        and not layout.animated and layout.orientation == 1
    ]  # fmt: skip
    sixteen = [name for name in eligible if read_layout(files[name]).bit_depth == 16]
    assert native_files == len(eligible) > 40 and len(sixteen) > 10


def test_corrupt_files_get_cv2s_frame_or_a_refusal():
    """Bit flips (CRCs made to match, so the inflater meets them), a wrong Adler-32, a wrong
    zlib header, cuts: where the C decoder gives a frame it is cv2's; where it gives none, the
    file goes to cv2, whose frame (libpng decodes past some damage with a warning) or refusal
    it is."""
    own = own_files()
    names = [n for n in sorted(own) if "8-bit" in n and ("RGB" in n or "gray" in n)]
    names += [n for n in sorted(own) if "16-bit" in n and ("RGB" in n or "gray" in n)][:6]
    checked = natively_decoded = 0
    for index, name in enumerate(names):
        for variant, data in mutations(own[name], index):
            try:
                got = cpu.decode_image(Path("x.png"), data, 10**9)
            except FrameError:
                continue  # refused: by the chunk walk before any decoder, or by cv2 itself
            expected = cv2_frame(data)
            assert expected is not None and np.array_equal(got, expected), f"{name}: {variant}"
            checked += 1
            natively_decoded += natively(data)
    # Those decoded at all: bit flips that change no pixel, an ancillary chunk's CRC; nearly
    # all the rest is refused, by the walk or by cv2 (over 700 variants).
    assert checked >= 5 and natively_decoded >= 1


INFLATERS = {  # png_inflater's word: (hide the deflate package, hide the system's library)
    "libdeflate (the deflate package's)": (False, True),
    "libdeflate (the system's)": (True, False),
    "zlib": (True, True),
}


@pytest.mark.parametrize("inflater", INFLATERS)
def test_every_inflater_gives_the_same_frames_and_verdicts(tmp_path, inflater):
    """With the deflate package's libdeflate, the system's, or zlib alone (the others hidden
    from the loader: zlib inflates a row a call as libpng does), the C decoder and the chunk
    walk (whose CRCs the same library checks) give the same frames, take the same files and
    refuse the same damage, on every own file and its corrupt and cut variants."""
    hide_package, hide_system = INFLATERS[inflater]
    if native.c is None:
        pytest.skip("edgecli._native is not built here")
    if not hide_package and native.deflate_library() is None:
        pytest.fail("the deflate package, a dependency of edgecli, is not installed")
    if not hide_system and ctypes.util.find_library("deflate") is None:
        pytest.skip("this system has no libdeflate")
    code = (
        "import sys, pickle\n"
        + ("sys.modules['deflate'] = None\n" if hide_package else "")
        + "from tests.test_png_native import verdicts\n"
        "from edgecli import native\n"
        "sys.stdout.buffer.write(pickle.dumps((native.c.png_inflater(), verdicts())))\n"
    )
    env = dict(os.environ, LD_PRELOAD="")
    if hide_system:
        env["LD_LIBRARY_PATH"] = str(tmp_path)
        (tmp_path / "libdeflate.so.0").write_bytes(b"not a library")  # dlopen fails on it
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=env, check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    import pickle

    taken, theirs = pickle.loads(done.stdout)
    assert taken == inflater
    ours = verdicts()
    assert theirs.keys() == ours.keys()
    for key, (frame, reason, native_frame) in theirs.items():
        here_frame, here_reason, here_native = ours[key]
        assert reason == here_reason, key
        assert (frame is None) == (here_frame is None), key
        assert (native_frame is None) == (here_native is None), key
        if frame is not None:
            assert np.array_equal(frame, here_frame), key
    assert sum(native_frame is not None for _, _, native_frame in theirs.values()) > 30


def verdicts() -> dict:
    """Each own file's and its variants' (frame, refusal, the C decoder's frame), by name."""
    own, found = own_files(), {}
    names = [n for n in sorted(own) if "8-bit" in n and ("RGB" in n or "gray" in n)][:8]
    cases = [(name, "whole", data) for name, data in sorted(own.items())]
    for index, name in enumerate(names):
        cases += [(name, variant, data) for variant, data in mutations(own[name], index)]
    for name, variant, data in cases:
        try:
            frame, reason = cpu.decode_image(Path("x.png"), data, 10**9), None
        except FrameError as exc:
            frame, reason = None, exc.reason
        try:
            native_frame = cpu.png_frame(data, read_layout(data))
        except Exception:  # refused by the walk: no C decode
            native_frame = None
        found[f"{name}: {variant}"] = (frame, reason, native_frame)
    return found


def spans(*pairs) -> bytes:
    """(offset, length) ``pairs`` packed as read_layout keeps them, uint64 end to end."""
    return array("Q", [n for pair in pairs for n in pair]).tobytes()


@pytest.mark.skipif(native.c is None, reason="edgecli._native is not built here")
def test_the_c_decoder_refuses_what_it_cannot_read():
    """Arguments no layout gives are errors; streams that are no image's come back False."""
    decode = native.c.png_decode
    data = bytes(range(256)) * 4
    out = np.empty((2, 3, 3), np.uint8)
    with pytest.raises(ValueError, match="outside the data"):
        decode(data, spans((1000, 100)), 3, 2, 3, 8, out)
    with pytest.raises(ValueError, match="outside the data"):
        decode(data, array("Q", (0, 10, 1020, 5)).tobytes(), 3, 2, 3, 8, out)
    with pytest.raises(ValueError, match="not whole"):
        decode(data, array("Q", (0, 10, 20)).tobytes(), 3, 2, 3, 8, out)
    with pytest.raises(ValueError, match="height x width x 3"):
        decode(data, spans((0, 10)), 4, 2, 3, 8, out)
    for channels, depth in ((0, 8), (5, 8), (3, 12), (3, 1)):
        with pytest.raises(ValueError, match="channels"):
            decode(data, spans((0, 10)), 3, 2, channels, depth, out)
    with pytest.raises(TypeError):
        decode(data, spans((0, 10)), 3, 2, 3, out)
    rng = np.random.default_rng(5)
    for length in (0, 1, 2, 64, 1000):
        stream = spans((0, length)) if length else spans()
        junk = rng.integers(0, 256, 1000, np.uint8).tobytes()
        assert decode(junk, stream, 3, 2, 3, 8, out) is False
    # A stream whose header names a 32 KB window and is damaged, and one whole but too short.
    whole = zlib.compress(bytes(2 * (1 + 9)))
    assert decode(whole, spans((0, len(whole))), 3, 2, 3, 8, out) is True
    out[:] = 0xA5
    halves = array("Q", (0, 7, 7, len(whole) - 7)).tobytes()
    assert decode(whole, halves, 3, 2, 3, 8, out) is True
    assert not out.any()
    assert decode(whole[:-5], spans((0, len(whole) - 5)), 3, 2, 3, 8, out) is False
    assert decode(whole, spans((0, len(whole))), 3, 3, 3, 8, np.empty((3, 3, 3), np.uint8)) is False
