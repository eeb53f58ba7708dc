"""Why do JPEG decode and PNG encode, run together, fall short of the codec floor?

On the 16-core host, decode and encode+write running at the same time reach only ~0.76-0.85
of the floor ``1 / (1/decode_fps + 1/encode_fps)``, each measured alone on W threads. This
script separates three explanations by running the same codec work in different shapes:

(a) oversubscription: edgecli had a decode pool and an encode pool of W threads each, 2W
    threads on W cores (one pool since; benchmarks/RESULTS.md, "Host pipeline"). If so, "one
    pool" (one task decodes frame i then encodes and writes its edges) and "two pools, W/2
    each" get near the floor; involuntary context switches per frame are high in "two
    pools".
(b) GIL convoys: a thread that leaves a GIL-free codec call waits up to the switch interval
    (5 ms) for the GIL. If so, "two pools" with ``sys.setswitchinterval(0.0005)`` does
    better, and "util" (process CPU time / (wall x cores)) is well below 1 while CPU ms per
    frame stays at its alone value.
(c) an inherent co-running penalty (memory bandwidth, shared caches, SMT siblings): CPU ms
    per frame rises above decode-alone + encode-alone in every shape, one pool included
    ("CPU vs alone" > 1). With SMT, the W/2-thread decode-only and encode-only rates are
    more than half the W-thread ones.

Frames: every ``*.jpg`` / ``*.png`` of ``--input``, sorted. An untimed first pass decodes them
(warming the file cache) and computes each edge map with edgecli's CPU reference, so that
encode has its inputs. Decode is ``cv2.imread``; encode+write is ``edgecli.png.encode_png``
(1-bit) and ``write_atomic`` into a scratch folder, as in ``benchmarks/e2e.py``. Each measure
runs ``--repeats`` times (interleaved), the median is reported. "idle tail": in the two-pool
shapes, the share of the wall time after the first pool finished.

    PYTHONPATH=. python3 benchmarks/codec_share.py --input bench_data/jpeg
    PYTHONPATH=. python3 benchmarks/codec_share.py --input /tmp/jpeg --workers 2 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import cv2

from edgecli.params import Options
from edgecli.png import encode_png
from edgecli.reference import detect_frame
from edgecli.sinks import write_atomic

LSCPU_KEYS = ("Model name", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "NUMA node(s)")


def lscpu() -> dict:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    fields = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in fields if k.strip() in LSCPU_KEYS}


def main() -> None:
    """The measurements, in the order the module docstring gives them: each configuration
    runs beside the one before it, so the table compares them within one run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="folder of *.jpg / *.png frames")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="W (all cores)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", help="folder for the PNGs written (default: a temp dir)")
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args()
    workers, half = args.workers, max(1, args.workers // 2)

    cores = len(os.sched_getaffinity(0))
    host = {"cpu_count": os.cpu_count(), "affinity": cores, "lscpu": lscpu()}
    host |= {"python": sys.version.split()[0], "opencv": cv2.__version__}
    host["cv2_threads"] = cv2.getNumThreads()
    for key, value in host.items():
        print(f"{key}: {value}")

    paths = sorted(str(p) for p in Path(args.input).iterdir() if p.suffix in (".jpg", ".png"))
    if not paths:
        sys.exit(f"{args.input}: no *.jpg or *.png frames")
    frames = len(paths)
    names = [f"frame_{i:06d}.png" for i in range(frames)]

    def decode(i: int) -> float:
        image = cv2.imread(paths[i], cv2.IMREAD_COLOR)
        if image is None:
            raise RuntimeError(f"{paths[i]}: cannot decode")
        return time.perf_counter()

    def edges_of(i: int):
        decode(i)  # warm the file cache, then decode again for the edges (untimed)
        return detect_frame(cv2.imread(paths[i], cv2.IMREAD_COLOR), Options())

    with ThreadPoolExecutor(max_workers=workers) as warm:
        edges = list(warm.map(edges_of, range(frames)))
    print(f"frames: {frames} of {edges[0].shape[1]}x{edges[0].shape[0]}, W={workers}")

    def encode_write(i: int, out: Path) -> float:
        write_atomic(out / names[i], encode_png(edges[i], 1))
        return time.perf_counter()

    def both(i: int, out: Path) -> float:
        decode(i)
        return encode_write(i, out)

    def pool(n: int) -> ThreadPoolExecutor:  # threads started now, not inside a timed run
        executor, barrier = ThreadPoolExecutor(max_workers=n), threading.Barrier(n)
        wait([executor.submit(barrier.wait) for _ in range(n)])
        return executor

    pools = {"W_a": pool(workers), "W_b": pool(workers), "H_a": pool(half), "H_b": pool(half)}

    def alone(name: str, task):
        def run(out: Path) -> dict:
            list(pools[name].map(task, range(frames), [out] * frames))
            return {}

        return run

    def two(dec: str, enc: str):
        def run(out: Path) -> dict:
            start = time.perf_counter()
            jobs = [
                (pools[dec].submit(decode, i), pools[enc].submit(encode_write, i, out))
                for i in range(frames)
            ]
            ends = [max(f.result() for f in column) for column in zip(*jobs, strict=True)]
            return {"idle_tail": (max(ends) - min(ends)) / (max(ends) - start)}

        return run

    def fast_switch(run):
        def wrapped(out: Path) -> dict:
            old = sys.getswitchinterval()
            sys.setswitchinterval(0.0005)
            try:
                return run(out)
            finally:
                sys.setswitchinterval(old)

        return wrapped

    measures = {  # name: (threads, run(out) -> extra numbers)
        "decode": (f"{workers}", alone("W_a", lambda i, out: decode(i))),
        "encode+write": (f"{workers}", alone("W_a", encode_write)),
        "two pools": (f"{workers}+{workers}", two("W_a", "W_b")),
        "one pool (dec→enc)": (f"{workers}", alone("W_a", both)),
        "two pools, W/2 each": (f"{half}+{half}", two("H_a", "H_b")),
        "two pools, switch 0.5 ms": (f"{workers}+{workers}", fast_switch(two("W_a", "W_b"))),
        "decode W/2": (f"{half}", alone("H_a", lambda i, out: decode(i))),
        "encode+write W/2": (f"{half}", alone("H_a", encode_write)),
    }
    runs: dict[str, list[dict]] = {name: [] for name in measures}
    scratch = Path(tempfile.mkdtemp(prefix="codec_share-", dir=args.scratch))
    try:
        for rep in range(args.repeats):
            for index, (name, (_, run)) in enumerate(measures.items()):
                out = scratch / f"{index}-{rep}"
                out.mkdir()
                r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                extra = run(out)
                wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
                cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
                runs[name].append(
                    {"wall_s": wall, "cpu_s": cpu, "invol_cs": r1.ru_nivcsw - r0.ru_nivcsw} | extra
                )
                shutil.rmtree(out)
            print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for executor in pools.values():
            executor.shutdown()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    results = {}
    for name, (threads, _) in measures.items():
        results[name] = {
            "threads": threads,
            "fps": frames / med(name, "wall_s"),
            "cpu_ms_per_frame": 1e3 * med(name, "cpu_s") / frames,
            "util": statistics.median(r["cpu_s"] / (r["wall_s"] * cores) for r in runs[name]),
            "invol_cs_per_frame": med(name, "invol_cs") / frames,
            "runs": runs[name],
        }
        if "idle_tail" in runs[name][0]:
            results[name]["idle_tail"] = med(name, "idle_tail")
    floor = 1 / (1 / results["decode"]["fps"] + 1 / results["encode+write"]["fps"])
    cpu_alone = {k: results[k]["cpu_ms_per_frame"] for k in ("decode", "encode+write")}
    for name, row in results.items():
        base = cpu_alone.get(name.removesuffix(" W/2"), sum(cpu_alone.values()))
        row["ratio_to_floor"] = row["fps"] / floor
        row["cpu_vs_alone"] = row["cpu_ms_per_frame"] / base
    for kind in ("decode", "encode+write"):
        share = results[f"{kind} W/2"]["fps"] / results[kind]["fps"]
        print(f"{kind}: {half} threads give {share:.2f} of the rate of {workers}")

    if args.json:
        summary = {"host": host, "frames": frames, "workers": workers, "floor_fps": floor}
        Path(args.json).write_text(json.dumps(summary | {"measures": results}, indent=2))
    print(
        "\n| measure | threads | fps | / floor | CPU ms/frame | CPU vs alone | util "
        "| invol cs/frame | idle tail |\n|---|---|---|---|---|---|---|---|---|"
    )
    print(f"| floor | | {floor:.1f} | 1.00 | | | | | |")
    for name, r in results.items():
        tail = f"{r['idle_tail']:.2f}" if "idle_tail" in r else ""
        print(
            f"| {name} | {r['threads']} | {r['fps']:.1f} | {r['ratio_to_floor']:.2f} "
            f"| {r['cpu_ms_per_frame']:.2f} | {r['cpu_vs_alone']:.2f} | {r['util']:.2f} "
            f"| {r['invol_cs_per_frame']:.2f} | {tail} |"
        )


if __name__ == "__main__":
    main()
