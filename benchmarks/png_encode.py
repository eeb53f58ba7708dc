"""1-bit PNG encoding: edgecli's encoder against OpenCV's, on the edge maps of real frames.

edgecli writes its default 1-bit PNGs with zlib, in C (``edgecli._native``) where it was
built and with NumPy in Python elsewhere (both rows here; the same bytes); before, it called
``cv2.imencode`` with ``IMWRITE_PNG_BILEVEL`` (filter none, libpng's default level, which uses
zlib's run-length strategy). For every frame of ``--input`` (``*.jpg`` /
``*.png``, sorted; default ``sample_frames/``), resized to ``--size`` (default 1920x1080),
and every ``--thresholds`` value, this script computes the edge map with the CPU reference,
then times each encoder:

- ms a frame on one thread (the median over the frames of the best of ``--repeats`` runs);
- frames/s on ``--workers`` threads (default: all cores), each encoder over all the maps;
- the PNG bytes, summed;

and checks that each PNG reads back (``cv2.imread`` … ``IMREAD_GRAYSCALE``) as the same 0/255
pixels, and that edgecli's is a 1-bit grayscale PNG. Nothing is written to disk.

    PYTHONPATH=. python3 benchmarks/png_encode.py
    PYTHONPATH=. python3 benchmarks/png_encode.py --input bench_data/jpeg --workers 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from edgecli import native
from edgecli.edges.reference import detect_frame
from edgecli.options.params import Options
from edgecli.output.png import png_from_rows_1bit_python, png_rows_1bit
from edgecli.pipeline.allocator import keep_freed_memory

OPENCV_BILEVEL = [cv2.IMWRITE_PNG_BILEVEL, 1, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]


def opencv_1bit(edges: np.ndarray) -> bytes:
    ok, encoded = cv2.imencode(".png", edges, OPENCV_BILEVEL)
    if not ok:
        raise RuntimeError("cv2.imencode failed")
    return encoded.tobytes()


def edgecli_python(edges: np.ndarray) -> bytes:
    return png_from_rows_1bit_python(png_rows_1bit(edges), edges.shape[1])


def edgecli_c(edges: np.ndarray) -> bytes:
    return native.c.encode_map(edges, edges.shape[1])


ENCODERS = {
    "OpenCV (cv2.imencode, bilevel)": opencv_1bit,
    "edgecli in Python (NumPy + zlib)": edgecli_python,
    **({"edgecli in C (edgecli._native)": edgecli_c} if native.c is not None else {}),
}


def edge_maps(
    folder: Path, size: tuple[int, int], thresholds: list[int], limit: int | None = None
) -> list[np.ndarray]:
    """The CPU reference's edge maps of the first ``limit`` (default: every) .jpg / .png
    frames of ``folder``, resized to ``size``, at each threshold."""
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".png"))[:limit]
    if not paths:
        sys.exit(f"no .jpg or .png files in {folder}")
    maps = []
    for path in paths:
        frame = cv2.resize(cv2.imread(str(path)), size, interpolation=cv2.INTER_CUBIC)
        maps += [detect_frame(frame, Options(threshold=t)) for t in thresholds]
    return maps


def single_thread_ms(encode, maps: list[np.ndarray], repeats: int) -> float:
    per_frame = []
    for edges in maps:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            encode(edges)
            best = min(best, time.perf_counter() - start)
        per_frame.append(best * 1e3)
    return statistics.median(per_frame)


def threaded_fps(encode, maps: list[np.ndarray], workers: int, rounds: int) -> float:
    work = maps * rounds
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(encode, maps))  # warm-up
        start = time.perf_counter()
        list(pool.map(encode, work))
        return len(work) / (time.perf_counter() - start)


def reads_back(png: bytes, edges: np.ndarray) -> bool:
    decoded = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_GRAYSCALE)
    return decoded is not None and np.array_equal(decoded, edges)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=Path("sample_frames"))
    parser.add_argument("--size", default="1920x1080", help="WxH the frames are resized to")
    parser.add_argument("--thresholds", type=int, nargs="+", default=[40, 100])
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5, help="single-thread runs a map")
    parser.add_argument("--rounds", type=int, default=10, help="threaded passes over the maps")
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="leave glibc's malloc as it is (by default it is set as edgecli's CLI sets it)",
    )
    args = parser.parse_args()
    if not args.default_malloc:
        keep_freed_memory()
    width, height = (int(v) for v in args.size.split("x"))
    maps = edge_maps(args.input, (width, height), args.thresholds)
    density = statistics.mean(float((m > 0).mean()) for m in maps)
    print(
        f"{len(maps)} edge maps of {width}x{height} from {args.input} (thresholds "
        f"{args.thresholds}; {density:.1%} edge pixels); {args.workers} threads; "
        f"{os.cpu_count()} cores"
    )
    print("| encoder | ms a frame, 1 thread | fps, threads | PNG KB a frame | reads back |")
    print("|---|---:|---:|---:|---|")
    for name, encode in ENCODERS.items():
        pngs = [encode(m) for m in maps]
        ok = all(reads_back(png, m) for png, m in zip(pngs, maps, strict=True))
        if encode is not opencv_1bit:
            ok = ok and all(png[24:26] == b"\x01\x00" for png in pngs)  # 1-bit, grayscale
        ms = single_thread_ms(encode, maps, args.repeats)
        fps = threaded_fps(encode, maps, args.workers, args.rounds)
        kb = sum(map(len, pngs)) / len(pngs) / 1e3
        print(f"| {name} | {ms:.2f} | {fps:.0f} | {kb:.1f} | {'yes' if ok else 'NO'} |")
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
