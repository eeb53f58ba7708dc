"""The child-side tasks of benchmarks/e2e.py: each runs in a process of its own, as
``python e2e_tasks.py NAME JSON``, and prints one JSON object. They import NumPy, OpenCV and
edgecli, which e2e.py's own process must not (see its docstring: a child's peak RSS is never
below its parent's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

from common import steady_fps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.standins: the stand-in backend of the pipeline rows


def task_environment(args: dict) -> dict:
    """Library versions, and why CUDA is unusable here (None when it is usable)."""
    import cv2
    import numpy as np

    versions = {"numpy": np.__version__, "opencv": cv2.__version__}
    try:
        from edgecli.edges.backends import cuda_unusable_reason

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

    from edgecli.edges.reference import detect_frame
    from edgecli.options.params import Options
    from edgecli.output.png import encode_png
    from edgecli.output.sinks import write_atomic

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
    batching and slab ring included, on tests.standins's stand-in with that lookup). Per
    mode: a warm-up run on ``short``, then ``repeats`` x (a run on ``full``, one on
    ``short``), then, if ``profile`` names it, one more on ``full`` under the Sampler. Only the
    last full run's output folder is kept, to compare with the CPU backend's.
    """
    import dataclasses
    import itertools
    import shlex
    from contextlib import nullcontext

    from edgecli.options.params import Options
    from edgecli.pipeline import run
    from tests.standins import PrecomputedEdges, StandInGpuBackend

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


if __name__ == "__main__":
    if sys.argv[1] in ("codec", "inproc"):
        # The floor and the ceilings under the allocator settings edgecli's CLI runs with, so
        # that the codecs cost the same in them as in edgecli.
        from edgecli.pipeline.allocator import keep_freed_memory

        keep_freed_memory()
    print(json.dumps(TASKS[sys.argv[1]](json.loads(sys.argv[2]))))
