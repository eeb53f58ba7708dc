"""Kernel benchmark (issue 3): edgecli's fused kernel against the copy ceiling and two baselines.

Run on a CUDA machine from the repository root:

    PYTHONPATH=. python3 benchmarks/kernel.py [--frames 32] [--json results.json]

For 1080p and 4K batches of random frames (never zeros) it times, with CUDA events on one
non-default stream and inputs rotated over buffers that together exceed the L2 cache:

- a device-to-device copy of a large buffer (cudaMemcpyAsync; read + write bytes): the ceiling;
- edgecli's fused kernel, one launch per batch (the default variant, and a few other item
  heights and warps per block, and the l2 norm, for comparison);
- the previous version of that kernel (benchmarks/previous_edges.cu), in the same run;
- a one-pixel-per-thread fused kernel (benchmarks/naive_edges.cu), one launch per frame;
- an unfused CuPy pipeline per frame: luma (elementwise), cupyx.scipy.ndimage.sobel x 2,
  |Gx| + |Gy|, threshold.

Reported per implementation: median microseconds per frame, effective GB/s at 4 bytes per pixel
(3 read, 1 written), that as a fraction of the copy bandwidth, the ratios to both baselines, and
whether the first frame's output equals edgecli.reference bit for bit. The markdown table comes
last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

import cupy as cp
import cupyx.scipy.ndimage as ndi
import numpy as np

from edgecli import gpu, reference
from edgecli.kernels import Variant, kernel_defines
from edgecli.params import Options

RESOLUTIONS = {"1080p": (1080, 1920), "4K": (2160, 3840)}
DEFAULT = Variant()
OTHER_VARIANTS = [  # item heights and warps per block tested in tests/test_gpu.py, and l2
    Variant(warps=1),
    Variant(warps=8),
    Variant(tile_h=18, warps=8),
    Variant(tile_h=6, warps=8),
    Variant(norm="l2"),
    Variant(halo_loads=True),
    Variant(halo_loads=True, warps=8),
    Variant(halo_loads=True, norm="l2"),
]
COPY_BYTES = 1 << 30
NAIVE_SOURCE = Path(__file__).with_name("naive_edges.cu")
PROBE_SOURCE = Path(__file__).with_name("probe_memory.cu")
# The kernel as it was before the warp-per-item rewrite, with the defines of its default.
PREVIOUS_SOURCE = Path(__file__).with_name("previous_edges.cu")
PREVIOUS_DEFINES = (
    "--std=c++17",
    "-DEDGES_NORM=EDGES_NORM_L1",
    "-DEDGES_BORDER=EDGES_BORDER_REPLICATE",
    "-DEDGES_TILE_W=128",
    "-DEDGES_TILE_H=30",
    "-DEDGES_THREADS=128",
    "-DEDGES_ROWS=2",
)
OPTIONS = Options()  # l1, replicate, T=100: what the baselines compute

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


def previous_launcher(height: int, width: int):
    """The previous kernel (one block per 128 x 30 tile, persistent grid), same arguments."""
    module = cp.RawModule(code=PREVIOUS_SOURCE.read_text(), options=PREVIOUS_DEFINES)
    kernel = module.get_function("edges_bgr")
    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, 128, 0)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    tiles_x = -(-width // 128)
    tiles_per_frame = tiles_x * -(-height // 30)

    def launch(frames_dev, edges_dev, stream):
        n_frames = frames_dev.shape[0]
        blocks = min(n_frames * tiles_per_frame, per_sm * sms)
        args = (frames_dev, edges_dev, *(np.int32(v) for v in (n_frames, height, width)))
        args += (np.int32(tiles_x), np.int32(tiles_per_frame), np.int32(OPTIONS.threshold))
        kernel((blocks,), (128,), args, stream=stream)

    return launch


def probe_launchers(height: int, width: int) -> dict[str, object]:
    """Memory-only versions of the fast path (--probes): no arithmetic, same traffic."""
    launchers: dict[str, object] = {}
    staging = gpu._compile(0, DEFAULT, kernel_defines(DEFAULT) + ("-DEDGES_PROBE_STAGING",))
    launchers["probe: edges.cu staging and stores, no arithmetic"] = lambda f, e, s: (
        gpu.launch_edges(staging, f, e, OPTIONS.effective_threshold, s)
    )
    # The same, each row staged from the item's first column, not the one before it: 400
    # bytes from a 128-byte boundary (13 sectors in 4 lines) instead of 416 from 16 bytes
    # before one (14 sectors in 5 lines). What the left halo column costs the copies.
    no_halo = gpu._compile(
        0, DEFAULT, kernel_defines(DEFAULT) + ("-DEDGES_PROBE_STAGING", "-DEDGES_PROBE_NO_HALO")
    )
    launchers["probe: staging without the left halo column, no arithmetic"] = lambda f, e, s: (
        gpu.launch_edges(no_halo, f, e, OPTIONS.effective_threshold, s)
    )
    if width % 128:
        return launchers
    tiles_x = width // 128
    tiles_per_frame = tiles_x * -(-height // 30)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for words in (3, 5):
        module = cp.RawModule(code=PROBE_SOURCE.read_text(), options=(f"-DWORDS={words}",))
        kernel = module.get_function("probe_direct")
        per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, 128, 0)

        def launch(frames_dev, edges_dev, stream, kernel=kernel, per_sm=per_sm):
            n_frames = frames_dev.shape[0]
            blocks = min(-(-n_frames * tiles_per_frame // 4), per_sm * sms)
            args = (frames_dev, edges_dev, *(np.int32(v) for v in (n_frames, height, width)))
            args += (np.int32(tiles_x), np.int32(tiles_per_frame))
            kernel((blocks,), (128,), args, stream=stream)

        launchers[f"probe: direct loads, {words} words a lane, and stores, no arithmetic"] = launch
    return launchers


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
    probes: bool = False,
) -> list[Result]:
    batch_bytes = n_frames * height * width * 3
    # Rotate over enough batches that their total exceeds the L2 cache several times over.
    n_buffers = max(3, -(-4 * l2_bytes // batch_bytes))
    frames = [random_bytes((n_frames, height, width, 3)) for _ in range(n_buffers)]
    edges = [cp.empty((n_frames, height, width), dtype=cp.uint8) for _ in range(n_buffers)]
    first_frame = cp.asnumpy(frames[0][0])
    expected = {
        variant.norm: reference.detect_frame(first_frame, Options(norm=variant.norm))
        for variant in [DEFAULT, *OTHER_VARIANTS]
    }

    def measure(label: str, launch, runs: int, warmup: int, norm: str = "l1") -> Result:
        result = Result(name, label, n_frames)
        edges[0].fill(0x5A)  # poison: an unwritten pixel fails the exactness check
        cp.cuda.Device().synchronize()  # the fill ran on the default stream
        launch(frames[0], edges[0], stream)
        stream.synchronize()
        result.exact = bool(np.array_equal(cp.asnumpy(edges[0][0]), expected[norm]))
        result.batch_ms = time_runs(
            stream,
            lambda i: launch(frames[i % n_buffers], edges[i % n_buffers], stream),
            runs,
            warmup,
        )
        return result

    results = []
    for variant in [DEFAULT, *OTHER_VARIANTS]:
        kernel = gpu.load_kernel(0, variant)
        label = "edgecli fused" + ("" if variant == DEFAULT else f" ({variant.name})")
        results.append(
            measure(
                label,
                lambda f, e, s, k=kernel: gpu.launch_edges(k, f, e, OPTIONS.effective_threshold, s),
                runs,
                warmup=5,
                norm=variant.norm,
            )
        )
    # The grid held to WARPS_PER_SM (the default) against every block that fits, per norm.
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for variant in (DEFAULT, Variant(norm="l2")):
        loaded = gpu.load_kernel(0, variant)
        if loaded.fitting_blocks == loaded.resident_blocks:
            continue
        kernel = replace(loaded, resident_blocks=loaded.fitting_blocks)
        results.append(
            measure(
                f"edgecli fused ({variant.name}, all {loaded.fitting_blocks // sms} blocks "
                f"an SM that fit, not {loaded.resident_blocks // sms})",
                lambda f, e, s, k=kernel: gpu.launch_edges(k, f, e, OPTIONS.effective_threshold, s),
                runs,
                warmup=5,
                norm=variant.norm,
            )
        )
    if probes:
        for label, launch in probe_launchers(height, width).items():
            result = measure(label, launch, runs, warmup=5)
            result.exact = None  # computes no edges
            results.append(result)
    if PREVIOUS_SOURCE.is_file():
        results.append(
            measure(
                "previous edgecli kernel (benchmarks/previous_edges.cu)",
                previous_launcher(height, width),
                runs,
                warmup=5,
            )
        )
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


def variant_named(name: str) -> Variant:
    """The benchmark's variant called ``name`` (``Variant.name``), for --single."""
    variants = {v.name: v for v in [DEFAULT, *OTHER_VARIANTS]}
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
    kernel = gpu.load_kernel(0, variant)
    for _ in range(2):
        gpu.launch_edges(kernel, frames, edges, OPTIONS.effective_threshold, stream)
    stream.synchronize()
    return 0


EXACT_WORDS = {True: "yes", False: "NO", None: "–"}  # None: a probe, which computes no edges


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
        help="with --single: this variant of the table instead, by name (l2-replicate-128x30-w4)",
    )
    parser.add_argument(
        "--probes",
        action="store_true",
        help="also time memory-only probes of the fast path (staging and stores, direct loads)",
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
    description = gpu.device_description(device.id)
    print(
        f"{date}  {description}, {props['multiProcessorCount']} SMs, "
        f"L2 {l2_bytes / 1e6:.0f} MB, CuPy {cp.__version__}"
    )

    copy_before, copy_times = copy_bandwidth(stream, args.runs)
    results = []
    for name, (height, width) in RESOLUTIONS.items():
        results += bench_resolution(
            name, height, width, args.frames, args.runs, stream, l2_bytes, args.probes
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
