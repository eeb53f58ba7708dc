"""How fast one video reader runs, alone and beside busy PNG encoders: what paces edgecli on
a video, which decodes in order on one reader thread.

    PYTHONPATH=. python3 benchmarks/reader.py bench_data/pan.mp4 --encoders 16

First, how long opening the clip and getting its first frame take, against reading the rest
(``--repeats`` times). Then, for each configuration, the clip is read whole, ``--repeats``
times, and the table gives the median frames per second, and the reader thread's CPU
milliseconds and minor page faults per frame (a frame cv2 allocates anew is first touched,
page by page, by the reader). The configurations: ``cv2.VideoCapture.read()`` allocating
each frame, or reading into one array it is handed (``read(image)``, which reuses it);
alone, or with ``--encoders`` threads encoding 1-bit PNGs of an edge map meanwhile, at
Python's default GIL switch interval (5 ms) and at 0.5 ms; and "hand-off": each frame handed
through a bounded queue to the main thread, which copies it into a buffer, as edgecli's
pipeline does. The encoders run flat out, so with 16 of them every core is busy: the worst
case for the reader, not edgecli's load (its workers encode only the frames the reader gives
them, and are a quarter busy on video).
"""

from __future__ import annotations

import argparse
import queue
import resource
import statistics
import sys
import threading
import time

import cv2
import numpy as np

from edgecli.params import Options
from edgecli.png import encode_png
from edgecli.reference import detect_batch


def opening(path: str) -> str:
    """How long opening the video and getting its first frame take, against the rest."""
    start = time.perf_counter()
    capture = cv2.VideoCapture(path)
    opened = time.perf_counter()
    ok, _ = capture.read()
    first = time.perf_counter()
    rest = 0
    while capture.read()[0]:
        rest += 1
    end = time.perf_counter()
    capture.release()
    return (
        f"open {1e3 * (opened - start):.1f} ms, first frame {1e3 * (first - opened):.1f} ms, "
        f"the other {rest} frames {1e3 * (end - first):.1f} ms ({rest / (end - first):.0f} fps)"
    )


def thread_usage() -> tuple[float, int]:
    """CPU seconds and minor page faults of the calling thread so far."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def read_all(path: str, reuse: bool, handoff: bool) -> tuple[int, float, float, int]:
    """Read every frame; return frames, seconds, the reader's CPU seconds and page faults."""
    capture = cv2.VideoCapture(path)
    frames = 0
    usage: list = []
    handed: queue.Queue = queue.Queue(maxsize=36)

    def read() -> None:
        nonlocal frames
        cpu0, faults0 = thread_usage()
        image = None
        while True:
            ok, frame = capture.read(image) if reuse else capture.read()
            if not ok:
                break
            if reuse:
                image = frame  # the next read() writes into this array
            frames += 1
            if handoff:
                handed.put(frame)  # with reuse, overwritten by the next read: timing only
        cpu1, faults1 = thread_usage()
        usage.extend([cpu1 - cpu0, faults1 - faults0])
        if handoff:
            handed.put(None)

    start = time.perf_counter()
    reader = threading.Thread(target=read, name="reader")
    reader.start()
    if handoff:
        out = None
        while (frame := handed.get()) is not None:
            if out is None:
                out = np.empty_like(frame)
            np.copyto(out, frame)
    reader.join()
    seconds = time.perf_counter() - start
    capture.release()
    return frames, seconds, usage[0], usage[1]


class Encoders:
    """``count`` threads encoding ``edges`` as 1-bit PNGs until stopped."""

    def __init__(self, count: int, edges: np.ndarray):
        self.stop = threading.Event()
        self.encoded = 0
        self.threads = [threading.Thread(target=self._work, args=(edges,)) for _ in range(count)]

    def _work(self, edges: np.ndarray) -> None:
        while not self.stop.is_set():
            encode_png(edges, 1)
            self.encoded += 1  # approximate under threads; only a rough rate is wanted

    def __enter__(self) -> Encoders:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("video")
    parser.add_argument("--encoders", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    capture = cv2.VideoCapture(args.video)
    ok, first = capture.read()
    capture.release()
    if not ok:
        sys.exit(f"{args.video}: cannot read a frame")
    edges = detect_batch(first[np.newaxis], Options())[0]
    configs = [
        ("alone, read() allocates", False, 0, 5.0, False),
        ("alone, read(image) reuses", True, 0, 5.0, False),
        (f"{args.encoders} encoders, read() allocates", False, args.encoders, 5.0, False),
        (f"{args.encoders} encoders, read(image) reuses", True, args.encoders, 5.0, False),
        (f"{args.encoders} encoders, read(), switch 0.5 ms", False, args.encoders, 0.5, False),
        (f"{args.encoders} encoders, read(), hand-off", False, args.encoders, 5.0, True),
        (f"{args.encoders} encoders, read(image), hand-off", True, args.encoders, 5.0, True),
    ]
    print(f"{args.video}; cv2 {cv2.__version__}, {cv2.getNumThreads()} cv2 threads")
    for _ in range(args.repeats):
        print(opening(args.video))
    print("| reader | fps | reader CPU ms / frame | page faults / frame | PNGs / s beside |")
    print("|---|---:|---:|---:|---:|")
    for label, reuse, encoders, switch_ms, handoff in configs:
        sys.setswitchinterval(switch_ms / 1e3)
        rows = []
        for _ in range(args.repeats):
            with Encoders(encoders, edges) as busy:
                frames, seconds, cpu, faults = read_all(args.video, reuse, handoff)
                encoded = busy.encoded
            rows.append((frames / seconds, cpu / frames * 1e3, faults / frames, encoded / seconds))
        sys.setswitchinterval(0.005)
        fps, cpu_ms, faults, pngs = (
            statistics.median(column) for column in zip(*rows, strict=True)
        )
        print(f"| {label} | {fps:.1f} | {cpu_ms:.2f} | {faults:.0f} | {pngs:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
