"""The CPU floor a GPU PNG decoder must beat: what decoding a 1080p PNG frame costs on the CPU,
whole and piece by piece, for frames as ``ffmpeg -i clip -pix_fmt rgb24 %06d.png`` extracts
them (every row Paeth-filtered but the first, Sub; zlib level 6, in 4 KB IDATs) and as
``cv2.imwrite`` writes them (OpenCV's defaults: every row Sub-filtered; zlib's run-length
strategy, in 8 KB IDATs).

Rows, each timed per frame (the best of ``--repeats`` runs of a frame, the median over the
frames; the rows taking turns) on one thread, and as frames a second on ``--threads``
threads:

- ``cv2.imdecode``: edgecli's CPU decoder (libpng and zlib, IMREAD_COLOR);
- ``read_layout``: edgecli's chunk walk before it (edgecli.decode.png_layout: CRCs);
- ``copy_stream``: the IDATs' data joined into one buffer, as for an upload;
- ``zlib.decompress``: the zlib stream inflated by the zlib Python links;
- ``libdeflate``: the same by libdeflate's ``libdeflate_zlib_decompress`` (the system's
  libdeflate.so.0 through ctypes: a benchmark's tool, not a dependency of edgecli);
- ``unfilter (C)``: the five filters undone by benchmarks/png_unfilter.c (built here with cc);
- ``RGB to BGR``: cv2.cvtColor of the unfiltered rows;
- ``libdeflate + C unfilter + BGR``: a CPU decoder built of the three (8-bit RGB only) with
  ``read_layout`` and the IDATs joined, checked equal to cv2.imdecode's frame on every frame:
  set against ``cv2.imdecode`` plus ``read_layout``, which edgecli's CPU decoder runs now.

A row is a :class:`Row` in ``cpu_rows``; the GPU's rows (its inflate kernel on the same
streams, its whole decode) join them as rows of their own, timed with CUDA events over a batch
and given per frame, so that one run prints the floor and the GPU side by side.

    python benchmarks/png_decode.py --clip bench_data/pan.mp4 [--frames 24] [--threads 16]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from edgecli.decode.png_layout import PngLayout, read_layout

HERE = Path(__file__).resolve().parent
LIBDEFLATE = "/usr/lib/x86_64-linux-gnu/libdeflate.so.0"


@dataclass(frozen=True)
class Frame:
    """One PNG file, its layout, its zlib stream and the rows that stream inflates to."""

    name: str
    data: bytes
    layout: PngLayout
    stream: bytes
    inflated: np.ndarray  # filter bytes and rows
    rows: np.ndarray  # unfiltered, (height, row bytes)


@dataclass(frozen=True)
class Row:
    name: str
    run: Callable[[Frame], object]


class Libdeflate:
    """libdeflate's zlib decompressor through ctypes (which lets go of the GIL during the
    call), one decompressor a thread as libdeflate asks."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        self.lib.libdeflate_alloc_decompressor.restype = ctypes.c_void_p
        self.lib.libdeflate_zlib_decompress.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
            ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
        ]  # fmt: skip
        self.local = threading.local()

    def inflate(self, stream: bytes, size: int) -> np.ndarray:
        """``stream`` inflated into a new array of ``size`` bytes, which it must fill."""
        decompressor = getattr(self.local, "decompressor", None)
        if decompressor is None:
            decompressor = self.local.decompressor = self.lib.libdeflate_alloc_decompressor()
        out = np.empty(size, np.uint8)
        written = ctypes.c_size_t()
        result = self.lib.libdeflate_zlib_decompress(
            decompressor, stream, len(stream), out.ctypes.data, size, ctypes.byref(written)
        )
        if result != 0 or written.value != size:
            raise RuntimeError(f"libdeflate: result {result}, {written.value} of {size} bytes")
        return out


def build_unfilter(folder: Path):
    """benchmarks/png_unfilter.c's ``png_unfilter``, compiled with cc -O2 into ``folder``."""
    library = folder / "png_unfilter.so"
    source = HERE / "png_unfilter.c"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    function = ctypes.CDLL(str(library)).png_unfilter
    function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_int,
                         ctypes.c_void_p]  # fmt: skip
    function.restype = ctypes.c_int
    return function


class FloorDecoder:
    """A CPU decoder of 8-bit RGB PNGs built of libdeflate, the C unfilter and cv2.cvtColor:
    what the floor's last row times."""

    def __init__(self, libdeflate: Libdeflate, unfilter_c) -> None:
        self.libdeflate = libdeflate
        self.unfilter_c = unfilter_c

    def unfilter(self, filtered: np.ndarray, layout: PngLayout) -> np.ndarray:
        rows = np.empty((layout.height, layout.row_bytes), np.uint8)
        failed = self.unfilter_c(filtered.ctypes.data, layout.height, layout.row_bytes,
                                 layout.filter_bpp, rows.ctypes.data)  # fmt: skip
        if failed:
            raise RuntimeError(f"filter type over 4 in row {failed - 1}")
        return rows

    @staticmethod
    def to_bgr(rows: np.ndarray, layout: PngLayout) -> np.ndarray:
        return cv2.cvtColor(rows.reshape(layout.height, layout.width, 3), cv2.COLOR_RGB2BGR)

    def decode(self, data: bytes) -> np.ndarray:
        layout = read_layout(data)
        inflated = self.libdeflate.inflate(layout.stream(data), layout.inflated_size)
        return self.to_bgr(self.unfilter(inflated, layout), layout)


def cpu_rows(decoder: FloorDecoder) -> list[Row]:
    def copy_stream(frame: Frame) -> int:
        return frame.layout.copy_stream(frame.data, bytearray(frame.layout.stream_size))

    def inflate(frame: Frame) -> np.ndarray:
        return decoder.libdeflate.inflate(frame.stream, frame.layout.inflated_size)

    return [
        Row("cv2.imdecode", lambda f: cv2.imdecode(np.frombuffer(f.data, np.uint8), 1)),
        Row("read_layout", lambda f: read_layout(f.data)),
        Row("copy_stream", copy_stream),
        Row("zlib.decompress", lambda f: zlib.decompress(f.stream)),
        Row("libdeflate", inflate),
        Row("unfilter (C)", lambda f: decoder.unfilter(f.inflated, f.layout)),
        Row("RGB to BGR", lambda f: decoder.to_bgr(f.rows, f.layout)),
        Row("libdeflate + C unfilter + BGR", lambda f: decoder.decode(f.data)),
    ]


def load_frames(paths: list[Path], decoder: FloorDecoder) -> list[Frame]:
    """The frames at ``paths``, each checked: 8-bit RGB, libdeflate's bytes zlib's, and the
    floor decoder's frame cv2.imdecode's."""
    frames = []
    for path in paths:
        data = path.read_bytes()
        layout = read_layout(data)
        if (layout.colour_type, layout.bit_depth, layout.interlaced) != (2, 8, False):
            raise SystemExit(f"{path}: not an 8-bit RGB PNG without interlacing")
        stream = layout.stream(data)
        inflated = np.frombuffer(zlib.decompress(stream), np.uint8)
        if not np.array_equal(decoder.libdeflate.inflate(stream, len(inflated)), inflated):
            raise SystemExit(f"{path}: libdeflate's bytes differ from zlib's")
        want = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if not np.array_equal(decoder.decode(data), want):
            raise SystemExit(f"{path}: the floor decoder's frame is not cv2.imdecode's")
        frames.append(
            Frame(path.name, data, layout, stream, inflated, decoder.unfilter(inflated, layout))
        )
    return frames


def per_frame_ms(rows: list[Row], frames: list[Frame], repeats: int) -> dict[str, float]:
    """Each row's median over the frames of its best of ``repeats`` runs of a frame, in
    milliseconds. The rows take turns frame by frame, so that other work on the machine
    slows them alike."""
    best = {(row.name, i): float("inf") for row in rows for i in range(len(frames))}
    for _ in range(repeats):
        for i, frame in enumerate(frames):
            for row in rows:
                start = time.perf_counter()
                row.run(frame)
                elapsed = time.perf_counter() - start
                best[row.name, i] = min(best[row.name, i], elapsed)
    return {
        row.name: statistics.median(best[row.name, i] for i in range(len(frames))) * 1e3
        for row in rows
    }


def threaded_fps(row: Row, frames: list[Frame], threads: int, count: int) -> float:
    """Frames a second of ``row`` over ``count`` frames on ``threads`` threads."""
    taken = iter(range(count))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                index = next(taken, None)
            if index is None:
                return
            row.run(frames[index % len(frames)])

    pool = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return count / (time.perf_counter() - start)


def make_frames(clip: Path, count: int, folder: Path) -> dict[str, list[Path]]:
    """``count`` frames of ``clip`` as FFmpeg extracts them (rgb24) and as cv2.imwrite writes
    the same pixels, in ``folder``."""
    import imageio_ffmpeg

    ffmpeg_dir, cv2_dir = folder / "ffmpeg", folder / "cv2"
    ffmpeg_dir.mkdir()
    cv2_dir.mkdir()
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(clip), "-frames:v",
               str(count), "-pix_fmt", "rgb24", str(ffmpeg_dir / "%06d.png")]  # fmt: skip
    subprocess.run(command, check=True)
    extracted = sorted(ffmpeg_dir.glob("*.png"))
    for path in extracted:
        cv2.imwrite(str(cv2_dir / path.name), cv2.imread(str(path)))
    return {"ffmpeg": extracted, "cv2.imwrite": sorted(cv2_dir.glob("*.png"))}


def describe(frames: list[Frame]) -> str:
    """The frames' size, compressed size and filter types, in a few words."""
    filters = Counter()
    for frame in frames:
        filters.update(frame.inflated[:: 1 + frame.layout.row_bytes].tolist())
    total = sum(filters.values())
    mix = ", ".join(f"{'NSUAP'[k]} {100 * n / total:.0f}%" for k, n in sorted(filters.items()))
    size = statistics.mean(len(f.data) for f in frames) / 1e6
    first = frames[0].layout
    return f"{first.width}x{first.height}, {size:.2f} MB a file, filters {mix}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", type=Path, default=Path("bench_data/pan.mp4"))
    parser.add_argument("--frames", type=int, default=24, help="frames taken from the clip")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each frame a row")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not args.clip.is_file():
        raise SystemExit(f"{args.clip}: no such clip (make bench-media makes bench_data/pan.mp4)")
    try:
        libdeflate = Libdeflate(ctypes.util.find_library("deflate") or LIBDEFLATE)
    except OSError as exc:
        raise SystemExit(f"libdeflate: {exc} (apt-get install libdeflate0)") from None
    results = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "threads": args.threads}
    with tempfile.TemporaryDirectory() as scratch:
        decoder = FloorDecoder(libdeflate, build_unfilter(Path(scratch)))
        rows = cpu_rows(decoder)
        for source, paths in make_frames(args.clip, args.frames, Path(scratch)).items():
            frames = load_frames(paths, decoder)
            print(f"\n{source}: {len(frames)} frames, {describe(frames)}")
            print(f"{'row':32} {'ms/frame':>9} {'fps, 1 thread':>14} "
                  f"{f'fps, {args.threads} threads':>16}")  # fmt: skip
            figures = {}
            times = per_frame_ms(rows, frames, args.repeats)
            for row in rows:
                ms = times[row.name]
                fps = threaded_fps(row, frames, args.threads, 2 * args.threads * len(frames))
                figures[row.name] = {"ms_per_frame": round(ms, 3), "fps_threads": round(fps, 1)}
                print(f"{row.name:32} {ms:9.2f} {1e3 / ms:14.1f} {fps:16.1f}", flush=True)
            results[source] = figures
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
