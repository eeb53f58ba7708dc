"""Make tests/data/pan_h264.mp4: a 24-frame H.264 clip of the sample camera pan.

OpenCV's wheels cannot encode H.264, so this uses the ffmpeg binary that the
imageio-ffmpeg wheel carries (dev-only; not a dependency of edgecli):

    pip install imageio-ffmpeg && python scripts/make_test_media.py

The clip is 322x238 (H.264 4:2:0 needs even sides; neither is a multiple of 16).
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


if __name__ == "__main__":
    main()
