"""Stage clocks and the end-of-run summary (text and JSON)."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import printable

# Stages in pipeline order. Device stages run on the GPU, timed with CUDA events; "read", a
# video's (or multi-frame file's) frames decoded in order, on its reader thread; the others on
# the worker threads. Host stages are timed with perf_counter.
DEVICE_STAGES = ("upload", "kernel", "download")
READER_STAGES = ("read",)
# "gpu_decode": a batch decoded by the GPU's JPEG engines (timed with CUDA events) or by an NVDEC
# session (on its thread), shared by its frames.
DECODER_STAGES = ("gpu_decode",)
STAGE_ORDER = (
    "read", "decode", "gpu_decode", "compute", "upload", "kernel", "download", "encode", "write",
)  # fmt: skip
SCHEMA_VERSION = 1
# A resource is named the bottleneck only when it was busy at least this share of the wall
# time. Below it nothing was saturated: the run was too short for the pipeline to fill (start-up
# and the last frames' drain dominate) or it waited on something not timed here (the disk, a
# slow producer), and naming the busiest stage would send the user after the wrong thing.
BOUND_FRACTION = 0.70


class StageClock:
    """Per-frame durations of each stage, safe to record from many threads.

    With ``per_frame`` it also keeps one row per output frame, for --timings-csv.
    """

    def __init__(self, per_frame: bool = False) -> None:
        self._lock = threading.Lock()
        self._ms: dict[str, list[float]] = defaultdict(list)
        self._rows: dict[str, dict[str, float]] | None = {} if per_frame else None

    def record(self, stage: str, elapsed_ms: float, frame: str) -> None:
        with self._lock:
            self._ms[stage].append(elapsed_ms)
            if self._rows is not None:
                self._rows.setdefault(frame, {})[stage] = elapsed_ms

    @contextmanager
    def timed(self, stage: str, frame: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.record(stage, (time.perf_counter() - start) * 1e3, frame)

    def csv_text(self) -> str:
        """One row per frame: its output name, then milliseconds per stage."""
        with self._lock:
            rows = dict(self._rows or {})
        stages = [s for s in STAGE_ORDER if s in self._ms]
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")  # csv's default is \r\n
        writer.writerow(["frame", *(f"{s}_ms" for s in stages)])
        for frame, times in rows.items():
            cells = ("" if s not in times else f"{times[s]:.3f}" for s in stages)
            writer.writerow([frame, *cells])
        return text.getvalue()

    def stats(self) -> dict[str, dict[str, float]]:
        with self._lock:
            items = {k: np.asarray(v) for k, v in self._ms.items() if v}
        return {
            stage: {
                "count": int(ms.size),
                "total_ms": round(float(ms.sum()), 3),
                "mean_ms": round(float(ms.mean()), 3),
                "p50_ms": round(percentile(ms, 50), 3),
                "p95_ms": round(percentile(ms, 95), 3),
            }
            for stage, ms in sorted(items.items(), key=lambda kv: STAGE_ORDER.index(kv[0]))
        }


def percentile(values: np.ndarray, q: float) -> float:
    """The ``q``-th percentile of ``values``, interpolated linearly between the two nearest
    ranks, as ``np.percentile``'s default does. (``np.percentile`` itself imports numpy.ma on
    first use, 70 ms of a one-image run's start-up on the H200 host.)"""
    ranked = np.sort(values)
    position = (ranked.size - 1) * q / 100
    low = int(position)
    high = min(low + 1, ranked.size - 1)
    return float(ranked[low] + (ranked[high] - ranked[low]) * (position - low))


class WaitClock:
    """Seconds the main thread spent blocked, by what it waited for.

    The main thread orders the pipeline: when it waits, nothing new is handed to the
    workers or the GPU, so these totals say which hand-off holds the run back. Only the
    main thread records, so no lock.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def timed(self, what: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[what] += time.perf_counter() - start

    def totals(self) -> dict[str, float]:
        return {what: round(s, 4) for what, s in sorted(self.seconds.items())}


def find_bottleneck(
    stages: dict, wall_s: float, workers: int, decode_lanes: int = 1
) -> tuple[str, str]:
    """The stage that kept the busiest resource busiest, and a sentence saying so; or "none"
    when even the busiest resource was busy less than BOUND_FRACTION of the wall time.

    The resources: the ``workers`` threads, which the worker stages share; the GPU, which
    the device stages share; and the readers of videos and multi-frame files, one a file
    (two at most at once, the next file read ahead: their time can pass the wall time). A
    resource's busy fraction is its stages' total time over the time it had (wall x threads,
    or wall). The busiest names the bottleneck: the GPU stage that took it longest, the worker
    stage that took the most of the workers' time, or reading. The GPU's decoders are a
    resource of their own: the JPEG engines (one decoder thread feeds them) or the NVDEC
    sessions (``decode_lanes`` of them side by side).
    """
    if not stages or wall_s <= 0:
        return "none", "no frames were processed"

    def busy(names, threads: int = 1) -> dict[str, float]:
        return {n: stages[n]["total_ms"] / 1e3 / (wall_s * threads) for n in stages if n in names}

    own = DEVICE_STAGES + READER_STAGES + DECODER_STAGES
    host = busy([n for n in stages if n not in own], workers)
    device, reader = busy(DEVICE_STAGES), busy(READER_STAGES)
    engines = busy(DECODER_STAGES, decode_lanes)
    resources = (host, device, reader, engines)
    busiest = max((f for f in resources if f), key=lambda f: sum(f.values()))
    name = max(busiest, key=busiest.get)
    total = sum(busiest.values())
    if total < BOUND_FRACTION:
        who = {
            id(host): f"the {workers} worker thread(s)",
            id(device): "the GPU",
            id(reader): "the readers of videos and multi-frame files",
            id(engines): "the GPU's decoders",
        }[id(busiest)]
        return "none", (  # percent rounded down, so 69.6% never reads "70% (under 70%)"
            f"not bound: the busiest resource, {who}, was busy {int(total * 100)}% of the wall "
            f"time (under {BOUND_FRACTION:.0%}: the run was too short, or waited on I/O)"
        )
    if busiest is reader:
        return name, (
            f"{name}-bound: reading videos and multi-frame files, in order (a reader a file), "
            f"took {total:.0%} of the wall time"
        )
    if busiest is engines:
        return name, (
            f"{name}-bound: the GPU's decoders (JPEG engines or {decode_lanes} NVDEC "
            f"session(s)) were busy {total:.0%} of the wall time"
        )
    who = "the GPU was" if busiest is device else f"the {workers} worker thread(s) were"
    return name, (
        f"{name}-bound: {who} busy {total:.0%} of the wall time, {busiest[name]:.0%} on {name}"
    )


@dataclass
class Summary:
    """What a run did. ``as_json`` is the schema docs/usage.md documents."""

    frames: int
    failed: list[dict]
    wall_s: float
    backend: str
    device: str
    params: dict
    workers: int
    output: str
    stages: dict = field(default_factory=dict)
    megapixels: float = 0.0
    skipped_existing: int = 0
    interrupted: bool = False
    gpu_busy_s: float | None = None  # time the GPU spent on copies and kernels (CUDA only)
    main_thread_waits_s: dict = field(default_factory=dict)  # WaitClock.totals()
    decoders: dict = field(default_factory=dict)  # frames per decoder: "cpu", "nvjpeg-hw", ...
    decode_lanes: int = 1  # the GPU decoders' sessions side by side (for the bottleneck)

    @property
    def gpu_busy_fraction(self) -> float | None:
        if self.gpu_busy_s is None or self.wall_s <= 0:
            return None
        return min(self.gpu_busy_s / self.wall_s, 1.0)

    @property
    def frames_failed(self) -> int:
        """Frames lost to errors: one a failure, or those a video that ended early lacks."""
        return sum(f.get("frames", 1) for f in self.failed)

    @property
    def fps(self) -> float:
        return self.frames / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def megapixels_per_s(self) -> float:
        return self.megapixels / self.wall_s if self.wall_s > 0 else 0.0

    def bottleneck(self) -> tuple[str, str]:
        return find_bottleneck(self.stages, self.wall_s, self.workers, self.decode_lanes)

    def as_json(self) -> dict:
        data = asdict(self)
        data.pop("gpu_busy_s")
        data.pop("decode_lanes")
        name, detail = self.bottleneck()
        data.update(
            schema=SCHEMA_VERSION,
            wall_s=round(self.wall_s, 4),
            megapixels=round(self.megapixels, 3),
            fps=round(self.fps, 2),
            megapixels_per_s=round(self.megapixels_per_s, 2),
            gpu_busy_fraction=None
            if self.gpu_busy_fraction is None
            else round(self.gpu_busy_fraction, 4),
            bottleneck=name,
            bottleneck_detail=detail,
        )
        return data

    def dumps(self) -> str:
        return json.dumps(self.as_json(), indent=2)

    def format_text(self, verbose: bool = False) -> str:
        """What the run did, for stderr: by default one line (frames, time, fps, what went
        wrong) and the bottleneck in words; ``verbose``: every stage's times, the decoders, the
        GPU's and the main thread's time too."""
        if not verbose:
            outcome = "".join(
                f"; {what}"
                for count, what in (
                    (self.frames_failed, f"{self.frames_failed} failed"),
                    (self.skipped_existing, f"{self.skipped_existing} kept (already written)"),
                    (self.interrupted, "interrupted"),
                )
                if count
            )
            return (
                f"edgecli: {self.frames} frame(s) -> {printable(self.output)} in "
                f"{self.wall_s:.2f} s ({self.fps:.1f} fps) on {self.backend}{outcome}\n"
                f"  {self.bottleneck()[1]}"
            )
        lines = [
            f"edgecli: {self.frames} frame(s) -> {printable(self.output)} in {self.wall_s:.2f} s "
            f"({self.fps:.1f} fps, {self.megapixels_per_s:.1f} MP/s) "
            f"on {self.backend} [{self.device}], {self.workers} worker(s)",
        ]
        if self.failed:
            lines.append(f"  failed: {self.frames_failed} frame(s)")
        if self.interrupted:
            lines.append("  interrupted: frames in flight were finished, the rest not started")
        if self.skipped_existing:
            lines.append(f"  skipped (output existed): {self.skipped_existing} frame(s)")
        for name, s in self.stages.items():
            lines.append(
                f"  {name:<9} total {s['total_ms'] / 1e3:8.3f} s  mean {s['mean_ms']:8.3f} ms"
                f"  p50 {s['p50_ms']:8.3f} ms  p95 {s['p95_ms']:8.3f} ms"
            )
        if self.gpu_busy_fraction is not None:
            lines.append(f"  GPU busy {self.gpu_busy_fraction:.1%} of the wall time")
        if self.decoders:
            lines.append("  decoded by: " + ", ".join(f"{k} {v}" for k, v in self.decoders.items()))
        if self.main_thread_waits_s:
            waits = ", ".join(f"{k} {v:.2f} s" for k, v in self.main_thread_waits_s.items())
            lines.append(f"  main thread waited on: {waits}")
        lines.append(f"  {self.bottleneck()[1]}")
        return "\n".join(lines)
