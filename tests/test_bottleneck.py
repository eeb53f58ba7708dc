"""Runs slowed at one known stage by a stand-in name that stage in their summary: the text
line and the JSON's ``bottleneck`` and ``busy``. Each slowed stage sleeps (as cv2, zlib, the
disk and CUDA let go of the GIL), so the verdict does not hang on how busy this machine is."""

from __future__ import annotations

import json
import time

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import pipeline
from edgecli.edges.reference import detect_batch
from edgecli.inputs.sources import ImageSource, SequenceSource
from edgecli.options.params import Options
from edgecli.pipeline import reader as reader_module
from edgecli.pipeline import writer as writer_module

from .media import photo, write_video
from .standins import StandInGpuBackend, StandInJpegDecoder, StandInRing

FRAMES = 48
# Seconds of the slowed stage's work a lane: about this long, whatever else the run does.
SLOWED_S = 1.2


@pytest.fixture(scope="module", autouse=True)
def warm_cpu_backend():
    """The CPU backend's once-a-process work (its check of cv2's luma) done before any timed
    run, where it would fall on the workers beside the slowed stage."""
    edgecli.detect_edges(photo(8, 8), backend="cpu")


@pytest.fixture
def jpegs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(FRAMES):
        assert cv2.imwrite(str(folder / f"f{i:03d}.jpg"), photo(24, 40, seed=i))
    return folder


def slowed(monkeypatch, owner, name: str, seconds: float) -> None:
    """``owner.name`` sleeping ``seconds`` before each call."""
    real = getattr(owner, name)

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, slow)


def verdict(summary) -> tuple[str, str, dict]:
    """The bottleneck as the JSON names it, the summary's line about it, and its ``busy``;
    whatever ran, no resource's lanes were busy longer than the wall time."""
    data = json.loads(summary.dumps())
    line = summary.format_text().splitlines()[1].strip()
    assert line == data["bottleneck_detail"]
    assert all(held["busy_fraction"] <= 1 for held in data["busy"].values()), data["busy"]
    return data["bottleneck"], line, data["busy"]


def cpu_run(folder, out, **fields):
    return pipeline.run(folder, out, Options(backend="cpu", workers=2, **fields))


def gpu_run(folder, out, compute=None, **fields):
    """A run on the stand-in GPU backend (its GPU decoding too, unless ``decode="cpu"``)."""
    options = Options(workers=2, **fields)
    return pipeline.run(folder, out, options, backend=StandInGpuBackend(options, compute))


SLOW = SLOWED_S * 2 / FRAMES  # a frame's sleep on one of 2 workers


@pytest.mark.parametrize("run", [cpu_run, gpu_run], ids=["cpu", "stand-in-gpu"])
@pytest.mark.parametrize(
    "owner, name, stage, pace",
    [
        (ImageSource, "decode", "decode", "the CPU decoders"),
        (writer_module, "encode_png", "encode", "PNG compression"),
        (writer_module, "write_atomic", "write", "the writes"),
    ],
    ids=["decoders", "compression", "writes"],
)
def test_a_slow_worker_stage_is_named(jpegs, tmp_path, monkeypatch, run, owner, name, stage, pace):
    """Slow decoders, compression or writes on the workers name that stage, on the CPU backend
    and on the GPU path (decoding on the CPU)."""
    slowed(monkeypatch, owner, name, SLOW)
    summary = run(jpegs, tmp_path / "out", decode="cpu")
    bottleneck, line, busy = verdict(summary)
    assert summary.frames == FRAMES
    assert bottleneck == stage and line.startswith(f"{stage}-bound: {pace} set the pace (")
    assert "the 2 worker thread(s) busy" in line
    assert max(busy["workers"]["stages_s"], key=busy["workers"]["stages_s"].get) == stage


def test_slow_cpu_decoders_beside_slow_gpu_batches_name_the_decoders(jpegs, tmp_path, monkeypatch):
    """The issue's --decode cpu case: the CPU decoders set the pace while each batch spends a
    long time on the GPU (as the deflate's latency does), its 4 streams holding batches side
    by side. Their times summed pass the wall time; the streams were never all full: the
    verdict is the CPU decoders, not the kernel."""
    slowed(monkeypatch, ImageSource, "decode", SLOW)

    def latent(frames):  # 0.2 s a batch of 4 (every 0.1 s a batch comes from the decoders)
        time.sleep(0.2)
        return detect_batch(np.stack(frames), Options())

    summary = gpu_run(jpegs, tmp_path / "out", latent, decode="cpu", batch=4, streams=4)
    bottleneck, line, busy = verdict(summary)
    assert summary.stages["kernel"]["total_ms"] / 1e3 > summary.wall_s  # summed, past the wall
    assert bottleneck == "decode" and line.startswith("decode-bound: the CPU decoders set the")
    assert busy["gpu"]["lanes"] == 4 and busy["gpu"]["busy_fraction"] < 0.7


def test_a_slow_kernel_is_named(jpegs, tmp_path):
    """A kernel that keeps both streams full names the kernel."""

    def slow(frames):
        time.sleep(SLOWED_S * 2 / (FRAMES / 4))  # 12 batches of 4 on 2 streams
        return detect_batch(np.stack(frames), Options())

    summary = gpu_run(jpegs, tmp_path / "out", slow, decode="cpu", batch=4, streams=2)
    bottleneck, line, busy = verdict(summary)
    assert bottleneck == "kernel"
    assert line.startswith("kernel-bound: the kernel set the pace (the GPU's 2 stream(s) busy")
    assert busy["gpu"]["lanes"] == 2 and busy["gpu"]["busy_fraction"] >= 0.7


def test_slow_jpeg_engines_are_named(jpegs, tmp_path, monkeypatch):
    """GPU decoding whose (stand-in) engines are slow names the JPEG engines."""
    slowed(monkeypatch, StandInJpegDecoder, "_decode", SLOWED_S / (FRAMES / 4))
    summary = gpu_run(jpegs, tmp_path / "out")
    bottleneck, line, busy = verdict(summary)
    assert summary.decoders == {"stand-in-jpeg": FRAMES}
    assert bottleneck == "gpu_decode"
    assert line.startswith("gpu_decode-bound: the JPEG engines set the pace")
    assert busy["jpeg"]["lanes"] == 1


def test_slow_reads_for_a_gpu_decoder_are_named(jpegs, tmp_path, monkeypatch):
    """Files read slowly for the GPU's (stand-in) JPEG decoder name those reads, whatever the
    decoder's kind: neither the CPU decoders nor the engines."""
    slowed(monkeypatch, reader_module, "read_walked", SLOW)
    summary = gpu_run(jpegs, tmp_path / "out")
    bottleneck, line, busy = verdict(summary)
    assert summary.decoders == {"stand-in-jpeg": FRAMES}
    assert bottleneck == "load"
    assert line.startswith("load-bound: reading the files for the GPU's decoders set the pace (")
    assert max(busy["workers"]["stages_s"], key=busy["workers"]["stages_s"].get) == "load"


def test_a_slow_video_reader_is_named(tmp_path, monkeypatch):
    """A video whose one reader decodes slowly names the reader, though two workers encode."""
    write_video(tmp_path / "clip.avi", [photo(24, 40, seed=i) for i in range(FRAMES)])
    real = SequenceSource.frames

    def slow(self, *args, **kwargs):
        for frame in real(self, *args, **kwargs):
            time.sleep(SLOWED_S / FRAMES)
            yield frame

    monkeypatch.setattr(SequenceSource, "frames", slow)
    summary = cpu_run(tmp_path / "clip.avi", tmp_path / "out")
    bottleneck, line, busy = verdict(summary)
    assert summary.frames == FRAMES
    assert bottleneck == "read" and line.startswith("read-bound: the reader of a video set")
    assert busy["reader"]["lanes"] == 1


def test_a_slow_main_thread_is_named(jpegs, tmp_path, monkeypatch):
    """A main thread slow to hand each batch over (the stand-in ring's submit, on it) names
    its hand-offs, while the workers and the GPU wait for it."""
    slowed(monkeypatch, StandInRing, "submit", SLOWED_S / FRAMES)
    summary = gpu_run(jpegs, tmp_path / "out", decode="cpu", batch=1)
    bottleneck, line, busy = verdict(summary)
    assert bottleneck == "handoff"
    assert line.startswith("handoff-bound: the main thread's hand-offs between the stages set")
    assert busy["main"]["busy_fraction"] >= 0.7


def test_videos_opened_ahead_keep_each_reader_within_its_lane(tmp_path, monkeypatch):
    """Clips slow to open: while one is read, the next is opened beside it, so the reader's
    time and the time read ahead each fit in the wall time, and the reader is still named."""
    folder = tmp_path / "in"
    folder.mkdir()
    clips, per_clip = 2, FRAMES // 2
    for c in range(clips):
        write_video(folder / f"clip{c}.avi", [photo(24, 40, seed=c * per_clip + i)
                                              for i in range(per_clip)])  # fmt: skip
    real = SequenceSource.frames

    def slow(self, *args, **kwargs):
        time.sleep(SLOWED_S / 4)  # opening it
        for frame in real(self, *args, **kwargs):
            time.sleep(SLOWED_S / FRAMES)
            yield frame

    monkeypatch.setattr(SequenceSource, "frames", slow)
    summary = cpu_run(folder, tmp_path / "out")
    bottleneck, line, busy = verdict(summary)
    assert summary.frames == FRAMES
    assert busy["ahead"]["stages_s"]["read"] > 0 and busy["ahead"]["lanes"] == 1
    assert bottleneck == "read" and line.startswith("read-bound: the reader of a video set")
