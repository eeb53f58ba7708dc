"""How fast a run's workers read PNG frames (issue 41), by what becomes of each file's bytes.

A ``--decode gpu`` run reads each PNG and walks its chunks (``read_layout``) on its worker
threads, ``FILES_A_READ`` files a task, and keeps the bytes until their batch is gathered into
pinned memory: hundreds of files, each some megabytes. This times ``--files`` reads of the
folder's PNGs (cycling over them, from the page cache) in tasks of ``--task`` files on each
of ``--threads``, with glibc's malloc set as a run sets it (``keep_freed_memory``), the
patterns taking turns:

- ``freed``: each file's bytes (``read_file``) dropped once walked;
- ``window``: the last ``--window`` files' bytes kept, as a run kept its batches' before
  ReadBuffers;
- ``buffers``: the same window, each file read into edgecli's ``ReadBuffers`` (new for each
  turn, as for each run) and given back as the window moves on, as a run reads them now.

    python benchmarks/png_reads.py [--pngs bench_data/png_ffmpeg] [--files 2400]
        [--window 768] [--task 8] [--threads 4 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import REPO

from edgecli.decode.cpu import ReadBuffers, read_file
from edgecli.decode.png_layout import read_layout
from edgecli.pipeline.allocator import keep_freed_memory
from edgecli.pipeline.reader import FILES_A_READ


def rate(pattern: str, paths: list[Path], threads: int, args) -> float:
    """Files a second read and walked by ``threads`` threads in tasks of ``args.task`` files,
    their bytes kept by ``pattern``."""
    buffers = ReadBuffers()

    def task(group: list[Path]) -> list:
        kept = []
        for path in group:
            data = buffers.read(path) if pattern == "buffers" else read_file(path)
            read_layout(data)
            kept.append(data if pattern != "freed" else None)
        return kept

    kept: deque = deque()
    tasks: deque = deque()
    ahead = 2 * threads  # tasks in flight, as a run's workers read ahead

    def keep(done: list) -> None:
        kept.extend(done)
        while len(kept) > args.window:
            old = kept.popleft()
            if pattern == "buffers":
                buffers.give(old)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as workers:
        for at in range(0, len(paths), args.task):
            tasks.append(workers.submit(task, paths[at : at + args.task]))
            if len(tasks) > ahead:
                keep(tasks.popleft().result())
        while tasks:
            keep(tasks.popleft().result())
    return len(paths) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pngs", type=Path, default=REPO / "bench_data" / "png_ffmpeg")
    parser.add_argument("--files", type=int, default=2400, help="reads a pattern, cycling")
    parser.add_argument("--window", type=int, default=768, help="files' bytes kept at once")
    parser.add_argument("--task", type=int, default=FILES_A_READ, help="files a read task")
    parser.add_argument("--threads", type=int, nargs="+", default=[4, os.cpu_count()])
    parser.add_argument("--rounds", type=int, default=2, help="turns of every pattern")
    args = parser.parse_args()
    frames = sorted(args.pngs.glob("*.png"))
    if not frames:
        parser.error(f"no PNGs in {args.pngs} (python benchmarks/png_decode.py --make-pngs)")
    paths = [frames[i % len(frames)] for i in range(args.files)]
    size = max(p.stat().st_size for p in frames)
    malloc = "as a run sets it" if keep_freed_memory() else "glibc's defaults or the user's"
    buffers = ReadBuffers()
    for path in frames:  # every way reads the same bytes
        data = buffers.read(path)
        assert data == read_file(path)
        buffers.give(data)
    patterns = ["freed", "window", "buffers"]
    print(f"{args.files} reads of {len(frames)} PNGs ({size / 1e6:.2f} MB at most), tasks of "
          f"{args.task}, window {args.window}, malloc {malloc}; files a second, median (range) "
          f"of {args.rounds} turns")  # fmt: skip
    print("threads " + "".join(f"{p:>22}" for p in patterns))
    for threads in args.threads:
        rates = {p: [] for p in patterns}
        for _ in range(args.rounds):
            for pattern in patterns:
                rates[pattern].append(rate(pattern, paths, threads, args))
        cells = (f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})"
                 for r in rates.values())  # fmt: skip
        print(f"{threads:7} " + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
