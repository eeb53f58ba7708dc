"""The summary's bottleneck: the busiest of the worker threads, the GPU and the video readers,
and its stage."""

from __future__ import annotations

import numpy as np
import pytest

from edgecli import timing
from edgecli.timing import StageClock, find_bottleneck


def _stages(**total_ms: float) -> dict:
    return {name: {"total_ms": ms} for name, ms in total_ms.items()}


def test_workers_busier_than_the_gpu():
    """Host stages share the workers: 16 threads for 1 s, 12 s of work, 6 s of it decoding."""
    stages = _stages(decode=6000, encode=4000, write=2000, upload=50, kernel=10)
    assert find_bottleneck(stages, wall_s=1.0, workers=16) == (
        "decode",
        "decode-bound: the 16 worker thread(s) were busy 75% of the wall time, 38% on decode",
    )


def test_gpu_busier_than_the_workers():
    """Device stages share one GPU: 0.95 s of 1 s, against workers busy 6% of theirs."""
    stages = _stages(decode=1000, upload=900, kernel=50)
    assert find_bottleneck(stages, wall_s=1.0, workers=16) == (
        "upload",
        "upload-bound: the GPU was busy 95% of the wall time, 90% on upload",
    )


def test_a_stage_that_is_not_the_busiest_alone_can_still_name_the_resource():
    """Decode and encode at 40% each keep the workers 80% busy, more than a GPU 60% busy on
    one stage: the workers are the bottleneck."""
    stages = _stages(decode=400, encode=400, kernel=600)
    name, detail = find_bottleneck(stages, wall_s=1.0, workers=1)
    assert name in ("decode", "encode") and "were busy 80%" in detail


def test_no_frames():
    assert find_bottleneck({}, wall_s=1.0, workers=4) == ("none", "no frames were processed")


def test_reading_videos_in_order_can_be_the_bottleneck():
    """A video's frames come from its one reader: read 0.9 s of 1 s is the cap, though the
    16 workers are busy only 25% of theirs (the old answer named their encode)."""
    stages = _stages(read=900, encode=3000, write=1000, upload=40, kernel=5, download=10)
    assert find_bottleneck(stages, wall_s=1.0, workers=16) == (
        "read",
        "read-bound: reading videos and multi-frame files, in order (a reader a file), took "
        "90% of the wall time",
    )


def test_a_gpu_with_no_time_is_not_a_bottleneck():
    """A GPU that spent no time is not saturated: nothing is named."""
    assert find_bottleneck(_stages(kernel=0), wall_s=1.0, workers=4)[0] == "none"


def test_a_run_whose_workers_were_mostly_idle_is_not_bound():
    """Workers busy 43% of the wall time (a 12-frame run, say) saturate nothing: the
    bottleneck is "none" and the detail says how busy the busiest resource was."""
    stages = _stages(decode=500, compute=160, encode=140, write=60)
    assert find_bottleneck(stages, wall_s=1.0, workers=2) == (
        "none",
        "not bound: the busiest resource, the 2 worker thread(s), was busy 43% of the wall "
        "time (under 70%: the run was too short, or waited on I/O)",
    )


def test_a_resource_busy_just_over_the_threshold_is_the_bottleneck():
    """At 70% busy the workers are saturated enough to name their longest stage."""
    stages = _stages(decode=1000, encode=400)
    assert find_bottleneck(stages, wall_s=1.0, workers=2)[0] == "decode"
    assert find_bottleneck(stages, wall_s=1.01, workers=2)[0] == "none"


def test_timings_csv_ends_lines_with_newline_only():
    """The timings CSV uses \\n line ends, not csv's default \\r\\n."""
    clock = StageClock(per_frame=True)
    clock.record("decode", 1.5, "a.png")
    clock.record("write", 0.25, "a.png")
    assert clock.csv_text() == "frame,decode_ms,write_ms\na.png,1.500,0.250\n"


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101])
def test_percentiles_are_numpy_s_linear_ones(size, rng):
    """The summary's p50 and p95 equal np.percentile's (linear) on any number of samples."""
    values = rng.random(size) * 100
    for q in (0, 50, 95, 100):
        assert timing.percentile(values, q) == pytest.approx(np.percentile(values, q), abs=1e-9)


def _summary(cls=timing.Summary, **fields):
    values = dict(frames=40, failed=[], wall_s=2.0, backend="cuda", device="NVIDIA H200",
                  params={}, workers=16, output="out",
                  stages={"decode": {"total_ms": 24000.0, "mean_ms": 600.0, "p50_ms": 1.0,
                                     "p95_ms": 2.0}})  # fmt: skip
    return cls(**{**values, **fields})


@pytest.mark.parametrize(
    "fields, outcome",
    [
        ({}, ""),
        ({"failed": [{}, {}]}, "; 2 failed"),
        ({"skipped_existing": 5, "interrupted": True}, "; 5 kept (already written); interrupted"),
    ],
)
def test_the_default_summary_is_two_lines(fields, outcome):
    """By default the summary is the result (frames, time, fps, what went wrong) and the
    bottleneck in words; no stage times."""
    assert _summary(**fields).format_text() == (
        f"edgecli: 40 frame(s) -> out in 2.00 s (20.0 fps) on cuda{outcome}\n"
        "  decode-bound: the 16 worker thread(s) were busy 75% of the wall time, 75% on decode"
    )


def test_the_verbose_summary_has_every_stage():
    """verbose adds each stage's times, the device and the workers, then the bottleneck."""
    lines = _summary(decoders={"nvjpeg-hw": 40}).format_text(verbose=True).splitlines()
    assert lines == [
        "edgecli: 40 frame(s) -> out in 2.00 s (20.0 fps, 0.0 MP/s) on cuda [NVIDIA H200], "
        "16 worker(s)",
        "  decode    total   24.000 s  mean  600.000 ms  p50    1.000 ms  p95    2.000 ms",
        "  decoded by: nvjpeg-hw 40",
        "  decode-bound: the 16 worker thread(s) were busy 75% of the wall time, 75% on decode",
    ]


def test_a_cluster_s_workers_show_only_when_verbose():
    """A cluster run's summary is two lines too; verbose adds a line per Dask worker."""
    from edgecli.cluster_summary import ClusterSummary

    worker = {"worker": "tcp://a:1", "host": "a", "tasks": 2, "frames": 40, "busy_s": 1.5,
              "fps": 26.7}  # fmt: skip
    summary = _summary(ClusterSummary, scheduler="local:2", tasks=2, workers_detail=[worker])
    assert summary.format_text() == _summary().format_text()
    assert summary.format_text(verbose=True).splitlines()[-2:] == [
        "  cluster local:2: 2 task(s) on 1 Dask worker(s)",
        "    tcp://a:1 (a): 2 task(s), 40 frame(s) in 1.50 s (26.7 fps)",
    ]
