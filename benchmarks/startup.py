"""Start-up: the wall time of a one-image run, and where a CUDA run's start-up time goes.

    PYTHONPATH=. python3 benchmarks/startup.py [--image sample_frames/pan_000.jpg] [--runs 5]

1. Whole processes, as a user or a CI smoke test runs them: ``python3 -m edgecli run IMAGE -o
   DIR -q`` with ``--backend cpu``, ``auto`` (the default: a run this small goes to the CPU,
   without the CUDA driver started early) and, where CUDA is usable, ``--backend cuda``: the
   first CUDA run with an empty kernel cache (it compiles), then ``--runs`` runs of each with
   the cache filled, interleaved; the median and range of their wall times.
2. With CUDA, the same CUDA run with and without edgecli's early driver start
   (``edgecli/cuda/driver.py``; off: ``start_driver`` replaced by a no-op), interleaved, with when
   ``main()`` returned.
3. Phases, each once in order in one fresh process (imports and the CUDA context cold, the
   kernel cache warm): imports, device query, context, kernel load, backend, the first batch.

Prints a short table last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = """
import time
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter()
    print(f"{name}\\t{(now - t) * 1e3:.1f}")
    t = now
import edgecli.cli
lap("import edgecli.cli (click)")
import numpy, cv2
lap("import numpy, cv2")
import edgecli.pipeline
lap("import edgecli.pipeline")
import cupy
lap("import cupy")
cupy.cuda.runtime.getDeviceCount()
lap("cuda: device count")
cupy.cuda.Device(0).use(); cupy.empty(1)
lap("cuda: context + first allocation")
from edgecli.edges.backends import cuda_unusable_reason
assert cuda_unusable_reason() is None
lap("cuda_unusable_reason (kernel load, from the cache)")
from edgecli.edges.cuda_backend import CudaBackend
from edgecli.options.params import Options
backend = CudaBackend(Options())
lap("CudaBackend()")
frame = cv2.imread(IMAGE)
edges = backend.detect(frame[numpy.newaxis])
lap("first detect() of the image (pinned and device buffers, copies, launch)")
edges = backend.detect(frame[numpy.newaxis])
lap("second detect() (buffers reused)")
"""


# A one-image CUDA run that reports when main() returned, then leaves as the program does
# (edgecli.cli.console); {prelude} runs first.
TIMED_RUN = """
import os, sys, time
t0 = time.perf_counter()
{prelude}
from edgecli.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
print(f"MAIN {{time.perf_counter() - t0:.3f}}", file=sys.stderr, flush=True)
os._exit(code)
"""
NO_EARLY_DRIVER = "import edgecli.cuda.driver as d; d.start_driver = lambda device: None"


def timed_cuda_run(image: Path, prelude: str, env: dict) -> tuple[float, float]:
    """Wall seconds of a one-image CUDA run, and when its main() returned."""
    with tempfile.TemporaryDirectory(prefix="edgecli-startup-") as out:
        code = TIMED_RUN.format(prelude=prelude)
        command = [sys.executable, "-c", code, "run", str(image), "-o", out, "-q"]
        start = time.perf_counter()
        done = subprocess.run([*command, "--backend", "cuda"], env=env, capture_output=True)
        wall = time.perf_counter() - start
    marks = [line for line in done.stderr.decode().splitlines() if line.startswith("MAIN ")]
    if done.returncode or not marks:
        raise SystemExit(f"startup.py: a timed CUDA run failed:\n{done.stderr.decode()}")
    return wall, float(marks[-1].split()[1])


def run_once(image: Path, backend: str, env: dict) -> float:
    with tempfile.TemporaryDirectory(prefix="edgecli-startup-") as out:
        command = [sys.executable, "-m", "edgecli", "run", str(image), "-o", out, "-q"]
        start = time.perf_counter()
        done = subprocess.run([*command, "--backend", backend], env=env, check=False)
        elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"startup.py: {' '.join(command)} --backend {backend} failed")
    return elapsed


def cuda_usable() -> bool:
    code = (
        "from edgecli.edges.backends import cuda_unusable_reason as r\n"
        "raise SystemExit(r() is not None)"
    )
    return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, default=Path("sample_frames/pan_000.jpg"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    rows: list[tuple[str, str]] = []
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    rows.append(("python3 -c pass", f"{(time.perf_counter() - start) * 1e3:.0f} ms"))

    backends = ["cpu", "auto"] + (["cuda"] if cuda_usable() else [])
    with tempfile.TemporaryDirectory(prefix="edgecli-cache-") as cache:
        env = dict(os.environ, XDG_CACHE_HOME=cache)  # an empty kernel cache
        if "cuda" in backends:
            cold = run_once(args.image, "cuda", env)
            rows.append(("cuda, empty kernel cache (compiles)", f"{cold:.3f} s"))
        walls: dict[str, list[float]] = {b: [] for b in backends}
        for _ in range(args.runs):
            for backend in backends:
                walls[backend].append(run_once(args.image, backend, env))
        for backend, times in walls.items():
            rows.append(
                (
                    f"{backend}, one image, {args.runs} runs",
                    f"median {statistics.median(times):.3f} s "
                    f"(range {min(times):.3f}-{max(times):.3f})",
                )
            )
        if "cuda" in backends:
            early: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
            for _ in range(args.runs):
                early["with"].append(timed_cuda_run(args.image, "", env))
                early["without"].append(timed_cuda_run(args.image, NO_EARLY_DRIVER, env))
            for how, runs in early.items():
                walls = [wall for wall, _ in runs]
                rows.append(
                    (
                        f"cuda, {how} the early driver start",
                        f"median {statistics.median(walls):.3f} s "
                        f"(range {min(walls):.3f}-{max(walls):.3f}), main() done at "
                        f"{statistics.median(m for _, m in runs):.3f} s",
                    )
                )
            phases = subprocess.run(
                [sys.executable, "-c", f"IMAGE = {str(args.image)!r}\n" + PHASES],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if phases.returncode:
                print(phases.stderr, file=sys.stderr)
                return phases.returncode
            for line in phases.stdout.splitlines():
                name, ms = line.split("\t")
                rows.append((f"  phase: {name}", f"{float(ms):.0f} ms"))
    print(f"| {args.image} | wall time |\n|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
