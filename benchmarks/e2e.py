"""End-to-end benchmark of issue 4: edgecli against the codec floor, the pipeline's own
ceiling, its CPU backend and the one-frame-at-a-time GPU loop, on H.264 video, a JPEG folder
and a PNG folder.

Input comes from ``scripts/make_bench_media.py`` (``--data``, default ``bench_data/``):
``pan.mp4`` and ``pan_head.mp4`` (its first fifth), ``jpeg/frame_*.jpg``, ``png/frame_*.png``.

    PYTHONPATH=. python3 benchmarks/e2e.py --json e2e.json            # on the GPU host
    python benchmarks/e2e.py --data /tmp/bd --skip-gpu --frames 12    # anywhere, no CUDA
    python benchmarks/e2e.py --long-frames 2400 --profile ceiling,gpu # where is the cap?

Per input kind, every figure at the same thread count W (``--workers``, default all cores):

- decode-only and encode-only throughput (1-bit PNG of the edge maps, written to disk as
  edgecli writes it), and the codec floor ``1 / (1/decode + 1/encode)``;
- the pipeline's ceiling: ``edgecli.pipeline.run`` with a backend that costs nothing but
  gives every frame its real edges (looked up in a table the CPU reference filled first),
  on the CPU backend's path and on the GPU path (batches, the copies into slabs and the
  slab ring, on ``tests.standins``'s stand-in); in-process, in a child process;
- ``edgecli run`` with ``--backend cuda`` and ``--backend cpu``, and the course loop
  (``benchmarks/course_loop.py``), each as a child process so that ``os.wait4`` gives the
  child's own peak RSS;
- with ``--profile``, one more run of the ceiling or of edgecli, in-process under a
  sampling profiler (``Sampler``): where each thread group is, its CPU time, and how long
  a thread waits for the GIL;
- peak RSS on 40 and on 400 frames (folders of symlinks cycling over the frames), or with
  ``--skip-rss`` that of the full runs over that of the short ones;
- that the GPU's PNGs (and the ceiling's, and the loop's) are byte- and pixel-identical to
  the CPU backend's.

``--long-frames N`` makes the full runs N frames long without more media: a folder of
symlinks cycling over the frames, or for video a quoted glob over N/240 symlinks to the clip
(edgecli takes one INPUT; its output names, ``pan_03_000017.png``, stay distinct). The short
runs are then the 240 real frames, so the steady rate comes from the long runs.

How fps is counted (the table says it again):

- wall fps: frames / wall time of the whole command, start-up included: interpreter,
  imports, CUDA context, kernel load, pipeline fill and drain.
- JSON fps: edgecli's own summary, timed from the start of its run (backend selection,
  hence the CUDA context and kernel compile, included; interpreter and imports not).
- steady fps: ``(N - k) / (wall_N - wall_k)`` over the medians of edgecli's JSON ``wall_s``
  in full runs (N frames) and short runs (k frames): the fixed start-up cost both pay
  cancels, leaving the per-frame rate a long job sees. The codec floor has no start-up
  cost either, so the targets are judged on steady fps. (edgecli's clock rather than the
  process's because it leaves out interpreter start-up and imports, the noisiest part; the
  JSON keeps the process-clock figure too.)

Warm-up runs come first, so the OS file cache and any on-disk kernel cache (CuPy's, for
kernels it compiles) are hot; a first run on a fresh host would also pay NVRTC compilation.
Decode-only is ``cv2.imread`` (edgecli reads the bytes and ``cv2.imdecode``s them: the same
codec work) or one ``cv2.VideoCapture``.

Its parts: ``e2e_tasks.py``, the child processes' tasks; ``e2e_measure.py``, one input kind's
runs and figures; ``e2e_table.py``, the targets and the report's tables; ``e2e_bench.py``, the child
processes; this file, the options and the run.

This process stays small on purpose (standard library only; decoding, encoding, comparing
and the in-process runs happen in child processes): on Linux a child's ``ru_maxrss`` can
never be below the peak RSS of the parent that started it, because exec folds the old
address space's high-water mark into the child's. ``rss floor`` in the notes is that bound,
measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from common import log
from e2e_bench import REPO, Bench
from e2e_measure import measure_kind
from e2e_table import (
    KINDS,
    gpu_device,
    make_brief_table,
    make_table,
)

PROFILE_CHOICES = ("ceiling", "ceiling-host", "ceiling-gpu", "gpu", "cpu")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench_data", help="input folder")
    parser.add_argument("--json", type=Path, help="write every measurement to this file")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="threads (W)")
    parser.add_argument("--frames", type=int, help="use the first N frames of each folder")
    parser.add_argument(
        "--short-frames", type=int, help="frames of the short runs (default: a fifth)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="comma-separated subset of video,jpeg,png"
    )
    parser.add_argument(
        "--rss-frames",
        default="40,400",
        type=lambda s: [int(v) for v in s.split(",")],
        help="two frame counts for the peak-RSS flatness check",
    )
    parser.add_argument(
        "--skip-gpu", action="store_true", help="measure only what needs no CUDA device"
    )
    parser.add_argument(
        "--gpu-args",
        default="",
        help="extra options for the GPU runs of edgecli, e.g. '--batch 32 --streams 3'",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=420,
        help="after this many seconds, skip remaining repetitions and RSS runs",
    )
    parser.add_argument("--run-timeout-s", type=float, default=300, help="kill a child after")
    parser.add_argument("--keep-temp", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--long-frames",
        type=int,
        help="full runs of N frames, cycling over the base frames (video: copies of the clip, "
        "N rounded to whole clips); the short runs are then the base input",
    )
    parser.add_argument(
        "--long-frames-cpu",
        type=int,
        help="full runs of the CPU backend, if shorter than --long-frames (it is slower)",
    )
    parser.add_argument(
        "--profile",
        default="",
        help=f"comma-separated subset of {','.join(PROFILE_CHOICES)} (ceiling: both paths): "
        "one more run of each, in-process, under a sampling profiler (threads' stacks and "
        "CPU time, GIL wait)",
    )
    parser.add_argument(
        "--skip-ceiling", action="store_true", help="no zero-cost-backend (ceiling) runs"
    )
    parser.add_argument("--skip-course", action="store_true", help="no course-loop runs")
    parser.add_argument(
        "--skip-rss",
        action="store_true",
        help="no 40/400-frame RSS runs (RSS flatness then compares the full and short runs)",
    )
    args = parser.parse_args(argv)
    args.profile = [p.strip() for p in args.profile.split(",") if p.strip()]
    if unknown := set(args.profile) - set(PROFILE_CHOICES):
        choices = ", ".join(PROFILE_CHOICES)
        parser.error(f"--profile: unknown {sorted(unknown)}; choose from {choices}")
    if "ceiling" in args.profile:
        args.profile += ["ceiling-host", "ceiling-gpu"]
    if args.long_frames_cpu and not args.long_frames:
        parser.error("--long-frames-cpu needs --long-frames")
    args.long_frames_cpu = args.long_frames_cpu or args.long_frames
    if args.long_frames is not None and min(args.long_frames, args.long_frames_cpu) < 2:
        parser.error("--long-frames and --long-frames-cpu must be >= 2")
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if unknown := set(args.kinds) - set(KINDS):
        parser.error(f"--kinds: unknown {sorted(unknown)}; choose from {', '.join(KINDS)}")
    if args.workers < 1 or args.repeats < 1 or (args.frames is not None and args.frames < 2):
        parser.error("--workers and --repeats must be >= 1, --frames >= 2")
    if len(args.rss_frames) != 2 or min(args.rss_frames) < 1:
        parser.error("--rss-frames takes two positive counts, e.g. 40,400")
    return args


NOTES = [
    "wall fps: frames / wall time of the whole command (interpreter start, imports, CUDA "
    "context, kernel load, pipeline fill and drain)",
    "JSON fps: edgecli's own summary, from the start of its run (includes CUDA context and "
    "kernel compile or load; not interpreter start-up or imports)",
    "steady fps: (N - k) / (wall_N - wall_k), medians of edgecli's JSON wall_s over full runs "
    "(N frames) and short runs (k frames: with --long-frames the base input, else its first "
    "fifth): the fixed start-up both pay cancels; the targets use it, as the codec floor has "
    "no start-up either (the JSON also keeps it by the process clock: "
    "steady_fps_process_clock)",
    "pipeline ceiling, no compute: edgecli.pipeline.run in-process on the same inputs and "
    "threads, with a backend that costs nothing (each frame's edges, computed before the runs "
    "by the CPU reference, looked up; so the PNGs, and their encode cost, are the real ones). "
    "Host path: the CPU backend's structure. GPU path: batches, the copies into slabs and the "
    "slab ring of the CUDA backend, on tests.standins's stand-in (host threads for streams). "
    "Far below the codec floor means the cap is in the pipeline, not the GPU",
    "profile: one more run in-process (after a warm-up) under a sampler that reads every "
    "thread's stack every 5 ms. Main thread not waiting: the share of the run outside its "
    "waits (edgecli's main_thread_waits_s): its own work, and waiting for the GIL or a core "
    "outside those waits; with it near 100%, the main thread is the cap. Main thread CPU "
    "cores: its CPU time over the wall time; not waiting but not on the CPU either means "
    "waiting for the GIL. GIL wait: how late the sampler thread wakes (it needs the GIL to "
    "run). Stacks show where threads release the GIL (C calls, waits), not pure-Python "
    "stretches: CPU time covers those",
    "start-up s: the full run's wall time beyond N frames at the steady rate (interpreter, "
    "imports, CUDA context, kernel load, pipeline fill and drain)",
    "course loop fps, loop only: its own clock around the frame loop, after CUDA context "
    "and kernel compile; wall fps: the whole command",
    "codec floor = 1 / (1/decode + 1/(encode+write)), both at W threads, files in page cache; "
    "'at once': both running together on W threads each, as edgecli's pools do, but with no "
    "hand-off between them (decode discards, encode reads precomputed edges): whether the "
    "two share the cores as the formula assumes",
    "peak RSS: ru_maxrss of each child from os.wait4, max over its full runs",
    "warm-up runs came first (file cache, CuPy's on-disk kernel cache), untimed",
]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-e2e-"))
    bench = Bench(args, scratch)
    report: dict = {
        "config": {
            "data": str(args.data),
            "workers": args.workers,
            "repeats": args.repeats,
            "frames": args.frames,
            "rss_frames": args.rss_frames,
            "skip_gpu": args.skip_gpu,
            "gpu_args": args.gpu_args,
            "long_frames": args.long_frames,
            "long_frames_cpu": args.long_frames_cpu,
            "profile": args.profile,
        },
        "host": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "kinds": {},
    }
    try:
        environment = bench.task("environment")
        report["host"].update(environment["versions"])
        reason = environment["cuda_unusable_reason"]
        if reason is not None and not args.skip_gpu:
            print(f"Error: CUDA is unusable here ({reason}); pass --skip-gpu", file=sys.stderr)
            return 1
        gpu_skip = f"skipped: {reason or '--skip-gpu'}" if args.skip_gpu else None
        report["config"]["gpu_skipped"] = gpu_skip
        log(f"edgecli e2e: {args.workers} worker thread(s), data {args.data}, scratch {scratch}")
        if gpu_skip:
            log(f"GPU runs {gpu_skip}")
        for kind in args.kinds:
            if report["kinds"] and bench.over_budget():
                log(f"\n{kind}: not measured: time budget ({args.budget_s:g} s) reached")
                report.setdefault("not_measured", []).append(kind)
                continue
            try:
                result = measure_kind(bench, kind, gpu_skip)
            except RuntimeError as exc:  # a helper task failed: report it, go on
                log(f"{kind}: not measured: {exc}")
                report.setdefault("errors", {})[kind] = str(exc)
                continue
            if result is not None:
                report["kinds"][kind] = result
                report["host"].setdefault("device", gpu_device(result))
        # The floor under every child's ru_maxrss: this process's own peak (see docstring).
        report["host"]["rss_floor_mb"] = bench.spawn("rss-floor", ["/bin/true"]).peak_rss_mb
        report["elapsed_s"] = round(bench.elapsed(), 1)
        if not report["kinds"]:
            hint = "make them with scripts/make_bench_media.py"
            print(f"Error: no benchmark inputs under {args.data}; {hint}", file=sys.stderr)
            return 1
        report["notes"] = NOTES + [
            f"rss floor: {report['host']['rss_floor_mb']} MB (a child's ru_maxrss cannot be "
            "below its parent's peak RSS on Linux)",
        ]
        report["table"] = make_table(report)
        report["brief_table"] = make_brief_table(report)
    finally:
        if args.keep_temp:
            log(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        log(f"\nwrote {args.json}")
    # Exit 2 when an output differs or a measured command failed: the table is not whole.
    failed = (
        "errors" in report
        or any(
            check["identical"] is False
            for result in report["kinds"].values()
            for check in result["identical"].values()
        )
        or any(
            "error" in result.get(name, {})
            for result in report["kinds"].values()
            for name in ("gpu", "cpu", "course")
        )
        or any(
            "error" in figures
            for result in report["kinds"].values()
            for figures in result.get("ceiling", {}).values()
        )
    )
    log("")
    for note in report["notes"]:
        log(f"- {note}")
    for kind, result in report["kinds"].items():
        for note in result["notes"]:
            log(f"- {kind}: {note}")
    log(
        f"\nedgecli end to end: {report['host']['cpu_count']} cores, {args.workers} threads, "
        f"GPU {report['host'].get('device') or 'none'}, {report['elapsed_s']} s\n"
    )
    if args.skip_gpu:
        log(f"GPU and course-loop rows: {report['config']['gpu_skipped']}\n")
    log(report["table"])
    log("\nWhere the cap is (fps / codec floor in brackets; see the notes above):\n")
    log(report["brief_table"])
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
