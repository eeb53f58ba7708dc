"""The summary's bottleneck: the resource whose lanes were busiest (the worker threads, the
GPU's streams, the video reader, the JPEG engines, the NVDEC sessions, the main thread), and
the stage that kept it so."""

from __future__ import annotations

import numpy as np
import pytest

from edgecli.output import timing
from edgecli.output.timing import StageClock, find_bottleneck


def _busy(wall_s: float = 1.0, **lanes_and_stages) -> tuple[dict, dict, float]:
    """find_bottleneck's arguments: ``resource=(lanes, {stage: ms})`` for each resource."""
    busy = {r: stages for r, (_, stages) in lanes_and_stages.items()}
    lanes = {r: n for r, (n, _) in lanes_and_stages.items()}
    return busy, lanes, wall_s


def test_workers_busier_than_the_gpu():
    """Host stages share the workers: 16 threads for 1 s, 12 s of work, 6 s of it decoding."""
    args = _busy(
        workers=(16, {"decode": 6000, "encode": 4000, "write": 2000}),
        gpu=(4, {"upload": 50, "kernel": 10}),
    )
    assert find_bottleneck(*args) == (
        "decode",
        "decode-bound: the CPU decoders set the pace (the 16 worker thread(s) busy 75% of the "
        "wall time, 38% on decode)",
    )


def test_cpu_decoders_not_the_gpu_s_side_by_side_batches_set_a_decode_cpu_run_s_pace():
    """The issue's --decode cpu run: workers busy 78% decoding, the GPU's 4 streams each
    holding a batch (the kernel's and the deflate's latency) a fifth of the time; their
    intervals summed reach 80% of the wall time, but no stream was ever full: the CPU
    decoders set the pace, not the kernel."""
    wall = 13.5
    args = _busy(
        wall,
        workers=(16, {"decode": 0.74 * 16 * wall * 1e3, "copy": 0.03 * 16 * wall * 1e3}),
        gpu=(4, {"upload": 0.15 * wall * 1e3, "kernel": 0.65 * wall * 1e3}),
    )
    name, detail = find_bottleneck(*args)
    assert name == "decode" and detail.startswith("decode-bound: the CPU decoders set the pace")


def test_a_gpu_whose_streams_were_full_sets_the_pace():
    """4 streams, each holding a batch 95% of the wall time, 90% of it uploading."""
    args = _busy(workers=(16, {"decode": 1000}), gpu=(4, {"upload": 3600, "kernel": 200}))
    assert find_bottleneck(*args) == (
        "upload",
        "upload-bound: copies to the GPU set the pace (the GPU's 4 stream(s) busy 95% of the "
        "wall time, 90% on upload)",
    )


@pytest.mark.parametrize(
    "resource, lanes, stages, expected",
    [
        ("gpu", 4, {"kernel": 3700, "upload": 100}, "kernel-bound: the kernel set the pace"),
        ("gpu", 2, {"kernel": 100, "deflate": 1800, "download": 50},
         "deflate-bound: PNG compression on the GPU set the pace"),
        ("workers", 8, {"encode": 6000, "write": 1500}, "encode-bound: PNG compression set"),
        ("workers", 8, {"encode": 1500, "write": 6000}, "write-bound: the writes set the pace"),
        ("jpeg", 1, {"gpu_decode": 950}, "gpu_decode-bound: the JPEG engines set the pace"),
        ("nvdec", 4, {"gpu_decode": 3500, "upload": 300}, "gpu_decode-bound: NVDEC set the"),
        ("reader", 1, {"read": 900}, "read-bound: the reader of a video set the pace"),
        ("main", 1, {"handoff": 970}, "handoff-bound: the main thread's hand-offs between"),
    ],
)  # fmt: skip
def test_each_pace_setter_is_named(resource, lanes, stages, expected):
    """Whichever resource was full names what filled it, beside a resource busy a half."""
    other = (
        ("reader", (1, {"read": 500})) if resource != "reader" else ("main", (1, {"handoff": 500}))
    )
    args = _busy(**{resource: (lanes, stages), other[0]: other[1]})
    name, detail = find_bottleneck(*args)
    assert name == max(stages, key=stages.get) and detail.startswith(expected)


def test_the_jpeg_engines_and_nvdec_are_resources_of_their_own():
    """One JPEG decoder thread busy 90% sets the pace, though 4 NVDEC sessions busy 25% have
    more time between them (counted together, the two read 47% of 4 lanes: not bound)."""
    args = _busy(jpeg=(1, {"gpu_decode": 900}), nvdec=(4, {"gpu_decode": 1000}))
    assert find_bottleneck(*args) == (
        "gpu_decode",
        "gpu_decode-bound: the JPEG engines set the pace (the JPEG engines busy 90% of the wall "
        "time)",
    )


def test_no_frames():
    """A run that decoded nothing names nothing, whatever its main thread did."""
    assert find_bottleneck({}, {}, 1.0) == ("none", "no frames were processed")
    args = _busy(main=(1, {"handoff": 900}))
    assert find_bottleneck(*args) == ("none", "no frames were processed")


def test_a_gpu_with_no_time_is_not_a_bottleneck():
    """A GPU that spent no time is not saturated: nothing is named."""
    assert find_bottleneck(*_busy(gpu=(4, {"kernel": 0})))[0] == "none"


def test_a_run_whose_workers_were_mostly_idle_is_not_bound():
    """Workers busy 43% of the wall time (a 12-frame run, say) saturate nothing: the
    bottleneck is "none" and the detail says how busy the busiest resource was."""
    args = _busy(workers=(2, {"decode": 500, "compute": 160, "encode": 140, "write": 60}))
    assert find_bottleneck(*args) == (
        "none",
        "not bound: the busiest resource, the 2 worker thread(s), was busy 43% of the wall "
        "time (under 70%: the run was too short, or waited on I/O)",
    )


def test_a_resource_busy_just_over_the_threshold_is_the_bottleneck():
    """At 70% busy the workers are saturated enough to name their longest stage."""
    busy, lanes, _ = _busy(workers=(2, {"decode": 1000, "encode": 400}))
    assert find_bottleneck(busy, lanes, 1.0)[0] == "decode"
    assert find_bottleneck(busy, lanes, 1.01)[0] == "none"


def test_timings_csv_ends_lines_with_newline_only():
    """The timings CSV uses \\n line ends, not csv's default \\r\\n."""
    clock = StageClock(per_frame=True)
    clock.record("decode", 1.5, "a.png")
    clock.record("write", 0.25, "a.png")
    assert clock.csv_text() == "frame,decode_ms,write_ms\na.png,1.500,0.250\n"


def test_a_batch_s_share_recorded_at_once_is_each_frame_s():
    """record_each (a batch's share of a stage, for each of its frames) leaves the clock as a
    record a frame would: the samples, the resource's busy time and the CSV's rows."""
    names = ["a.png", "b.png", "c.png"]
    at_once, one_by_one = StageClock(per_frame=True), StageClock(per_frame=True)
    at_once.record_each("gpu_decode", 2.5, names, "png")
    at_once.record_each("kernel", 0.5, names)
    for name in names:
        one_by_one.record("gpu_decode", 2.5, name, "png")
        one_by_one.record("kernel", 0.5, name)
    assert (
        at_once.busy() == one_by_one.busy() == {"png": {"gpu_decode": 7.5}, "gpu": {"kernel": 1.5}}
    )
    assert at_once.csv_text() == one_by_one.csv_text()
    assert at_once.stats() == one_by_one.stats()


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
                                     "p95_ms": 2.0}},
                  busy={"workers": {"decode": 24000.0}}, lanes={"workers": 16})  # fmt: skip
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
        "  decode-bound: the CPU decoders set the pace (the 16 worker thread(s) busy 75% of the "
        "wall time)"
    )


def test_the_verbose_summary_has_every_stage():
    """verbose adds each stage's times, the device and the workers, then the bottleneck."""
    lines = _summary(decoders={"nvjpeg-hw": 40}).format_text(verbose=True).splitlines()
    assert lines == [
        "edgecli: 40 frame(s) -> out in 2.00 s (20.0 fps, 0.0 MP/s) on cuda [NVIDIA H200], "
        "16 worker(s)",
        "  decode    total   24.000 s  mean  600.000 ms  p50    1.000 ms  p95    2.000 ms",
        "  busy: the 16 worker thread(s) 75%",
        "  decoded by: nvjpeg-hw 40",
        "  decode-bound: the CPU decoders set the pace (the 16 worker thread(s) busy 75% of the "
        "wall time)",
    ]


def test_a_cluster_s_workers_show_only_when_verbose():
    """A cluster run's summary is two lines too; verbose adds a line per Dask worker."""
    from edgecli.cluster.summary import ClusterSummary

    worker = {"worker": "tcp://a:1", "host": "a", "tasks": 2, "frames": 40, "busy_s": 1.5,
              "fps": 26.7}  # fmt: skip
    summary = _summary(ClusterSummary, scheduler="local:2", tasks=2, workers_detail=[worker])
    assert summary.format_text() == _summary().format_text()
    assert summary.format_text(verbose=True).splitlines()[-2:] == [
        "  cluster local:2: 2 task(s) on 1 Dask worker(s)",
        "    tcp://a:1 (a): 2 task(s), 40 frame(s) in 1.50 s (26.7 fps)",
    ]


def test_videos_nvdec_did_not_decode_exactly_are_named_with_why():
    """A GPU-decoding run's videos that NVDEC left to the CPU, or decoded approximately, are
    in the JSON summary, every one, and under -v the first ten with a count of the rest."""
    said = "cpu: h264 in matroska: NVDEC's frame order there is unchecked"
    videos = {f"clips/c{i:02d}.mkv": said for i in range(12)}
    videos["clips/deep.mp4"] = "nvdec-approx: 10-bit"
    summary = _summary(videos=videos)
    assert summary.as_json()["videos"] == videos
    text = summary.format_text(verbose=True)
    assert f"  clips/c00.mkv: {said}" in text
    assert "clips/c09.mkv" in text and "clips/c10.mkv" not in text
    assert "  ... and 3 more videos (--json-summary)" in text
    assert "c00.mkv" not in summary.format_text(verbose=False)
    assert "videos" not in _summary().format_text(verbose=True)
