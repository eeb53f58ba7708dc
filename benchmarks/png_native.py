"""edgecli's C half (``edgecli._native``: each PNG encoded, and written atomically, in one
release of the GIL) against the same work in Python, in whole ``edgecli run`` processes:
alternating rounds on a JPEG folder, a glob of H.264 clips and one long H.264 video
(``--decode auto``), and the JPEG folder with ``--decode cpu``; each into ``--roots``
(``/tmp``, and tmpfs where the disk is not the limit). Each round's PNGs of the two are
checked equal, file for file (the same bytes where both link one zlib).

    python benchmarks/png_native.py --jpeg bench_data/q95/jpeg --clip bench_data/pan.mp4 \
        --long bench_data/pan_long.mp4 --roots /tmp /dev/shm

"python" is the same program with ``edgecli.native.c`` set to None (what an install without a
C compiler runs). Wall time from the process's start to its end; medians of ``--rounds`` (5).
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

from common import log, png_digests, symlink_folder, video_copies  # noqa: E402

PROGRAM = (
    "import sys, edgecli.native as native\n"
    "if sys.argv.pop(1) == 'python':\n"
    "    native.c = None\n"
    "elif native.c is None:\n"
    "    sys.exit('edgecli._native is not built: pip install -e . with a C compiler')\n"
    "from edgecli.cli import console\n"
    "console()\n"
)
WAYS = ("C", "python")
INPUTS = {  # --inputs: the rows, by name
    "jpeg": "JPEG folder",
    "clips": "H.264 clips",
    "long": "long H.264 video",
    "jpeg-cpu": "JPEG folder, --decode cpu",
}


def one(way: str, source: str, decode: str, out: Path, env: dict) -> float:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-c", PROGRAM, way, "run", source, "-o", str(out), "-q",
               "--decode", decode]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{way} {source}: exit {done.returncode}: {done.stderr[-400:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jpeg", type=Path, default=REPO / "bench_data" / "q95" / "jpeg")
    parser.add_argument("--clip", type=Path, default=REPO / "bench_data" / "pan.mp4")
    parser.add_argument("--long", type=Path, default=REPO / "bench_data" / "pan_long.mp4")
    parser.add_argument("--frames", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--roots", type=Path, nargs="+", default=[Path("/tmp")])
    parser.add_argument("--inputs", nargs="+", choices=INPUTS, default=list(INPUTS))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-png-native-"))
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(scratch / "pyc"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        jpegs = str(symlink_folder(sorted(args.jpeg.iterdir()), args.frames, scratch / "jpeg"))
        clips = video_copies(args.clip, max(args.frames // 240, 1), scratch / "clips")
        sources = {"jpeg": (jpegs, "auto"), "clips": (clips, "auto"),
                   "long": (str(args.long), "auto"), "jpeg-cpu": (jpegs, "cpu")}  # fmt: skip
        runs = {INPUTS[name]: sources[name] for name in args.inputs}
        log("| input | into | C fps | Python fps | C / Python | walls (s) |")
        log("|---|---|---:|---:|---:|---|")
        for kind, (source, decode) in runs.items():
            for root in args.roots:
                out = Path(tempfile.mkdtemp(prefix="edgecli-png-native-out-", dir=root))
                try:
                    one("C", source, decode, out / "warm", env)  # caches: bytecode, kernel
                    walls: dict[str, list[float]] = {way: [] for way in WAYS}
                    for round_ in range(args.rounds):
                        order = WAYS if round_ % 2 == 0 else WAYS[::-1]
                        for way in order:
                            walls[way].append(one(way, source, decode, out / way, env))
                        if png_digests(out / "C") != png_digests(out / "python"):
                            raise SystemExit(f"{kind}: the two encoders' PNGs differ")
                    median = {way: statistics.median(w) for way, w in walls.items()}
                    frames = len(list((out / "C").glob("*.png")))
                    shown = "; ".join(
                        f"{way} {', '.join(f'{x:.2f}' for x in w)}" for way, w in walls.items()
                    )
                    log(f"| {kind} ({frames}) | {root} | {frames / median['C']:.0f} "
                        f"| {frames / median['python']:.0f} "
                        f"| {median['python'] / median['C']:.2f} | {shown} |")  # fmt: skip
                finally:
                    shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
