"""How fast a run's workers read PNG frames (issue 41), by what becomes of each file's bytes.

A ``--decode gpu`` run reads each PNG (``read_file``) and walks its chunks (``read_layout``) on
its worker threads, and keeps the bytes until their batch is gathered into pinned memory:
hundreds of files, which glibc serves with fresh pages (page faults, and mmap and munmap calls
that every thread's faults wait behind). This times ``--files`` reads of the folder's PNGs
(cycling over them, from the page cache) on each of ``--threads``, the patterns taking turns:

- ``freed``: each file's bytes dropped once walked;
- ``window``: the last ``--window`` files' bytes kept, as a run keeps its batches;
- ``pooled``: the same window, each file read (``os.readv``) into a buffer of a pool made and
  touched before the clock starts, which goes back to the pool as the window moves on.

    python benchmarks/png_reads.py [--pngs bench_data/png_ffmpeg] [--files 2400]
        [--window 768] [--threads 4 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import REPO

from edgecli.decode.cpu import read_file
from edgecli.decode.png_layout import read_layout

PAGE = 4096


class Pool:
    """Buffers of ``size`` bytes, each page touched once, handed out and given back."""

    def __init__(self, count: int, size: int):
        self._free = [bytearray(size) for _ in range(count)]
        for buffer in self._free:
            buffer[::PAGE] = bytes(len(range(0, size, PAGE)))
        self._lock = threading.Lock()

    def take(self) -> bytearray:
        with self._lock:
            return self._free.pop()

    def give(self, buffer: bytearray) -> None:
        with self._lock:
            self._free.append(buffer)


def read_pooled(path: Path, pool: Pool) -> tuple[bytearray, memoryview]:
    """The file's bytes read into a buffer of ``pool``: (the buffer, a view of the bytes)."""
    buffer = pool.take()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.readv(fd, [buffer])
    finally:
        os.close(fd)
    return buffer, memoryview(buffer)[:size]


def rate(pattern: str, paths: list[Path], threads: int, window: int, pool: Pool | None) -> float:
    """Files a second read and walked by ``threads`` threads, their bytes kept by
    ``pattern``."""

    def one(path: Path):
        if pattern == "pooled":
            buffer, data = read_pooled(path, pool)
            read_layout(data)
            return buffer
        data = read_file(path)
        read_layout(data)
        return data if pattern == "window" else None

    kept: deque = deque()
    reading: deque = deque()
    ahead = 2 * threads  # reads in flight, as a run's workers read ahead

    def keep(done) -> None:
        kept.append(done)
        if len(kept) > window:
            old = kept.popleft()
            if pattern == "pooled":
                pool.give(old)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as workers:
        for path in paths:
            reading.append(workers.submit(one, path))
            if len(reading) > ahead:
                keep(reading.popleft().result())
        while reading:
            keep(reading.popleft().result())
    wall = time.perf_counter() - start
    if pattern == "pooled":
        for buffer in kept:
            pool.give(buffer)
    return len(paths) / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pngs", type=Path, default=REPO / "bench_data" / "png_ffmpeg")
    parser.add_argument("--files", type=int, default=2400, help="reads a pattern, cycling")
    parser.add_argument("--window", type=int, default=768, help="files' bytes kept at once")
    parser.add_argument("--threads", type=int, nargs="+", default=[4, os.cpu_count()])
    parser.add_argument("--rounds", type=int, default=2, help="turns of every pattern")
    args = parser.parse_args()
    frames = sorted(args.pngs.glob("*.png"))
    if not frames:
        parser.error(f"no PNGs in {args.pngs} (python benchmarks/png_decode.py --make-pngs)")
    paths = [frames[i % len(frames)] for i in range(args.files)]
    size = max(p.stat().st_size for p in frames) + 1
    # Room for the window and the reads in flight past it.
    pool = Pool(args.window + 2 * max(args.threads) + 2, size)
    patterns = ("freed", "window", "pooled")
    print(f"{args.files} reads of {len(frames)} PNGs ({size / 1e6:.2f} MB at most), window "
          f"{args.window}; files a second, median (range) of {args.rounds} turns")  # fmt: skip
    print("threads " + "".join(f"{p:>22}" for p in patterns))
    for threads in args.threads:
        rates = {p: [] for p in patterns}
        for _ in range(args.rounds):
            for pattern in patterns:
                rates[pattern].append(rate(pattern, paths, threads, args.window, pool))
        cells = (
            f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})" for r in rates.values()
        )
        print(f"{threads:7} " + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
