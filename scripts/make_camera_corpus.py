"""Make a corpus of clips the way cameras, phones, screen recorders and web downloads make them
(issue 38), for checking on the GPU host that every one NVDEC takes gives cv2's frames:
``benchmarks/nvdec_order.py`` and ``scripts/device_decode.sh`` read it. About 1.5 MB, so it
can be carried; the host has no encoder.

    python scripts/make_camera_corpus.py --out bench_data/corpus

H.264 (BT.601 untagged, BT.709, full range, both; 854x480, 1366x768 in MOV, an AAC track),
stream copies turned 90/180/270 and mirrored (``-display_rotation``, ``-display_hflip``), in
MP4 and Matroska, B-frames throughout; HEVC 8-bit (hev1 in MP4, hvc1 BT.709 in MOV, full
range in Matroska) and Main10; VP9 (WebM, BT.709 WebM, full range in MP4) and profile 2; AV1;
a variable frame rate in Matroska; and files cut short (MP4 with moov first, MKV, WebM).
Needs imageio-ffmpeg's ffmpeg (libx264, libx265, libvpx-vp9, libsvtav1) and scikit-image.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import cv2
import imageio_ffmpeg
import numpy as np
from skimage import data

FFMPEG = imageio_ffmpeg.get_ffmpeg_exe()
X264 = ["-c:v", "libx264", "-preset", "fast", "-crf", "24", "-bf", "3", "-g", "30"]
X265 = ["-c:v", "libx265", "-preset", "fast", "-crf", "28",
        "-x265-params", "log-level=error:bframes=3:keyint=30"]  # fmt: skip
VP9 = ["-c:v", "libvpx-vp9", "-b:v", "300k", "-g", "30", "-deadline", "realtime",
       "-cpu-used", "8"]  # fmt: skip
BT709 = ["-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709"]
FULL = ["-color_range", "pc"]
AUDIO = ["-f", "lavfi", "-i", "sine=frequency=440:duration=3"]

# name: (width, height, frames, encoder options, input options before the frames)
ENCODED = {
    "h264_bt709.mp4": (854, 480, 40, [*X264, *BT709], []),
    "h264_full.mp4": (640, 360, 40, [*X264, *FULL], []),
    "h264_bt709_full.mp4": (640, 360, 40, [*X264, *BT709, *FULL], []),
    "h264_1366.mov": (1366, 768, 20, [*X264, *BT709], []),
    "h264_audio.mp4": (640, 360, 60, [*X264, *BT709, "-c:a", "aac", "-shortest"], AUDIO),
    "h264_src.mp4": (480, 270, 45, X264, []),
    "hevc_main.mp4": (854, 480, 40, X265, []),
    "hevc_bt709.mov": (640, 360, 40, [*X265, "-tag:v", "hvc1", *BT709], []),
    "hevc_full.mkv": (640, 360, 40, [*X265, *BT709, *FULL], []),
    "hevc_main10.mp4": (640, 360, 20, [*X265, *BT709, "-pix_fmt", "yuv420p10le"], []),
    "vp9.webm": (854, 480, 40, VP9, []),
    "vp9_bt709.webm": (640, 360, 40, [*VP9, *BT709], []),
    "vp9_full.mp4": (640, 360, 40, [*VP9, *FULL], []),
    "vp9_p2.webm": (320, 180, 20, [*VP9, "-pix_fmt", "yuv420p10le"], []),
    "av1.mp4": (320, 180, 20, ["-c:v", "libsvtav1", "-preset", "12"], []),
    "h264_vfr.mkv": (320, 240, 40, [*X264, "-fps_mode", "vfr", "-vf",
                                    "setpts='N/30/TB+if(gt(N,20),0.5/TB,0)'"], []),
}  # fmt: skip
# name: (source, input options, output options): stream copies, as phones and remuxes make them
COPIES = {
    **{
        f"h264_rot{turn}.mp4": ("h264_src.mp4", ["-display_rotation", str(turn)], [])
        for turn in (90, 180, 270)
    },
    "h264_hflip.mp4": ("h264_src.mp4", ["-display_hflip"], []),
    "h264_rot90.mkv": ("h264_src.mp4", ["-display_rotation", "90"], []),
    "h264_bframes.mkv": ("h264_src.mp4", [], []),
    "h264_bt709.mkv": ("h264_bt709.mp4", [], []),
    "hevc_rot90.mp4": ("hevc_main.mp4", ["-display_rotation", "90"], []),
    "faststart.mp4": ("h264_bt709.mp4", [], ["-movflags", "+faststart"]),
}  # fmt: skip
# name: (source, the share of its bytes kept): files cut short, as a copy or a recording stopped
CUT = {"trunc.mkv": ("h264_bframes.mkv", 0.6), "trunc.webm": ("vp9.webm", 0.6),
       "trunc_moovfirst.mp4": ("faststart.mp4", 0.6)}  # fmt: skip


def pan(width: int, height: int, frames: int) -> bytes:
    """Raw BGR frames of a window panning across a photograph."""
    photo = np.ascontiguousarray(data.astronaut()[:, :, ::-1])
    big = cv2.resize(photo, (2 * max(width, height),) * 2)
    out = []
    for i in range(frames):
        x = i * (big.shape[1] - width) // max(frames - 1, 1)
        y = i * (big.shape[0] - height) // max(2 * frames - 1, 1)
        out.append(np.ascontiguousarray(big[y : y + height, x : x + width]).tobytes())
    return b"".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench_data/corpus"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    quiet = {**os.environ, "SVT_LOG": "1"}  # SVT-AV1's banner on stderr
    for name, (width, height, frames, options, inputs) in ENCODED.items():
        command = [FFMPEG, "-v", "error", "-y", *inputs, "-f", "rawvideo", "-pix_fmt", "bgr24",
                   "-s", f"{width}x{height}", "-r", "30", "-i", "-", "-pix_fmt", "yuv420p",
                   *(["-map", "1:v", "-map", "0:a"] if inputs else []), *options,
                   str(args.out / name)]  # fmt: skip
        subprocess.run(command, input=pan(width, height, frames), check=True, env=quiet)
    for name, (source, before, after) in COPIES.items():
        command = [FFMPEG, "-v", "error", "-y", *before, "-i", str(args.out / source)]
        subprocess.run([*command, "-c", "copy", *after, str(args.out / name)], check=True)
    for name, (source, share) in CUT.items():
        whole = (args.out / source).read_bytes()
        (args.out / name).write_bytes(whole[: int(len(whole) * share)])
    total = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{args.out}: {len(list(args.out.iterdir()))} clips, {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
