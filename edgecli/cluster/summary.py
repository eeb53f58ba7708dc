"""A cluster run's one summary, merged from its tasks' (:mod:`edgecli.cluster.run`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..options.params import Options
from ..output.timing import Summary
from ..pipeline import summary_params


@dataclass
class ClusterSummary(Summary):
    """A :class:`Summary` merged from a cluster's tasks, and what each Dask worker did."""

    scheduler: str = ""
    tasks: int = 0
    # One entry a Dask worker: its address and host, tasks and frames, the seconds its
    # tasks ran, and its frames per second over them.
    workers_detail: list[dict] = field(default_factory=list)

    def format_text(self, verbose: bool = False) -> str:
        """:meth:`Summary.format_text`; ``verbose`` adds what each Dask worker did."""
        if not verbose:
            return super().format_text()
        lines = [super().format_text(verbose)]
        lines.append(
            f"  cluster {self.scheduler}: {self.tasks} task(s) on "
            f"{len(self.workers_detail)} Dask worker(s)"
        )
        for w in self.workers_detail:
            where = w["host"] + (f", GPU {w['device']}" if "device" in w else "")
            lines.append(
                f"    {w['worker']} ({where}): {w['tasks']} task(s), {w['frames']} "
                f"frame(s) in {w['busy_s']:.2f} s ({w['fps']:.1f} fps)"
            )
        return "\n".join(lines)


def merge(results: list[dict], *, scheduler: str, tasks: int, wall_s: float, output: str,
          options: Options, interrupted: bool) -> ClusterSummary:  # fmt: skip
    """One summary from the tasks' ``results`` (in shard order): counts, stage totals and
    frames per decoder summed, each stage's p50 and p95 the largest of the tasks', the wall
    time the client's."""
    summaries = [r["summary"] for r in results]
    stages: dict[str, dict] = {}
    for s in summaries:
        for name, st in s["stages"].items():
            merged = stages.setdefault(
                name, {"count": 0, "total_ms": 0.0, "mean_ms": 0.0, "p50_ms": 0.0, "p95_ms": 0.0}
            )
            merged["count"] += st["count"]
            merged["total_ms"] += st["total_ms"]
            merged["p50_ms"] = max(merged["p50_ms"], st["p50_ms"])
            merged["p95_ms"] = max(merged["p95_ms"], st["p95_ms"])
    for st in stages.values():
        st["mean_ms"] = st["total_ms"] / st["count"] if st["count"] else 0.0
    waits: dict[str, float] = {}
    for s in summaries:
        for name, seconds in s["main_thread_waits_s"].items():
            waits[name] = waits.get(name, 0.0) + seconds
    detail: dict[str, dict] = {}
    threads: dict[str, int] = {}
    for r in results:
        w = detail.setdefault(
            r["worker"],
            {"worker": r["worker"], "host": r["host"], "tasks": 0, "frames": 0, "busy_s": 0.0},
        )
        if r.get("device") is not None:
            w["device"] = r["device"]
        w["tasks"] += 1
        w["frames"] += r["summary"]["frames"]
        w["busy_s"] += r["task_s"]
        threads[r["worker"]] = max(threads.get(r["worker"], 0), r["summary"]["workers"])
    for w in detail.values():
        w["fps"] = round(w["frames"] / w["busy_s"], 2) if w["busy_s"] > 0 else 0.0
        w["busy_s"] = round(w["busy_s"], 4)
    decoders: dict[str, int] = {}  # frames by the decoder that gave them, over every task
    for s in summaries:
        for name, count in s.get("decoders", {}).items():
            decoders[name] = decoders.get(name, 0) + count
    videos = {path: said for s in summaries for path, said in s.get("videos", {}).items()}
    # Busy time summed over the tasks; lanes over the Dask workers, each worker's the most
    # any of its tasks had (its tasks ran one after another on the same threads).
    busy: dict[str, dict[str, float]] = {}
    lanes_of: dict[str, dict[str, int]] = {}
    for r in results:
        for resource, by_stage in r["summary"].get("busy", {}).items():
            merged = busy.setdefault(resource, {})
            for stage, ms in by_stage.items():
                merged[stage] = merged.get(stage, 0.0) + ms
        held = lanes_of.setdefault(r["worker"], {})
        for resource, n in r["summary"].get("lanes", {}).items():
            held[resource] = max(held.get(resource, 0), n)
    lanes: dict[str, int] = {}
    for held in lanes_of.values():
        for resource, n in held.items():
            lanes[resource] = lanes.get(resource, 0) + n
    ran = [s for s in summaries if s["backend"] != "none"]  # "none": a shard with no sources
    first = ran[0] if ran else {"backend": options.backend, "device": ""}
    return ClusterSummary(
        frames=sum(s["frames"] for s in summaries),
        failed=[f for s in summaries for f in s["failed"]],
        wall_s=wall_s,
        backend=first["backend"],
        device=first["device"],
        params=summary_params(options),
        workers=sum(threads.values()),
        output=output,
        stages=stages,
        megapixels=sum(s["megapixels"] for s in summaries),
        skipped_existing=sum(s["skipped_existing"] for s in summaries),
        interrupted=interrupted,
        main_thread_waits_s=waits,
        decoders=dict(sorted(decoders.items())),
        videos=videos,
        busy=busy,
        lanes=lanes,
        scheduler=scheduler,
        tasks=tasks,
        workers_detail=sorted(detail.values(), key=lambda w: w["worker"]),
    )
