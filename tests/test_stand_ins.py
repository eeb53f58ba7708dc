"""tests.standins's stand-ins, which the pipeline tests and benchmarks/e2e.py build on, and
``pipeline.run(backend=...)``, which they use."""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import pipeline
from edgecli.edges.reference import detect_batch
from edgecli.options.params import Options

from . import standins
from .helpers import same_bytes
from .media import photo, write_video
from .standins import PrecomputedEdges, StandInGpuBackend


@pytest.fixture
def folder(tmp_path):
    """Nine frames of two sizes, each a different crop of the sample photographs."""
    path = tmp_path / "in"
    path.mkdir()
    for i in range(9):
        cv2.imwrite(str(path / f"f{i}.png"), photo(23 + 10 * (i > 5), 31, seed=i)[:, i:])
    return path


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
    same_bytes(tmp_path / "cpu", tmp_path / "out")


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
    prints = {standins.fingerprint(f) for f in (frame[:, 1:], frame[:, :-1], frame, frame[1:])}
    assert len(prints) == 4
    assert standins.fingerprint(frame) == standins.fingerprint(frame.copy())


def test_run_uses_the_backend_it_is_given(folder, tmp_path):
    """pipeline.run(backend=...) runs every frame on that backend, whatever the options ask
    for (backend="cuda" fails a run's own choice where CUDA is unusable, as on CI), and the
    summary names the backend given; the PNGs are the CPU backend's."""
    backend = StandInGpuBackend(Options())
    options = Options(batch=3, backend="cuda")
    summary = pipeline.run(folder, tmp_path / "out", options, backend=backend)
    assert summary.backend == "stand-in-gpu" and summary.frames == 9
    assert sum(backend.rings[0].batch_sizes) == 9
    edgecli.process(folder, tmp_path / "cpu", backend="cpu")
    same_bytes(tmp_path / "cpu", tmp_path / "out")


def test_a_batch_is_computed_from_its_slab():
    """A ring computes a batch from the frames copied into its slab's inputs, and nothing
    else: a slab is poisoned when filled, so a frame never copied in shows."""
    options = Options()
    ring = StandInGpuBackend(options).slab_ring(3)
    frames = [photo(9, 14, seed=i) for i in range(4)]
    filling = ring.fill(frames[0].shape, capacity=5)
    assert filling.inputs.shape == (5, 9, 14, 3) and (filling.inputs == 0x5A).all()
    for i, frame in enumerate(frames[:3]):
        np.copyto(filling.inputs[i], frame)
    pending = filling.submit(4)  # the fourth frame was never copied in
    edges, _ = pending.result()
    pending.release()
    np.testing.assert_array_equal(edges[:3], detect_batch(np.stack(frames[:3]), options))
    poisoned = np.full_like(frames[3], 0x5A)
    np.testing.assert_array_equal(edges[3], detect_batch(poisoned[np.newaxis], options)[0])


def test_the_ring_refuses_a_broken_protocol():
    """Filling two slabs at once, a batch larger than its slab, more batches in flight than
    streams: each raises, so that a pipeline that does it fails its tests."""
    ring = StandInGpuBackend(Options(streams=1)).slab_ring(3)
    shape = (4, 5, 3)
    filling = ring.fill(shape, capacity=2)
    with pytest.raises(RuntimeError, match="another one was being filled"):
        ring.fill(shape, capacity=2)
    with pytest.raises(RuntimeError, match="a batch of 3 in a slab filled for 2"):
        filling.submit(3)
    first = filling.submit(2)
    second = ring.fill(shape, capacity=2)
    with pytest.raises(RuntimeError, match="2 batches on the GPU, more than 1"):
        second.submit(1)
    first.result()
    second.submit(1).result()


def test_stand_in_batches_run_on_a_few_lasting_threads():
    """A ring's batches run on the stand-in's few stream threads, not on a thread started per
    batch (whose start the pipeline's main thread would wait for)."""
    threads = set()

    def compute(frames):
        threads.add(threading.current_thread())  # kept alive here: no object is reused
        return detect_batch(np.stack(frames), Options())

    options = Options(streams=2)
    ring = StandInGpuBackend(options, compute=compute).slab_ring(4)
    frame = photo(6, 7)
    for _ in range(3 * standins.STREAM_THREADS):
        filling = ring.fill(frame.shape, capacity=1)
        np.copyto(filling.inputs[0], frame)
        batch = filling.submit(1)
        batch.result()
        batch.release()
    assert 1 <= len(threads) <= standins.STREAM_THREADS
    assert threading.main_thread() not in threads
