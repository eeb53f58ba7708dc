"""edgecli.testing's stand-ins, which the pipeline tests and benchmarks/e2e.py build on, and
``pipeline.run(backend=...)``, which they use."""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import pipeline, testing
from edgecli.params import Options
from edgecli.reference import detect_batch
from edgecli.testing import PrecomputedEdges, StandInGpuBackend

from .media import photo, write_video


@pytest.fixture
def folder(tmp_path):
    """Nine frames of two sizes, each a different crop of the sample photographs."""
    path = tmp_path / "in"
    path.mkdir()
    for i in range(9):
        cv2.imwrite(str(path / f"f{i}.png"), photo(23 + 10 * (i > 5), 31, seed=i)[:, i:])
    return path


def same_outputs(a, b) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) and names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("path", ["host", "gpu"])
def test_precomputed_edges_write_the_cpu_backends_bytes(folder, tmp_path, path):
    """The zero-cost backend looks up each frame's real edges: on either pipeline path the
    PNGs are the CPU backend's, byte for byte."""
    options = Options(workers=2, batch=4)
    table = PrecomputedEdges.of_inputs([folder], options, workers=2)
    assert len(table.edges) == 9
    backend = table if path == "host" else StandInGpuBackend(options, compute=table.lookup)
    summary = pipeline.run(folder, tmp_path / "out", options, backend=backend)
    edgecli.process(folder, tmp_path / "cpu", backend="cpu")
    assert summary.frames == 9 and summary.backend == backend.name
    same_outputs(tmp_path / "cpu", tmp_path / "out")


def test_precomputed_edges_of_videos(tmp_path):
    """Every frame of each input is in the table, with the reference's edges."""
    decoded = write_video(tmp_path / "a.avi", [photo(16, 24, seed=i) for i in range(5)])
    decoded += write_video(tmp_path / "b.avi", [photo(16, 24, seed=i)[::-1] for i in range(3)])
    inputs = [tmp_path / "a.avi", tmp_path / "b.avi"]
    table = PrecomputedEdges.of_inputs(inputs, Options(), workers=2)
    for frame in decoded:
        np.testing.assert_array_equal(
            table.detect(frame[np.newaxis])[0], edgecli.detect_edges(frame, backend="cpu")
        )


def test_lookup_of_an_unknown_frame_fails(folder):
    """A frame that was not precomputed is an error, never some other frame's edges."""
    table = PrecomputedEdges.of_inputs([folder], Options(), workers=1)
    with pytest.raises(KeyError, match="not precomputed"):
        table.lookup([photo(23, 31, seed=99)])


def test_fingerprint_tells_shifted_frames_apart():
    """Frames one pixel apart in a pan, or of another shape, have different fingerprints."""
    frame = photo(64, 96)
    prints = {testing.fingerprint(f) for f in (frame[:, 1:], frame[:, :-1], frame, frame[1:])}
    assert len(prints) == 4
    assert testing.fingerprint(frame) == testing.fingerprint(frame.copy())


def test_run_uses_the_backend_it_is_given(folder, tmp_path, monkeypatch):
    """pipeline.run(backend=...) selects no backend of its own."""

    def refuse(options):
        raise AssertionError("select_backend was called")

    monkeypatch.setattr(pipeline, "select_backend", refuse)
    backend = StandInGpuBackend(Options())
    summary = pipeline.run(folder, tmp_path / "out", Options(batch=3), backend=backend)
    assert summary.backend == "stand-in-gpu" and summary.frames == 9
    assert sum(backend.rings[0].batch_sizes) == 9


def test_frames_are_free_once_submitted():
    """A ring computes a batch from its slab's own input, filled by the gather it was given:
    the caller may overwrite the frames as soon as submit returns."""
    options = Options()
    backend = StandInGpuBackend(options)
    ring = backend.slab_ring(3, pipeline.gather_frames)
    frames = [photo(9, 14, seed=i) for i in range(4)]
    expected = detect_batch(np.stack(frames), options)
    pending = ring.submit(frames)
    for frame in frames:
        frame[...] = 0
    edges, _ = pending.result()
    np.testing.assert_array_equal(edges, expected)
    pending.release()


def test_batches_are_gathered_off_the_main_thread(tmp_path, monkeypatch):
    """On the GPU path each frame is copied into its slab by a task on the worker pool, not
    on the main thread; the PNGs are the CPU backend's."""
    copies: list[tuple[str, int]] = []
    gather = pipeline.gather_frames

    def recording(frames, out):
        copies.append((threading.current_thread().name.rsplit("_", 1)[0], len(frames)))
        gather(frames, out)

    monkeypatch.setattr(pipeline, "gather_frames", recording)
    write_video(tmp_path / "clip.avi", [photo(16, 24, seed=i) for i in range(12)])
    options = Options(workers=2, batch=4)
    backend = StandInGpuBackend(options, max_delay_s=0.002)
    pipeline.run(tmp_path / "clip.avi", tmp_path / "out", options, backend=backend)
    edgecli.process(tmp_path / "clip.avi", tmp_path / "cpu", backend="cpu")
    assert backend.rings[0].batch_sizes == [4, 4, 4]
    assert copies == [("edgecli-worker", 1)] * 12
    same_outputs(tmp_path / "cpu", tmp_path / "out")
