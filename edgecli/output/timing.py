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

from ..errors import printable

# Stages in pipeline order. Each runs on one resource, which it occupies while it runs: the
# ``workers`` threads (timed with perf_counter: decoding stills on the CPU, reading JPEGs for the
# GPU's decoder, copying frames into pinned memory, computing on the CPU, encoding PNGs,
# writing); the ``reader`` of videos and multi-frame files (a video's frames decoded in order);
# the GPU's streams (CUDA events: upload, kernel with the packing of 1-bit rows, deflate when the
# GPU compresses the PNGs, download); the JPEG engines (``gpu_decode``, events on their decoder's
# stream); and the NVDEC sessions, which record their own stages under ``nvdec``.
STAGE_ORDER = (
    "read", "decode", "load", "gpu_decode", "copy", "compute", "upload", "kernel", "deflate",
    "download", "encode", "write",
)  # fmt: skip
RESOURCE_OF = {
    "decode": "workers", "load": "workers", "copy": "workers", "compute": "workers",
    "encode": "workers", "write": "workers", "read": "reader", "upload": "gpu", "kernel": "gpu",
    "deflate": "gpu", "download": "gpu", "gpu_decode": "jpeg",
}  # fmt: skip
# The main thread's own work: what it does between its waits (WaitClock) while frames flow.
HANDOFF = "handoff"
# The resource of a video's frames read before its turn (opening it, its first frames): the
# reader of the next sequence, which runs beside the reader of the one being read.
READ_AHEAD = "ahead"
# What set the pace, by the resource and the stage that kept it busiest.
PACE_SETTERS = {
    ("workers", "decode"): "the CPU decoders",
    ("workers", "load"): "reading the files for the GPU's decoders",
    ("workers", "copy"): "copying frames into pinned memory",
    ("workers", "compute"): "edge detection on the CPU",
    ("workers", "encode"): "PNG compression",
    ("workers", "write"): "the writes",
    ("reader", "read"): "the reader of a video",
    (READ_AHEAD, "read"): "opening each next video ahead",
    ("gpu", "upload"): "copies to the GPU",
    ("gpu", "kernel"): "the kernel",
    ("gpu", "deflate"): "PNG compression on the GPU",
    ("gpu", "download"): "copies from the GPU",
    ("jpeg", "gpu_decode"): "the JPEG engines",
    ("png", "gpu_decode"): "the GPU's PNG decoder",
    ("nvdec", "gpu_decode"): "NVDEC",
    ("nvdec", "read"): "the CPU decoders of videos NVDEC does not decode exactly",
    ("nvdec", "upload"): "uploading CPU-decoded video frames",
    ("main", HANDOFF): "the main thread's hand-offs between the stages",
}
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
        self._busy: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._rows: dict[str, dict[str, float]] | None = {} if per_frame else None

    def record(self, stage: str, elapsed_ms: float, frame: str, resource: str | None = None):
        """``frame``'s ``elapsed_ms`` in ``stage``, which occupied ``resource`` (by default
        the one the stage runs on, RESOURCE_OF) that long."""
        self.record_each(stage, elapsed_ms, (frame,), resource)

    def record_each(self, stage: str, elapsed_ms: float, frames, resource: str | None = None):
        """:meth:`record` of ``elapsed_ms`` for each of ``frames``, under one acquisition of
        the lock: a batch's share of a stage it ran as a whole, recorded by the main thread."""
        with self._lock:
            self._ms[stage].extend([elapsed_ms] * len(frames))
            self._busy[resource or RESOURCE_OF[stage]][stage] += elapsed_ms * len(frames)
            if self._rows is not None:
                for frame in frames:
                    self._rows.setdefault(frame, {})[stage] = elapsed_ms

    def add_busy(self, resource: str, stage: str, elapsed_ms: float) -> None:
        """Time ``resource`` spent on ``stage`` for no one frame (the main thread's)."""
        with self._lock:
            self._busy[resource][stage] += elapsed_ms

    def busy(self) -> dict[str, dict[str, float]]:
        """Milliseconds each resource was occupied, by stage."""
        with self._lock:
            return {r: {s: round(ms, 3) for s, ms in st.items()} for r, st in self._busy.items()}

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
    first use, a cost that a one-image run's start-up would show.)"""
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

    def total_s(self) -> float:
        return sum(self.seconds.values())


# Who each resource is, in the bottleneck's sentence ({n}: its lanes).
RESOURCE_NAMES = {
    "workers": "the {n} worker thread(s)",
    "reader": "the reader of videos and multi-frame files",
    READ_AHEAD: "the reader of the next video, ahead",
    "gpu": "the GPU's {n} stream(s)",
    "jpeg": "the JPEG engines",
    "png": "the GPU's PNG decoder ({n} thread(s))",
    "nvdec": "the {n} NVDEC session(s)",
    "main": "the main thread",
}
RESOURCE_ORDER = tuple(RESOURCE_NAMES)


def busy_fractions(busy: dict, lanes: dict, wall_s: float) -> dict[str, float]:
    """Each resource's busy fraction: the time its stages occupied it over the time it had,
    its lanes (threads, streams, sessions) times the wall time."""
    if wall_s <= 0:
        return {}
    ordered = sorted(busy, key=lambda r: RESOURCE_ORDER.index(r) if r in RESOURCE_ORDER else 99)
    return {
        r: sum(busy[r].values()) / 1e3 / (max(lanes.get(r, 1), 1) * wall_s)
        for r in ordered
        if busy[r]
    }


def find_bottleneck(busy: dict, lanes: dict, wall_s: float) -> tuple[str, str]:
    """The stage that set the pace, and a sentence saying what it is and how busy it kept its
    resource; or "none" when even the busiest resource was busy less than BOUND_FRACTION of
    the wall time.

    ``busy`` holds the milliseconds each resource was occupied, by stage
    (:meth:`StageClock.busy`); ``lanes`` how many of each there were. Busy means the same on
    every resource: a lane was working on a stage, not waiting for work or for room
    downstream. A resource whose lanes were all busy all the time set the pace, whatever the
    others did; its busiest stage names it: the CPU decoders, the JPEG engines, NVDEC, the
    kernel, compression (on the host or the GPU), the writes, the reader of a video, the main
    thread's hand-offs. The GPU's lanes are its streams, the batches it may have in flight: a
    stream's batch occupies it from its first copy to its last, however many other streams the
    GPU runs beside it, so a GPU whose every stream was full set the pace, and one that ran a
    few short batches side by side did not.
    """
    fractions = busy_fractions(busy, lanes, wall_s)
    if not any(r != "main" for r in fractions):
        return "none", "no frames were processed"
    resource = max(fractions, key=fractions.get)
    stages, total = busy[resource], fractions[resource]
    stage = max(stages, key=stages.get)
    who = RESOURCE_NAMES.get(resource, resource).format(n=lanes.get(resource, 1))
    if total < BOUND_FRACTION:
        return "none", (  # percent rounded down, so 69.6% never reads "70% (under 70%)"
            f"not bound: the busiest resource, {who}, was busy {int(total * 100)}% of the wall "
            f"time (under {BOUND_FRACTION:.0%}: the run was too short, or waited on I/O)"
        )
    share = stages[stage] / sum(stages.values()) * total
    on = f", {share:.0%} on {stage}" if len(stages) > 1 else ""
    pace = PACE_SETTERS.get((resource, stage), stage)
    return stage, (
        f"{stage}-bound: {pace} set the pace ({who} busy {total:.0%} of the wall time{on})"
    )


# Videos named one by one under -v: the JSON summary has them all.
VIDEOS_SHOWN = 10


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
    main_thread_waits_s: dict = field(default_factory=dict)  # WaitClock.totals()
    decoders: dict = field(default_factory=dict)  # frames per decoder: "cpu", "nvjpeg-hw", ...
    # A GPU-decoding run's videos NVDEC did not decode exactly: each file's decoder and why.
    videos: dict = field(default_factory=dict)
    busy: dict = field(default_factory=dict)  # StageClock.busy(): ms by resource and stage
    lanes: dict = field(default_factory=dict)  # each resource's threads, streams or sessions

    def busy_fractions(self) -> dict[str, float]:
        return busy_fractions(self.busy, self.lanes, self.wall_s)

    @property
    def gpu_busy_fraction(self) -> float | None:
        """The share of its streams' time the GPU's batches occupied (CUDA backend only)."""
        if "gpu" not in self.lanes:
            return None
        return self.busy_fractions().get("gpu", 0.0)

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
        return find_bottleneck(self.busy, self.lanes, self.wall_s)

    def as_json(self) -> dict:
        data = asdict(self)
        data.pop("lanes")
        fractions = self.busy_fractions()
        data["busy"] = {
            resource: {
                "lanes": self.lanes.get(resource, 1),
                "busy_fraction": round(fraction, 4),
                "stages_s": {s: round(ms / 1e3, 4) for s, ms in self.busy[resource].items()},
            }
            for resource, fraction in fractions.items()
        }
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
        fractions = self.busy_fractions()
        if fractions:
            lines.append(
                "  busy: "
                + ", ".join(
                    f"{RESOURCE_NAMES.get(r, r).format(n=self.lanes.get(r, 1))} {f:.0%}"
                    for r, f in fractions.items()
                )
            )
        if self.decoders:
            lines.append("  decoded by: " + ", ".join(f"{k} {v}" for k, v in self.decoders.items()))
        shown = list(self.videos.items())[:VIDEOS_SHOWN]
        for path, said in shown:
            lines.append(f"  {path}: {said}")
        if len(self.videos) > len(shown):
            lines.append(f"  ... and {len(self.videos) - len(shown)} more videos (--json-summary)")
        if self.main_thread_waits_s:
            waits = ", ".join(f"{k} {v:.2f} s" for k, v in self.main_thread_waits_s.items())
            lines.append(f"  main thread waited on: {waits}")
        lines.append(f"  {self.bottleneck()[1]}")
        return "\n".join(lines)
