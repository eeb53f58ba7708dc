"""Make the end-to-end benchmark's input (issue 4): a camera pan over real photographs.

Photographs that scikit-image ships in its wheel (no download) are tiled onto a canvas
twice the frame size in each direction; a frame-sized window pans across it (left to right,
down and back up), so consecutive frames differ as they do in footage. Each frame is
written three ways, under OUT (default ``bench_data/``, which git ignores):

    OUT/pan.mp4        H.264 (libx264, yuv420p, CRF 20), every frame
    OUT/pan_head.mp4   the first fifth of the frames, same settings: the short run that
                       benchmarks/e2e.py subtracts to remove start-up cost on video
    OUT/pan_bt709.mp4  pan.mp4 tagged BT.709 in its SPS (stream-copied: the same pictures)
    OUT/pan_hevc.mp4   the same frames in HEVC (libx265, yuv420p, CRF 24)
    OUT/pan_rot90.mp4  pan.mp4 with a portrait phone's display matrix (stream-copied)
    OUT/jpeg/          frame_0000.jpg, ... (quality 90)
    OUT/png/           frame_0000.png, ... (OpenCV's default PNG settings)

and, alone, with ``--long-copies N``: OUT/pan_long.mp4 (``--long-name``), pan.mp4 N times
over in one video, stream-copied in plain Python (``concat_mp4.py``; no FFmpeg needed).

OpenCV's wheels cannot encode H.264, so the videos need the ffmpeg binary of the
imageio-ffmpeg wheel (dev-only; not a dependency of edgecli). The JPEG and PNG folders need
only OpenCV and scikit-image, so they can be made on a machine without imageio-ffmpeg:

    python scripts/make_bench_media.py                      # everything, 240 frames 1920x1080
    python scripts/make_bench_media.py --only video         # only the .mp4 files
    python scripts/make_bench_media.py --only jpeg --only png --out bench_data
    python scripts/make_bench_media.py --frames 12 --size 640x360 --out /tmp/bd
    python scripts/make_bench_media.py --long-copies 40 --long-name pan_long40.mp4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
from concat_mp4 import concat

KINDS = ("video", "jpeg", "png")
JPEG_QUALITY = 90
HEVC_CRF = 24  # about the bitrate of x264's CRF 20 at the same quality
VIDEO_FPS = 24
# The canvas is a grid of photo cells, twice the frame size in each direction.
GRID_ROWS, GRID_COLS = 4, 6


COLOR_PHOTOS = (
    "astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "retina",
    "immunohistochemistry", "stereo_motorcycle",
)  # fmt: skip
GRAY_PHOTOS = ("camera", "coins", "moon", "brick", "grass", "page")


def photographs() -> list[np.ndarray]:
    """Photographs bundled with scikit-image, as 8-bit BGR (gray ones replicated).

    One that this scikit-image cannot load without a download is left out, with a warning:
    the frames then differ from another machine's (the video made elsewhere keeps its own).
    """
    from skimage import data  # only here: the long video is made where it is not installed

    photos = []
    for name in COLOR_PHOTOS + GRAY_PHOTOS:
        try:
            image = getattr(data, name)()
        except Exception as exc:  # missing in this version, or needs a download
            print(f"warning: skimage.data.{name} unavailable ({exc}); left out", file=sys.stderr)
            continue
        if name == "stereo_motorcycle":  # (left, right, disparity): two photographs
            photos += [np.ascontiguousarray(view[:, :, ::-1]) for view in image[:2]]
        elif image.ndim == 2:
            photos.append(cv2.cvtColor(image, cv2.COLOR_GRAY2BGR))
        else:
            photos.append(np.ascontiguousarray(image[:, :, ::-1]))  # RGB -> BGR
    if len(photos) < 4:
        raise SystemExit("fewer than 4 of scikit-image's photographs could be loaded")
    return photos


def cover(photo: np.ndarray, height: int, width: int) -> np.ndarray:
    """``photo`` scaled to cover height x width (aspect kept), centre-cropped to it."""
    rows, cols = photo.shape[:2]
    scale = max(height / rows, width / cols)
    size = (max(width, round(cols * scale)), max(height, round(rows * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    scaled = cv2.resize(photo, size, interpolation=interpolation)
    top = (scaled.shape[0] - height) // 2
    left = (scaled.shape[1] - width) // 2
    return scaled[top : top + height, left : left + width]


def make_canvas(height: int, width: int) -> np.ndarray:
    """A (2*height) x (2*width) BGR canvas tiled with the photographs.

    Photos repeat once the list runs out, mirrored so no two cells are identical.
    """
    canvas_h, canvas_w = 2 * height, 2 * width
    canvas = np.zeros((canvas_h, canvas_w, 3), np.uint8)
    photos = photographs()
    rows = [canvas_h * r // GRID_ROWS for r in range(GRID_ROWS + 1)]
    cols = [canvas_w * c // GRID_COLS for c in range(GRID_COLS + 1)]
    for cell in range(GRID_ROWS * GRID_COLS):
        r, c = divmod(cell, GRID_COLS)
        photo = photos[cell % len(photos)]
        if (cell // len(photos)) % 2:
            photo = photo[:, ::-1]
        canvas[rows[r] : rows[r + 1], cols[c] : cols[c + 1]] = cover(
            photo, rows[r + 1] - rows[r], cols[c + 1] - cols[c]
        )
    return canvas


class Pan:
    """Frame i of the pan: a window moving right across the canvas, down and back up."""

    def __init__(self, canvas: np.ndarray, height: int, width: int, frames: int):
        self.canvas, self.height, self.width, self.frames = canvas, height, width, frames

    def __len__(self) -> int:
        return self.frames

    def __getitem__(self, i: int) -> np.ndarray:
        span_x = self.canvas.shape[1] - self.width
        span_y = self.canvas.shape[0] - self.height
        t = i / max(self.frames - 1, 1)
        x = round(t * span_x)
        y = round(span_y * (0.5 - 0.5 * np.cos(2 * np.pi * t)))
        return np.ascontiguousarray(self.canvas[y : y + self.height, x : x + self.width])


def write_video(pan: Pan, frames: int, path: Path, crf: int, codec: str = "libx264") -> None:
    """Pipe the first ``frames`` frames as raw BGR into imageio-ffmpeg's ffmpeg (libx264, or
    libx265 as phones record HEVC: 8-bit 4:2:0, tagged hvc1)."""
    import imageio_ffmpeg  # only here: the folders must not need it

    options = {
        "libx264": ["-preset", "medium"],
        "libx265": ["-preset", "fast", "-x265-params", "log-level=error", "-tag:v", "hvc1"],
    }[codec]
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
        "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{pan.width}x{pan.height}",
        "-r", str(VIDEO_FPS), "-i", "-",
        "-c:v", codec, "-pix_fmt", "yuv420p", "-crf", str(crf), *options,
        "-movflags", "+faststart", str(path),
    ]  # fmt: skip
    encoder = subprocess.Popen(command, stdin=subprocess.PIPE)
    try:
        for i in range(frames):  # one frame at a time: never the whole clip in memory
            encoder.stdin.write(pan[i].tobytes())
    finally:
        encoder.stdin.close()
    if encoder.wait() != 0:
        raise SystemExit(f"ffmpeg failed (exit {encoder.returncode}) writing {path}")
    capture = cv2.VideoCapture(str(path))
    decoded = 0
    while capture.grab():
        decoded += 1
    capture.release()
    if decoded != frames:
        raise SystemExit(f"{path}: OpenCV decodes {decoded} frames, expected {frames}")


# Stream copies of pan.mp4 that only retag it: the pictures, and their decoding, are the same.
RETAGGED = {
    # What nearly every HD camera and phone writes: BT.709 in the SPS's VUI.
    "pan_bt709.mp4": [
        "-bsf:v", "h264_metadata=colour_primaries=1:transfer_characteristics=1"
        ":matrix_coefficients=1:video_full_range_flag=0",
    ],
    # A phone held upright: a 90-degree display matrix, which cv2 applies.
    "pan_rot90.mp4": ["-display_rotation", "90"],
}  # fmt: skip


def write_retagged(clip: Path, name: str) -> Path:
    """``clip`` stream-copied to ``name`` beside it with the options of :data:`RETAGGED`."""
    import imageio_ffmpeg

    path = clip.with_name(name)
    options = RETAGGED[name]
    before, after = (options, []) if options[0].startswith("-display") else ([], options)
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-y", *before, "-i", str(clip)]
    command += ["-c", "copy", *after, "-movflags", "+faststart", str(path)]
    subprocess.run(command, check=True)
    return path


def write_folder(pan: Pan, folder: Path, suffix: str, params: list[int], workers: int) -> int:
    """frame_0000<suffix>, ... in ``folder`` (stale frames removed first); total bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f"frame_*{suffix}"):
        stale.unlink()

    def write(i: int) -> int:
        path = folder / f"frame_{i:04d}{suffix}"
        if not cv2.imwrite(str(path), pan[i], params):
            raise OSError(f"{path}: cv2.imwrite failed")
        return path.stat().st_size

    # cv2 releases the GIL while encoding, so threads use every core.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(write, range(len(pan))))


def write_long(clip: Path, copies: int, path: Path) -> None:
    """``clip`` ``copies`` times over in one MP4, stream-copied (the same frames, so a long
    video costs no encoding) by ``concat_mp4.py``: in plain Python, so that the GPU host, which
    has no FFmpeg, makes it from the pan.mp4 carried there."""
    concat(clip, copies, path)
    print(f"{path}: {clip.name} x {copies}, {path.stat().st_size / 1e6:.1f} MB")


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}") from None
    if width < 2 or height < 2 or width % 2 or height % 2:
        # H.264 with 4:2:0 chroma needs even sides.
        raise argparse.ArgumentTypeError(f"sides must be even and >= 2, got {text!r}")
    return width, height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench_data"), help="output folder")
    parser.add_argument("--frames", type=int, default=240, help="frames (default 240)")
    parser.add_argument("--size", type=parse_size, default=(1920, 1080), help="WxH")
    parser.add_argument(
        "--only", action="append", choices=KINDS, help="make only this kind (repeatable)"
    )
    parser.add_argument("--crf", type=int, default=20, help="x264 CRF (default 20)")
    parser.add_argument(
        "--jpeg-quality", type=int, default=JPEG_QUALITY, help=f"(default {JPEG_QUALITY})"
    )
    parser.add_argument(
        "--head-frames",
        type=int,
        default=None,
        help="frames in pan_head.mp4 (default: a fifth of --frames)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="writer threads")
    parser.add_argument(
        "--long-copies",
        type=int,
        help="only write OUT/pan_long.mp4: OUT/pan.mp4 this many times over (stream-copied)",
    )
    parser.add_argument(
        "--long-name", default="pan_long.mp4", help="the file --long-copies writes in OUT"
    )
    args = parser.parse_args()
    if args.long_copies:
        write_long(args.out / "pan.mp4", args.long_copies, args.out / args.long_name)
        return
    if args.frames < 2:
        parser.error("--frames must be at least 2")
    head = args.head_frames or max(1, args.frames // 5)
    if not 1 <= head < args.frames:
        parser.error("--head-frames must be between 1 and --frames - 1")
    kinds = args.only or list(KINDS)
    width, height = args.size

    started = time.perf_counter()
    pan = Pan(make_canvas(height, width), height, width, args.frames)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"canvas {2 * width}x{2 * height} ready in {time.perf_counter() - started:.1f} s")
    for kind in kinds:
        start = time.perf_counter()
        if kind == "video":
            for name, frames in (("pan.mp4", args.frames), ("pan_head.mp4", head)):
                path = args.out / name
                write_video(pan, frames, path, args.crf)
                size_mb = path.stat().st_size / 1e6
                print(f"{path}: {frames} frames {width}x{height}, CRF {args.crf}, {size_mb:.1f} MB")
            for name in RETAGGED:
                path = write_retagged(args.out / "pan.mp4", name)
                print(f"{path}: pan.mp4 stream-copied, {' '.join(RETAGGED[name])}")
            path = args.out / "pan_hevc.mp4"
            write_video(pan, args.frames, path, HEVC_CRF, "libx265")
            size_mb = path.stat().st_size / 1e6
            print(f"{path}: {args.frames} frames HEVC, CRF {HEVC_CRF}, {size_mb:.1f} MB")
        elif kind == "jpeg":
            params = [cv2.IMWRITE_JPEG_QUALITY, args.jpeg_quality]
            total = write_folder(pan, args.out / "jpeg", ".jpg", params, args.workers)
            print(f"{args.out / 'jpeg'}: {args.frames} JPEGs, {total / 1e6:.1f} MB")
        else:
            total = write_folder(pan, args.out / "png", ".png", [], args.workers)
            print(f"{args.out / 'png'}: {args.frames} PNGs, {total / 1e6:.1f} MB")
        print(f"  ({kind} took {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
