"""What judging a JPEG's scans costs: per file on one thread, the C walk that repeats
libjpeg-turbo's Huffman decoding (edgecli._native.jpeg_scan_damage) against cv2.imdecode; and
whole runs of a JPEG folder (its PNGs written to /dev/shm where there is one) with the walk of
every scan (the default) and with the markers' check alone, alternated. ``--against REV``
builds the C module of git revision REV (or of a copy of its ``_native.c``; or takes a build
of it, a ``.so``, on a machine without the repository's history or a compiler) beside the
working tree's and times both walks, alternated, on the folder's frames encoded again at
qualities 95, 90 and 75.

    python benchmarks/jpeg_scans.py bench_data/q95/jpeg [--rounds 2] [--decodes auto,cpu]
        [--against REV|FILE.c|FILE.so]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

# edgecli's command with the C walk hidden: scan_damage then takes the markers' check.
WITHOUT_WALK = """
import sys
import edgecli.native as native

class Hidden:
    def __init__(self, c):
        self._c = c

    def __getattr__(self, name):
        if name == "jpeg_scan_damage":
            raise AttributeError(name)
        return getattr(self._c, name)

native.c = Hidden(native.c)
from edgecli.cli import console
sys.argv[0] = "edgecli"
console()
"""


# Whole runs: (mode, the interpreter's arguments before edgecli's, environment).
PROGRAMS = (
    ("cpu-walk", ["-m", "edgecli"], {}),
    ("markers", ["-c", WITHOUT_WALK], {}),
)


def per_file(datas: list[bytes]) -> None:
    from edgecli import native

    cv2.setNumThreads(1)

    def median_ms(work) -> float:
        times = []
        for data in datas:
            start = time.perf_counter()
            work(data)
            times.append(time.perf_counter() - start)
        return 1e3 * statistics.median(times)

    walk = median_ms(native.c.jpeg_scan_damage)
    decode = median_ms(lambda d: cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR))
    print(f"per file, median of {len(datas)}, one thread: walk {walk:.2f} ms, "
          f"cv2.imdecode {decode:.2f} ms ({walk / decode:.0%})")  # fmt: skip


def walk_module(revision: str, scratch: Path):
    """edgecli._native as git revision ``revision`` has it, built as setup.py builds it; or
    built from the ``_native.c`` at that path; or the build at that path (a ``.so``)."""
    library = Path(revision)
    if not revision.endswith(".so"):
        source, library = scratch / "_native.c", scratch / "_native.abi3.so"
        if Path(revision).is_file():
            shutil.copyfile(revision, source)
        else:
            show = ["git", "show", f"{revision}:edgecli/_native.c"]
            root = Path(__file__).resolve().parent.parent
            source.write_bytes(
                subprocess.run(show, cwd=root, check=True, capture_output=True).stdout
            )
        subprocess.run(
            [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O3", "-fwrapv", "-DNDEBUG",
             f"-I{sysconfig.get_paths()['include']}", "-DPy_LIMITED_API=0x030B0000",
             str(source), "-lz", "-ldl", "-lpthread", "-o", str(library)],
            check=True,
        )  # fmt: skip
    spec = importlib.util.spec_from_file_location("_native", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def against(datas: list[bytes], revision: str, rounds: int = 5) -> None:
    """The walk of the working tree's module against ``revision``'s, alternated, per file:
    the least of ``rounds`` means over the frames, at each quality."""
    from edgecli import native

    frames = [cv2.imdecode(np.frombuffer(d, np.uint8), cv2.IMREAD_COLOR) for d in datas[:10]]
    with tempfile.TemporaryDirectory(prefix="edgecli-walk-") as scratch:
        walks = {"tree": native.c, revision: walk_module(revision, Path(scratch))}
        print(f"quality  {revision:>10}     tree  (ms a file, least of {rounds} rounds)")
        for quality in (95, 90, 75):
            files = [
                cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()
                for f in frames
            ]
            best = dict.fromkeys(walks, float("inf"))
            for _ in range(rounds):
                for name, module in walks.items():
                    start = time.perf_counter()
                    for data in files:
                        module.jpeg_scan_damage(data)
                    best[name] = min(best[name], (time.perf_counter() - start) / len(files))
            old, new = 1e3 * best[revision], 1e3 * best["tree"]
            print(f"q{quality:<6} {old:10.2f} {new:8.2f}  ({old / new:.2f}x)")


def whole_runs(folder: Path, rounds: int, decodes: list[str]) -> None:
    print("round decode mode       wall_s    fps")
    # In tmpfs, so that no run pays for the writeback of the runs before it.
    shm = Path("/dev/shm")
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-scans-", dir=shm if shm.is_dir() else None))
    try:
        for round_ in range(rounds):
            for decode in decodes:
                for mode, program, env in PROGRAMS:
                    out = scratch / f"{mode}-{decode}-{round_}"
                    summary = scratch / "summary.json"
                    args = ["run", str(folder), "-o", str(out), "-q", "--decode", decode,
                            "--json-summary", str(summary)]  # fmt: skip
                    start = time.perf_counter()
                    subprocess.run(
                        [sys.executable, *program, *args], check=True, env=os.environ | env
                    )
                    wall = time.perf_counter() - start
                    frames = json.loads(summary.read_text())["frames"]
                    print(f"{round_:5} {decode:6} {mode:10} {wall:6.2f} {frames / wall:6.0f}")
                    shutil.rmtree(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a folder of JPEGs")
    parser.add_argument("--files", type=int, default=200, help="files timed one by one")
    parser.add_argument("--rounds", type=int, default=2, help="whole runs of each, alternated")
    parser.add_argument("--decodes", default="auto,cpu", help="--decode values to run")
    parser.add_argument(
        "--against", metavar="REV", help="time the walk of git revision REV (or a _native.c) too"
    )
    args = parser.parse_args()
    datas = [p.read_bytes() for p in sorted(args.folder.glob("*.jpg"))[: args.files]]
    per_file(datas)
    if args.against:
        against(datas, args.against)
    whole_runs(args.folder, args.rounds, args.decodes.split(","))


if __name__ == "__main__":
    main()
