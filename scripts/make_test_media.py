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
And clips the way cameras, phones and web downloads make them (issue 38): full range, BT.709
full range in MOV, 1366x768 with an audio track, HEVC 8- and 10-bit, VP9 in WebM and MP4, AV1,
HEVC in Matroska and a turned clip in Matroska (nvdec_full.mp4 ... nvdec_rot90.mkv).
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


# Clips the way cameras, phones, screen recorders and web downloads make them (issue 38):
# name: (width, height, frames, encoder and tag options, ffmpeg input options before the pan).
BT709 = ["-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709"]
X264 = ["-c:v", "libx264", "-preset", "medium", "-bf", "3", "-g", "12", "-crf", "30"]
X265 = ["-c:v", "libx265", "-preset", "fast", "-crf", "32", "-tag:v", "hvc1",
        "-x265-params", "log-level=error:bframes=3:keyint=12"]  # fmt: skip
VP9 = ["-c:v", "libvpx-vp9", "-b:v", "150k", "-g", "12", "-deadline", "good", "-cpu-used", "8"]
AUDIO = ["-f", "lavfi", "-i", "sine=frequency=440:duration=2"]
CAMERA_CLIPS = {
    "nvdec_full.mp4": (176, 144, 24, [*X264, "-color_range", "pc"], []),
    "nvdec_bt709_full.mov": (176, 144, 24, [*X264, *BT709, "-color_range", "pc"], []),
    "nvdec_1366x768.mp4": (1366, 768, 6, [*X264, *BT709, "-c:a", "aac", "-shortest"], AUDIO),
    "nvdec_hevc.mp4": (320, 180, 24, [*X265, *BT709], []),
    "nvdec_hevc10.mp4": (320, 180, 12, [*X265, "-pix_fmt", "yuv420p10le"], []),
    "nvdec_vp9.webm": (320, 180, 24, VP9, []),
    "nvdec_av1.mp4": (320, 180, 12, ["-c:v", "libsvtav1", "-preset", "12", "-crf", "50"], []),
}
# name: (source, ffmpeg input options, output options) for stream copies of the clips above.
CAMERA_COPIES = {
    "nvdec_vp9.mp4": ("nvdec_vp9.webm", [], []),
    "nvdec_hevc.mkv": ("nvdec_hevc.mp4", [], []),
    "nvdec_rot90.mkv": ("nvdec_250x142.mp4", ["-display_rotation", "90"], []),
    # Cut at its second keyframe, an open GOP's CRA picture: the pictures after it that refer
    # to frames before the cut are in the file, and every decoder drops them.
    "nvdec_hevc_cra.mkv": ("nvdec_hevc.mp4", ["-ss", "0.5"], []),
}


def camera_clips() -> None:
    photo = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    for name, (width, height, frames, options, inputs) in CAMERA_CLIPS.items():
        path = OUT.parent / name
        command = [
            ffmpeg, "-y", "-loglevel", "error", *inputs, "-f", "rawvideo", "-pix_fmt", "bgr24",
            "-s", f"{width}x{height}", "-r", "24", "-i", "-",
            *(["-map", f"{len(inputs) // 4}:v", "-map", "0:a"] if inputs else []),
            "-pix_fmt", "yuv420p", *options, str(path),
        ]  # fmt: skip
        subprocess.run(command, input=b"".join(pan(photo, width, height, frames)), check=True)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")
    for name, (source, before, after) in CAMERA_COPIES.items():
        path = OUT.parent / name
        command = [ffmpeg, "-y", "-loglevel", "error", *before, "-i", str(OUT.parent / source)]
        subprocess.run([*command, "-c", "copy", *after, str(path)], check=True)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
    nvdec_clips()
    remuxed_clips()
    camera_clips()
