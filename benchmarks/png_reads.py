"""How fast a run's workers read PNG frames (issue 41), by what becomes of each file's bytes.

A ``--decode gpu`` run reads each PNG (``read_file``) and walks its chunks (``read_layout``) on
its worker threads, ``FILES_A_READ`` files a task, and keeps the bytes until their batch is
gathered into pinned memory: hundreds of files, which glibc serves with fresh pages (page
faults, and mmap and munmap calls that every thread's faults wait behind); and each of the
four system calls of a read lets go of the GIL and waits to win it back. This times
``--files`` reads of the folder's PNGs (cycling over them, from the page cache) in tasks of
``--task`` files on each of ``--threads``, the patterns taking turns:

- ``freed``: each file's bytes dropped once walked;
- ``window``: the last ``--window`` files' bytes kept, as a run keeps its batches;
- ``pooled``: the same window, each file read (``os.readv``) into a buffer of a pool made and
  touched before the clock starts, which goes back to the pool as the window moves on;
- ``batched``: the same window, a task's files opened in one call and read in another
  (benchmarks/read_batch.c, built with cc; left out without it): two waits for the GIL a task.

    python benchmarks/png_reads.py [--pngs bench_data/png_ffmpeg] [--files 2400]
        [--window 768] [--task 8] [--threads 4 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import REPO

from edgecli.decode.cpu import read_file
from edgecli.decode.png_layout import read_layout
from edgecli.pipeline.reader import FILES_A_READ

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


# A bytes object of a size, its bytes not yet written (as os.read makes one), and where they are.
_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.argtypes, _new_bytes.restype = [ctypes.c_void_p, ctypes.c_ssize_t], ctypes.py_object
_bytes_at = ctypes.pythonapi.PyBytes_AsString
_bytes_at.argtypes, _bytes_at.restype = [ctypes.py_object], ctypes.c_void_p


class BatchReader:
    """benchmarks/read_batch.c, built with cc into ``folder``: a task's files in two calls."""

    def __init__(self, folder: Path):
        library = folder / "read_batch.so"
        source = Path(__file__).resolve().parent / "read_batch.c"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
                       check=True)  # fmt: skip
        functions = ctypes.CDLL(str(library))
        self._open, self._read = functions.open_batch, functions.read_batch
        self._open.restype = self._read.restype = None

    def read(self, paths: list[Path]) -> list[bytes]:
        count = len(paths)
        names = (ctypes.c_char_p * count)(*(os.fsencode(p) for p in paths))
        fds, sizes = (ctypes.c_int * count)(), (ctypes.c_longlong * count)()
        self._open(names, count, fds, sizes)
        if min(fds) < 0:
            raise OSError(-min(fds), "open_batch")
        datas = [_new_bytes(None, sizes[i]) for i in range(count)]
        pointers = (ctypes.c_void_p * count)(*(_bytes_at(d) for d in datas))
        got = (ctypes.c_longlong * count)()
        self._read(fds, count, pointers, sizes, got)
        if list(got) != list(sizes):
            raise OSError(f"read_batch read {list(got)} of {list(sizes)} bytes")
        return datas


def rate(pattern: str, paths: list[Path], threads: int, args, pool: Pool, batch) -> float:
    """Files a second read and walked by ``threads`` threads in tasks of ``args.task`` files,
    their bytes kept by ``pattern``."""

    def task(group: list[Path]) -> list:
        if pattern == "batched":
            datas = batch.read(group)
            for data in datas:
                read_layout(data)
            return datas
        kept = []
        for path in group:
            if pattern == "pooled":
                buffer, data = read_pooled(path, pool)
                read_layout(data)
                kept.append(buffer)
            else:
                data = read_file(path)
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
            if pattern == "pooled":
                pool.give(old)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as workers:
        for at in range(0, len(paths), args.task):
            tasks.append(workers.submit(task, paths[at : at + args.task]))
            if len(tasks) > ahead:
                keep(tasks.popleft().result())
        while tasks:
            keep(tasks.popleft().result())
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
    parser.add_argument("--task", type=int, default=FILES_A_READ, help="files a read task")
    parser.add_argument("--threads", type=int, nargs="+", default=[4, os.cpu_count()])
    parser.add_argument("--rounds", type=int, default=2, help="turns of every pattern")
    args = parser.parse_args()
    frames = sorted(args.pngs.glob("*.png"))
    if not frames:
        parser.error(f"no PNGs in {args.pngs} (python benchmarks/png_decode.py --make-pngs)")
    paths = [frames[i % len(frames)] for i in range(args.files)]
    size = max(p.stat().st_size for p in frames) + 1
    # Room for the window and the tasks in flight past it.
    pool = Pool(args.window + (2 * max(args.threads) + 2) * args.task, size)
    patterns = ["freed", "window", "pooled", "batched"]
    with tempfile.TemporaryDirectory(prefix="edgecli-reads-") as scratch:
        try:
            batch = BatchReader(Path(scratch))
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"no batched row: read_batch.c could not be built ({exc})")
            batch, patterns = None, patterns[:-1]
        # Every way reads the same bytes.
        expected = [read_file(path) for path in frames]
        for path, data in zip(frames, expected, strict=True):
            buffer, view = read_pooled(path, pool)
            assert view == data
            pool.give(buffer)
        assert batch is None or batch.read(frames) == expected
        print(f"{args.files} reads of {len(frames)} PNGs ({size / 1e6:.2f} MB at most), tasks of "
              f"{args.task}, window {args.window}; files a second, median (range) of "
              f"{args.rounds} turns")  # fmt: skip
        print("threads " + "".join(f"{p:>22}" for p in patterns))
        for threads in args.threads:
            rates = {p: [] for p in patterns}
            for _ in range(args.rounds):
                for pattern in patterns:
                    rates[pattern].append(rate(pattern, paths, threads, args, pool, batch))
            cells = (f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})"
                     for r in rates.values())  # fmt: skip
            print(f"{threads:7} " + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
