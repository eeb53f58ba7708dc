"""Kernel forms x grid sizes, timed in interleaved rounds: A/B comparisons that see 2-3%.

``benchmarks/kernel.py`` times each kernel once after the other, so the machine's drift falls
on some more than others. Here every (form, norm, blocks an SM) is timed ``--runs`` times a
round, ``--rounds`` rounds, the order reversed every other round, on the same batches of 32
random frames (rotated over buffers larger than L2) and the same CUDA events as kernel.py.
Each is checked exact on its first frame first. The table gives the median µs a frame and
the range of the round medians.

    PYTHONPATH=. python3 benchmarks/kernel_ab.py                       # every form below
    PYTHONPATH=. python3 benchmarks/kernel_ab.py --forms staged staged-w8 --norms l1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

import cupy as cp
import kernel as kb  # benchmarks/kernel.py: this script's directory is first on sys.path
import numpy as np

from edgecli import gpu, reference
from edgecli.kernels import Variant
from edgecli.params import NORMS, Options

FRAMES = 32  # a batch, as in kernel.py
FORMS = {
    "staged": {},
    "halo-loads": {"halo_loads": True},
    "staged-w8": {"warps": 8},
}


def grids(forms: list[str], norms: list[str]) -> dict[str, gpu.LoadedKernel]:
    """Every form x norm, at each number of blocks an SM that fits (8 warps a block: 1 or 2;
    else 2 to 4), as launchable kernels, by label."""
    sms = cp.cuda.Device(0).attributes["MultiProcessorCount"]
    loaded = {}
    for form in forms:
        for norm in norms:
            kernel = gpu.load_kernel(0, Variant(norm=norm, **FORMS[form]))
            default = kernel.resident_blocks // sms
            for per_sm in (1, 2) if kernel.variant.warps == 8 else (2, 3, 4):
                if per_sm * sms <= kernel.fitting_blocks:
                    mark = " (default)" if per_sm == default else ""
                    label = f"{form} {norm} {per_sm}/SM{mark}"
                    loaded[label] = dataclasses.replace(kernel, resident_blocks=per_sm * sms)
    return loaded


def time_interleaved(
    loaded: dict[str, gpu.LoadedKernel], height: int, width: int, rounds: int, runs: int
) -> tuple[dict[str, list[float]], dict[str, bool]]:
    """Batch milliseconds of each kernel, ``runs`` a round in interleaved rounds, and whether
    each is exact on its first frame."""
    stream = cp.cuda.Stream(non_blocking=True)
    l2 = cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    threshold = kb.OPTIONS.effective_threshold
    n = FRAMES
    buffers = max(3, -(-4 * l2 // (n * height * width * 3)))
    frames = [kb.random_bytes((n, height, width, 3)) for _ in range(buffers)]
    edges = [cp.empty((n, height, width), dtype=cp.uint8) for _ in range(buffers)]
    first = cp.asnumpy(frames[0][0])
    expected = {norm: reference.detect_frame(first, Options(norm=norm)) for norm in NORMS}
    exact = {}
    for label, kernel in loaded.items():
        edges[0].fill(0x5A)  # poison: an unwritten pixel fails
        cp.cuda.Device().synchronize()
        gpu.launch_edges(kernel, frames[0], edges[0], threshold, stream)
        stream.synchronize()
        result = cp.asnumpy(edges[0][0])
        exact[label] = bool(np.array_equal(result, expected[kernel.variant.norm]))

    def launcher(kernel):
        def launch(i):
            b = i % buffers
            gpu.launch_edges(kernel, frames[b], edges[b], threshold, stream)

        return launch

    times: dict[str, list[float]] = {label: [] for label in loaded}
    for r in range(rounds):
        for label in list(loaded) if r % 2 == 0 else list(reversed(loaded)):
            times[label] += kb.time_runs(stream, launcher(loaded[label]), runs, 3)
    return times, exact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forms", nargs="+", choices=list(FORMS), default=list(FORMS))
    parser.add_argument("--norms", nargs="+", choices=NORMS, default=list(NORMS))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=20, help="timed runs a round")
    args = parser.parse_args()
    loaded = grids(args.forms, args.norms)
    exit_status = 0
    for resolution, (height, width) in kb.RESOLUTIONS.items():
        times, exact = time_interleaved(loaded, height, width, args.rounds, args.runs)
        print(f"\n{resolution}: µs a frame, median of {args.rounds} x {args.runs} runs")
        print("| form, norm, blocks an SM | µs | round medians | exact |")
        print("|---|---:|---|---|")
        for label, t in times.items():
            rounds = [
                statistics.median(t[i * args.runs : (i + 1) * args.runs]) * 1e3 / FRAMES
                for i in range(args.rounds)
            ]
            median = statistics.median(t) * 1e3 / FRAMES
            spread = f"{min(rounds):.2f}-{max(rounds):.2f}"
            print(f"| {label} | {median:.2f} | {spread} | {'yes' if exact[label] else 'NO'} |")
            exit_status |= not exact[label]
    return exit_status


if __name__ == "__main__":
    sys.exit(main())
