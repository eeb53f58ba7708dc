"""The GPU path's PNG encoder processes (edgecli/encoders.py) against the worker threads they
replace: whole ``edgecli run`` processes, ``--decode auto``, alternating rounds, on a JPEG
folder and a glob of H.264 clips, each into ``/tmp`` and into tmpfs (``/dev/shm``, where the
disk is not the limit). Every run's PNGs are checked against the first run's, file for file.

    python benchmarks/encoder_processes.py --jpeg bench_data/q95/jpeg --clip bench_data/pan.mp4

"threads" is the same program with ``edgecli.pipeline.runner.start_encoders`` replaced by one
that starts none. Medians of ``--rounds`` (3), and each round's figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
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

from common import log, symlink_folder, video_copies  # noqa: E402

PROGRAM = (
    "import sys, edgecli.pipeline.runner as runner\n"
    "if sys.argv.pop(1) == 'threads':\n"
    "    runner.start_encoders = lambda *args: None\n"
    "from edgecli.cli import console\n"
    "console()\n"
)


def one(way: str, source: str, out: Path, env: dict) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    summary = out.with_suffix(".json")
    command = [sys.executable, "-c", PROGRAM, way, "run", source, "-o", str(out), "-q",
               "--decode", "auto", "--json-summary", str(summary)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{way} {source}: exit {done.returncode}: {done.stderr[-400:]}")
    figures = json.loads(summary.read_text())
    return {"wall_s": wall, "fps": figures["frames"] / wall,
            "processes": figures["encoder_processes"]}  # fmt: skip


def digest(folder: Path) -> str:
    total = hashlib.blake2b()
    for path in sorted(folder.iterdir()):
        total.update(path.name.encode() + hashlib.blake2b(path.read_bytes()).digest())
    return total.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jpeg", type=Path, default=REPO / "bench_data" / "q95" / "jpeg")
    parser.add_argument("--clip", type=Path, default=REPO / "bench_data" / "pan.mp4")
    parser.add_argument("--frames", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--roots", type=Path, nargs="+", help="folders to write into")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-encoders-"))
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(scratch / "pyc"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    roots = args.roots or [Path("/tmp"), *([Path("/dev/shm")] if Path("/dev/shm").is_dir() else [])]
    try:
        jpegs = sorted(args.jpeg.iterdir())
        inputs = {
            "JPEG folder": str(symlink_folder(jpegs, args.frames, scratch / "jpeg")),
            "H.264 clips": video_copies(args.clip, max(args.frames // 240, 1), scratch / "clips"),
        }
        for kind, source in inputs.items():
            for root in roots:
                out = Path(tempfile.mkdtemp(prefix="edgecli-encoders-out-", dir=root))
                try:
                    expected = None
                    one("processes", source, out / "warm", env)  # caches: bytecode, kernel
                    walls: dict[str, list[float]] = {"threads": [], "processes": []}
                    for _ in range(args.rounds):
                        for way in walls:
                            result = one(way, source, out / way, env)
                            walls[way].append(result["wall_s"])
                            found = digest(out / way)
                            if expected is None:
                                expected = found
                            elif found != expected:
                                raise SystemExit(f"{kind}, {way}: PNGs differ from the first")
                    frames = args.frames
                    row = " | ".join(
                        f"{way} {frames / statistics.median(w):.0f} fps "
                        f"({', '.join(f'{x:.2f}' for x in w)} s)"
                        for way, w in walls.items()
                    )
                    gain = statistics.median(walls["threads"]) / statistics.median(
                        walls["processes"]
                    )
                    log(f"{kind} into {root}: {row} | processes / threads {gain:.2f}x")
                finally:
                    shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
