"""The one-frame-at-a-time GPU loop: the course structure edgecli grew from (issue 4 baseline).

For each frame, in order, on one thread: decode (``cv2.imread`` or ``VideoCapture.read``),
copy the pageable frame to a fresh device allocation, launch a one-pixel-per-thread kernel,
copy the edge map back (blocking), encode a 1-bit PNG and write it. Nothing overlaps: the
GPU idles while the CPU decodes and encodes, and all but one core idle throughout.

The kernel follows the edge contract exactly (integer luma, Sobel with replicate border,
l1 norm, threshold 100 strict, every pixel written), so its output is byte-identical to
edgecli's; what it keeps from the course is the structure, not the course's defects.

    python benchmarks/course_loop.py INPUT OUT_DIR     # prints one JSON line on stdout

INPUT is a folder of images or a video; output names follow edgecli's (``a.jpg`` ->
``a.png``, frame i of ``clip.mp4`` -> ``clip_00000i.png``), so outputs compare by name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from edgecli.inputs.sources import discover
from edgecli.output.png import encode_png

THRESHOLD = np.int32(100)  # typed: a Python int would be passed as 64-bit
BLOCK = (16, 16, 1)

# The one-pixel-per-thread kernel that benchmarks/kernel.py times too: one thread per pixel,
# its 9 neighbours' BGR read straight from global memory, replicate border, l1 norm.
NAIVE_SOURCE = Path(__file__).with_name("naive_edges.cu")


def frames_in_order(input_arg: str):
    """(output name, BGR frame) for every frame of INPUT, decoded one at a time."""
    for source in discover(input_arg):
        if not source.multi_frame:
            frame = cv2.imread(str(source.path), cv2.IMREAD_COLOR)
            if frame is None:
                raise SystemExit(f"{source.path}: cv2.imread cannot decode this file")
            yield source.out_name, frame
        elif source.kind == "video":
            capture = cv2.VideoCapture(str(source.path))
            index = 0
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                yield source.frame_name(index), frame
                index += 1
            capture.release()
        else:
            raise SystemExit(f"{source.path}: the course loop reads only images and videos")


def detect_on_gpu(kernel, frame: np.ndarray) -> np.ndarray:
    """One frame the course way: fresh allocations, pageable copies, blocking download.

    Both device arrays go out of scope on return, so with the pool off each frame pays a
    cudaMalloc and a cudaFree per array.
    """
    import cupy

    height, width = frame.shape[:2]
    frame_dev = cupy.asarray(frame)  # pageable H2D into a fresh allocation
    edges_dev = cupy.empty((height, width), dtype=cupy.uint8)
    grid = ((width + BLOCK[0] - 1) // BLOCK[0], (height + BLOCK[1] - 1) // BLOCK[1], 1)
    kernel(grid, BLOCK, (frame_dev, edges_dev, np.int32(height), np.int32(width), THRESHOLD))
    return edges_dev.get()  # blocking D2H on the default stream: waits for the kernel too


def run_course_loop(input_arg, out_dir) -> dict:
    """Run the loop over every frame of ``input_arg``, writing PNGs into ``out_dir``.

    Returns ``frames``, ``wall_s`` and ``fps`` of the loop alone, and ``startup_s``: CuPy
    import, CUDA context creation and kernel compilation (or loading from CuPy's on-disk
    cache), done before the clock starts, as a course program's set-up would be.
    """
    started = time.perf_counter()
    try:
        import cupy  # only here: importing this module must not need CUDA
    except ImportError as exc:
        raise SystemExit(f"the course loop needs CuPy and a CUDA device ({exc})") from None

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # No memory pool: every frame gets its own cudaMalloc and cudaFree, as in the course.
    cupy.cuda.set_allocator(None)
    kernel = cupy.RawKernel(NAIVE_SOURCE.read_text(), "naive_edges_l1_replicate")
    detect_on_gpu(kernel, np.zeros((2, 2, 3), np.uint8))  # context + compile, untimed
    device_name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    startup_s = time.perf_counter() - started

    frames = 0
    start = time.perf_counter()
    for name, frame in frames_in_order(str(input_arg)):
        edges = detect_on_gpu(kernel, frame)
        (out_dir / name).write_bytes(encode_png(edges, 1))
        frames += 1
    wall_s = time.perf_counter() - start
    return {
        "frames": frames,
        "wall_s": round(wall_s, 4),
        "fps": round(frames / wall_s, 2) if wall_s > 0 else 0.0,
        "startup_s": round(startup_s, 4),
        "device": device_name.decode() if isinstance(device_name, bytes) else device_name,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="a folder of images or a video")
    parser.add_argument("out_dir", type=Path, help="folder to write edge PNGs into")
    args = parser.parse_args()
    result = run_course_loop(args.input, args.out_dir)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
