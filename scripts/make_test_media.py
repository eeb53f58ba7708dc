"""Make tests/data/pan_h264.mp4 (a 24-frame H.264 clip of the sample camera pan) and the small
clips the GPU-decoding tests compare NVDEC with cv2.VideoCapture on (tests/data/nvdec_*).

OpenCV's wheels cannot encode H.264, so this uses the ffmpeg binary that the
imageio-ffmpeg wheel carries (dev-only; not a dependency of edgecli):

    pip install imageio-ffmpeg && python scripts/make_test_media.py

The clip is 322x238 (H.264 4:2:0 needs even sides; neither is a multiple of 16). The NVDEC
clips: odd sizes (1918x1080, whose coded height 1088 is cropped; 250x142; 66x18, near NVDEC's
smallest), B-frames and short GOPs (so segments start between keyframes), a BT.709-tagged clip
and a Matroska one (both of which stay on the CPU decoder under --decode auto); and three stream
copies of nvdec_250x142.mp4 that cv2 shows otherwise than decoded (a portrait phone clip's
display matrix, a cut by edit list, a first keyframe dropped), which stay on the CPU too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import imageio_ffmpeg
import numpy as np
from skimage import data

OUT = Path("tests/data/pan_h264.mp4")
HEIGHT, WIDTH, FRAMES = 238, 322, 24


def main() -> None:
    photo = np.ascontiguousarray(data.rocket()[:, :, ::-1])
    rows, cols = photo.shape[:2]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
        "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{WIDTH}x{HEIGHT}", "-r", "24", "-i", "-",
        "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "23", "-preset", "medium",
        "-movflags", "+faststart", str(OUT),
    ]  # fmt: skip
    frames = []
    for i in range(FRAMES):
        x = round(i * (cols - WIDTH) / (FRAMES - 1))
        y = (rows - HEIGHT) // 2
        frames.append(photo[y : y + HEIGHT, x : x + WIDTH].tobytes())
    subprocess.run(command, input=b"".join(frames), check=True)
    capture = cv2.VideoCapture(str(OUT))
    count = 0
    while capture.read()[0]:
        count += 1
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e3:.0f} kB, {count} frames decoded by OpenCV)")


# name: (width, height, frames, extra x264/ffmpeg arguments)
NVDEC_CLIPS = {
    "nvdec_1918x1080.mp4": (1918, 1080, 12, ["-g", "4", "-bf", "3", "-crf", "34"]),
    "nvdec_250x142.mp4": (250, 142, 90, ["-g", "12", "-bf", "2", "-crf", "30"]),
    "nvdec_66x18.mp4": (66, 18, 12, ["-bf", "2", "-crf", "30"]),
    "nvdec_bt709.mp4": (
        96,
        64,
        8,
        ["-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-crf", "30"],
    ),  # fmt: skip
    "nvdec_bframes.mkv": (160, 96, 20, ["-g", "10", "-bf", "3", "-crf", "30"]),
}


def pan(photo: np.ndarray, width: int, height: int, frames: int) -> list[bytes]:
    """A camera pan across ``photo`` (scaled to cover the frame), as raw BGR frames."""
    rows, cols = photo.shape[:2]
    scale = max(height / rows, 1.5 * width / cols)
    photo = cv2.resize(photo, (round(cols * scale) + 1, round(rows * scale) + 1))
    rows, cols = photo.shape[:2]
    out = []
    for i in range(frames):
        x = round(i * (cols - width) / max(frames - 1, 1))
        y = (rows - height) // 2
        out.append(np.ascontiguousarray(photo[y : y + height, x : x + width]).tobytes())
    return out


def nvdec_clips() -> None:
    photo = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    for name, (width, height, frames, extra) in NVDEC_CLIPS.items():
        path = OUT.parent / name
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
            "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}", "-r", "24",
            "-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "medium", *extra,
            *(["-movflags", "+faststart"] if path.suffix == ".mp4" else []), str(path),
        ]  # fmt: skip
        subprocess.run(command, input=b"".join(pan(photo, width, height, frames)), check=True)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


# name: (ffmpeg input options, output options) for a stream copy of nvdec_250x142.mp4
REMUXED_CLIPS = {
    "nvdec_rotated.mp4": (["-display_rotation", "90"], []),  # as a phone held upright writes
    "nvdec_cut.mp4": (["-ss", "1.6"], []),  # an edit list that starts mid-GOP
    "nvdec_headless.mp4": ([], ["-bsf:v", "noise=drop=lt(n\\,3)"]),  # no first keyframe
}


def remuxed_clips() -> None:
    source = OUT.parent / "nvdec_250x142.mp4"
    for name, (before, after) in REMUXED_CLIPS.items():
        path = OUT.parent / name
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", *before,
            "-i", str(source), "-c", "copy", *after, "-movflags", "+faststart", str(path),
        ]  # fmt: skip
        subprocess.run(command, check=True)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
    nvdec_clips()
    remuxed_clips()
