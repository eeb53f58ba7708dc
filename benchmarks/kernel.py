"""Kernel benchmark: edgecli's fused kernel against the copy ceiling and two baselines.

Run on a CUDA machine from the repository root:

    PYTHONPATH=. python3 benchmarks/kernel.py [--frames 32] [--json results.json]

For 1080p and 4K batches of random frames (never zeros) it times, with CUDA events on one
non-default stream and inputs rotated over buffers that together exceed the L2 cache:

- a device-to-device copy of a large buffer (cudaMemcpyAsync; read + write bytes): the ceiling,
  before and after the rest;
- edgecli's fused kernel, one launch per batch, l1 and l2, as compiled for this GPU; and
  compiled as PTX for sm_80 and sm_75 (edgecli.cuda.compiling.ARCH_ENV), the code paths of older
  GPUs (cp.async without Hopper's DPX instructions; rows staged with plain loads), run here;
- edgecli's Canny (cuda/canny.cu, four launches a batch: the tiles' fused pass, the
  merge across tiles, the roots, the output), l1 and l2, at thresholds CANNY_THRESHOLDS;
  random frames are its hard case (candidates everywhere, strong ones among them);
- with --blocks-per-sm, the persistent grid at every number of blocks an SM that fits, per
  norm, in interleaved rounds (how edgecli.edges.variants.WARPS_PER_SM is chosen);
- a one-pixel-per-thread fused kernel (benchmarks/naive_edges.cu), one launch per frame;
- an unfused CuPy pipeline per frame: luma (elementwise), cupyx.scipy.ndimage.sobel x 2,
  |Gx| + |Gy|, threshold.

Reported per implementation: median microseconds per frame, effective GB/s at 4 bytes per pixel
(3 read, 1 written), that as a fraction of the copy bandwidth, the ratios to both baselines, and
whether the first frame's output equals edgecli.edges.reference bit for bit (Canny's: cv2.Canny of
its cv2 gray; the output is poisoned first). The markdown table comes last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import cupy as cp
import cupyx.scipy.ndimage as ndi
import cv2
import numpy as np

from edgecli.cuda import build
from edgecli.cuda.compiling import ARCH_ENV
from edgecli.edges import cuda_backend as backend
from edgecli.edges import kernels as edge_kernels
from edgecli.edges import reference
from edgecli.edges import variants as kernels
from edgecli.edges.cuda_canny import launch_canny
from edgecli.edges.variants import Variant
from edgecli.options.params import Options, canny_limits

# 1918x1080: a width that is not a multiple of 16, so every item takes the general path.
RESOLUTIONS = {"1080p": (1080, 1920), "4K": (2160, 3840), "1918x1080": (1080, 1918)}
DEFAULT = Variant()
NORMS = (DEFAULT, Variant(norm="l2"))
OLDER_PATHS = (80, 75)  # compiled as PTX for these, run on this GPU
COPY_BYTES = 1 << 30
NAIVE_SOURCE = Path(__file__).with_name("naive_edges.cu")
OPTIONS = Options()  # l1, replicate, T=100: what the baselines compute
CANNY_THRESHOLDS = (50, 150)

LUMA = cp.ElementwiseKernel(
    "raw uint8 bgr",
    "int16 y",
    "y = (9798 * bgr[3 * i + 2] + 19235 * bgr[3 * i + 1] + 3735 * bgr[3 * i] + 16384) >> 15",
    "edgecli_bench_luma",
)


@dataclass
class Result:
    resolution: str
    implementation: str
    frames: int
    batch_ms: list[float] = field(default_factory=list)
    exact: bool | None = None

    @property
    def us_per_frame(self) -> float:
        return 1e3 * statistics.median(self.batch_ms) / self.frames


def random_bytes(shape) -> cp.ndarray:
    return (cp.random.random(shape, dtype=cp.float32) * 256).astype(cp.uint8)


def time_runs(stream: cp.cuda.Stream, enqueue, runs: int, warmup: int) -> list[float]:
    """Milliseconds of each of `runs` calls of enqueue(i), from CUDA events around it."""
    for i in range(warmup):
        enqueue(i)
    events = []
    for i in range(runs):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        enqueue(warmup + i)
        end.record(stream)
        events.append((start, end))
    stream.synchronize()
    return [cp.cuda.get_elapsed_time(start, end) for start, end in events]


def copy_bandwidth(stream: cp.cuda.Stream, runs: int) -> tuple[float, list[float]]:
    """GB/s of a device-to-device copy of COPY_BYTES, counting bytes read plus written."""
    src = random_bytes(COPY_BYTES)
    dst = cp.empty_like(src)
    cp.cuda.Device().synchronize()  # made on the default stream; timed on `stream`
    times = time_runs(
        stream,
        lambda i: dst.data.copy_from_device_async(src.data, COPY_BYTES, stream),
        runs,
        warmup=3,
    )
    return 2 * COPY_BYTES / (statistics.median(times) * 1e-3) / 1e9, times


def naive_launcher(height: int, width: int):
    kernel = cp.RawModule(code=NAIVE_SOURCE.read_text()).get_function("naive_edges_l1_replicate")
    grid = (-(-width // 16), -(-height // 16))

    def launch(frames_dev, edges_dev, stream):
        for n in range(frames_dev.shape[0]):  # one launch per frame, as the course code did
            kernel(
                grid,
                (16, 16),
                (
                    frames_dev[n],
                    edges_dev[n],
                    np.int32(height),
                    np.int32(width),
                    np.int32(OPTIONS.threshold),
                ),
                stream=stream,
            )

    return launch


@contextmanager
def compiled_for(arch: int | None):
    """Kernels loaded inside compile as PTX for ``arch`` (None: for this GPU)."""
    before = os.environ.get(ARCH_ENV)
    if arch is None:
        os.environ.pop(ARCH_ENV, None)
    else:
        os.environ[ARCH_ENV] = str(arch)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ARCH_ENV, None)
        else:
            os.environ[ARCH_ENV] = before


def edgecli_launcher(kernel: edge_kernels.LoadedKernel):
    def launch(frames_dev, edges_dev, stream):
        backend.launch_edges(kernel, frames_dev, edges_dev, OPTIONS.effective_threshold, stream)

    return launch


def canny_launcher(canny, labels_dev: cp.ndarray):
    """Canny at CANNY_THRESHOLDS, its labels in ``labels_dev`` (one buffer: the launches of a
    stream run one after another)."""
    limits = canny_limits(*CANNY_THRESHOLDS, canny.norm == "l2")

    def launch(frames_dev, edges_dev, stream):
        launch_canny(canny, frames_dev, edges_dev, labels_dev, limits, stream)

    return launch


def unfused_pipeline(frames_dev, edges_dev, stream):
    with stream:
        for n in range(frames_dev.shape[0]):
            y = cp.empty(frames_dev.shape[1:3], dtype=cp.int16)
            LUMA(frames_dev[n], y)
            gx = ndi.sobel(y, axis=1, mode="nearest")  # nearest = replicate
            gy = ndi.sobel(y, axis=0, mode="nearest")
            magnitude = cp.abs(gx) + cp.abs(gy)
            edges_dev[n] = (magnitude > OPTIONS.threshold).astype(cp.uint8) * cp.uint8(255)


def bench_resolution(
    name: str,
    height: int,
    width: int,
    n_frames: int,
    runs: int,
    stream: cp.cuda.Stream,
    l2_bytes: int,
    grid_sweep: bool = False,
) -> list[Result]:
    batch_bytes = n_frames * height * width * 3
    # Rotate over enough batches that their total exceeds the L2 cache several times over.
    n_buffers = max(3, -(-4 * l2_bytes // batch_bytes))
    frames = [random_bytes((n_frames, height, width, 3)) for _ in range(n_buffers)]
    edges = [cp.empty((n_frames, height, width), dtype=cp.uint8) for _ in range(n_buffers)]
    first_frame = cp.asnumpy(frames[0][0])
    expected = {
        variant.norm: reference.detect_frame(first_frame, Options(norm=variant.norm))
        for variant in NORMS
    }
    gray = cv2.cvtColor(first_frame, cv2.COLOR_BGR2GRAY)
    for variant in NORMS:
        expected[f"canny-{variant.norm}"] = cv2.Canny(
            gray, *CANNY_THRESHOLDS, L2gradient=variant.norm == "l2"
        )

    def check(launch, norm: str) -> bool:
        edges[0].fill(0x5A)  # poison: an unwritten pixel fails the exactness check
        cp.cuda.Device().synchronize()  # the fill ran on the default stream
        launch(frames[0], edges[0], stream)
        stream.synchronize()
        return bool(np.array_equal(cp.asnumpy(edges[0][0]), expected[norm]))

    def measure(label: str, launch, runs: int, warmup: int, norm: str = "l1") -> Result:
        result = Result(name, label, n_frames)
        result.exact = check(launch, norm)
        result.batch_ms = time_runs(
            stream,
            lambda i: launch(frames[i % n_buffers], edges[i % n_buffers], stream),
            runs,
            warmup,
        )
        return result

    results = []
    for variant in NORMS:
        kernel = edge_kernels.load_kernel(0, variant)
        label = f"edgecli fused, {variant.norm} ({kernel.target})"
        results.append(measure(label, edgecli_launcher(kernel), runs, 5, variant.norm))
    labels_dev = cp.empty((n_frames, height, width), dtype=cp.uint32)
    for variant in NORMS:
        canny = edge_kernels.load_canny(0, variant.norm)
        label = f"edgecli Canny, {variant.norm} {CANNY_THRESHOLDS}"
        launch = canny_launcher(canny, labels_dev)
        results.append(measure(label, launch, runs, 5, f"canny-{variant.norm}"))
    for arch in OLDER_PATHS:
        with compiled_for(arch):
            kernel = edge_kernels.load_kernel(0, DEFAULT)
        label = f"edgecli fused, l1, as compiled for older GPUs ({kernel.target})"
        results.append(measure(label, edgecli_launcher(kernel), runs, 5))
    if grid_sweep:
        results += sweep_grids(name, n_frames, runs, measure, check)
    results.append(
        measure(
            "one pixel per thread, per frame",
            naive_launcher(height, width),
            max(5, runs // 3),
            warmup=2,
        )
    )
    results.append(
        measure(
            "unfused CuPy (luma, ndimage.sobel x2, threshold)",
            unfused_pipeline,
            max(3, runs // 10),
            warmup=1,
        )
    )
    return results


def sweep_grids(name: str, n_frames: int, runs: int, measure, check) -> list[Result]:
    """Every blocks-an-SM that fits, per norm, in interleaved rounds of runs // 5 each: the
    persistent grid's size is the one choice left that moves the kernel's time."""
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    grids = []
    for variant in NORMS:
        loaded = edge_kernels.load_kernel(0, variant)
        for per_sm in range(1, loaded.fitting_blocks // sms + 1):
            kernel = replace(loaded, resident_blocks=per_sm * sms)
            label = f"grid: {variant.norm}, {per_sm} block(s) of {kernels.WARPS} warps an SM"
            if per_sm * sms == loaded.resident_blocks:
                label += " (the default)"
            grids.append((label, edgecli_launcher(kernel), variant.norm))
    rounds = 5
    merged = {label: Result(name, label, n_frames) for label, _, _ in grids}
    for label, launch, norm in grids:
        merged[label].exact = check(launch, norm)
    for _ in range(rounds):
        for label, launch, norm in grids:
            timed = measure(label, launch, max(2, runs // rounds), 2, norm)
            merged[label].batch_ms += timed.batch_ms
    return list(merged.values())


def variant_named(name: str) -> Variant:
    """The variant called ``name`` (``Variant.name``, e.g. l2-constant), for --single."""
    variants = {v.name: v for v in kernels.all_variants()}
    if name not in variants:
        raise SystemExit(f"kernel.py: no variant {name!r}; one of {', '.join(variants)}")
    return variants[name]


def launch_twice(n_frames: int, variant: Variant = DEFAULT) -> int:
    """Two launches of ``variant`` on a random 1080p batch: what a profiler looks at."""
    height, width = RESOLUTIONS["1080p"]
    frames = random_bytes((n_frames, height, width, 3))
    edges = cp.empty((n_frames, height, width), dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()  # frames were made on the default stream
    kernel = edge_kernels.load_kernel(0, variant)
    for _ in range(2):
        backend.launch_edges(kernel, frames, edges, OPTIONS.effective_threshold, stream)
    stream.synchronize()
    return 0


EXACT_WORDS = {True: "yes", False: "NO", None: "–"}


def markdown_table(results: list[Result], copy_gbs: float) -> str:
    rows = [
        "| resolution | implementation | µs/frame | GB/s (4 B/px) | × copy BW | × naive "
        "| × unfused | exact |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    by_resolution: dict[str, list[Result]] = {}
    for result in results:
        by_resolution.setdefault(result.resolution, []).append(result)
    for name, group in by_resolution.items():
        height, width = RESOLUTIONS[name]
        naive = next(r for r in group if r.implementation.startswith("one pixel"))
        unfused = next(r for r in group if r.implementation.startswith("unfused"))
        for r in group:
            gbs = 4 * height * width / (r.us_per_frame * 1e-6) / 1e9
            rows.append(
                f"| {name} | {r.implementation} | {r.us_per_frame:.2f} | {gbs:.0f} | "
                f"{gbs / copy_gbs:.2f} | {naive.us_per_frame / r.us_per_frame:.1f} | "
                f"{unfused.us_per_frame / r.us_per_frame:.1f} | {EXACT_WORDS[r.exact]} |"
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32, help="frames per batch (default 32)")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per kernel")
    parser.add_argument("--json", type=Path, help="write every measurement to this file")
    parser.add_argument(
        "--single",
        action="store_true",
        help="launch the default kernel (or --variant) twice on one 1080p batch and exit (for "
        "a profiler: ncu -k edges_bgr)",
    )
    parser.add_argument(
        "--variant",
        metavar="NAME",
        help="with --single: this variant instead, by name (l2-replicate)",
    )
    parser.add_argument(
        "--blocks-per-sm",
        action="store_true",
        help="also time the persistent grid at every number of blocks an SM that fits",
    )
    args = parser.parse_args(argv)
    if args.variant and not args.single:
        parser.error("--variant goes with --single")
    if args.single:
        return launch_twice(args.frames, variant_named(args.variant or DEFAULT.name))

    device = cp.cuda.Device(0)
    props = cp.cuda.runtime.getDeviceProperties(0)
    l2_bytes = props["l2CacheSize"]
    stream = cp.cuda.Stream(non_blocking=True)
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    description = build.device_description(device.id)
    print(
        f"{date}  {description}, {props['multiProcessorCount']} SMs, "
        f"L2 {l2_bytes / 1e6:.0f} MB, CuPy {cp.__version__}"
    )

    copy_before, copy_times = copy_bandwidth(stream, args.runs)
    results = []
    for name, (height, width) in RESOLUTIONS.items():
        results += bench_resolution(
            name, height, width, args.frames, args.runs, stream, l2_bytes, args.blocks_per_sm
        )
        for r in (r for r in results if r.resolution == name):
            spread = (max(r.batch_ms) - min(r.batch_ms)) / statistics.median(r.batch_ms)
            print(
                f"{name:6} {r.implementation:60} {r.us_per_frame:9.2f} us/frame  "
                f"(runs {len(r.batch_ms)}, spread {100 * spread:.0f}%, exact {r.exact})"
            )
    copy_after, copy_times_after = copy_bandwidth(stream, args.runs)
    copy_gbs = statistics.median([copy_before, copy_after])
    print(
        f"device-to-device copy: {copy_before:.0f} GB/s before, {copy_after:.0f} GB/s after "
        f"(read + write, {COPY_BYTES >> 20} MiB)"
    )

    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": date,
                    "device": description,
                    "frames_per_batch": args.frames,
                    "copy_gbs": {
                        "before": copy_before,
                        "after": copy_after,
                        "ms_before": copy_times,
                        "ms_after": copy_times_after,
                    },
                    "results": [
                        {
                            "resolution": r.resolution,
                            "implementation": r.implementation,
                            "us_per_frame": r.us_per_frame,
                            "exact": r.exact,
                            "batch_ms": r.batch_ms,
                        }
                        for r in results
                    ],
                },
                indent=1,
            )
        )
    print()
    print(
        f"Batches of {args.frames} random frames; copy bandwidth {copy_gbs:.0f} GB/s "
        "(median of before and after)."
    )
    print(markdown_table(results, copy_gbs))
    return 0 if all(r.exact is not False for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
