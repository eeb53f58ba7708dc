"""PNG frame folders decoded on the CPU and on the GPU (issue 41), in one run: 1080p frames as
``ffmpeg -i clip -pix_fmt rgb24 %06d.png`` extracts them (every row Paeth-filtered but the
first, Sub; zlib level 6, in 4 KB IDATs), and the same pixels as ``cv2.imwrite`` writes them
(every row Sub-filtered; zlib's run-length strategy, in 8 KB IDATs) for the CPU floor.

Input: ``--pngs``, a folder of FFmpeg's frames (default ``bench_data/png_ffmpeg``). Where it is
missing it is made from ``--clip`` (every ``--every``-th of its frames, ``--frames`` of them) by
imageio-ffmpeg's FFmpeg; ``--make-pngs`` makes it again and stops. The GPU host has no FFmpeg,
so the folder is made on the development machine and carried there (12 frames, 29 MB).

1. **The CPU floor**: each row timed per frame (the best of ``--repeats`` runs of a frame, the
   median over the frames, the rows taking turns) on one thread, and as frames a second on
   ``--threads`` threads, on both kinds of file:

   - ``cv2.imdecode``: edgecli's CPU decoder (libpng and zlib, IMREAD_COLOR);
   - ``read_layout``: edgecli's chunk walk before it (edgecli.decode.png_layout: CRCs);
   - ``copy_stream``: the IDATs' data joined into one buffer, as for an upload;
   - ``zlib.decompress``: the zlib stream inflated by the zlib Python links;
   - ``libdeflate``: the same by libdeflate's ``libdeflate_zlib_decompress`` (the system's
     libdeflate.so.0 through ctypes: a benchmark's tool, not a dependency of edgecli);
   - ``unfilter (C)``: the five filters undone by benchmarks/png_unfilter.c (built here with cc);
   - ``RGB to BGR``: cv2.cvtColor of the unfiltered rows;
   - ``libdeflate + C unfilter + BGR``: a CPU decoder built of the three (8-bit RGB only) with
     ``read_layout`` and the IDATs joined, checked equal to cv2.imdecode's frame on every
     frame: set against ``cv2.imdecode`` plus ``read_layout``, which edgecli's CPU decoder runs.

   A row whose tool is missing (no libdeflate, no cc) is left out, with a line saying so.
2. **Whole runs** (``--runs``, default 2,400 and 12,000 frames: links cycling over FFmpeg's
   frames): ``python -m edgecli run --decode`` each of ``--decodes`` (default cpu, the
   reference, then gpu; auto decodes PNGs on the CPU) into tmpfs (``--into``), after one
   warm-up run that fills the bytecode and kernel caches; wall fps (process start to exit), the
   summary's bottleneck line and decoders, and every run's PNGs compared byte for byte with the
   cpu run's (the encoder is deterministic, so equal pixels give equal bytes).
3. **The GPU's kernels alone** (needs CUDA): inflate.cu over batches of FFmpeg's zlib streams
   (``--inflate-batches``: the median launch between device events, per frame and GB/s of
   inflated output); png.cu (``--png-batches`` x ``--warps``: each launch after a copy of the
   pristine inflated data, not timed; every frame checked equal to cv2.imdecode's); and a
   line on nvCOMP, which has no row: whether ``nvidia.nvcomp`` is importable (the GPU host
   has no nvCOMP, and its wheels, 34 MB, leave no room for the frames in a device call).

Last, a short table: each run's and each rate's ratio to the ``--decode cpu`` run of the same
length. ``--cpu-only`` (or a machine where CUDA is unusable) leaves out the GPU's rows.

    python benchmarks/png_decode.py [--pngs bench_data/png_ffmpeg] [--runs 2400 12000]
    python benchmarks/png_decode.py --cpu-only --runs 240 --repeats 1
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import shutil
import statistics
import subprocess
import sys
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
from common import log, output_root, png_digests, ratio, symlink_folder, threaded_rate
from gpu_decode import ENV, edgecli

from edgecli.decode.png_layout import PngLayout, read_layout

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LIBDEFLATE = "/usr/lib/x86_64-linux-gnu/libdeflate.so.0"
DECODES = ("cpu", "auto", "gpu")
# The whole-process targets of issue 41, frames a second by run length.
TARGETS = {2400: 1000, 12000: 1500}
WIDTH = 50  # the table's first column


@dataclass(frozen=True)
class Frame:
    """One PNG file, its layout, its zlib stream, the rows that stream inflates to, and
    cv2.imdecode's frame of it."""

    name: str
    data: bytes
    layout: PngLayout
    stream: bytes
    inflated: np.ndarray  # filter bytes and rows
    rows: np.ndarray | None  # unfiltered, (height, row bytes); None without the C unfilter
    bgr: np.ndarray  # cv2.imdecode(IMREAD_COLOR)


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
    what the floor's last row times. Either tool may be missing (None): its rows are left out."""

    def __init__(self, libdeflate: Libdeflate | None, unfilter_c) -> None:
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


def floor_decoder(scratch: Path) -> FloorDecoder:
    """The floor's decoder with the tools this machine has; a line for each one missing."""
    try:
        libdeflate = Libdeflate(ctypes.util.find_library("deflate") or LIBDEFLATE)
    except OSError as exc:
        log(f"libdeflate: {exc} (apt-get install libdeflate0): its rows are left out")
        libdeflate = None
    try:
        unfilter_c = build_unfilter(scratch)
    except (OSError, subprocess.CalledProcessError) as exc:
        log(f"the C unfilter: not built ({exc}): its rows are left out")
        unfilter_c = None
    return FloorDecoder(libdeflate, unfilter_c)


def cpu_rows(decoder: FloorDecoder) -> list[Row]:
    def copy_stream(frame: Frame) -> int:
        return frame.layout.copy_stream(frame.data, bytearray(frame.layout.stream_size))

    def inflate(frame: Frame) -> np.ndarray:
        return decoder.libdeflate.inflate(frame.stream, frame.layout.inflated_size)

    rows = [
        Row("cv2.imdecode", lambda f: cv2.imdecode(np.frombuffer(f.data, np.uint8), 1)),
        Row("read_layout", lambda f: read_layout(f.data)),
        Row("copy_stream", copy_stream),
        Row("zlib.decompress", lambda f: zlib.decompress(f.stream)),
    ]
    if decoder.libdeflate is not None:
        rows.append(Row("libdeflate", inflate))
    if decoder.unfilter_c is not None:
        rows.append(Row("unfilter (C)", lambda f: decoder.unfilter(f.inflated, f.layout)))
        rows.append(Row("RGB to BGR", lambda f: decoder.to_bgr(f.rows, f.layout)))
        if decoder.libdeflate is not None:
            rows.append(Row("libdeflate + C unfilter + BGR", lambda f: decoder.decode(f.data)))
    return rows


def load_frames(paths: list[Path], decoder: FloorDecoder) -> list[Frame]:
    """The frames at ``paths``, each checked: 8-bit RGB, libdeflate's bytes zlib's, and the
    floor decoder's frame cv2.imdecode's (where it has the tools)."""
    frames = []
    for path in paths:
        data = path.read_bytes()
        layout = read_layout(data)
        if (layout.colour_type, layout.bit_depth, layout.interlaced) != (2, 8, False):
            raise SystemExit(f"{path}: not an 8-bit RGB PNG without interlacing")
        stream = layout.stream(data)
        inflated = np.frombuffer(zlib.decompress(stream), np.uint8)
        want = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        libdeflate, unfilter_c = decoder.libdeflate, decoder.unfilter_c
        if libdeflate is not None and not np.array_equal(
            libdeflate.inflate(stream, len(inflated)), inflated
        ):
            raise SystemExit(f"{path}: libdeflate's bytes differ from zlib's")
        if libdeflate and unfilter_c and not np.array_equal(decoder.decode(data), want):
            raise SystemExit(f"{path}: the floor decoder's frame is not cv2.imdecode's")
        rows = decoder.unfilter(inflated, layout) if unfilter_c is not None else None
        frames.append(Frame(path.name, data, layout, stream, inflated, rows, want))
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


def make_pngs(clip: Path, count: int, every: int, folder: Path) -> list[Path]:
    """``count`` frames of ``clip``, every ``every``-th, as FFmpeg extracts them (rgb24) into
    ``folder`` (made anew): the input a user's ``ffmpeg -i clip frames/%06d.png`` gives."""
    import imageio_ffmpeg

    if not clip.is_file():
        raise SystemExit(f"{clip}: no such clip (make bench-media makes bench_data/pan.mp4)")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(clip), "-vf",
               f"select=not(mod(n\\,{every}))", "-fps_mode", "passthrough", "-frames:v",
               str(count), "-pix_fmt", "rgb24", str(folder / "%06d.png")]  # fmt: skip
    subprocess.run(command, check=True)
    return sorted(folder.glob("*.png"))


def rewritten_by_cv2(paths: list[Path], folder: Path) -> list[Path]:
    """The pixels of ``paths`` as cv2.imwrite writes them, in ``folder``."""
    folder.mkdir()
    for path in paths:
        cv2.imwrite(str(folder / path.name), cv2.imread(str(path)))
    return sorted(folder.glob("*.png"))


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


def cpu_floor(frames: list[Frame], rows: list[Row], args) -> dict:
    """The floor's rows on ``frames``: ms a frame on one thread, fps on ``--threads``."""
    log(f"{'row':32} {'ms/frame':>9} {'fps, 1 thread':>14} {f'fps, {args.threads} threads':>16}")
    figures = {}
    times = per_frame_ms(rows, frames, args.repeats)
    for row in rows:
        ms = times[row.name]
        fps = threaded_rate(row.run, frames, args.threads, 2 * args.threads * len(frames))
        figures[row.name] = {"ms_per_frame": round(ms, 3), "fps_threads": round(fps, 1)}
        log(f"{row.name:32} {ms:9.2f} {1e3 / ms:14.1f} {fps:16.1f}")
    return figures


def whole_runs(pngs: list[Path], args, gpu: bool, scratch: Path) -> dict[int, list[dict]]:
    """Each ``--runs`` length with each ``--decodes`` (cpu first: the reference) into
    ``--into``, every run's PNGs compared with the cpu run's; after one warm-up run."""
    # Every child compiles edgecli's modules once, into a cache of the benchmark's own, rather
    # than each child paying for it (the GPU host's image sets PYTHONDONTWRITEBYTECODE).
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = str(scratch / "pyc")
    root = Path(tempfile.mkdtemp(prefix="edgecli-bench-png-", dir=output_root(args.into)))
    decodes = sorted(args.decodes, key=lambda d: d != "cpu")
    if not gpu:
        decodes = [d for d in decodes if d != "gpu"]
    results: dict[int, list[dict]] = {}
    try:
        warm = symlink_folder(pngs, 64, scratch / "warm-in")
        warm_up = edgecli(
            str(warm), root / "warm", "gpu" if gpu else "cpu", timeout_s=args.run_timeout_s
        )
        shutil.rmtree(root / "warm", ignore_errors=True)
        log(f"warm-up, 64 frames: {warm_up}")
        for count in args.runs:
            source = symlink_folder(pngs, count, scratch / f"in-{count}")
            reference, results[count] = None, []
            for decode in decodes:
                if time.perf_counter() - args.started > args.budget_s:
                    run = {"decode": decode, "error": f"not run: past --budget-s {args.budget_s:g}"}
                    log(f"{count} PNGs, --decode {decode}: {run['error']}")
                    results[count].append(run)
                    continue
                out = root / f"{count}-{decode}"
                run = {
                    "decode": decode,
                    **edgecli(str(source), out, decode, timeout_s=args.run_timeout_s),
                }
                if "error" not in run:
                    digests = png_digests(out)
                    if decode == "cpu":
                        reference = digests
                    elif reference is not None:
                        run["equal_to_cpu"] = digests == reference
                shutil.rmtree(out, ignore_errors=True)
                log(f"{count} PNGs, --decode {decode} into {args.into}: {run}")
                results[count].append(run)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def time_inflate(device: int, streams, sizes, *, repeats: int = 5) -> float:
    """Seconds one launch over the zlib ``streams`` (inflating to ``sizes`` bytes each) takes on
    ``device``, the median of ``repeats`` timed between device events after one warm-up;
    ValueError where a stream does not inflate to its size."""
    import cupy  # only here: the CPU rows run without CuPy

    from edgecli.decode.gpu import inflate

    kernel = inflate.module(device)
    src, src_start = inflate.pack_streams(streams)
    dst_start = inflate.offsets(sizes)
    with cupy.cuda.Device(device):
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:  # the copies on the launch's own stream, so it waits for them
            args = [cupy.asarray(a) for a in (src, src_start)]
            dst = cupy.empty(int(dst_start[-1]), np.uint8)
            dst_start_dev = cupy.asarray(dst_start)
            status = cupy.empty(len(sizes), np.int32)
        inflate.launch_inflate(kernel, *args, dst, dst_start_dev, status, stream=stream)
        statuses = status.get(stream=stream)
        failed = np.flatnonzero(statuses != inflate.OK)
        if failed.size:
            i = int(failed[0])
            raise ValueError(f"stream {i} did not inflate: {inflate.reason(statuses[i])}")
        elapsed = []
        for _ in range(repeats):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            inflate.launch_inflate(kernel, *args, dst, dst_start_dev, status, stream=stream)
            end.record(stream)
            end.synchronize()
            elapsed.append(cupy.cuda.get_elapsed_time(start, end) / 1000)
    return float(np.median(elapsed))


def inflate_rows(frames: list[Frame], batches: list[int]) -> list[dict]:
    """inflate.cu alone over batches of the frames' zlib streams (cycled): the median launch."""
    rows = []
    for batch in batches:
        chosen = [frames[i % len(frames)] for i in range(batch)]
        sizes = [frame.layout.inflated_size for frame in chosen]
        try:
            seconds = time_inflate(0, [frame.stream for frame in chosen], sizes)
        except ValueError as exc:
            rows.append({"batch": batch, "error": str(exc)})
            log(f"inflate.cu, batch {batch}: {exc}")
            continue
        row = {
            "batch": batch,
            "ms_a_launch": round(seconds * 1e3, 3),
            "us_a_frame": round(seconds / batch * 1e6, 1),
            "fps": round(batch / seconds, 1),
            "output_gb_s": round(sum(sizes) / seconds / 1e9, 2),
        }
        rows.append(row)
        log(f"inflate.cu, batch {batch}: {row}")
    return rows


def png_kernel_rows(frames: list[Frame], batches: list[int], warps_list: list[int]) -> list[dict]:
    """png.cu alone: the frames' inflated data to BGR frames, per batch and warps an image; the
    median of five launches between device events, each after a copy of the pristine data over
    the buffer the kernel unfilters in place (not timed)."""
    import cupy as cp

    from edgecli.decode.gpu import png as gpu_png

    kernel = gpu_png.kernel(0)
    stream = cp.cuda.Stream(non_blocking=True)
    layout = frames[0].layout
    stride = layout.inflated_size
    rows = []
    for batch in batches:
        order = [i % len(frames) for i in range(batch)]
        pristine = cp.asarray(np.concatenate([frames[i].inflated for i in order]))
        work = cp.empty_like(pristine)
        out = cp.empty((batch, layout.height, layout.width, 3), cp.uint8)
        status = cp.empty(batch, cp.int32)
        for warps in warps_list:
            times = []
            for _ in range(6):  # the first warms up
                start, end = cp.cuda.Event(), cp.cuda.Event()
                with stream:
                    cp.copyto(work, pristine)
                    start.record(stream)
                    gpu_png.launch_png_to_bgr(
                        kernel, work, stride, out, status, color_type=layout.colour_type,
                        depth=layout.bit_depth, stream=stream, warps=warps,
                    )  # fmt: skip
                    end.record(stream)
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
            ms = statistics.median(times[1:])
            decoded = cp.asnumpy(out)
            exact = not cp.asnumpy(status).any() and all(
                np.array_equal(decoded[k], frames[i].bgr) for k, i in enumerate(order)
            )
            row = {"batch": batch, "warps": warps, "ms_a_launch": round(ms, 3),
                   "fps": round(batch / ms * 1e3, 1), "equal_to_cv2": exact}  # fmt: skip
            rows.append(row)
            log(f"png.cu, batch {batch}, {warps} warps an image: {row}")
        del pristine, work, out
    return rows


def nvcomp_line() -> str:
    """Whether nvCOMP (nvidia.nvcomp) is here to set its Deflate beside inflate.cu."""
    try:
        from nvidia import nvcomp
    except ImportError as exc:
        return f"nvCOMP: not importable here ({exc}): no nvCOMP Deflate row"
    version = getattr(nvcomp, "__version__", "?")
    return f"nvCOMP {version}: importable here; this benchmark has no row for its Deflate"


def table(results: dict) -> str:
    """Every whole run and every rate, as frames a second and as a ratio to the --decode cpu
    run of the same length (the first length's where a rate has none)."""
    runs = {int(count): rows for count, rows in results.get("runs", {}).items()}
    cpu_fps = {
        count: next((r["fps"] for r in rows if r["decode"] == "cpu" and "fps" in r), None)
        for count, rows in runs.items()
    }
    base = next(iter(cpu_fps.values()), None)
    lines = [f"{'':{WIDTH}} {'fps':>8} {'/ cpu run':>9}  notes"]

    def line(what: str, fps: float | None, over: float | None, notes: str = "") -> None:
        shown = "-" if fps is None else f"{fps:8.0f}"
        r = ratio(fps, over)
        lines.append(f"{what:{WIDTH}} {shown:>8} {'-' if r is None else f'{r:.2f}':>9}  {notes}")

    for count, rows in runs.items():
        for run in rows:
            what = f"{count:,} PNGs, --decode {run['decode']}"
            if "error" in run:
                lines.append(f"{what:{WIDTH}} {run['error'][:90]}")
                continue
            notes = [f"decoders {run['decoders']}"]
            if "equal_to_cpu" in run:
                notes.append(f"PNGs == cpu's: {run['equal_to_cpu']}")
            if run["decode"] == "gpu" and count in TARGETS:
                met = "met" if run["fps"] >= TARGETS[count] else "not met"
                notes.append(f"target {TARGETS[count]:,}: {met}")
            line(what, run["fps"], cpu_fps[count], "; ".join(notes))
            lines.append(f"{'':{WIDTH + 2}}{run['bottleneck']}")
    threads = results["threads"]
    for source, figures in results.get("floor", {}).items():
        for name in ("cv2.imdecode", "libdeflate + C unfilter + BGR"):
            if name in figures:
                what = f"floor, {source}: {name}"
                line(what, figures[name]["fps_threads"], base, f"{threads} threads")
    for row in results.get("inflate_kernel", []):
        if "error" in row:
            lines.append(f"{'inflate.cu alone, batch ' + str(row['batch']):{WIDTH}} {row['error']}")
            continue
        notes = f"{row['us_a_frame']} us a frame, {row['output_gb_s']} GB/s out"
        line(f"inflate.cu alone, batch {row['batch']}", row["fps"], base, notes)
    for row in results.get("png_kernel", []):
        what = f"png.cu alone, batch {row['batch']}, {row['warps']} warps"
        line(what, row["fps"], base, f"frames == cv2's: {row['equal_to_cv2']}")
    for key in ("kernel_error", "nvcomp"):
        if key in results:
            lines.append(results[key][:200])
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pngs", type=Path, default=REPO / "bench_data" / "png_ffmpeg",
                        help="FFmpeg's frames (made from --clip where missing)")  # fmt: skip
    parser.add_argument("--clip", type=Path, default=REPO / "bench_data" / "pan.mp4")
    parser.add_argument("--frames", type=int, default=12, help="frames taken from the clip")
    parser.add_argument("--every", type=int, default=20, help="take every n-th frame of it")
    parser.add_argument("--make-pngs", action="store_true", help="make --pngs again and stop")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each frame a floor row")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--runs", type=int, nargs="*", default=[2400, 12000],
                        help="lengths of the whole runs (none: no whole runs)")  # fmt: skip
    parser.add_argument("--decodes", nargs="+", choices=DECODES, default=["cpu", "gpu"])
    parser.add_argument("--into", default="tmpfs", help="tmpfs (/dev/shm), disk, or a folder")
    parser.add_argument("--run-timeout-s", type=float, default=150.0)
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="start no whole run after this many seconds")  # fmt: skip
    parser.add_argument("--inflate-batches", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--png-batches", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--warps", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--cpu-only", action="store_true", help="leave out the GPU's rows")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


def gpu_unusable(cpu_only: bool) -> str | None:
    """Why the GPU's rows are left out, or None where they run."""
    if cpu_only:
        return "--cpu-only"
    from edgecli.edges.backends import cuda_unusable_reason

    return cuda_unusable_reason()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.started = time.perf_counter()
    if args.make_pngs or not args.pngs.is_dir():
        pngs = make_pngs(args.clip, args.frames, args.every, args.pngs)
        log(f"made {len(pngs)} PNGs of {args.clip} in {args.pngs}")
        if args.make_pngs:
            return 0
    pngs = sorted(args.pngs.glob("*.png"))
    if not pngs:
        raise SystemExit(f"{args.pngs}: no PNGs")
    why_not_gpu = gpu_unusable(args.cpu_only)
    if why_not_gpu is not None:
        log(f"the GPU's rows are left out: {why_not_gpu}")
    results: dict = {"machine": os.uname().nodename, "cpus": os.cpu_count(),
                     "threads": args.threads, "pngs": str(args.pngs), "floor": {}}  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        decoder = floor_decoder(scratch)
        rows = cpu_rows(decoder)
        frames = {}
        sources = {"ffmpeg": pngs, "cv2.imwrite": rewritten_by_cv2(pngs, scratch / "cv2")}
        for source, paths in sources.items():
            frames[source] = load_frames(paths, decoder)
            log(f"\n{source}: {len(frames[source])} frames, {describe(frames[source])}")
            results["floor"][source] = cpu_floor(frames[source], rows, args)
        del frames["cv2.imwrite"]
        if args.runs:
            log("\n== whole runs")
            results["runs"] = whole_runs(pngs, args, why_not_gpu is None, scratch)
        if why_not_gpu is None:
            log("\n== the GPU's kernels alone, on FFmpeg's frames")
            try:
                results["inflate_kernel"] = inflate_rows(frames["ffmpeg"], args.inflate_batches)
                results["png_kernel"] = png_kernel_rows(
                    frames["ffmpeg"], args.png_batches, args.warps
                )
            except Exception as exc:  # a kernel that never ran before: keep the table
                results["kernel_error"] = f"the kernels alone: {type(exc).__name__}: {exc}"
                log(results["kernel_error"])
            results["nvcomp"] = nvcomp_line()
            log(results["nvcomp"])
    results["elapsed_s"] = round(time.perf_counter() - args.started, 1)
    results["table"] = table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    log(f"\n{results['table']}\n({results['elapsed_s']} s)")
    kernel_rows = [results.get("inflate_kernel", []), results.get("png_kernel", [])]
    failed = "kernel_error" in results or any(
        "error" in row or row.get("equal_to_cpu") is False or row.get("equal_to_cv2") is False
        for rows in [*results.get("runs", {}).values(), *kernel_rows]
        for row in rows
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
