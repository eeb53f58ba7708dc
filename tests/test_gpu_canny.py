"""The Canny kernels on the GPU, byte for byte cv2.Canny of the frames' cv2 gray, and whole
``edgecli run --operator canny`` runs on the CUDA backend byte for byte the CPU backend's (needs
a usable CUDA device; skipped, with the reason, elsewhere).

tests/test_canny_kernels.py runs the same kernels on the CPU over small frames; here they run
as built by NVRTC, on frames up to 4K, in batches, under the CuPy launches of the backend."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.cuda.compiling import ARCH_ENV
from edgecli.options.params import NORMS

from .canny_cases import ADVERSARIAL, ADVERSARIAL_THRESHOLDS, adversarial, cv2_canny
from .canny_images import ADVERSARIAL_LIMITS, as_bgr, lattice, spiral
from .canny_reference import limits as cv2_limits
from .helpers import H264_CLIP, invoke, make_frames, png_pixels, same_bytes
from .media import photo

pytestmark = pytest.mark.gpu

POISONS = ((0xA5, 0), (0x5A, 0xFFFFFFFF))  # (output, labels)
SHAPES = [(1, 1), (1, 300), (45, 1), (2, 2), (33, 65), (481, 641), (1080, 1920), (2160, 3840)]
THRESHOLDS = [(50, 150), (0, 0), (150, 50), (100, 5000), (5000, 5000)]


@pytest.fixture(autouse=True)
def usable_cuda(gpu):
    """Every test here, the whole runs too, skips where CUDA is unusable (the gpu fixture)."""


def device_canny(edge_kernels, cp, stream, frames: np.ndarray, low, high, norm: str) -> np.ndarray:
    """launch_canny's edges of ``frames`` on the device, the same from each poisoning of the
    output and the labels."""
    from edgecli.edges.cuda_canny import launch_canny

    canny = edge_kernels.load_canny(0, norm)
    limits = cv2_limits(low, high, norm == "l2")
    results = []
    with stream:
        frames_dev = cp.asarray(frames)
        for edge_poison, label_poison in POISONS:
            edges_dev = cp.full(frames.shape[:3], edge_poison, dtype=cp.uint8)
            labels_dev = cp.full(frames.shape[:3], label_poison, dtype=cp.uint32)
            launch_canny(canny, frames_dev, edges_dev, labels_dev, limits, stream)
            results.append(edges_dev.get(stream=stream))
    stream.synchronize()
    assert np.array_equal(results[0], results[1]), "pixels left unwritten or labels misread"
    return results[0]


def assert_same(got: np.ndarray, want: np.ndarray, context: str) -> None:
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        first = tuple(int(i) for i in bad[0])
        raise AssertionError(
            f"{context}: {len(bad)} of {want.size} pixels differ; first at {first}: "
            f"got {got[first]}, want {want[first]}"
        )


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{h}x{w}" for h, w in SHAPES])
def test_kernels_equal_cv2(edge_kernels, cp, stream, shape, norm):
    """A batch of photographs and noise, 1x1 to 4K, gives cv2.Canny's edges at every pair of
    thresholds, swapped pairs included."""
    rng = np.random.default_rng(shape[0] * 7919 + shape[1])
    frames = np.stack(
        [photo(*shape, seed=0), photo(*shape, seed=3), rng.integers(0, 256, (*shape, 3), np.uint8)]
    )
    for low, high in THRESHOLDS:
        got = device_canny(edge_kernels, cp, stream, frames, low, high, norm)
        assert_same(got, cv2_canny(frames, low, high, norm), f"{shape} {norm} {low},{high}")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("image", ADVERSARIAL)
def test_adversarial_images_equal_cv2(edge_kernels, cp, stream, image, norm):
    """The spiral, lattice, checkerboards and noise of the CPU tests give cv2.Canny's
    edges."""
    frames = adversarial(image)
    for low, high in ADVERSARIAL_THRESHOLDS:
        got = device_canny(edge_kernels, cp, stream, frames, low, high, norm)
        assert_same(got, cv2_canny(frames, low, high, norm), f"{image} {norm} {low},{high}")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("image", ["spiral", "lattice"])
def test_4k_webs_of_weak_edges_are_edges_to_the_corners(edge_kernels, cp, stream, image, norm):
    """A spiral filling a 2160 x 2160 frame and a lattice over a 4K one, fed by one strong
    block in the middle, are edges out to every corner, as cv2.Canny has them."""
    frames = as_bgr(spiral(2160, 2160) if image == "spiral" else lattice(2160, 3840))[None]
    got = device_canny(edge_kernels, cp, stream, frames, *ADVERSARIAL_LIMITS, norm)
    assert_same(got, cv2_canny(frames, *ADVERSARIAL_LIMITS, norm), f"4K {image} {norm}")
    edges = got[0]
    assert all(c.any() for c in (edges[:8, :8], edges[:8, -8:], edges[-8:, :8], edges[-8:, -8:]))


@pytest.mark.parametrize("target", [80, 75])
def test_older_architectures_equal_cv2(edge_kernels, cp, stream, monkeypatch, target):
    """Compiled as PTX for sm_80 and sm_75 (EDGECLI_CUDA_ARCH), the kernels give the same
    edges."""
    monkeypatch.setenv(ARCH_ENV, str(target))
    frames = np.stack([photo(481, 641, seed=i) for i in range(2)])
    got = device_canny(edge_kernels, cp, stream, frames, 50, 150, "l2")
    assert_same(got, cv2_canny(frames, 50, 150, "l2"), f"as sm_{target}")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape", [(1080, 1920), (2160, 3840), (481, 641)], ids=str)
def test_the_backend_equals_the_cpu_backend_and_cv2(shape, norm):
    """detect_edges with operator canny on the CUDA backend gives the CPU backend's edges and
    cv2.Canny's, for a batch of photographs at 1080p and 4K, through the backend's slab."""
    frames = np.stack([photo(*shape, seed=i) for i in range(3)])
    for low, high in [(50, 150), (150, 50), (0, 0)]:
        options = dict(operator="canny", threshold=(low, high), norm=norm)
        got = edgecli.detect_edges(frames, backend="cuda", **options)
        assert_same(got, edgecli.detect_edges(frames, backend="cpu", **options), "cpu")
        assert_same(got, cv2_canny(frames, low, high, norm), f"{shape} {norm} {low},{high}")


@pytest.fixture(scope="module")
def canny_folder(tmp_path_factory):
    """Frames of several sizes, runs of one size longer than a batch, and 1080p."""
    shapes = [(237, 321)] * 6 + [(1, 1), (1, 50), (50, 1)] + [(1080, 1920)] * 3
    return make_frames(tmp_path_factory.mktemp("canny"), shapes)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("thresholds", ["50,150", "200,20", "0,5000", "0,0"])
def test_a_canny_run_on_cuda_writes_the_cpu_runs_bytes(canny_folder, tmp_path, norm, thresholds):
    """edgecli run --operator canny on the CUDA backend writes the CPU backend's files, byte
    for byte, and their pixels are cv2.Canny's."""
    common = ["--operator", "canny", "-t", thresholds, "--norm", norm, "-q"]
    for backend in ("cpu", "cuda"):
        result = invoke("run", canny_folder, "-o", tmp_path / backend, "--backend", backend,
                        "--batch", "4", *common)  # fmt: skip
        assert result.exit_code == 0, result.output
    same_bytes(tmp_path / "cpu", tmp_path / "cuda")
    low, high = (int(t) for t in thresholds.split(","))
    for name, edges in png_pixels(tmp_path / "cuda").items():
        frame = cv2.imread(str(canny_folder / name), cv2.IMREAD_COLOR)
        want = cv2_canny(frame[None], low, high, norm)[0]
        assert np.array_equal(edges.astype(bool), want.astype(bool)), name


@pytest.mark.parametrize("decode", ["cpu", "gpu"])
def test_a_canny_video_run_on_cuda_writes_the_cpu_runs_bytes(tmp_path, decode):
    """The H.264 clip through the CUDA backend, decoded on either side, gives the CPU run's
    files under --operator canny."""
    from edgecli.decode import engines

    if decode == "gpu" and (reason := engines.video_unusable_reason()) is not None:
        pytest.skip(f"NVDEC unusable: {reason}")
    common = ["--operator", "canny", "-t", "40,120", "-q"]
    result = invoke("run", H264_CLIP, "-o", tmp_path / "cpu", "--backend", "cpu", *common)
    assert result.exit_code == 0, result.output
    result = invoke("run", H264_CLIP, "-o", tmp_path / "cuda", "--backend", "cuda",
                    "--decode", decode, "--batch", "5", *common)  # fmt: skip
    assert result.exit_code == 0, result.output
    same_bytes(tmp_path / "cpu", tmp_path / "cuda")
