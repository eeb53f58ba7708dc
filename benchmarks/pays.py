"""What pays (issue 39): whole ``edgecli run`` processes with each optional part on and off, at
each number of usable cores, in alternating rounds, so that a part stays only where whole runs
need it. The parts: the GPU deflate of the 1-bit PNGs (off: ``EDGECLI_GPU_DEFLATE=0``, the
CPU's zlib compresses them) and ``edgecli._native`` (off: ``edgecli.native.c``
set to None, what an install without a C compiler runs: Python encodes and writes the PNGs,
and JPEG scans get the markers' check only); and the C decoder of 8-bit PNGs on the CPU (off:
its function hidden, cv2 decodes every PNG).

    python benchmarks/pays.py --jpeg bench_data/q95/jpeg --clip bench_data/pan.mp4 \\
        --long bench_data/pan_long.mp4 --cores 16 8 --into tmpfs
    python benchmarks/pays.py ... --setting 'switch=import sys; sys.setswitchinterval(5e-4)'

Rows: a JPEG folder, a glob of H.264 clips, one of HEVC clips (``--hevc``) and one long H.264
video (``--decode auto``), the JPEG folder with ``--decode cpu``, and a PNG folder with
``--decode cpu`` and ``gpu`` (``--png``, FFmpeg's frames by default), each ``--frames`` long.
Each row at each ``--cores`` count (the runs pinned to the first N CPUs with ``taskset``;
edgecli sizes its pools to them) gets a warm-up run (the bytecode and kernel caches), then
``--rounds`` rounds in which every variant runs once, in turn, the order rotating from round to
round; a run is timed from its process's start to its end, and every variant's PNGs must equal
the default's, file for file.
``--setting NAME=PYTHON`` adds a variant that runs a line of Python before edgecli starts (a
module constant, an interpreter setting: an experiment, not an option).

The table gives each variant's median fps and the default's speed over it (the median of the
rounds' ratios, each round's two runs side by side); the verdict line says, for each part,
whether the runs without it were at least ``--pays`` (10%) slower in every round of some row
at some core count: what the issue keeps. Runs go through ``soak_child.py``'s watchdog
(``--deadline-s``; a stalled run's stacks go to ``BENCH_STALLS``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from common import (  # noqa: E402
    log,
    png_digests,
    run_folders,
    symlink_folder,
    video_copies,
)
from gpu_decode import ENV, edgecli  # noqa: E402

DEFAULT = "default"
# Each part that must pay for itself: the variant without it, as (environment, Python setting).
PARTS = {
    "no-gpu-deflate": ({"EDGECLI_GPU_DEFLATE": "0"}, ""),
    "no-native": ({}, "import edgecli.native as native; native.c = None"),
    "no-native-png": (
        {},
        "import types, edgecli.native as n; n.c = types.SimpleNamespace(**{k: getattr(n.c, k) "
        "for k in dir(n.c) if not k.startswith('_') and k != 'png_decode'})",
    ),
}
MIN_ROUNDS = 3  # a verdict's fewest rounds
ROWS = {  # --rows: the input and --decode of each
    "jpeg": ("JPEG folder", "auto"),
    "clips": ("H.264 clips", "auto"),
    "hevc": ("HEVC clips", "auto"),
    "long": ("long H.264 video", "auto"),
    "jpeg-cpu": ("JPEG folder, --decode cpu", "cpu"),
    "png-cpu": ("PNG folder, --decode cpu", "cpu"),
    "png-gpu": ("PNG folder, --decode gpu", "gpu"),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jpeg", type=Path, default=REPO / "bench_data" / "q95" / "jpeg")
    parser.add_argument("--clip", type=Path, default=REPO / "bench_data" / "pan.mp4")
    parser.add_argument("--hevc", type=Path, default=REPO / "bench_data" / "pan_hevc.mp4")
    parser.add_argument("--long", type=Path, default=REPO / "bench_data" / "pan_long.mp4")
    parser.add_argument("--png", type=Path, default=REPO / "bench_data" / "png_ffmpeg")
    parser.add_argument("--frames", type=int, default=2400, help="frames of the JPEG rows")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS)[:4])
    parser.add_argument("--cores", type=int, nargs="+", help="usable CPUs a run (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--into", default="tmpfs", help="tmpfs (/dev/shm), disk, or a folder")
    parser.add_argument("--parts", nargs="*", choices=PARTS, default=list(PARTS)[:2])
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=PYTHON",
        help="another variant: a line of Python run before edgecli starts",
    )  # fmt: skip
    parser.add_argument("--pays", type=float, default=1.10, help="speed a part must give")
    parser.add_argument("--deadline-s", type=float, default=300.0, help="a run's watchdog")
    args = parser.parse_args(argv)
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    args.cores = args.cores or [allowed]
    if too_many := [n for n in args.cores if not 1 <= n <= allowed]:
        parser.error(f"--cores {too_many}: this process may use 1 to {allowed} CPUs")
    args.variants = {DEFAULT: ({}, "")} | {part: PARTS[part] for part in args.parts}
    for setting in args.setting:
        name, sep, line = setting.partition("=")
        if not sep or not name or not line or name in args.variants:
            parser.error(f"--setting {setting!r}: NAME=PYTHON, with a new NAME")
        args.variants[name] = ({}, line)
    return args


def cpus(n: int) -> str:
    """The first ``n`` CPUs this process may use, as taskset writes a list."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return ",".join(map(str, allowed[:n])) if allowed else f"0-{n - 1}"


def one(source: str, decode: str, out: Path, variant: tuple, cores: int, args) -> float:
    """One whole run's wall seconds; SystemExit where it fails or stalls."""
    extra_env, setting = variant
    shutil.rmtree(out, ignore_errors=True)
    run = edgecli(source, out, decode, timeout_s=args.deadline_s,
                  env={**extra_env, "BENCH_SETTING": setting},
                  prefix=("taskset", "-c", cpus(cores)))  # fmt: skip
    out.with_suffix(".json").unlink(missing_ok=True)
    if "error" in run:
        raise SystemExit(f"{out.name}: {run['error']}")
    return run["wall_s"]


def measure(name: str, source: str, decode: str, cores: int, args, root: Path) -> dict:
    """One row at one core count: each variant's walls, round by round, outputs compared."""
    variants = list(args.variants)
    one(source, decode, root / "warm", args.variants[DEFAULT], cores, args)
    shutil.rmtree(root / "warm", ignore_errors=True)
    walls: dict[str, list[float]] = {v: [] for v in variants}
    frames = 0
    for round_ in range(args.rounds):
        turn = round_ % len(variants)
        for variant in variants[turn:] + variants[:turn]:
            walls[variant].append(one(source, decode, root / variant, args.variants[variant],
                                      cores, args))  # fmt: skip
        reference = png_digests(root / DEFAULT)
        frames = len(reference)
        for variant in variants[1:]:
            if png_digests(root / variant) != reference:
                raise SystemExit(
                    f"{name}, {cores} cores: {variant}'s PNGs differ from the default's"
                )
    for variant in variants:
        shutil.rmtree(root / variant, ignore_errors=True)
    median = {v: statistics.median(w) for v, w in walls.items()}
    row = {"row": name, "cores": cores, "frames": frames, "walls": walls}
    row["fps"] = {v: round(frames / median[v], 1) for v in variants}
    # Paired by round, so that a drift of the host falls on both sides of each ratio.
    paired = {v: [w / d for w, d in zip(walls[v], walls[DEFAULT], strict=True)] for v in variants}
    row["gain"] = {v: round(statistics.median(paired[v]), 3) for v in variants[1:]}
    row["least_gain"] = {v: round(min(paired[v]), 3) for v in variants[1:]}
    log(f"  {name}, {cores} cores: {row['fps']}; default's speed over each: {row['gain']}")
    return row


def table(rows: list[dict], args) -> str:
    variants = list(args.variants)[1:]
    heads = "".join(f" {v} fps (default / it) |" for v in variants)
    lines = [
        f"| row | cores | frames | default fps |{heads}",
        "|---|---:|---:|---:|" + "---:|" * len(variants),
    ]
    for row in rows:
        cells = [f"{row['fps'][v]:.0f} ({row['gain'][v]:.2f})" for v in variants]
        lines.append(
            f"| {row['row']} | {row['cores']} | {row['frames']} | {row['fps'][DEFAULT]:.0f} | "
            + " | ".join(cells) + " |"
        )  # fmt: skip
    for part in (v for v in variants if v in PARTS):
        best = max(rows, key=lambda r: r["least_gain"][part], default=None)
        if best is None:
            continue
        pays = best["least_gain"][part] >= args.pays
        verdict = "pays" if pays else "does not pay"
        if args.rounds < MIN_ROUNDS:  # one or two rounds cannot tell a part from noise
            verdict = f"no verdict under {MIN_ROUNDS} rounds"
        lines.append(
            f"{part}: runs without it were at least {best['least_gain'][part]:.2f}x slower in "
            f"every round at best ({best['row']}, {best['cores']} cores): {verdict} (the bar: "
            f"{args.pays:.2f}x in every round)"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    scratch, root = run_folders("edgecli-bench-pays", args.into, ENV)
    started = time.perf_counter()
    rows = []
    try:
        jpegs = str(symlink_folder(sorted(args.jpeg.iterdir()), args.frames, scratch / "jpeg"))
        copies = max(args.frames // 240, 1)  # links to a 240-frame clip
        clips = video_copies(args.clip, copies, scratch / "clips")
        sources = {"jpeg": jpegs, "clips": clips, "long": str(args.long), "jpeg-cpu": jpegs}
        if "hevc" in args.rows:
            sources["hevc"] = video_copies(args.hevc, copies, scratch / "hevc")
        if {"png-cpu", "png-gpu"} & set(args.rows):
            pngs = str(symlink_folder(sorted(args.png.glob("*.png")), args.frames, scratch / "png"))
            sources["png-cpu"] = sources["png-gpu"] = pngs
        for key in args.rows:
            name, decode = ROWS[key]
            for cores in args.cores:
                rows.append(measure(name, sources[key], decode, cores, args, root))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    log(f"\n{table(rows, args)}\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
