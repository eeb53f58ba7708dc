"""The output stage's floor on this host: 2400 1-bit PNGs of real 1080p edge maps (of the first
48 files of ``bench_data/q95/jpeg``) compressed, written atomically into one folder of /tmp,
or both, by 8, 12 and 16 processes (edgecli's own encoder and ``write_atomic``).

    PYTHONPATH=. python3 benchmarks/write_floor.py
"""

import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, ".")
from edgecli.params import Options
from edgecli.png import png_from_rows_1bit, png_rows_1bit
from edgecli.reference import detect_frame
from edgecli.sinks import write_atomic

paths = sorted(Path("bench_data/q95/jpeg").iterdir())[:48]
ROWS = [png_rows_1bit(detect_frame(cv2.imread(str(p)), Options())) for p in paths]
PNGS = [png_from_rows_1bit(r, 1920) for r in ROWS]


def job(args):
    out, lo, hi, what = args
    t = time.perf_counter()
    for i in range(lo, hi):
        data = (
            png_from_rows_1bit(ROWS[i % len(ROWS)], 1920)
            if what != "write"
            else PNGS[i % len(PNGS)]
        )
        if what != "compress":
            write_atomic(Path(out) / f"f{i:05d}.png", data)
    return time.perf_counter() - t


FS = os.popen("df -T /tmp | tail -1").read().split()[1]
print(f"mean PNG {np.mean([len(p) for p in PNGS]) / 1e3:.1f} KB; file system of /tmp: {FS}")
for n in (8, 12, 16):
    with ProcessPoolExecutor(n) as pool:
        list(pool.map(job, [("/dev/null", 0, 1, "compress")] * n))  # start
        for what in ("compress", "write", "both"):
            out = tempfile.mkdtemp(dir="/tmp")
            t = time.perf_counter()
            busy = list(
                pool.map(job, [(out, 2400 * k // n, 2400 * (k + 1) // n, what) for k in range(n)])
            )
            wall = time.perf_counter() - t
            print(
                f"{n:>2} processes, {what:<8}: {2400 / wall:6.0f} PNGs/s ({wall:.3f} s; "
                f"busy {sum(busy) / n / wall:.0%})",
                flush=True,
            )
            shutil.rmtree(out)
