"""png.cu's rate: 1080p PNGs' inflated data to BGR frames on one GPU, the kernel alone.

Run on a CUDA machine from the repository root:

    PYTHONPATH=. python3 benchmarks/png_kernel.py [--batches 8 32 128] [--warps 1 2 4]

The sample frames, resized to 1920 x 1080 and written by cv2.imencode (libpng's own filter per
row, so all five filters occur) and with Paeth on every row (the slowest filter), are inflated
once by zlib; each launch first copies a pristine batch over the one the kernel unfilters in
place (not timed: CUDA events around the kernel only). Reported per filter choice, batch and
warps an image: the median milliseconds a launch and frames a second, and whether every frame
equals cv2.imdecode's.
"""

from __future__ import annotations

import argparse
import statistics
import zlib
from pathlib import Path

import cupy as cp
import cv2
import numpy as np

from edgecli.decode.gpu import png as gpu_png

SAMPLES = Path(__file__).resolve().parent.parent / "sample_frames"
ENCODINGS = {"libpng": [], "paeth": [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_PAETH]}


def inflated(data: bytes) -> bytes:
    """A PNG's IDAT chunks joined and inflated."""
    position, idat = 8, []
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        if kind == b"IDAT":
            idat.append(data[position + 8 : position + 8 + length])
        position += 12 + length
    return zlib.decompress(b"".join(idat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--warps", type=int, nargs="+", default=[1, 2, gpu_png.WARPS])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    photos = [cv2.resize(cv2.imread(str(p)), (1920, 1080)) for p in sorted(SAMPLES.glob("*.jpg"))]
    kernel = gpu_png.kernel(0)
    stream = cp.cuda.Stream(non_blocking=True)
    print("| PNGs | batch | warps | ms a launch | fps | frames == cv2 |")
    print("|---|---|---|---|---|---|")
    for name, flags in ENCODINGS.items():
        files = [cv2.imencode(".png", photo, flags)[1].tobytes() for photo in photos]
        expected = [cv2.imdecode(np.frombuffer(f, np.uint8), cv2.IMREAD_COLOR) for f in files]
        data = [np.frombuffer(inflated(f), np.uint8) for f in files]
        stride = data[0].size
        for batch in args.batches:
            order = [i % len(files) for i in range(batch)]
            pristine = cp.asarray(np.concatenate([data[i] for i in order]))
            work = cp.empty_like(pristine)
            out = cp.empty((batch, 1080, 1920, 3), cp.uint8)
            status = cp.empty(batch, cp.int32)
            for warps in args.warps:
                times = []
                for _ in range(args.repeat + 1):  # the first warms up
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    with stream:
                        cp.copyto(work, pristine)
                        start.record(stream)
                        gpu_png.launch_png_to_bgr(
                            kernel, work, stride, out, status, color_type=2, depth=8,
                            stream=stream, warps=warps,
                        )  # fmt: skip
                        end.record(stream)
                    end.synchronize()
                    times.append(cp.cuda.get_elapsed_time(start, end))
                ms = statistics.median(times[1:])
                frames = cp.asnumpy(out)
                exact = not cp.asnumpy(status).any() and all(
                    np.array_equal(frames[k], expected[i]) for k, i in enumerate(order)
                )
                fps = batch / ms * 1000
                print(f"| {name} | {batch} | {warps} | {ms:.2f} | {fps:,.0f} | {exact} |")


if __name__ == "__main__":
    main()
