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
  slab ring, on ``edgecli.testing``'s stand-in); in-process, in a child process;
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
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common import log, symlink_folder, video_copies

REPO = Path(__file__).resolve().parents[1]
KINDS = ("video", "jpeg", "png")
FOLDER_SUFFIX = {"jpeg": ".jpg", "png": ".png"}
TARGETS = {  # issue 4, from one run on the 16-core H200 host
    "gpu_vs_floor": 0.9,
    "gpu_vs_course_png": 30.0,
    "gpu_vs_cpu": 1.0,
    "rss_flatness": 1.5,
}


# --------------------------------------------------------------------------------------
# Child-side tasks: run as ``e2e.py _task NAME JSON``, they print one JSON object. They
# import NumPy, OpenCV and edgecli, which this (parent) process must not: see the docstring.
# --------------------------------------------------------------------------------------


def task_environment(args: dict) -> dict:
    """Library versions, and why CUDA is unusable here (None when it is usable)."""
    import cv2
    import numpy as np

    versions = {"numpy": np.__version__, "opencv": cv2.__version__}
    try:
        from edgecli.backends import cuda_unusable_reason

        reason = cuda_unusable_reason(0)  # pick another GPU with CUDA_VISIBLE_DEVICES
    except Exception as exc:  # e.g. CuPy present but edgecli's GPU module broken
        reason = f"{type(exc).__name__}: {exc}"
    if reason is None:
        import cupy

        versions["cupy"] = cupy.__version__
    return {"versions": versions, "cuda_unusable_reason": reason}


def _image_paths(folder: str) -> list[str]:
    return sorted(str(p) for p in Path(folder).iterdir() if p.suffix in (".jpg", ".png"))


def task_codec(args: dict) -> dict:
    """Decode-only and encode-only throughput of one input at ``workers`` threads.

    An untimed first pass decodes every frame (warming the file cache) and computes its
    edge map with edgecli's CPU reference; the timed passes then decode (discarding each
    frame in its worker) and encode those edge maps, ``repeats`` times each. ``together``:
    both at once, each on its own ``workers`` threads as in edgecli, with no hand-off
    between them: what the floor's formula assumes, that the two share the cores at no cost.
    """
    from concurrent.futures import ThreadPoolExecutor

    import cv2

    from edgecli.params import Options
    from edgecli.png import encode_png
    from edgecli.reference import detect_frame
    from edgecli.sinks import write_atomic

    workers, repeats, kind = args["workers"], args["repeats"], args["kind"]
    scratch = Path(args["scratch"])
    pool = ThreadPoolExecutor(max_workers=workers)
    encode_pool = ThreadPoolExecutor(max_workers=workers)  # for ``together``

    if kind == "video":

        def video_frames():
            capture = cv2.VideoCapture(args["input"])
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                yield frame
            capture.release()

        def decode_all(pool=pool) -> int:  # a video decodes in order, from one reader
            return sum(1 for _ in video_frames())

        edges = list(pool.map(lambda f: detect_frame(f, Options()), video_frames()))
        decode_threads = "1 reader"
    else:
        paths = _image_paths(args["input"])

        def decode_one(path: str) -> int:
            return cv2.imread(path, cv2.IMREAD_COLOR).shape[0]

        def decode_all(pool=pool) -> int:
            return sum(1 for _ in pool.map(decode_one, paths))

        edges = list(
            pool.map(lambda p: detect_frame(cv2.imread(p, cv2.IMREAD_COLOR), Options()), paths)
        )
        decode_threads = workers
    frames = len(edges)
    names = [f"frame_{i:06d}.png" for i in range(frames)]

    def encode_all() -> int:
        return sum(pool.map(lambda e: len(encode_png(e, 1)), edges))

    def encode_write_all(out_dir: Path, pool=pool) -> int:
        def one(i: int) -> int:
            data = encode_png(edges[i], 1)
            write_atomic(out_dir / names[i], data)  # temp file + rename, as edgecli does
            return len(data)

        return sum(pool.map(one, range(frames)))

    def together(out_dir: Path) -> None:
        with ThreadPoolExecutor(max_workers=2) as both:
            decoding = both.submit(decode_all, pool)
            encoding = both.submit(encode_write_all, out_dir, encode_pool)
            decoding.result(), encoding.result()

    def timed(fn, *fn_args) -> float:
        start = time.perf_counter()
        fn(*fn_args)
        return time.perf_counter() - start

    decode_s, encode_s, encode_write_s, together_s = [], [], [], []
    png_bytes = encode_all()
    for rep in range(repeats):
        decode_s.append(timed(decode_all))
        encode_s.append(timed(encode_all))
        out_dir = scratch / f"encode-{rep}"
        out_dir.mkdir(parents=True)
        encode_write_s.append(timed(encode_write_all, out_dir))
        shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        together_s.append(timed(together, out_dir))
        shutil.rmtree(out_dir)
    pool.shutdown()
    encode_pool.shutdown()

    def rate(seconds: list[float]) -> dict:
        return {
            "threads": workers,
            "runs_s": [round(s, 4) for s in seconds],
            "fps": round(frames / statistics.median(seconds), 2),
        }

    return {
        "frames": frames,
        "decode": rate(decode_s) | {"threads": decode_threads},
        "encode": rate(encode_s),
        "encode_write": rate(encode_write_s),
        "together": rate(together_s) | {"threads": f"{decode_threads} + {workers}"},
        "mean_png_kb": round(png_bytes / frames / 1e3, 1),
    }


def task_compare(args: dict) -> dict:
    """Whether two output folders hold the same PNG names, bytes and decoded pixels; with
    ``common_only``, the PNGs of the names both hold (None when they share none)."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2
    import numpy as np

    a, b = Path(args["a"]), Path(args["b"])
    names_a = sorted(p.name for p in a.glob("*.png"))
    names_b = sorted(p.name for p in b.glob("*.png"))

    def same(name: str) -> tuple[bool, bool]:
        bytes_a, bytes_b = (a / name).read_bytes(), (b / name).read_bytes()
        pixels_a = cv2.imdecode(np.frombuffer(bytes_a, np.uint8), cv2.IMREAD_GRAYSCALE)
        pixels_b = cv2.imdecode(np.frombuffer(bytes_b, np.uint8), cv2.IMREAD_GRAYSCALE)
        return bytes_a == bytes_b, bool(np.array_equal(pixels_a, pixels_b))

    common = sorted(set(names_a) & set(names_b))
    with ThreadPoolExecutor(max_workers=args["workers"]) as pool:
        results = dict(zip(common, pool.map(same, common), strict=True))
    bytes_differ = [n for n, (same_bytes, _) in results.items() if not same_bytes]
    pixels_differ = [n for n, (_, same_pixels) in results.items() if not same_pixels]
    names_equal = names_a == names_b
    common_only = args.get("common_only", False)
    if common:
        identical = (names_equal or common_only) and not bytes_differ and not pixels_differ
    else:
        identical = None if common_only else False
    return {
        "files": len(common),
        "names_equal": names_equal,
        "only_in_a": sorted(set(names_a) - set(names_b))[:5],
        "only_in_b": sorted(set(names_b) - set(names_a))[:5],
        "bytes_differ": bytes_differ[:5],
        "pixels_differ": pixels_differ[:5],
        "identical": identical,
    }


class Sampler:
    """Where each thread of the process is, every ``interval_s``: a sampling profiler.

    A thread of its own reads ``sys._current_frames()`` and tallies, per thread group (a
    thread's name without its pool index: MainThread, edgecli-worker,
    edgecli-reader), the innermost line of edgecli's code on the stack and, when the stack
    goes deeper than edgecli, the innermost function there (``threading.wait``: waiting on a
    lock, an event, a queue or a future). A line that calls into OpenCV, NumPy or CuPy
    stands for the C code it runs. More measures, since the GIL is invisible in stacks:
    each thread's CPU time and preemptions (involuntary context switches: a thread preempted
    while it holds the GIL stalls every thread that needs it), from /proc every 40 samples;
    and how late the sampler itself wakes: it must take the GIL (and a core) to sample, so
    its lateness is the wait for them.
    """

    def __init__(self, interval_s: float = 0.005):
        import edgecli

        self.interval_s = interval_s
        self.package = str(Path(edgecli.__file__).resolve().parent)
        self.counts: dict[str, dict[tuple, int]] = {}
        self.cpu_s: dict[int, tuple[str, float, float]] = {}  # thread id -> group, user, sys
        self.process_cpu = (0.0, 0.0)
        self.lags_ms: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="e2e-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self.started = time.perf_counter()
        self._read_cpu()
        self.cpu_at_start = self.cpu_s.copy(), self.process_cpu
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.wall_s = time.perf_counter() - self.started

    @staticmethod
    def group(name: str) -> str:
        return name.rsplit("_", 1)[0] if name.rsplit("_", 1)[-1].isdigit() else name

    def _loop(self) -> None:
        due = time.perf_counter()
        samples = 0
        while not self.stop.is_set():
            due += self.interval_s
            time.sleep(max(0.0, due - time.perf_counter()))
            now = time.perf_counter()
            self.lags_ms.append((now - due) * 1e3)
            due = max(due, now - self.interval_s)  # after a long stall, do not catch up
            self._sample()
            samples += 1
            if samples % 40 == 1:
                self._read_cpu()
        self._read_cpu()

    def _sample(self) -> None:
        me = threading.get_ident()
        threads = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me or ident not in threads:
                continue
            group = self.group(threads[ident].name)
            tally = self.counts.setdefault(group, {})
            key = self._where(frame)
            tally[key] = tally.get(key, 0) + 1

    def _where(self, frame) -> tuple:
        """(file, line, function) of the innermost edgecli frame, and the function it is in
        beyond edgecli, if any; a pool thread with no edgecli frame is idle."""
        inner = frame
        beyond = None
        while frame is not None:
            code = frame.f_code
            if code.co_filename.startswith(self.package):
                if frame is not inner:
                    module = Path(inner.f_code.co_filename).stem
                    beyond = f"{module}.{inner.f_code.co_name}"
                return (code.co_filename, frame.f_lineno, code.co_name, beyond)
            frame = frame.f_back
        code = inner.f_code
        return (code.co_filename, inner.f_lineno, code.co_name, "no edgecli frame")

    @staticmethod
    def _cpu_times(task: str) -> tuple[float, float, int]:
        """User and system CPU seconds, and involuntary context switches (preemptions), of
        a /proc task ('self' or 'self/task/<id>'); zeros where there is none."""
        try:
            fields = Path(f"/proc/{task}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{task}/status").read_text()
        except OSError:  # the thread is gone, or this is not Linux
            return 0.0, 0.0, 0
        tick = os.sysconf("SC_CLK_TCK")
        preempted = status.rsplit("nonvoluntary_ctxt_switches:", 1)[-1].split()[0]
        return int(fields[11]) / tick, int(fields[12]) / tick, int(preempted)

    def _read_cpu(self) -> None:
        for thread in threading.enumerate():
            times = self._cpu_times(f"self/task/{thread.native_id}")
            if any(times):
                self.cpu_s[thread.native_id] = (self.group(thread.name), *times)
        self.process_cpu = self._cpu_times("self")[:2]

    def _used(self, tid: int) -> tuple[float, float, int]:
        """User and system CPU seconds, and preemptions, of thread ``tid`` while sampling."""
        _, *now = self.cpu_s[tid]
        _, *then = self.cpu_at_start[0].get(tid, ("", 0.0, 0.0, 0))
        return tuple(a - b for a, b in zip(now, then, strict=True))

    def report(self, top: int = 8) -> dict:
        """Per thread group: threads, CPU seconds (and in cores, over the wall time), and
        the ``top`` places by share of that group's samples."""
        import linecache

        groups = {}
        for group in sorted(set(self.counts) | {g for g, *_ in self.cpu_s.values()}):
            tally = self.counts.get(group, {})
            total = sum(tally.values())
            places = []
            for (path, line, function, beyond), count in sorted(
                tally.items(), key=lambda kv: -kv[1]
            )[:top]:
                code = linecache.getline(path, line).strip()
                where = f"{Path(path).name}:{line} {function}"
                where += f" > {beyond}" if beyond else ""
                places.append({"share": round(count / total, 3), "where": where, "code": code})
            used = [self._used(tid) for tid, (g, *_) in self.cpu_s.items() if g == group]
            cpu_s = sum(user + system for user, system, _ in used)
            groups[group] = {
                "threads": len(used),
                "cpu_cores": round(cpu_s / self.wall_s, 2),
                "sys_share": round(sum(system for _, system, _ in used) / max(cpu_s, 1e-9), 2),
                "preempted_per_s": round(sum(p for *_, p in used) / self.wall_s),
                "samples": total,
                "top": places,
            }
        # CPU of the threads Python does not know (FFmpeg's, OpenCV's) and of those that
        # ended between two readings.
        process = sum(self.process_cpu) - sum(self.cpu_at_start[1])
        threads = sum(user + system for user, system, _ in map(self._used, self.cpu_s))
        groups["other threads"] = {"cpu_cores": round((process - threads) / self.wall_s, 2)}
        lags = sorted(self.lags_ms) or [0.0]
        return {
            "interval_ms": self.interval_s * 1e3,
            "wall_s": round(self.wall_s, 3),
            "process_cpu_cores": round(process / self.wall_s, 2),
            "sampler_lag_ms": {
                "p50": round(lags[len(lags) // 2], 3),
                "p95": round(lags[int(len(lags) * 0.95)], 3),
                "max": round(lags[-1], 3),
            },
            "groups": groups,
        }


def task_inproc(args: dict) -> dict:
    """edgecli.pipeline.run in this process, so that the Sampler can see its threads.

    ``modes``: ``cuda`` or ``cpu`` (edgecli's backends), ``ceiling-host`` (the CPU
    backend's path with a backend that costs nothing: every frame's edges looked up in a
    table the CPU reference filled before the runs) and ``ceiling-gpu`` (the GPU path,
    batching and slab ring included, on edgecli.testing's stand-in with that lookup). Per
    mode: a warm-up run on ``short``, then ``repeats`` x (a run on ``full``, one on
    ``short``), then, if ``profile`` names it, one more on ``full`` under the Sampler. Only the
    last full run's output folder is kept, to compare with the CPU backend's.
    """
    import dataclasses
    import itertools
    import shlex
    from contextlib import nullcontext

    from edgecli.params import Options
    from edgecli.pipeline import run
    from edgecli.testing import PrecomputedEdges, StandInGpuBackend

    started = time.perf_counter()
    scratch = Path(args["scratch"])
    parser = argparse.ArgumentParser(prog="--gpu-args")  # edgecli's options that apply
    for name in ("--batch", "--streams", "--device"):
        parser.add_argument(name, type=int)
    gpu_options = vars(parser.parse_args(shlex.split(args["gpu_args"])))
    options = Options(
        workers=args["workers"], **{k: v for k, v in gpu_options.items() if v is not None}
    )
    table = None
    if any(mode.startswith("ceiling") for mode in args["modes"]):
        # The full input cycles over the base frames; the short one may be other frames
        # (pan_head.mp4 is encoded on its own, so its frames differ from pan.mp4's).
        inputs = dict.fromkeys([args["base"], args["short"]])
        table = PrecomputedEdges.of_inputs(list(inputs), options, args["workers"])
    stand_ins = {
        "ceiling-host": lambda: table,
        "ceiling-gpu": lambda: StandInGpuBackend(options, compute=table.lookup, poison=False),
    }
    counter = itertools.count()

    def once(mode: str, input_arg: str, profile: bool = False) -> tuple[dict, Path]:
        out = scratch / f"{mode}-{next(counter)}"
        stand_in = stand_ins.get(mode, lambda: None)()
        if stand_in is None:
            run_options = dataclasses.replace(options, backend=mode)
        else:
            run_options = options  # its backend field is not read
        with Sampler() if profile else nullcontext() as sampler:
            summary = run(input_arg, out, run_options, backend=stand_in)
        reported = summary.as_json()
        figures = {k: reported[k] for k in ("frames", "wall_s", "fps", "main_thread_waits_s")}
        figures["bottleneck_detail"] = reported["bottleneck_detail"]
        figures["stage_mean_ms"] = {k: v["mean_ms"] for k, v in reported["stages"].items()}
        if sampler:
            figures["profile"] = sampler.report()
        return figures, out

    results = {}
    for mode in args["modes"]:
        shutil.rmtree(once(mode, args["short"])[1])  # warm-up: file cache, CUDA, kernel
        full, short, kept = [], [], None
        for rep in range(args["repeats"]):
            if rep and time.perf_counter() - started > args["budget_s"]:
                break
            figures, out = once(mode, args["full"])
            full.append(figures)
            if kept:
                shutil.rmtree(kept)
            kept = out
            figures, out = once(mode, args["short"])
            short.append(figures)
            shutil.rmtree(out)
        result: dict = {"runs": full, "short_runs": short}
        if full:
            n, k = full[0]["frames"], short[0]["frames"]
            wall_n = statistics.median(r["wall_s"] for r in full)
            wall_k = statistics.median(r["wall_s"] for r in short)
            result.update(
                frames=n,
                short_frames=k,
                fps=round(n / wall_n, 2),
                steady_fps=steady_fps(n, wall_n, k, wall_k),
            )
        if mode in args["profile"]:
            result["profiled"], out = once(mode, args["full"], profile=True)
            if kept:
                shutil.rmtree(out)
            else:
                kept = out
        result["output"] = str(kept) if kept else None
        results[mode] = result
    return results


TASKS = {
    "environment": task_environment,
    "codec": task_codec,
    "compare": task_compare,
    "inproc": task_inproc,
}


# --------------------------------------------------------------------------------------
# Parent side: standard library only.
# --------------------------------------------------------------------------------------


@dataclass
class Run:
    """One child process: how it ended, how long it took, its peak RSS, what it printed."""

    label: str
    rc: int
    wall_s: float
    peak_rss_mb: float
    stdout: str
    stderr_tail: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    def json_out(self) -> dict | None:
        """The JSON object the child printed on stdout (edgecli's is indented), if any."""
        text = self.stdout.strip()
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None


class Bench:
    """Child processes, scratch folders and the time budget of one benchmark run."""

    def __init__(self, args, scratch: Path):
        self.args, self.scratch = args, scratch
        self.started = time.perf_counter()
        self.counter = 0
        self.env = dict(os.environ)
        # Children import edgecli from this checkout, installed or not.
        path = self.env.get("PYTHONPATH")
        self.env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
        self.edgecli = [sys.executable, "-m", "edgecli"]

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def over_budget(self) -> bool:
        return self.elapsed() > self.args.budget_s

    def new_dir(self, name: str) -> Path:
        self.counter += 1
        path = self.scratch / f"{self.counter:03d}-{name}"
        path.mkdir(parents=True)
        return path

    def spawn(self, label: str, command: list[str], timeout_s: float | None = None) -> Run:
        """Run ``command``; wall time around it and its own ``ru_maxrss`` from os.wait4."""
        logs = self.new_dir(f"log-{label}")
        timeout_s = timeout_s or self.args.run_timeout_s
        with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=out, stderr=err, env=self.env, cwd=REPO)
            killed = threading.Event()

            def kill() -> None:
                killed.set()
                child.kill()

            timer = threading.Timer(timeout_s, kill)
            timer.start()
            # wait4 rather than Popen.wait: it also returns this child's rusage.
            _, status, usage = os.wait4(child.pid, 0)
            wall_s = time.perf_counter() - start
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        stdout = (logs / "stdout").read_text(errors="replace")
        stderr = (logs / "stderr").read_text(errors="replace")
        shutil.rmtree(logs)
        return Run(
            label=label,
            rc=child.returncode,
            wall_s=round(wall_s, 4),
            peak_rss_mb=round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
            stdout=stdout,
            stderr_tail=stderr[-2000:],
            timed_out=killed.is_set(),
        )

    def task(self, name: str, **task_args) -> dict:
        command = [sys.executable, str(Path(__file__).resolve()), "_task", name]
        run = self.spawn(f"task-{name}", command + [json.dumps(task_args)])
        if not run.ok:
            raise RuntimeError(f"task {name} failed (exit {run.rc}): {run.stderr_tail}")
        return run.json_out()

    def edgecli_run(self, backend: str, input_path: Path, label: str) -> tuple[Run, Path]:
        out_dir = self.new_dir(f"out-{label}")
        command = self.edgecli + [
            "run", str(input_path), "-o", str(out_dir), "--backend", backend,
            "--workers", str(self.args.workers), "-q", "--json-summary", "-",
        ]  # fmt: skip
        if backend == "cuda":
            command += shlex.split(self.args.gpu_args)
        return self.spawn(label, command), out_dir

    def course_run(self, input_path: Path, label: str) -> tuple[Run, Path]:
        out_dir = self.new_dir(f"out-{label}")
        script = REPO / "benchmarks" / "course_loop.py"
        command = [sys.executable, str(script), str(input_path), str(out_dir)]
        return self.spawn(label, command), out_dir


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def run_summary(run: Run) -> dict:
    """What the JSON keeps of one child run."""
    data = {k: v for k, v in asdict(run).items() if k not in ("stdout", "stderr_tail")}
    if not run.ok:
        data["stderr_tail"] = run.stderr_tail[-500:]
    summary = run.json_out() if run.ok else None
    if summary:
        keep = ("frames", "fps", "wall_s", "workers", "device", "bottleneck_detail", "startup_s")
        keep += ("bottleneck", "gpu_busy_fraction", "main_thread_waits_s")
        data["reported"] = {k: summary[k] for k in keep if k in summary}
    return data


def steady_fps(frames: int, wall_n: float, short_frames: int, wall_k: float) -> float | None:
    """Frames per second of the frames a full run has beyond a short one: start-up cancels."""
    if frames <= short_frames or wall_n <= wall_k:
        return None  # too few frames, or noise larger than the difference
    return round((frames - short_frames) / (wall_n - wall_k), 2)


def runner_figures(full: list[Run], short: list[Run]) -> dict:
    """wall / JSON / steady fps, start-up and peak RSS of one edgecli backend on one input."""
    good_full = [r for r in full if r.ok]
    good_short = [r for r in short if r.ok]
    if not good_full:
        return {"error": full[-1].stderr_tail[-500:] if full else "not run"}
    frames = good_full[0].json_out()["frames"]
    wall_n = median([r.wall_s for r in good_full])
    json_wall_n = round(median([r.json_out()["wall_s"] for r in good_full]), 4)
    bottleneck = good_full[-1].json_out()
    figures = {
        "frames": frames,
        "wall_s_median": round(wall_n, 4),
        "wall_fps": round(frames / wall_n, 2),
        "json_wall_s_median": json_wall_n,
        "json_fps": round(frames / json_wall_n, 2),
        "peak_rss_mb": max(r.peak_rss_mb for r in good_full),
        "bottleneck": bottleneck.get("bottleneck"),
        "bottleneck_detail": bottleneck.get("bottleneck_detail"),
        "runs": [run_summary(r) for r in full],
    }
    if good_short:
        k = good_short[0].json_out()["frames"]
        wall_k = median([r.wall_s for r in good_short])
        json_wall_k = round(median([r.json_out()["wall_s"] for r in good_short]), 4)
        # Both clocks give a steady rate. edgecli's own (from the start of its run) leaves
        # out interpreter start-up and imports, the noisiest part, so the table uses it.
        steady = steady_fps(frames, json_wall_n, k, json_wall_k)
        figures.update(
            short_frames=k,
            short_wall_s_median=round(wall_k, 4),
            short_json_wall_s_median=json_wall_k,
            short_peak_rss_mb=max(r.peak_rss_mb for r in good_short),
            steady_fps=steady,
            steady_fps_process_clock=steady_fps(frames, wall_n, k, wall_k),
            # What the full run's wall time holds beyond its frames at the steady rate.
            startup_s=round(wall_n - frames / steady, 3) if steady else None,
            short_runs=[run_summary(r) for r in short],
        )
    return figures


def prepare_inputs(bench: Bench, kind: str) -> dict | None:
    """The inputs of one kind, None if it is missing: ``base`` (the real frames: the codec
    floor's input, the ceiling's lookup table, the course loop's input), and per runner
    (``gpu``, ``cpu``) a ``full`` and a ``short`` one, and the RSS-test inputs.

    Without --long-frames, full is the base input and short its first fifth (video:
    pan_head.mp4). With it, full is a long input cycling over the base frames (folders of
    symlinks; for video, copies of pan.mp4, made once its frame count is known: see
    :func:`lengthen_video`) and short is the base input.
    """
    args = bench.args
    data = Path(args.data)
    inputs = bench.scratch / "inputs"
    if kind == "video":
        base, head = data / "pan.mp4", data / "pan_head.mp4"
        if not base.is_file():
            log(f"video: no {base}; skipped (make it with scripts/make_bench_media.py)")
            return None
        short = head if head.is_file() and not args.long_frames else None
        return {"base": base, "full": {}, "short": {}, "default": (base, short), "rss": {}}
    frames = sorted((data / kind).glob(f"frame_*{FOLDER_SUFFIX[kind]}"))
    if not frames:
        log(f"{kind}: no frames in {data / kind}; skipped")
        return None
    frames = frames[: args.frames] if args.frames else frames
    n = len(frames)
    base = symlink_folder(frames, n, inputs / f"{kind}-{n}")
    result = {"base": base, "full": {}, "short": {}}
    if args.long_frames:
        for runner, count in (("gpu", args.long_frames), ("cpu", args.long_frames_cpu)):
            folder = inputs / f"{kind}-{count}"
            if not folder.exists():
                symlink_folder(frames, count, folder)
            result["full"][runner], result["short"][runner] = folder, base
    else:
        k = args.short_frames or max(1, n // 5)
        short = symlink_folder(frames, k, inputs / f"{kind}-{k}") if k < n else None
        for runner in ("gpu", "cpu"):
            result["full"][runner], result["short"][runner] = base, short
    counts = [] if args.skip_rss else args.rss_frames
    result["rss"] = {c: symlink_folder(frames, c, inputs / f"{kind}-rss{c}") for c in counts}
    return result


def lengthen_video(bench: Bench, inputs: dict, clip_frames: int) -> None:
    """Fill in the video's full and short inputs, once the clip's frame count is known."""
    args = bench.args
    if not args.long_frames:
        for runner in ("gpu", "cpu"):
            inputs["full"][runner], inputs["short"][runner] = inputs["default"]
        return
    for runner, count in (("gpu", args.long_frames), ("cpu", args.long_frames_cpu)):
        copies = max(2, round(count / clip_frames))
        folder = bench.scratch / "inputs" / f"video-x{copies}"
        inputs["full"][runner] = (
            str(folder / "pan_*.mp4") if folder.exists() else
            video_copies(inputs["base"], copies, folder)
        )  # fmt: skip
        inputs["short"][runner] = inputs["base"]


def measure_codec(bench: Bench, kind: str, inputs: dict) -> dict:
    args = bench.args
    log(f"\n== {kind} (at {bench.elapsed():.0f} s): codec floor at {args.workers} thread(s)")
    codec = bench.task(
        "codec",
        kind=kind,
        input=str(inputs["base"]),
        workers=args.workers,
        repeats=args.repeats,
        scratch=str(bench.new_dir(f"codec-{kind}")),
    )
    decode_fps, encode_fps = codec["decode"]["fps"], codec["encode_write"]["fps"]
    codec["floor_fps"] = round(1 / (1 / decode_fps + 1 / encode_fps), 2)
    log(
        f"   {codec['frames']} frames: decode {decode_fps} fps ({codec['decode']['threads']}), "
        f"encode {codec['encode']['fps']} fps, encode+write {encode_fps} fps, "
        f"floor {codec['floor_fps']} fps; decode and encode+write at once: "
        f"{codec['together']['fps']} fps"
    )
    return codec


def measure_inproc(bench: Bench, kind: str, modes: list[str], inputs: dict, **task_args):
    """edgecli.pipeline.run in a child process (task_inproc): the ceiling, or a profile."""
    args = bench.args
    task_args.setdefault("repeats", 0)
    task_args.setdefault("profile", modes)
    runner = "cpu" if modes == ["cpu"] else "gpu"
    try:
        return bench.task(
            "inproc",
            modes=modes,
            base=str(inputs["base"]),
            full=str(inputs["full"][runner]),
            short=str(inputs["short"][runner] or inputs["base"]),
            workers=args.workers,
            gpu_args=args.gpu_args,
            budget_s=max(0.0, args.budget_s - bench.elapsed()),
            scratch=str(bench.new_dir(f"inproc-{kind}")),
            **task_args,
        )
    except RuntimeError as exc:  # reported in its rows; the other measurements go on
        log(f"   in-process {', '.join(modes)}: FAILED: {exc}")
        return {mode: {"error": str(exc)[-500:]} for mode in modes}


def log_inproc(name: str, figures: dict) -> None:
    if "error" in figures:
        return
    if figures.get("runs"):
        log(
            f"   {name}: {figures['frames']} frames {figures['fps']} fps, steady "
            f"{figures['steady_fps']} fps" + main_thread_text(figures["runs"][-1])
        )
    if "profiled" in figures:
        log(format_profile(f"{name}, profiled", figures["profiled"]))


def format_profile(title: str, run: dict, top: int = 4) -> str:
    """A few lines per thread group: CPU used, and where its samples were."""
    profile = run["profile"]
    lag = profile["sampler_lag_ms"]
    lines = [
        f"   {title}: {run['frames']} frames {run['fps']} fps; process CPU "
        f"{profile['process_cpu_cores']} cores; GIL wait (sampler lag) p50 {lag['p50']} ms, "
        f"p95 {lag['p95']} ms" + main_thread_text(run)
    ]
    for group, figures in profile["groups"].items():
        if "top" not in figures and group != "other threads":
            continue
        where = "; ".join(f"{p['share']:.0%} {p['where']}" for p in figures.get("top", [])[:top])
        threads = f"{figures['threads']} thr, " if "threads" in figures else ""
        preempted = (
            f", preempted {figures['preempted_per_s']}/s" if "preempted_per_s" in figures else ""
        )
        head = f"     {group} ({threads}{figures['cpu_cores']} cores{preempted})"
        lines.append(f"{head}: {where}" if where else head)
    return "\n".join(lines)


def measure_kind(bench: Bench, kind: str, gpu_skip: str | None) -> dict | None:
    """Every figure of one input kind (see the module docstring)."""
    args = bench.args
    inputs = prepare_inputs(bench, kind)
    if inputs is None:
        return None
    result: dict = {"input": str(inputs["base"]), "notes": []}
    if kind == "video" and args.frames:
        result["notes"].append("--frames does not apply to video: every frame of pan.mp4 is used")

    result["codec"] = codec = measure_codec(bench, kind, inputs)
    if kind == "video":
        lengthen_video(bench, inputs, codec["frames"])
    if inputs["short"]["gpu"] is None:
        result["notes"].append("no short input (pan_head.mp4 missing?): no steady fps")
    result["inputs"] = {k: {r: str(p) for r, p in inputs[k].items()} for k in ("full", "short")}

    last_out: dict[str, Path] = {}
    if not args.skip_ceiling:
        log(
            f"   (at {bench.elapsed():.0f} s) pipeline ceiling, no compute "
            f"({args.workers} threads, in-process)"
        )
        ceiling = measure_inproc(
            bench,
            kind,
            ["ceiling-host", "ceiling-gpu"],
            inputs,
            repeats=args.repeats,
            profile=args.profile,
        )
        result["ceiling"] = ceiling
        for mode, figures in ceiling.items():
            log_inproc(mode, figures)
            if figures.get("output"):
                last_out[mode] = Path(figures["output"])

    backends = ["cpu"] if gpu_skip else ["cuda", "cpu"]
    names = {"cuda": "gpu", "cpu": "cpu"}
    # Warm-up, untimed: file cache, Python bytecode, CuPy's kernel cache.
    for backend in backends:
        warm_input = inputs["short"][names[backend]] or inputs["full"][names[backend]]
        bench.edgecli_run(backend, warm_input, f"{kind}-{backend}-warmup")
    if not gpu_skip and not args.skip_course:
        bench.course_run(inputs["base"], f"{kind}-course-warmup")

    full: dict[str, list[Run]] = {b: [] for b in backends}
    short: dict[str, list[Run]] = {b: [] for b in backends}
    for rep in range(args.repeats):
        if rep and bench.over_budget():
            result["notes"].append(f"time budget reached: {rep} repetition(s), not {args.repeats}")
            break
        for backend in backends:  # interleaved, so drift in the host hits both alike
            runner = names[backend]
            run, out_dir = bench.edgecli_run(
                backend, inputs["full"][runner], f"{kind}-{backend}-{rep}"
            )
            full[backend].append(run)
            if backend in last_out:
                shutil.rmtree(last_out[backend])
            last_out[backend] = out_dir
            if inputs["short"][runner] is not None:
                run, out_dir = bench.edgecli_run(
                    backend, inputs["short"][runner], f"{kind}-{backend}-k"
                )
                short[backend].append(run)
                shutil.rmtree(out_dir)
            log(
                f"   (at {bench.elapsed():.0f} s) rep {rep + 1}: {backend:<4} "
                f"{describe(full[backend][-1])}"
            )

    for backend in backends:
        result[names[backend]] = runner_figures(full[backend], short[backend])
        result[names[backend]]["threads"] = args.workers
    for backend in backends:
        if names[backend] in args.profile and not bench.over_budget():
            profiled = measure_inproc(bench, kind, [backend], inputs)[backend]
            if "profiled" in profiled:
                result[names[backend]]["profiled"] = profiled["profiled"]
                log_inproc(f"edgecli {names[backend].upper()}", profiled)
            if profiled.get("output"):
                shutil.rmtree(profiled["output"])
    if gpu_skip:
        result["gpu"] = {"skipped": gpu_skip}
    if gpu_skip or args.skip_course:
        result["course"] = {"skipped": gpu_skip or "--skip-course"}
    else:
        run, course_out = bench.course_run(inputs["base"], f"{kind}-course")
        log(f"   course loop: {describe(run)}")
        course = {"threads": 1, "run": run_summary(run)}
        if run.ok:
            reported = run.json_out()
            course.update(
                frames=reported["frames"],
                loop_fps=reported["fps"],
                wall_fps=round(reported["frames"] / run.wall_s, 2),
                startup_s=reported["startup_s"],
                peak_rss_mb=run.peak_rss_mb,
            )
        else:
            course["error"] = run.stderr_tail[-500:]
        result["course"] = course
        last_out["course"] = course_out

    checks = {}
    inputs_of = {"course": inputs["base"]}  # the others ran on the GPU's full input
    if "cpu" in last_out:
        for other in ("cuda", "course", "ceiling-host", "ceiling-gpu"):
            if other in last_out:
                # Inputs of different lengths (--long-frames-cpu, the course loop on the
                # base input): compare the names they share.
                same_input = inputs_of.get(other, inputs["full"]["gpu"]) == inputs["full"]["cpu"]
                compare = bench.task(
                    "compare",
                    a=str(last_out[other]),
                    b=str(last_out["cpu"]),
                    workers=args.workers,
                    common_only=not same_input,
                )
                checks[f"{names.get(other, other)}_vs_cpu"] = compare
                outcome = {True: "PASS", False: "FAIL", None: "no names in common"}
                log(
                    f"   {other} output == cpu output ({compare['files']} PNGs): "
                    f"{outcome[compare['identical']]}"
                )
    result["identical"] = checks
    for out_dir in last_out.values():
        shutil.rmtree(out_dir, ignore_errors=True)

    result["rss_flatness"] = measure_rss_flatness(bench, kind, inputs["rss"], backends)
    result["ratios"] = kind_ratios(result)
    return result


def measure_rss_flatness(bench: Bench, kind: str, rss_inputs: dict, backends: list) -> dict:
    """Peak RSS of one run on each RSS input (40 and 400 frames by default), per backend."""
    flatness: dict = {}
    if not rss_inputs:
        return {"note": "not measured (video, or --skip-rss): see the full and short runs"}
    if bench.over_budget():
        return {"note": "skipped: time budget reached"}
    counts = sorted(rss_inputs)
    for backend in backends:
        peaks = {}
        for count in counts:
            run, out_dir = bench.edgecli_run(backend, rss_inputs[count], f"{kind}-{backend}-rss")
            shutil.rmtree(out_dir)
            peaks[count] = run.peak_rss_mb if run.ok else None
        name = "gpu" if backend == "cuda" else "cpu"
        flatness[name] = {
            "peak_rss_mb": {str(c): peaks[c] for c in counts},
            "ratio": ratio(peaks[counts[-1]], peaks[counts[0]]),
        }
        log(f"   peak RSS {backend}: {peaks} MB")
    return flatness


def kind_ratios(result: dict) -> dict:
    """The issue's ratios for one kind, on steady fps (and on wall fps, for reference)."""
    gpu, cpu, course = result.get("gpu", {}), result.get("cpu", {}), result.get("course", {})
    ceiling = result.get("ceiling", {})
    host, stand_in = ceiling.get("ceiling-host", {}), ceiling.get("ceiling-gpu", {})
    floor = result["codec"]["floor_fps"]
    flatness = result.get("rss_flatness", {})

    def rss_ratio(name: str, figures: dict) -> float | None:
        """RSS(400) / RSS(40) where measured, else the full run's over the short run's."""
        if name in flatness:
            return flatness[name]["ratio"]
        return ratio(figures.get("peak_rss_mb"), figures.get("short_peak_rss_mb"))

    return {
        "gpu_vs_floor": ratio(gpu.get("steady_fps"), floor),
        "gpu_vs_floor_wall": ratio(gpu.get("wall_fps"), floor),
        "gpu_vs_course": ratio(gpu.get("steady_fps"), course.get("loop_fps")),
        "gpu_vs_course_wall": ratio(gpu.get("wall_fps"), course.get("wall_fps")),
        "gpu_vs_cpu": ratio(gpu.get("steady_fps"), cpu.get("steady_fps")),
        "gpu_vs_cpu_wall": ratio(gpu.get("wall_fps"), cpu.get("wall_fps")),
        "ceiling_host_vs_floor": ratio(host.get("steady_fps"), floor),
        "ceiling_gpu_vs_floor": ratio(stand_in.get("steady_fps"), floor),
        "gpu_vs_ceiling_gpu": ratio(gpu.get("steady_fps"), stand_in.get("steady_fps")),
        "gpu_rss_flatness": rss_ratio("gpu", gpu),
        "cpu_rss_flatness": rss_ratio("cpu", cpu),
    }


def gpu_device(result: dict) -> str | None:
    """The GPU's name, as edgecli's JSON summary gives it."""
    for run in result.get("gpu", {}).get("runs", []):
        if "reported" in run:
            return run["reported"].get("device")
    return None


def describe(run: Run) -> str:
    if run.timed_out:
        return f"TIMED OUT after {run.wall_s:.0f} s"
    if not run.ok:
        last = run.stderr_tail.strip().splitlines()[-1:] or ["(no message)"]
        return f"FAILED (exit {run.rc}): {last[0]}"
    reported = run.json_out() or {}
    frames = reported.get("frames", 0)
    return (
        f"{frames} frames, wall {run.wall_s:.2f} s ({frames / run.wall_s:.1f} fps), "
        f"JSON {reported.get('fps', '-')} fps, peak RSS {run.peak_rss_mb:.0f} MB"
        + main_thread_text(reported)
    )


def main_thread_text(reported: dict) -> str:
    """', main thread waited (s): decode 1.20, ..., working 45% of the run': the main thread
    hands all work out, so where it is neither waiting nor working, nothing new starts."""
    waits = reported.get("main_thread_waits_s") or {}
    if not waits:
        return ""
    waited = ", ".join(f"{k} {v:.2f}" for k, v in waits.items())
    return f", main thread waited (s): {waited}; not waiting {main_thread_busy(reported):.0%}"


def main_thread_busy(reported: dict) -> float:
    """The share of the run the main thread spent outside its waits: its own work, and
    waiting for the GIL (or a core) outside them."""
    waited = sum((reported.get("main_thread_waits_s") or {}).values())
    return max(0.0, 1 - waited / reported["wall_s"]) if reported.get("wall_s") else 0.0


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def verdict(value: float | None, target: float, op: str = "≥") -> str:
    """'0.93 (ok, ≥ 0.9)': a ratio, and whether it meets its target."""
    if value is None:
        return "–"
    met = {"≥": value >= target, "≤": value <= target, ">": value > target}[op]
    return f"{value:.2f} ({'ok' if met else 'MISS'}, {op} {target:g})"


def runner_cells(figures: dict, key: str, digits: int = 1) -> str:
    if "skipped" in figures:
        return "skipped"
    if "error" in figures:
        return "FAILED"
    return fmt(figures.get(key), digits)


def make_table(report: dict) -> str:
    """The results as a markdown table: one column per input kind."""
    kinds = [k for k in KINDS if k in report["kinds"]]
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, cell) -> None:
        rows.append((name, [cell(report["kinds"][k], k) for k in kinds]))

    def several(figures: dict, *keys: str, digits: int = 1) -> str:
        if "skipped" in figures or "error" in figures:
            return runner_cells(figures, keys[0])
        return " · ".join(fmt(figures.get(key), digits) for key in keys)

    w = report["config"]["workers"]
    low, high = sorted(report["config"]["rss_frames"])
    row("frames (full / short)", lambda r, k: _frames_cell(r))
    row(
        f"decode-only fps ({w} thr; video: 1 reader)", lambda r, k: fmt(r["codec"]["decode"]["fps"])
    )
    row(
        f"1-bit PNG encode fps ({w} thr): in memory · with write",
        lambda r, k: (
            f"{fmt(r['codec']['encode']['fps'])} · {fmt(r['codec']['encode_write']['fps'])}"
        ),
    )
    row("**codec floor fps**", lambda r, k: fmt(r["codec"]["floor_fps"]))
    row(
        "decode and encode+write at once, no hand-off, fps (/ floor)",
        lambda r, k: _together_cell(r),
    )
    if any("ceiling" in report["kinds"][k] for k in kinds):
        row(
            f"**pipeline ceiling, no compute** ({w} thr), steady fps: host path · GPU path",
            lambda r, k: _ceiling_cell(r, "steady_fps"),
        )
        row(
            "pipeline ceiling / codec floor: host path · GPU path",
            lambda r, k: " · ".join(
                fmt(r["ratios"][key], 2)
                for key in ("ceiling_host_vs_floor", "ceiling_gpu_vs_floor")
            ),
        )
    for name, key in (("gpu", "edgecli GPU"), ("cpu", "edgecli CPU")):
        row(
            f"**{key} fps** ({w} thr): steady · wall · JSON",
            lambda r, k, n=name: several(r[n], "steady_fps", "wall_fps", "json_fps"),
        )
        row(f"{key}: start-up s; bottleneck", lambda r, k, n=name: _startup_cell(r[n]))
    row(
        "course loop fps (1 thr): loop · wall",
        lambda r, k: several(r["course"], "loop_fps", "wall_fps"),
    )
    row(
        "peak RSS MB: GPU · CPU · course",
        lambda r, k: " · ".join(
            runner_cells(r[n], "peak_rss_mb", 0) for n in ("gpu", "cpu", "course")
        ),
    )
    row(f"peak RSS MB GPU, {low} → {high} frames", lambda r, k: _rss_cell(r, "gpu"))
    row(f"peak RSS MB CPU, {low} → {high} frames", lambda r, k: _rss_cell(r, "cpu"))
    row(
        "GPU / codec floor: steady (wall)",
        lambda r, k: _ratio_cell(r, "gpu_vs_floor", TARGETS["gpu_vs_floor"]),
    )
    row(
        "GPU / course loop: steady (wall)",
        lambda r, k: _ratio_cell(
            r, "gpu_vs_course", TARGETS["gpu_vs_course_png"] if k == "png" else None
        ),
    )
    row(
        "GPU / CPU backend: steady (wall)",
        lambda r, k: _ratio_cell(r, "gpu_vs_cpu", TARGETS["gpu_vs_cpu"], ">"),
    )
    row("GPU / GPU-path ceiling (steady)", lambda r, k: fmt(r["ratios"]["gpu_vs_ceiling_gpu"], 2))
    for name, label in PROFILED:
        if any(_profiled(report["kinds"][k], name) for k in kinds):
            row(
                f"profile, {label}: fps; main thread not waiting · CPU cores; "
                "GIL wait p50 · p95 ms",
                lambda r, k, n=name: _profile_cell(_profiled(r, n)),
            )
    row(
        f"RSS({high}) / RSS({low}) (else full / short), GPU",
        lambda r, k: verdict(r["ratios"]["gpu_rss_flatness"], TARGETS["rss_flatness"], "≤"),
    )
    row("GPU output == CPU output", lambda r, k: _identity_cell(r, "gpu_vs_cpu"))
    row("course output == CPU output", lambda r, k: _identity_cell(r, "course_vs_cpu"))
    if any("ceiling" in report["kinds"][k] for k in kinds):
        row(
            "ceiling output == CPU output: host path · GPU path",
            lambda r, k: " · ".join(
                _identity_cell(r, f"{m}_vs_cpu") for m in ("ceiling-host", "ceiling-gpu")
            ),
        )

    header = "| measure | " + " | ".join(kinds) + " |"
    lines = [header, "|---|" + "---:|" * len(kinds)]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    return "\n".join(lines)


def make_brief_table(report: dict) -> str:
    """The figures that say where the cap is, one column per input kind: the codec floor,
    the pipeline's own ceiling, edgecli, and the profiles (markdown)."""
    kinds = [k for k in KINDS if k in report["kinds"]]
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, cell) -> None:
        rows.append((name, [cell(report["kinds"][k]) for k in kinds]))

    def against_floor(fps: float | None, result: dict) -> str:
        return f"{fmt(fps)} ({fmt(ratio(fps, result['codec']['floor_fps']), 2)})"

    def steady(figures: dict) -> str:
        if "skipped" in figures or "error" in figures:
            return runner_cells(figures, "steady_fps")
        return fmt(figures.get("steady_fps"))

    row("frames: full / short", _frames_cell)
    row("codec floor fps", lambda r: fmt(r["codec"]["floor_fps"]))
    row("decode and encode+write at once, no hand-off, fps (/ floor)", _together_cell)
    row(
        "ceiling, no compute, steady fps (/ floor): host path · GPU path",
        lambda r: " · ".join(
            against_floor(r.get("ceiling", {}).get(m, {}).get("steady_fps"), r)
            for m in ("ceiling-host", "ceiling-gpu")
        ),
    )
    row(
        "edgecli GPU steady fps (/ floor)",
        lambda r: against_floor(r["gpu"]["steady_fps"], r) if "steady_fps" in r["gpu"]
        else steady(r["gpu"]),
    )  # fmt: skip
    row("edgecli GPU / GPU-path ceiling", lambda r: fmt(r["ratios"]["gpu_vs_ceiling_gpu"], 2))
    row("edgecli CPU steady fps", lambda r: steady(r["cpu"]))
    for name, label in PROFILED:
        if any(_profiled(report["kinds"][k], name) for k in kinds):
            row(
                f"profiled {label}: fps; main thread not waiting · CPU; GIL wait p50 · p95 ms",
                lambda r, n=name: _profile_cell(_profiled(r, n)),
            )
    row("every output == CPU backend's", _all_identical_cell)
    lines = ["| measure | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    return "\n".join(lines)


def _together_cell(result: dict) -> str:
    codec = result["codec"]
    if "together" not in codec:
        return "–"
    fps = codec["together"]["fps"]
    return f"{fmt(fps)} ({fmt(ratio(fps, codec['floor_fps']), 2)})"


def _all_identical_cell(result: dict) -> str:
    checks = result["identical"].values()
    if any(check["identical"] is False for check in checks):
        return "FAIL"
    return f"PASS ({len(checks)} compared)" if checks else "–"


# Profiled runs in the table: where each is in a kind's result, and its row's label.
PROFILED = (("ceiling-gpu", "GPU-path ceiling"), ("gpu", "edgecli GPU"), ("cpu", "edgecli CPU"))


def _profiled(result: dict, name: str) -> dict | None:
    if name.startswith("ceiling"):
        return result.get("ceiling", {}).get(name, {}).get("profiled")
    return result.get(name, {}).get("profiled")


def _profile_cell(run: dict | None) -> str:
    if run is None:
        return "–"
    profile = run["profile"]
    main = profile["groups"].get("MainThread", {}).get("cpu_cores")
    lag = profile["sampler_lag_ms"]
    return (
        f"{fmt(run['fps'])}; {main_thread_busy(run):.0%} · {fmt(main, 2)}; "
        f"{fmt(lag['p50'], 2)} · {fmt(lag['p95'], 2)}"
    )


def _ceiling_cell(result: dict, key: str) -> str:
    ceiling = result.get("ceiling")
    if ceiling is None:
        return "–"
    cells = []
    for mode in ("ceiling-host", "ceiling-gpu"):
        figures = ceiling.get(mode, {})
        cells.append("FAILED" if "error" in figures else fmt(figures.get(key)))
    return " · ".join(cells)


def _ratio_cell(result: dict, key: str, target: float | None, op: str = "≥") -> str:
    """'0.93 (ok, ≥ 0.9) (wall 0.31)': the steady ratio against its target, then the wall one."""
    steady, wall = result["ratios"][key], result["ratios"][f"{key}_wall"]
    if steady is None and wall is None:
        return "–"
    text = fmt(steady, 2) if target is None else verdict(steady, target, op)
    return f"{text} (wall {fmt(wall, 2)})"


def _startup_cell(figures: dict) -> str:
    if "skipped" in figures or "error" in figures:
        return runner_cells(figures, "startup_s")
    return f"{fmt(figures.get('startup_s'), 2)}; {_bottleneck_cell(figures)}"


def _frames_cell(result: dict) -> str:
    cells = []
    ceiling = result.get("ceiling", {}).get("ceiling-gpu", {})  # ran on the GPU's inputs
    for name in ("gpu", "cpu"):
        figures = result.get(name, {})
        if name == "gpu" and "frames" not in figures:
            figures = ceiling
        if "frames" in figures:
            cells.append(f"{figures['frames']} / {figures.get('short_frames', '–')}")
    if not cells:
        return f"{result['codec']['frames']} / –"
    return " (CPU ".join(cells) + ")" if len(set(cells)) == 2 else cells[0]


def _rss_cell(result: dict, name: str) -> str:
    if "skipped" in result[name]:
        return "skipped"
    entry = result.get("rss_flatness", {}).get(name)
    if entry:
        low, high = entry["peak_rss_mb"].values()
        return f"{fmt(low, 0)} → {fmt(high, 0)}"
    figures = result[name]  # video: the short run against the full one instead
    if "short_peak_rss_mb" not in figures:
        return "–"
    return (
        f"{fmt(figures['short_peak_rss_mb'], 0)} → {fmt(figures['peak_rss_mb'], 0)} "
        f"({figures['short_frames']} → {figures['frames']} frames)"
    )


def _bottleneck_cell(figures: dict) -> str:
    """'decode 79%' from edgecli's 'decode-bound: the 16 worker thread(s) were busy 79% of the
    wall time, 41% on decode': the stage, and how busy it kept its resource's (all stages)."""
    detail = figures.get("bottleneck_detail")
    if not detail:
        return runner_cells(figures, "bottleneck")
    busy = [word for word in detail.split() if word.endswith("%")]
    return f"{figures['bottleneck']} {busy[0]}" if busy else figures["bottleneck"]


def _identity_cell(result: dict, key: str) -> str:
    check = result["identical"].get(key)
    if check is None:
        return "skipped"
    if check["identical"] is None:
        return "no names in common"
    return f"{'PASS' if check['identical'] else 'FAIL'} ({check['files']} PNGs)"


# --------------------------------------------------------------------------------------


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
    "slab ring of the CUDA backend, on edgecli.testing's stand-in (host threads for streams). "
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
    if len(sys.argv) > 1 and sys.argv[1] == "_task":
        if sys.argv[2] in ("codec", "inproc"):
            # The floor and the ceilings under the allocator settings edgecli's CLI runs
            # with, so that the codecs cost the same in them as in edgecli.
            from edgecli.allocator import keep_freed_memory

            keep_freed_memory()
        print(json.dumps(TASKS[sys.argv[2]](json.loads(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
