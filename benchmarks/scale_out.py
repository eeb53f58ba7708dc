"""Scale-out overhead (issue 20): the same run as one process, as two ``--shard i/2``
processes at once into one folder, on ``--scheduler local:2`` and, where a host has several
GPUs, on ``--device all``; whole-process wall times in alternating rounds, every output folder
checked byte for byte against the one-process run's.

    python benchmarks/scale_out.py [--input DIR] [--frames 240] [--rounds 5] [--backend cpu]

Without ``--input`` it makes ``--frames`` JPEGs (720p to 1080p, the frames of
benchmarks/cpu_vs_script.py); with it, the run reads ``--frames`` symlinks cycling over the
folder's images (as benchmarks/gpu_decode.py does). The overhead of a way is its median wall
time over the one process's, minus 1: what splitting costs on the same hardware (on a 2-core
machine the two shards, or the two Dask workers, share the cores the one process had to
itself).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from common import png_digests, symlink_folder  # noqa: E402
from cpu_vs_script import make_frames  # noqa: E402


def edgecli(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgecli", "run", *args, "-q"]


def one_process(source: str, out: Path, backend: str) -> float:
    start = time.perf_counter()
    subprocess.run(edgecli(source, "-o", str(out), "--backend", backend), check=True, cwd=REPO)
    return time.perf_counter() - start


def two_shards(source: str, out: Path, backend: str) -> float:
    start = time.perf_counter()
    shards = [
        subprocess.Popen(
            edgecli(source, "-o", str(out), "--backend", backend, "--shard", f"{i}/2"), cwd=REPO
        )
        for i in range(2)
    ]
    if any(shard.wait() for shard in shards):
        sys.exit("a shard failed")
    return time.perf_counter() - start


def dask_local(source: str, out: Path, backend: str) -> float:
    start = time.perf_counter()
    command = edgecli(source, "-o", str(out), "--backend", backend, "--scheduler", "local:2")
    subprocess.run(command, check=True, cwd=REPO)
    return time.perf_counter() - start


def every_gpu(source: str, out: Path, backend: str) -> float:
    start = time.perf_counter()
    command = edgecli(source, "-o", str(out), "--backend", backend, "--device", "all")
    subprocess.run(command, check=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, help="a folder of images (default: make JPEGs)")
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda", "auto"))
    parser.add_argument("--devices", action="store_true", help="also time --device all")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-scale-"))
    try:
        source = scratch / "in"
        if args.input is None:
            make_frames(source, args.frames)
        else:
            symlink_folder(
                sorted(p for p in args.input.iterdir() if p.is_file()), args.frames, source
            )
        ways = {"one process": one_process, "2 shards": two_shards, "local:2": dask_local}
        if args.devices:
            ways["--device all"] = every_gpu
        times: dict[str, list[float]] = {name: [] for name in ways}
        print(f"{os.cpu_count()} CPUs; {len(list(Path(source).iterdir()))} files; "
              f"--backend {args.backend}; {args.rounds} rounds", flush=True)  # fmt: skip
        reference = None
        for round_ in range(args.rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for name in order:
                out = scratch / "out"
                shutil.rmtree(out, ignore_errors=True)
                times[name].append(ways[name](str(source), out, args.backend))
                got = png_digests(out)
                if reference is None and name == "one process":
                    reference = got
                elif reference is not None and got != reference:
                    sys.exit(f"{name}: the PNGs differ from the one-process run's")
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n in ways),
                  flush=True)  # fmt: skip
        base = statistics.median(times["one process"])
        print("\nway            median s  (min-max)      overhead")
        for name, runs in times.items():
            median = statistics.median(runs)
            print(f"{name:<14} {median:8.3f}  ({min(runs):.2f}-{max(runs):.2f})  "
                  f"{100 * (median / base - 1):+6.1f}%")  # fmt: skip
        print("every output folder equal to the one-process run's, byte for byte")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
