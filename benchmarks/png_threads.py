"""The 1-bit PNG encoder's pieces on 1 to 16 threads: which of them stop scaling.

Each piece runs over the edge maps of ``--input``'s first 40 frames (resized to
1920x1080, thresholds 40 and 100, CPU reference), ``--frames`` maps a run, on 1, 4, 8 and 16
plain threads (best of 2 runs); the table gives frames/s and the 16-thread rate over 16 times
the 1-thread rate. The pieces:

- OpenCV's bilevel ``cv2.imencode`` (one call that lets go of the GIL);
- edgecli's Python encoder: the packing and the compression;
- ``png_from_rows_1bit_python``: its compression alone, of rows packed beforehand (what the
  encoders do when the GPU packs the rows);
- ``png_rows_1bit``: the packing alone (``np.packbits``, which holds the GIL);
- the packing by NumPy ufuncs, which let go of the GIL: ``(edges != 0)`` as 8-byte words,
  times 0x8040201008040201, the top byte (checked equal to ``png_rows_1bit`` first);
- where ``edgecli._native`` is built, its C doing both, and the compression alone: one
  release of the GIL a PNG.

    PYTHONPATH=. python3 benchmarks/png_threads.py bench_data/jpeg
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from common import threaded_rate  # this script's directory is first on sys.path
from png_encode import edge_maps, opencv_1bit

from edgecli import native
from edgecli.output.png import png_from_rows_1bit_python, png_rows_1bit
from edgecli.pipeline.allocator import keep_freed_memory

GATHER = np.uint64(0x8040201008040201)  # byte k's low bit to bit 63 - k: pixel k to bit 7 - k
THREADS = (4, 8, 16)


def rows_by_ufuncs(edges: np.ndarray) -> np.ndarray:
    """png_rows_1bit for widths that are multiples of 8, by ufuncs only (GIL released)."""
    height, width = edges.shape
    rows = np.empty((height, 1 + width // 8), np.uint8)
    rows[:, 0] = 0
    words = np.multiply(np.not_equal(edges, 0).view(np.uint64), GATHER)
    np.right_shift(words, np.uint64(56), out=words)
    rows[:, 1:] = words
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path, help="a folder of .jpg or .png frames")
    parser.add_argument("--frames", type=int, default=960, help="maps a threaded run")
    args = parser.parse_args()
    keep_freed_memory()  # as the CLI runs
    maps = edge_maps(args.input, (1920, 1080), [40, 100], limit=40)
    packed = {id(m): png_rows_1bit(m) for m in maps}
    if not all(np.array_equal(rows_by_ufuncs(m), packed[id(m)]) for m in maps):
        sys.exit("png_threads.py: the ufunc packing differs from png_rows_1bit")
    pieces = {
        "OpenCV imencode (bilevel)": opencv_1bit,
        "edgecli in Python: packing and compression": lambda m: png_from_rows_1bit_python(
            png_rows_1bit(m), 1920
        ),
        "compression only, Python (png_from_rows_1bit_python)": lambda m: png_from_rows_1bit_python(
            packed[id(m)], 1920
        ),
        "packing only (png_rows_1bit, np.packbits)": png_rows_1bit,
        "packing only, by ufuncs": rows_by_ufuncs,
    }
    if native.c is not None:  # edgecli._native: the same work, one release of the GIL
        pieces["edgecli in C: packing and compression"] = lambda m: native.c.encode_map(m, 1920)
        pieces["compression only, C"] = lambda m: native.c.encode_rows(packed[id(m)], 1920)
    density = float(np.mean([(m > 0).mean() for m in maps]))
    print(f"{len(maps)} maps of 1920x1080 from {args.input}, {density:.1%} edge pixels")
    print("| piece | ms, 1 thread | fps, 1 | fps, 4 | fps, 8 | fps, 16 | 16-thread scaling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, piece in pieces.items():
        threaded_rate(piece, maps, 16, 96)  # warm-up
        one = threaded_rate(piece, maps, 1, 96)
        many = {
            t: max(threaded_rate(piece, maps, t, args.frames) for _ in range(2)) for t in THREADS
        }
        cells = " | ".join(f"{many[t]:.0f}" for t in THREADS)
        print(f"| {name} | {1e3 / one:.3f} | {one:.0f} | {cells} | {many[16] / 16 / one:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
