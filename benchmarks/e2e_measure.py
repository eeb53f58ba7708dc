"""benchmarks/e2e.py's measurements of one input kind: its inputs made, the codec floor, the
pipeline's ceilings, edgecli and the course loop run, their figures and the peak-RSS check
(standard library only, as e2e.py's own process: the work is done in child processes)."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from common import log, median, ratio, steady_fps, symlink_folder, video_copies
from e2e_table import describe, kind_ratios, main_thread_text

FOLDER_SUFFIX = {"jpeg": ".jpg", "png": ".png"}

if TYPE_CHECKING:
    from e2e_bench import Bench, Run


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
    """Every figure of one input kind (see the module docstring).

    One function, in the order the figures are taken: each step reuses what the steps before
    it measured or made (the codec's frame count, the lengthened inputs, the CPU run's folder
    the others are compared with), and the budget cuts the steps that come last."""
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
