"""Sweep edgecli's settings on one input, to choose defaults by measurement.

    PYTHONPATH=. python3 benchmarks/sweep.py bench_data/jpeg --batch 8 16 32 --streams 1 2 \
        --workers 8 16 --switch-interval 5 0.5

After one warm-up run, every setting runs once a round, ``--repeats`` rounds (the order
rotated each round, so that the machine's drift falls on all alike); the table shows the
median and range of the fps from edgecli's own JSON summary (its clock starts after
interpreter start-up and imports) and the bottleneck it names. ``--switch-interval`` (ms)
runs edgecli under ``sys.setswitchinterval``: how long a thread may hold the GIL before
another that waits for it gets a turn (Python's default is 5 ms), which decides how fast the
main thread gets the GIL back among many worker threads.

To compare versions of the code or settings that are not options in one run, on one machine:
``--tree`` names folders that each hold an ``edgecli`` package (put first on the import path;
"." is this checkout), ``--prelude`` Python statements run before edgecli starts (say,
``import edgecli.pipeline.runner as p; p.SPARE_SLABS = 4``; "" for none), and ``--env``
environment settings for the run (``NAME=VALUE`` words; "" for none).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

LAUNCH = "\n".join(
    [
        "import sys",
        "sys.path.insert(0, {tree!r})",  # before the current folder, which -c puts first
        "sys.setswitchinterval({s} / 1e3)",
        "{prelude}",
        "try:",  # the program as installed: console() where the tree has it
        "    from edgecli.cli import console as main",
        "except ImportError:",
        "    from edgecli.cli import main",
        "main()",
    ]
)


def run_once(source: str, setting: dict, backend: str) -> dict:
    out = tempfile.mkdtemp(prefix="edgecli-sweep-")
    env = dict(os.environ)
    env.update(word.split("=", 1) for word in setting["env"].split())
    tree = os.path.abspath(setting["tree"])
    launch = LAUNCH.format(tree=tree, s=setting["switch_ms"], prelude=setting["prelude"])
    try:
        command = [sys.executable, "-c", launch,
                   "run", source, "-o", out, "-q", "--json-summary", "-",
                   "--backend", backend, "--batch", str(setting["batch"]),
                   "--streams", str(setting["streams"]),
                   "--workers", str(setting["workers"])]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode:
            sys.exit(f"sweep: {setting} failed:\n{result.stderr}")
        return json.loads(result.stdout)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("--batch", type=int, nargs="+", default=[4])
    parser.add_argument("--streams", type=int, nargs="+", default=[4])
    parser.add_argument("--workers", type=int, nargs="+", default=[16])
    parser.add_argument("--switch-interval", type=float, nargs="+", default=[5.0])
    parser.add_argument("--tree", nargs="+", default=["."])
    parser.add_argument("--prelude", nargs="+", default=[""])
    parser.add_argument("--env", nargs="+", default=[""])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the settings (2)")
    args = parser.parse_args()
    settings = [
        dict(batch=b, streams=s, workers=w, switch_ms=i, tree=t, prelude=p, env=e)
        for b, s, w, i, t, p, e in itertools.product(
            args.batch, args.streams, args.workers, args.switch_interval, args.tree,
            args.prelude, args.env,
        )
    ]  # fmt: skip
    run_once(args.source, settings[0], args.backend)  # warm-up: file and kernel caches
    # Rounds, each running every setting once, in an order rotated a step a round: the
    # machine's drift over minutes then falls on every setting alike.
    runs: list[list[dict]] = [[] for _ in settings]
    for round_ in range(args.repeats):
        for k in range(len(settings)):
            i = (k + round_) % len(settings)
            runs[i].append(run_once(args.source, settings[i], args.backend))
            print(f"{runs[i][-1]['fps']:7.1f} fps  {settings[i]}", flush=True)
    print(f"\n{args.source}, backend {args.backend}, {args.repeats} rounds")
    print("| tree | prelude | env | batch | streams | workers | GIL switch ms | frames "
          "| fps: median (min-max) | bottleneck (median run) |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for s, done in zip(settings, runs, strict=True):
        fps = sorted(r["fps"] for r in done)
        middle = sorted(done, key=lambda r: r["fps"])[len(done) // 2]
        print(f"| {s['tree']} | {s['prelude'] or '–'} | {s['env'] or '–'} | {s['batch']} "
              f"| {s['streams']} | {s['workers']} | {s['switch_ms']} | {middle['frames']} "
              f"| {statistics.median(fps):.1f} ({fps[0]:.1f}-{fps[-1]:.1f}) "
              f"| {middle['bottleneck_detail']} |")  # fmt: skip


if __name__ == "__main__":
    main()
