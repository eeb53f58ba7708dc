"""1-bit PNGs compressed on the GPU (cuda/deflate.cu): zlib's streams byte for byte,
in every layout the kernel meets, and the PNGs of a run the CPU backend's (needs CUDA).

The kernel zeroes its output itself, so it is filled with a poison before each launch here; a
stream's length is poisoned too (-7), so an unwritten one cannot pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.edges import reference
from edgecli.options.params import Options
from edgecli.output.png import PackedEdges, encode_png, png_from_rows_1bit, png_rows_1bit

from .deflate_cases import cases, incompressible, zlib_stream
from .helpers import H264_CLIP, edgecli_command, same_bytes
from .media import photo

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def deflater(gpu):
    """The checked deflate of device 0: the check must pass on this host's zlib, or every
    other test here would pass on the host's own compression."""
    from edgecli.edges import cuda_deflate as deflate

    loaded = deflate.deflater(0)
    assert loaded is not None, deflate.description(0)
    return loaded


@pytest.mark.parametrize("name", sorted(cases()))
def test_one_frame_is_zlibs_stream(deflater, name):
    """Each case as one frame of one row: zlib's bytes, or (incompressible only) None."""
    data = cases()[name]
    (stream,) = deflater.compress(np.frombuffer(data, np.uint8).reshape(1, 1, -1))
    if name.endswith("random bytes") and len(data) >= 1000:
        assert stream is None  # zlib might store these: the host's to compress
    elif stream is None:
        assert incompressible(data)
    else:
        assert stream == zlib_stream(data)


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (2, 1), (1, 1921), (1080, 1), (37, 100)])
def test_odd_shapes_in_one_launch(deflater, rng, shape):
    """Seven frames of an odd shape in one launch (each frame's bytes after the last's), of
    every density: each its own zlib stream."""
    maps = [(rng.random(shape) < p).astype(np.uint8) * 255 for p in (0, 0.01, 0.1, 0.5, 1)]
    maps += [reference.detect_frame(photo(*shape, seed=s), Options()) for s in (1, 2)]
    rows = np.stack([png_rows_1bit(m) for m in maps])
    for frame, stream in zip(rows, deflater.compress(rows), strict=True):
        if stream is not None or not incompressible(frame.tobytes()):
            assert stream == zlib_stream(frame.tobytes())


@pytest.fixture(scope="module")
def rows_1080p():
    """The 1-bit PNG rows of 64 1080p maps of photos at several thresholds."""
    maps = [
        reference.detect_frame(photo(1080, 1920, seed=i % 8), Options(threshold=t))
        for i, t in enumerate([20, 60, 150, 400] * 16)
    ]
    return np.stack([png_rows_1bit(m) for m in maps])


def test_a_batch_of_1080p_edge_maps(deflater, rows_1080p):
    """64 1080p maps in one launch: several blocks a frame."""
    streams = deflater.compress(rows_1080p)
    assert all(s is not None for s in streams)
    for frame, stream in zip(rows_1080p, streams, strict=True):
        assert stream == zlib_stream(frame.tobytes())


def test_every_call_gives_the_same_streams(deflater, rows_1080p):
    """The check's and the tests' compress, called again and again: every call's streams
    zlib's. (Its input and poison once went to the default stream while the kernel ran on one
    that does not wait for it: 19 of 40 such calls gave wrong streams on the H200.)"""
    want = [zlib_stream(frame.tobytes()) for frame in rows_1080p]
    for call in range(12):
        wrong = [i for i, s in enumerate(deflater.compress(rows_1080p)) if s != want[i]]
        assert not wrong, f"call {call}: frames {wrong[:8]} differ from zlib's"


def test_the_ring_hands_over_the_streams(gpu, deflater):
    """The pipeline's 1-bit batches carry each frame's stream (photos, and noise: Sobel's
    neighbourhoods overlap, so even its edges compress), and its PNG is the CPU's."""
    frames = np.stack([photo(300, 1920, seed=i) for i in range(3)])
    frames[2] = np.random.default_rng(5).integers(0, 256, frames[2].shape, dtype=np.uint8)
    expected = reference.detect_batch(frames, Options(threshold=250))
    ring = gpu.CudaBackend(Options(threshold=250)).slab_ring(2)
    filling = ring.fill(frames.shape[1:], 4)  # room for 4: a batch of 3 uses a prefix
    try:
        filling.inputs[:3] = frames
        outputs, _ = filling.submit(3).result()
        assert all(o.zlib is not None for o in outputs)
        for packed, edges in zip(outputs, expected, strict=True):
            assert isinstance(packed, PackedEdges)
            assert encode_png(packed, 1) == png_from_rows_1bit(png_rows_1bit(edges), 1920)
    finally:
        filling.release()


# A kernel that holds its stream for ``ns`` nanoseconds of the GPU's global timer (one thread).
HOLD = r"""
__device__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void hold(unsigned long long ns) {
    unsigned long long start = now();
    while (now() - start < ns) {}
}
"""


def test_a_submitted_batch_is_queued_not_waited_for(gpu, deflater):
    """submit_device queues the kernel, the compression and the copies and returns: while the
    batch waits on its input (a stream held 0.5 s), submitting takes no time and the batch is
    not ready; its result then is the CPU's. (CuPy's ndarray.get waits for its stream unless
    told not to: that held the main thread on every batch.)"""
    import cupy as cp

    frames = np.stack([photo(1080, 1920, seed=i) for i in range(4)])
    expected = reference.detect_batch(frames, Options())
    ring = gpu.CudaBackend(Options()).slab_ring(2)
    frames_dev = cp.asarray(frames)
    hold = cp.RawKernel(HOLD, "hold")
    gate, ready = cp.cuda.Stream(non_blocking=True), cp.cuda.Event()
    cp.cuda.Device().synchronize()
    filling = ring.fill(frames.shape[1:], 4, host_input=False)
    try:
        hold((1,), (1,), (np.uint64(500_000_000),), stream=gate)
        ready.record(gate)
        started = time.perf_counter()
        in_flight = filling.submit_device(frames_dev, ready)
        queued_s = time.perf_counter() - started
        waiting = not in_flight.ready()
        outputs, _ = in_flight.result()
        assert queued_s < 0.2 and waiting, queued_s
        for packed, edges in zip(outputs, expected, strict=True):
            assert encode_png(packed, 1) == png_from_rows_1bit(png_rows_1bit(edges), 1920)
    finally:
        filling.release()


def test_runs_with_noise_and_video_write_the_cpus_bytes(gpu, deflater, tmp_path):
    """A folder mixing photos and noise (frames left to the host) and the H.264 clip: the CUDA
    backend's PNGs are the CPU backend's, byte for byte."""
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(9)
    for i in range(12):
        frame = photo(241, 333, seed=i)
        if i % 3 == 2:
            frame = rng.integers(0, 256, frame.shape, dtype=np.uint8)
        cv2.imwrite(str(folder / f"f{i:02d}.png"), frame)
    for source, name in ((folder, "folder"), (H264_CLIP, "clip")):
        edgecli.process(source, tmp_path / f"{name}-cpu", backend="cpu", threshold=150)
        edgecli.process(source, tmp_path / f"{name}-gpu", backend="cuda", threshold=150, batch=5)
        same_bytes(tmp_path / f"{name}-cpu", tmp_path / f"{name}-gpu")


@pytest.mark.parametrize(("setting", "said"), [("", "GPU, zlib's bytes"), ("0", "CPU (EDGECLI")])
def test_info_says_where_pngs_are_compressed(gpu, setting, said, tmp_path):
    """edgecli info names the GPU's compression, or the host's where EDGECLI_GPU_DEFLATE=0;
    and a run with it off writes the same PNGs."""
    env = dict(os.environ, EDGECLI_GPU_DEFLATE=setting)
    done = subprocess.run(
        [*edgecli_command(), "info"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"png compression (--png-bits 1): {said}" in done.stdout
    run = [*edgecli_command(), "run", str(H264_CLIP), "-o", str(tmp_path / "out"), "-q"]
    done = subprocess.run(
        [*run, "--json-summary", "-"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["backend"] == "cuda"
    edgecli.process(H264_CLIP, tmp_path / "cpu", backend="cpu")
    same_bytes(tmp_path / "cpu", tmp_path / "out")
