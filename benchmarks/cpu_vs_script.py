"""edgecli's CPU backend against the script a user would write (issue 16), whole processes.

    PYTHONPATH=. python3 benchmarks/cpu_vs_script.py                  # makes 240 JPEGs
    PYTHONPATH=. python3 benchmarks/cpu_vs_script.py --input DIR --rounds 7
    PYTHONPATH=. python3 benchmarks/cpu_vs_script.py --tree ../other-checkout  # its edgecli

The script is ``benchmarks/pool_script.py``: multiprocessing.Pool, one process a core, each
frame imread, cvtColor, Sobel x2, |Gx| + |Gy|, threshold, imwrite with IMWRITE_PNG_BILEVEL.
Without ``--input``, 240 JPEGs (quality 90) are made in a temporary folder: windows of 1280 x
720, 1600 x 900 and 1920 x 1080, in turn, panning over a canvas tiled with the photographs of
``sample_frames/`` at their own scale (so their texture is that of photographs, not of an
enlargement). Nothing is written into the repository.

Each round runs ``edgecli run IN -o OUT --backend cpu -q`` and the script, each as a fresh
process into an empty folder, in alternating order (other work on the machine then perturbs
both alike); the wall time of each whole process is measured. The PNGs of the two must hold
equal pixels (cv2.imread, np.array_equal), or the run fails. Then ``edgecli run`` on one image
is timed ``--rounds`` times. Printed: every time, the medians, the spread, and the ratio
script / edgecli of the medians (with the lowest and highest per-round ratios).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
POOL_SCRIPT = REPO / "benchmarks" / "pool_script.py"
SIZES = ((720, 1280), (900, 1600), (1080, 1920))


def make_frames(folder: Path, count: int) -> None:
    photos = [cv2.imread(str(p)) for p in sorted((REPO / "sample_frames").glob("pan_*.jpg"))]
    height, width = photos[0].shape[:2]
    rows, cols = 10, 14  # 2370 x 4494: room to pan a 1080p window
    canvas = np.zeros((rows * height, cols * width, 3), np.uint8)
    for r in range(rows):
        for c in range(cols):
            canvas[r * height : (r + 1) * height, c * width : (c + 1) * width] = photos[
                (r * cols + c) % len(photos)
            ]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        h, w = SIZES[i % len(SIZES)]
        y, x = (i * 7) % (canvas.shape[0] - h), (i * 13) % (canvas.shape[1] - w)
        window = canvas[y : y + h, x : x + w]
        cv2.imwrite(str(folder / f"frame_{i:04d}.jpg"), window, [cv2.IMWRITE_JPEG_QUALITY, 90])


def timed(command: list[str], out: Path, tree: Path = REPO) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    # In the tree's folder: `python -m` puts the working folder first on the import path.
    subprocess.run(command, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def check_equal(edgecli_out: Path, script_out: Path, count: int) -> None:
    names = sorted(p.name for p in script_out.glob("*.png"))
    if len(names) != count or names != sorted(p.name for p in edgecli_out.glob("*.png")):
        sys.exit(f"the two wrote different files: {len(names)} vs {count} expected")
    for name in names:
        a = cv2.imread(str(edgecli_out / name), cv2.IMREAD_GRAYSCALE)
        b = cv2.imread(str(script_out / name), cv2.IMREAD_GRAYSCALE)
        if not np.array_equal(a, b):
            sys.exit(f"{name}: edgecli and the script differ")


def spread(times: list[float]) -> str:
    return f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, help="a folder of JPEGs (default: make 240)")
    parser.add_argument("--frames", type=int, default=240, help="JPEGs to make")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threshold", type=int, default=100, help="below 255 (see the script)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the edgecli checkout to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgecli-bench-") as scratch:
        scratch = Path(scratch)
        frames = (args.input or scratch / "jpeg").resolve()
        if args.input is None:
            make_frames(frames, args.frames)
        count = len([p for p in frames.iterdir() if p.suffix.lower() in (".jpg", ".jpeg")])
        edgecli_out, script_out, one_out = scratch / "edgecli", scratch / "script", scratch / "one"
        edgecli_run = [sys.executable, "-m", "edgecli", "run", str(frames), "-o", str(edgecli_out),
                       "--backend", "cpu", "-q", "-t", str(args.threshold)]  # fmt: skip
        script_run = [sys.executable, str(POOL_SCRIPT), str(frames), str(script_out),
                      str(args.threshold)]  # fmt: skip
        one = sorted(frames.glob("*.jp*g"))[-1]
        one_run = [sys.executable, "-m", "edgecli", "run", str(one), "-o", str(one_out),
                   "--backend", "cpu", "-q"]  # fmt: skip
        timed(one_run, one_out, args.tree)  # warm the page cache, and edgecli's cvtColor verdict
        edgecli_s, script_s, ratios = [], [], []
        print(f"{count} JPEGs in {frames}, {os.cpu_count()} cores, {args.rounds} rounds")
        for round_ in range(args.rounds):
            runs = [("edgecli", edgecli_run, edgecli_out), ("script", script_run, script_out)]
            seconds = {}
            for name, command, out in runs if round_ % 2 == 0 else runs[::-1]:
                seconds[name] = timed(command, out, args.tree)
            check_equal(edgecli_out, script_out, count)
            edgecli_s.append(seconds["edgecli"])
            script_s.append(seconds["script"])
            ratios.append(seconds["script"] / seconds["edgecli"])
            print(f"round {round_}: edgecli {seconds['edgecli']:.3f} s, script "
                  f"{seconds['script']:.3f} s, ratio {ratios[-1]:.2f}")  # fmt: skip
        one_s = [timed(one_run, one_out, args.tree) for _ in range(args.rounds)]
    ratio = statistics.median(script_s) / statistics.median(edgecli_s)
    for name, times in (("edgecli --backend cpu", edgecli_s), ("Pool script", script_s)):
        print(f"{name}: {spread(times)}, {count / statistics.median(times):.1f} fps")
    print(f"ratio script / edgecli: {ratio:.2f} (per round {min(ratios):.2f}-{max(ratios):.2f})")
    print(f"one image ({one.name}), edgecli --backend cpu: {spread(one_s)}")
    print("outputs equal pixel for pixel in every round")


if __name__ == "__main__":
    main()
