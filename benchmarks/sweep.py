"""Sweep edgecli's --batch and --streams on one input, to choose the defaults by measurement.

    PYTHONPATH=. python3 benchmarks/sweep.py bench_data/jpeg --batch 4 8 16 32 --streams 1 2 3

Each setting runs twice after one warm-up run; the table shows the better run's fps from
edgecli's own JSON summary (its clock starts after interpreter start-up and imports) and
the bottleneck it names.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile


def run_once(source: str, batch: int, streams: int, extra: list[str]) -> dict:
    out = tempfile.mkdtemp(prefix="edgecli-sweep-")
    try:
        command = [sys.executable, "-m", "edgecli", "run", source, "-o", out, "-q",
                   "--json-summary", "-", "--batch", str(batch), "--streams", str(streams),
                   *extra]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        return json.loads(result.stdout)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("--batch", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--backend", default="cuda")
    args = parser.parse_args()
    extra = ["--backend", args.backend]
    run_once(args.source, args.batch[0], args.streams[0], extra)  # warm-up: caches
    rows = []
    for batch, streams in itertools.product(args.batch, args.streams):
        runs = [run_once(args.source, batch, streams, extra) for _ in range(2)]
        best = max(runs, key=lambda r: r["fps"])
        rows.append((batch, streams, best["frames"], best["fps"], best["bottleneck_detail"]))
    print(f"\n{args.source}, backend {args.backend}")
    print("| batch | streams | frames | fps (JSON, best of 2) | bottleneck |")
    print("|---:|---:|---:|---:|---|")
    for batch, streams, frames, fps, detail in rows:
        print(f"| {batch} | {streams} | {frames} | {fps:.1f} | {detail} |")


if __name__ == "__main__":
    main()
