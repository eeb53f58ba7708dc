"""What edgecli says of damaged inputs: its own one line, never a codec's; damaged JPEG scans
and cut videos reported as other damage is; paths with control characters kept on one line."""

from __future__ import annotations

import os
import subprocess
import zlib

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import native

from .helpers import edgecli_command, invoke
from .media import photo, read_frames

pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from .clips import FFMPEG  # noqa: E402

ENV_TIMEOUT = 120


def run_edgecli(*args) -> subprocess.CompletedProcess:
    """``edgecli ARGS...`` as a process: what the C libraries write to fd 2 is in its stderr."""
    return subprocess.run(
        [*edgecli_command(), *map(str, args)], capture_output=True, text=True, timeout=ENV_TIMEOUT
    )


def cut_png() -> bytes:
    encoded = cv2.imencode(".png", photo(120, 160))[1].tobytes()
    return encoded[: len(encoded) // 2]


def garbled_png() -> bytes:
    encoded = bytearray(cv2.imencode(".png", photo(120, 160))[1].tobytes())
    middle = len(encoded) // 2
    encoded[middle : middle + 20] = b"\x55" * 20
    return bytes(encoded)


def png_with_colour_type_5() -> bytes:
    """A PNG whose IHDR (CRC matched) gives colour type 5, which libpng refuses."""
    encoded = bytearray(cv2.imencode(".png", photo(12, 16))[1].tobytes())
    encoded[25] = 5
    encoded[29:33] = zlib.crc32(encoded[12:29]).to_bytes(4, "big")
    return bytes(encoded)


def png_with_unknown_critical_chunk() -> bytes:
    """A PNG with a critical chunk ``ABCD`` (CRC matched) after its IHDR."""
    encoded = cv2.imencode(".png", photo(12, 16))[1].tobytes()
    extra = b"\0\0\0\x01ABCDx" + zlib.crc32(b"ABCDx").to_bytes(4, "big")
    return encoded[:33] + extra + encoded[33:]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (cut_png, "truncated PNG: the file ends inside its IDAT chunk"),
        (garbled_png, "corrupt PNG: its IDAT chunk fails its CRC check"),
        (png_with_colour_type_5, "corrupt PNG: colour type 5, not one of 0, 2, 3, 4, 6"),
        (png_with_unknown_critical_chunk, "corrupt PNG: unknown critical chunk ABCD"),
    ],
    ids=["truncated", "garbled", "colour-type", "critical-chunk"],
)
def test_a_damaged_png_gives_only_edgecli_line(tmp_path, make, reason):
    """A truncated, garbled or malformed PNG: stderr is edgecli's one Error line, no libpng
    text."""
    (tmp_path / "bad.png").write_bytes(make())
    done = run_edgecli("run", tmp_path / "bad.png", "-o", tmp_path / "out", "--backend", "cpu")
    assert done.returncode == 1
    assert done.stderr == f"Error: {tmp_path / 'bad.png'}: not a decodable image ({reason})\n"


def jpeg_with_stray_marker() -> bytes:
    """A JPEG whose scan has bytes FF 37 (no marker a scan holds) in the middle, EOI intact."""
    encoded = bytearray(cv2.imencode(".jpg", photo(120, 160))[1].tobytes())
    middle = len(encoded) // 2
    encoded[middle : middle + 4] = b"\x12\xff\x37\x40"
    return bytes(encoded)


def jpeg_with_restarts_out_of_order() -> bytes:
    """A JPEG with restart markers, the data from its second to its third one cut out."""
    encoded = cv2.imencode(".jpg", photo(120, 160), [cv2.IMWRITE_JPEG_RST_INTERVAL, 2])[1]
    data = encoded.tobytes()
    scan = data.index(b"\xff\xda")
    second = data.index(b"\xff\xd1", scan)
    third = data.index(b"\xff\xd2", scan)
    return data[:second] + data[third:]


def jpeg_with_restarts_missing() -> bytes:
    """A JPEG with restart markers whose last interval (with its marker) is cut out."""
    encoded = cv2.imencode(".jpg", photo(120, 160), [cv2.IMWRITE_JPEG_RST_INTERVAL, 2])[1]
    data = encoded.tobytes()
    last = max(data.rfind(bytes([0xFF, 0xD0 + k])) for k in range(8))
    return data[:last] + b"\xff\xd9"


def issue_jpeg(garble) -> bytes:
    """A 1920 x 1080 JPEG at quality 95 with 245 bytes of its scan's middle garbled."""
    image = cv2.resize(photo(120, 160), (1920, 1080), interpolation=cv2.INTER_CUBIC)
    encoded = bytearray(cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes())
    middle = len(encoded) // 2
    encoded[middle : middle + 245] = garble
    return bytes(encoded)


def jpeg_with_zeroed_bytes() -> bytes:
    """The issue's case: 245 bytes of a 1080p scan zeroed, which leaves the markers right."""
    return issue_jpeg(bytes(245))


def jpeg_with_random_bytes() -> bytes:
    """245 random bytes over a 1080p scan, none of them FF (so no marker among them)."""
    return issue_jpeg(np.random.default_rng(37).integers(0, 255, 245, dtype=np.uint8).tobytes())


# The reason each gives: libjpeg-turbo's, where edgecli's C extension decodes the scans as it
# does; else what the markers in the scan show (nothing, for the issue's two files).
GARBLED_JPEGS = {
    "stray-marker": (
        jpeg_with_stray_marker,
        "premature end of data segment: marker 0x37 at byte",
        "marker 0x37 inside the image data",
    ),
    "restart-order": (
        jpeg_with_restarts_out_of_order,
        "found marker 0xd2 instead of RST1",
        "restart marker RST2 where RST1 belongs",
    ),
    "restarts-missing": (
        jpeg_with_restarts_missing,
        "found marker 0xd9 instead of RST6",
        "restart markers where its",
    ),
    "zeroed-245": (jpeg_with_zeroed_bytes, "", None),
    "random-245": (jpeg_with_random_bytes, "", None),
}


def garbled_jpeg(kind: str) -> tuple[bytes, str]:
    """The JPEG ``kind`` and the reason edgecli gives for it; a skip where it finds nothing
    wrong without its C extension."""
    make, native_reason, marker_reason = GARBLED_JPEGS[kind]
    reason = native_reason if native.c is not None else marker_reason
    if reason is None:
        pytest.skip("edgecli._native is not built: only libjpeg's Huffman decoder sees this")
    return make(), reason


@pytest.mark.parametrize("kind", GARBLED_JPEGS)
def test_a_jpeg_garbled_mid_scan_fails(tmp_path, kind):
    """A JPEG damaged in its scan, EOI intact: exit 1 and edgecli's line, no libjpeg text."""
    data, reason = garbled_jpeg(kind)
    (tmp_path / "bad.jpg").write_bytes(data)
    done = run_edgecli("run", tmp_path / "bad.jpg", "-o", tmp_path / "out", "--backend", "cpu")
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: {tmp_path / 'bad.jpg'}: corrupt JPEG data (")
    assert reason in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "out" / "bad.png").exists()


@pytest.mark.parametrize("kind", GARBLED_JPEGS)
def test_a_jpeg_garbled_mid_scan_is_skipped_and_counted(tmp_path, kind):
    """Under --on-error skip the garbled JPEG is named, the good one written, exit 3."""
    data, reason = garbled_jpeg(kind)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_bad.jpg").write_bytes(data)
    assert cv2.imwrite(str(folder / "b_good.jpg"), photo(120, 160))
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "--on-error", "skip", "-q")
    assert result.exit_code == 3
    assert f"edgecli: skipped {folder / 'a_bad.jpg'}: corrupt JPEG data (" in result.stderr
    assert reason in result.stderr
    assert result.stderr.splitlines()[-1] == "Error: 1 frame(s) skipped after errors"
    assert sorted(p.name for p in out.glob("*.png")) == ["b_good.png"]


# What a file name holds, and how edgecli prints it.
CONTROL_CHARACTERS = {"newline": ("\n", "\\n"), "return": ("\r", "\\r"), "tab": ("\t", "\\t")}
CONTROL_CHARACTERS["escape"] = ("\x1b", "\\x1b")
CONTROL_CHARACTERS["not-utf8"] = (os.fsdecode(b"\xff"), "\\xff")


@pytest.mark.parametrize("name", CONTROL_CHARACTERS)
def test_a_path_with_control_characters_stays_on_one_line(tmp_path, name):
    """A file named with a control character is named escaped, its Error line one line."""
    char, shown = CONTROL_CHARACTERS[name]
    bad = tmp_path / f"bad{char}[31mname.png"
    bad.write_bytes(b"not a PNG")
    result = invoke("run", bad, "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    escaped = str(tmp_path / f"bad{shown}[31mname.png")
    assert result.stderr == (
        f"Error: {escaped}: not a decodable image (corrupt, truncated or wrong type)\n"
    )


@pytest.mark.parametrize("name", CONTROL_CHARACTERS)
def test_a_skipped_path_with_control_characters_stays_on_one_line(tmp_path, name):
    """Under skip, the warning naming such a file is one line too."""
    char, shown = CONTROL_CHARACTERS[name]
    folder = tmp_path / f"in{char}put"
    folder.mkdir()
    (folder / "bad.png").write_bytes(b"not a PNG")
    result = invoke(
        "run", folder, "-o", tmp_path / "out", "--backend", "cpu", "--on-error", "skip", "-q"
    )
    assert result.exit_code == 3
    warning = f"edgecli: skipped {tmp_path / f'in{shown}put' / 'bad.png'}: not a decodable image"
    lines = result.stderr.splitlines()  # (splitlines splits at \r too)
    assert len(lines) == 2 and lines[0].startswith(warning)
    assert char not in "".join(lines)


CLIP_FRAMES = 100
X264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
ENCODERS = {
    ".mkv": X264,
    ".webm": [
        "-c:v",
        "libvpx-vp9",
        "-deadline",
        "realtime",
        "-cpu-used",
        "8",
        "-pix_fmt",
        "yuv420p",
    ],
    ".mp4": [*X264, "-movflags", "+faststart"],  # the index first: a cut file still opens
    ".avi": ["-c:v", "mjpeg", "-pix_fmt", "yuvj420p"],
}


def make_clip(path, extra=()):
    """CLIP_FRAMES frames of a pan at 10 fps, encoded for ``path``'s container."""
    frames = [np.roll(photo(64, 96), 3 * i, axis=1) for i in range(CLIP_FRAMES)]
    command = [FFMPEG, "-v", "error", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", "96x64"]
    command += ["-r", "10", "-i", "-", *extra, *ENCODERS[path.suffix], "-y", str(path)]
    subprocess.run(command, input=b"".join(f.tobytes() for f in frames), check=True)
    return path


@pytest.fixture(scope="module", params=list(ENCODERS))
def cut_clip(request, tmp_path_factory):
    """A clip cut at half its bytes, and how many frames cv2 decodes of it."""
    folder = tmp_path_factory.mktemp("clips")
    whole = make_clip(folder / f"whole{request.param}").read_bytes()
    cut = folder / f"cut{request.param}"
    cut.write_bytes(whole[: len(whole) // 2])
    decoded = len(read_frames(cut))
    assert 0 < decoded < CLIP_FRAMES
    return cut, decoded


def test_a_cut_video_fails_saying_how_many_frames_it_read(cut_clip, tmp_path):
    """Under fail, a cut video is exit 1, naming the file and the frames read of how many."""
    cut, decoded = cut_clip
    result = invoke("run", cut, "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: {cut} [frame {decoded}]: video ended early: {decoded} of ")
    assert f" {CLIP_FRAMES} frames decoded (truncated" in line


def test_a_cut_video_under_skip_counts_the_missing_frames(cut_clip, tmp_path):
    """Under skip, the frames read are written and every missing one is counted: exit 3."""
    cut, decoded = cut_clip
    out = tmp_path / "out"
    result = invoke("run", cut, "-o", out, "--backend", "cpu", "--on-error", "skip", "-q")
    assert result.exit_code == 3
    lost = CLIP_FRAMES - decoded
    assert result.stderr.splitlines()[-1] == f"Error: {lost} frame(s) skipped after errors"
    assert len(list(out.glob("*.png"))) == decoded
    summary = edgecli.process(cut, tmp_path / "again", backend="cpu", on_error="skip")
    assert [f["frames"] for f in summary.failed] == [lost]


def test_a_cut_video_counts_only_the_missing_frames_selected(cut_clip, tmp_path):
    """With --every 2, only the missing frames --every would have taken are counted."""
    cut, decoded = cut_clip
    out = tmp_path / "out"
    result = invoke(
        "run", cut, "-o", out, "--backend", "cpu", "--on-error", "skip", "-q", "--every", 2
    )
    assert result.exit_code == 3
    lost = len(range(decoded + decoded % 2, CLIP_FRAMES, 2))
    assert result.stderr.splitlines()[-1] == f"Error: {lost} frame(s) skipped after errors"
    assert len(list(out.glob("*.png"))) == len(range(0, decoded, 2))


@pytest.mark.parametrize("suffix", [".mkv", ".webm"])
def test_a_whole_variable_frame_rate_video_is_not_reported(tmp_path, suffix):
    """A complete VFR clip whose duration x rate misleads cv2's frame count runs clean."""
    # Frames 0-49 at 10 fps, 50-99 at 5 fps: cv2 estimates more frames than there are.
    timing = ["-vf", "setpts='if(lt(N,50),N*0.1,5+(N-50)*0.2)/TB'", "-fps_mode", "vfr"]
    clip = make_clip(tmp_path / f"vfr{suffix}", timing)
    capture = cv2.VideoCapture(str(clip))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) != CLIP_FRAMES
    capture.release()
    out = tmp_path / "out"
    result = invoke("run", clip, "-o", out, "--backend", "cpu", "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert len(list(out.glob("*.png"))) == CLIP_FRAMES


def test_a_matroska_file_cut_only_in_its_index_is_not_reported(tmp_path):
    """An .mkv cut at its Cues (the index after the last frame) lost no frame: exit 0."""
    whole = make_clip(tmp_path / "whole.mkv").read_bytes()
    cues = whole.rindex(bytes.fromhex("1C53BB6B"))  # the Cues element's ID
    (tmp_path / "cut.mkv").write_bytes(whole[:cues])
    out = tmp_path / "out"
    result = invoke("run", tmp_path / "cut.mkv", "-o", out, "--backend", "cpu", "-q")
    assert result.exit_code == 0, result.stderr
    assert len(list(out.glob("*.png"))) == CLIP_FRAMES
