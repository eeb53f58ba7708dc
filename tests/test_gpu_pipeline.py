"""The streaming GPU pipeline end to end: byte-identical to the CPU backend (needs CUDA).

Output buffers are poisoned before every launch, so a pixel the kernel never wrote fails: the
edge maps, and the 1-bit PNG rows packed from them (with a poison that is a different packing of
bits from run to run: one value could be a right byte by chance).
"""

from __future__ import annotations

import itertools
import json
import time

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.inputs.sources import ImageSource
from edgecli.options.params import BORDERS, NORMS

from .helpers import H264_CLIP, invoke, same_bytes
from .media import cv2_layouts, photo

pytestmark = pytest.mark.gpu

POISON = 0x5A
PACKED_POISONS = (0x5A, 0xA5)


@pytest.fixture(autouse=True)
def poisoned_launches(gpu, cp, monkeypatch):
    """Fill each batch's device outputs with poison right before their kernels are queued:
    the edge maps with POISON, the packed rows with a byte that changes with each batch."""
    launch, pack = gpu.CudaBackend.launch, gpu.CudaBackend.pack
    batches = itertools.count()

    def poisoned(self, frames_dev, edges_dev, stream, *work):
        edges_dev.data.memset_async(POISON, edges_dev.nbytes, stream)
        launch(self, frames_dev, edges_dev, stream, *work)

    def poisoned_pack(self, edges_dev, rows_dev, stream):
        rows_dev.data.memset_async(PACKED_POISONS[next(batches) % 2], rows_dev.nbytes, stream)
        pack(self, edges_dev, rows_dev, stream)

    monkeypatch.setattr(gpu.CudaBackend, "launch", poisoned)
    monkeypatch.setattr(gpu.CudaBackend, "pack", poisoned_pack)


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    """19 frames: three runs of two sizes (not tile or batch multiples) and odd tiny ones."""
    folder = tmp_path_factory.mktemp("mixed")
    shapes = [(237, 321)] * 7 + [(1, 1), (1, 50), (50, 1)] + [(481, 641)] * 5 + [(237, 321)] * 4
    for i, shape in enumerate(shapes):
        cv2.imwrite(str(folder / f"f{i:03d}.png"), photo(*shape, seed=i))
    return folder


@pytest.mark.parametrize("batch, streams", [(1, 1), (3, 1), (4, 2), (16, 2), (64, 4)])
def test_gpu_pipeline_equals_cpu(mixed_folder, tmp_path, batch, streams):
    """Any batch size and stream count gives the CPU backend's bytes, frame for frame."""
    edgecli.process(mixed_folder, tmp_path / "cpu", backend="cpu")
    summary = edgecli.process(
        mixed_folder, tmp_path / "gpu", backend="cuda", batch=batch, streams=streams
    )
    assert summary.backend == "cuda" and summary.frames == 19
    assert {"upload", "kernel", "download"} <= set(summary.stages)
    assert 0 < summary.gpu_busy_fraction <= 1
    same_bytes(tmp_path / "cpu", tmp_path / "gpu")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("threshold, bits", [(0, 1), (60, 8), (2040, 1)])
def test_every_option_on_video(tmp_path, norm, border, threshold, bits):
    """The H.264 clip, every border x norm: GPU and CPU write identical PNGs."""
    options = dict(norm=norm, border=border, threshold=threshold, png_bits=bits)
    edgecli.process(H264_CLIP, tmp_path / "cpu", backend="cpu", **options)
    edgecli.process(H264_CLIP, tmp_path / "gpu", backend="cuda", batch=5, **options)
    same_bytes(tmp_path / "cpu", tmp_path / "gpu")


def test_detect_edges_api_on_gpu(gpu):
    """The library call with backend='cuda' equals the CPU reference for a frame and a batch."""
    frames = np.stack([photo(33, 65, seed=i) for i in range(3)])
    np.testing.assert_array_equal(
        edgecli.detect_edges(frames, backend="cuda"), edgecli.detect_edges(frames, backend="cpu")
    )
    np.testing.assert_array_equal(
        edgecli.detect_edges(frames[0], backend="cuda", norm="l2", border="constant"),
        edgecli.detect_edges(frames[0], backend="cpu", norm="l2", border="constant"),
    )


@pytest.mark.parametrize("layout", ["gray", "bgra", "bgra batch"])
def test_detect_edges_takes_gray_and_bgra_on_gpu(gpu, layout):
    """backend='cuda' takes a gray or BGRA frame, or a BGRA batch, as the CPU does: the edges
    of its cv2.cvtColor conversion to BGR."""
    given, bgr = cv2_layouts()[layout]
    np.testing.assert_array_equal(
        edgecli.detect_edges(given, backend="cuda"), edgecli.detect_edges(bgr, backend="cpu")
    )


def test_cli_auto_uses_cuda(tmp_path):
    """`edgecli run` with the default backend picks CUDA here for a video and says so in its
    summary."""
    result = invoke("run", H264_CLIP, "-o", tmp_path, "-q", "--json-summary", "-")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["backend"] == "cuda" and summary["device"].startswith("NVIDIA")
    assert summary["gpu_busy_fraction"] is not None


def test_cli_auto_gives_a_small_run_the_cpu(mixed_folder, tmp_path):
    """19 small frames are done on the CPU before CUDA would have started: the default backend
    takes the CPU for them, with --backend cuda's bytes."""
    result = invoke("run", mixed_folder, "-o", tmp_path / "auto", "-q", "--json-summary", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backend"] == "cpu"
    edgecli.process(mixed_folder, tmp_path / "cuda", backend="cuda")
    same_bytes(tmp_path / "cuda", tmp_path / "auto")


def test_gpu_out_of_memory_is_a_clear_failure(mixed_folder, tmp_path, cp, monkeypatch):
    """A batch the GPU cannot hold ends the run with one line saying what to change."""
    from edgecli.edges import ring

    def no_memory(*args, **kwargs):
        raise cp.cuda.memory.OutOfMemoryError(10**12, 0)

    monkeypatch.setattr(ring.cp, "empty", no_memory)
    result = invoke("run", mixed_folder, "-o", tmp_path / "out", "--backend", "cuda")
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: cannot allocate ") and last.endswith(
        "use a smaller --batch or fewer --streams"
    )
    assert not list((tmp_path / "out").glob("*.png"))


@pytest.mark.parametrize("rule", ["auto", "7%"])
def test_an_automatic_threshold_is_the_same_on_both_backends(gpu, mixed_folder, tmp_path, rule):
    """-t auto and -t P% choose one number from the CPU-decoded sample, whatever the backend:
    the CUDA run picks the CPU run's threshold and writes its bytes."""
    cpu = edgecli.process(mixed_folder, tmp_path / "cpu", backend="cpu", threshold=rule)
    cuda = edgecli.process(mixed_folder, tmp_path / "cuda", backend="cuda", threshold=rule)
    assert cuda.params["threshold"] == cpu.params["threshold"]
    assert cuda.params["threshold_rule"] == rule
    same_bytes(tmp_path / "cpu", tmp_path / "cuda")
    clip_cpu = edgecli.process(H264_CLIP, tmp_path / "vc", backend="cpu", threshold=rule)
    clip_cuda = edgecli.process(H264_CLIP, tmp_path / "vg", backend="cuda", threshold=rule)
    assert clip_cuda.params["threshold"] == clip_cpu.params["threshold"]
    same_bytes(tmp_path / "vc", tmp_path / "vg")


def test_a_preview_is_the_same_on_both_backends(gpu, mixed_folder, tmp_path):
    """edgecli preview computes its edge maps on the backend run uses: the same sheet."""
    sheets = {}
    for backend in ("cpu", "cuda"):
        sheet = tmp_path / f"{backend}.png"
        result = invoke("preview", mixed_folder, H264_CLIP, "-o", sheet, "--backend", backend,
                        "--samples", "6")  # fmt: skip
        assert result.exit_code == 0, result.output
        assert f"({backend})" in result.stderr
        sheets[backend] = sheet.read_bytes()
    assert sheets["cpu"] == sheets["cuda"]


def test_slow_cpu_decoders_set_a_decode_cpu_run_s_pace(gpu, tmp_path, monkeypatch):
    """--decode cpu on the CUDA backend, its CPU decoders slowed (a sleep a frame, as cv2
    lets go of the GIL): whatever the kernel's and the deflate's latency on the GPU's streams,
    the summary names the CPU decoders, its workers busy, its streams far from full."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(48):
        assert cv2.imwrite(str(folder / f"f{i:03d}.jpg"), photo(24, 40, seed=i))
    # The backend's once-a-process start (CuPy, the kernels, the deflate's check) first.
    edgecli.process(folder / "f000.jpg", tmp_path / "warm", backend="cuda", decode="cpu")
    decode = ImageSource.decode

    def slow(self, max_pixels):
        time.sleep(0.05)
        return decode(self, max_pixels)

    monkeypatch.setattr(ImageSource, "decode", slow)
    summary = edgecli.process(folder, tmp_path / "out", backend="cuda", decode="cpu", workers=2)
    data = json.loads(summary.dumps())
    assert data["bottleneck"] == "decode"
    assert data["bottleneck_detail"].startswith("decode-bound: the CPU decoders set the pace")
    assert data["busy"]["gpu"]["busy_fraction"] < 0.7
