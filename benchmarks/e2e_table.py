"""benchmarks/e2e.py's report: the ratios the targets are judged on, and the tables it
prints (standard library only, as e2e.py's own process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from common import ratio

if TYPE_CHECKING:
    from e2e_bench import Run

KINDS = ("video", "jpeg", "png")
TARGETS = {  # issue 4, from one run on the 16-core H200 host
    "gpu_vs_floor": 0.9,
    "gpu_vs_course_png": 30.0,
    "gpu_vs_cpu": 1.0,
    "rss_flatness": 1.5,
}


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
    """'decode 79%' from edgecli's 'decode-bound: the CPU decoders set the pace (the 16 worker
    thread(s) busy 79% of the wall time, 41% on decode)': the stage, and how busy its resource
    was (all stages)."""
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
