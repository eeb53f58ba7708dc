"""The summary's bottleneck: the busiest of the worker threads, the GPU and the video readers,
and its stage."""

from __future__ import annotations

from edgecli.timing import find_bottleneck


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


def test_a_gpu_with_no_time_still_names_a_stage():
    assert find_bottleneck(_stages(kernel=0), wall_s=1.0, workers=4)[0] == "kernel"
