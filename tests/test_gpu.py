"""The CUDA backend against the CPU reference, bit for bit (needs a usable CUDA device).

Every test here carries the ``gpu`` marker and is skipped, with the reason, where
``edgecli.edges.backends.cuda_unusable_reason()`` says the CUDA backend cannot run. CuPy is only
imported once a device is known to be usable, so collection works without it.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgecli.cuda.compiling import ARCH_ENV
from edgecli.edges import reference
from edgecli.edges import variants as kernels
from edgecli.edges.variants import Variant
from edgecli.options.params import BORDERS, NORMS, Options

pytestmark = pytest.mark.gpu

POISON = 0x5A  # neither 0 nor 255: a pixel the kernel never wrote cannot pass
THRESHOLDS = (0, 1, 100, 2040, 5000)
# Work items are 128 columns x 30 rows. Whole items of widths that are multiples of 16 take the
# kernel's fast path; the rest (and the right and bottom edges) the general one.
SHAPES = [
    (1, 1),
    (1, 37),
    (1, 300),
    (45, 1),
    (2, 2),
    (17, 31),
    (33, 65),
    (30, 128),  # one whole item
    (61, 144),  # fast items beside a 16-column edge item; a 1-row bottom item
    (37, 100),  # width % 16 == 4: each row starts at its own skew
    (481, 641),
    (1080, 1920),
    (2160, 3840),
]


# ---- frames ------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _photos() -> tuple[np.ndarray, ...]:
    try:
        from skimage import data
    except ImportError:
        return ()
    # scikit-image gives RGB; frames are BGR.
    return tuple(
        np.ascontiguousarray(img[..., ::-1])
        for img in (data.astronaut(), data.coffee(), data.chelsea())
    )


def make_batch(height: int, width: int, seed: int) -> np.ndarray:
    """A batch of same-size frames with mixed content: noise, flat, steps, photographs."""
    rng = np.random.default_rng(seed)
    frames = [
        rng.integers(0, 256, (height, width, 3), dtype=np.uint8),
        np.full((height, width, 3), 77, dtype=np.uint8),
    ]
    step = np.zeros((height, width, 3), dtype=np.uint8)
    step[:, width // 2 :] = (30, 200, 90)  # vertical edge
    step[height // 3 :, :, 0] = 255  # horizontal edge in B only
    frames.append(step)
    sparse = (rng.random((height, width, 1)) < 0.1) * np.uint8(255)
    frames.append(np.repeat(sparse, 3, axis=2))
    for photo in _photos()[:2]:
        frames.append(cv2.resize(photo, (width, height), interpolation=cv2.INTER_AREA))
    if height * width >= 2160 * 3840:
        frames = frames[:1] + frames[-1:]  # keep the 4K batch cheap on the CPU
    return np.ascontiguousarray(np.stack(frames))


@lru_cache(maxsize=2)
def _batch_and_gradients(height: int, width: int, border: str):
    """A batch and its reference gradients, shared by every norm and threshold."""
    frames = make_batch(height, width, seed=height * 10007 + width)
    gradients = [reference.sobel(reference.luma(frame), border) for frame in frames]
    return frames, gradients


def expected_edges(gradients, options: Options) -> np.ndarray:
    return np.stack([reference.threshold_magnitude(gx, gy, options) for gx, gy in gradients])


def run_kernel(gpu, cp, stream, kernel, frames: np.ndarray, threshold: int) -> np.ndarray:
    """Launch on device copies of ``frames`` into a poisoned output; return it on the host."""
    # Everything on one stream: the copy and the poisoning are ordered before the launch
    # (a non-blocking stream does not wait for the default one).
    with stream:
        frames_dev = cp.asarray(frames)
        edges_dev = cp.full(frames.shape[:3], POISON, dtype=cp.uint8)
        gpu.launch_edges(kernel, frames_dev, edges_dev, threshold, stream)
        edges = edges_dev.get(stream=stream)
    stream.synchronize()
    return edges


def assert_same(actual: np.ndarray, expected: np.ndarray, context: str) -> None:
    if not np.array_equal(actual, expected):
        bad = np.argwhere(actual != expected)
        first = tuple(int(i) for i in bad[0])
        raise AssertionError(
            f"{context}: {len(bad)} of {expected.size} pixels differ; first at {first}: "
            f"got {actual[first]}, want {expected[first]}"
        )


# ---- the contract, bit for bit -----------------------------------------------------------------


# Shape outermost, so the cached batch and gradients serve all norms of a border in a row.
CASES = [(h, w, border, norm) for h, w in SHAPES for border in BORDERS for norm in NORMS]


# The kernel for this GPU, and compiled as PTX for older architectures through the documented
# setting (edgecli.cuda.compiling.ARCH_ENV), so that the H200 also runs the code that sm_80
# (cp.async, no DPX instructions) and sm_70/75 GPUs (rows staged with plain loads) run.
TARGETS = (None, 80, 75)


@pytest.fixture(params=TARGETS, ids=lambda t: "native" if t is None else f"as-sm{t}")
def target(request, monkeypatch):
    if request.param is not None:
        monkeypatch.setenv(ARCH_ENV, str(request.param))
    return request.param


@pytest.mark.parametrize(
    ("height", "width", "border", "norm"), CASES, ids=[f"{h}x{w}-{b}-{n}" for h, w, b, n in CASES]
)
def test_kernel_matches_reference(
    edge_kernels, gpu, cp, stream, height, width, border, norm, target
):
    """Every pixel of every frame equals the CPU reference, for every threshold."""
    frames, gradients = _batch_and_gradients(height, width, border)
    kernel = edge_kernels.load_kernel(0, Variant(norm, border))
    assert kernel.target == (f"compute_{target}" if target else f"sm_{kernel.target[3:]}")
    for threshold in THRESHOLDS:
        options = Options(threshold=threshold, norm=norm, border=border)
        actual = run_kernel(gpu, cp, stream, kernel, frames, options.effective_threshold)
        assert_same(
            actual,
            expected_edges(gradients, options),
            f"{height}x{width} {border} {norm} T={threshold} {kernel.target}",
        )


@pytest.mark.parametrize("resident_blocks", [1, 2, 7])
@pytest.mark.parametrize(
    ("height", "width"), [(33, 65), (61, 257), (481, 641), (120, 512), (75, 640)]
)
def test_few_blocks_loop_over_many_tiles(
    edge_kernels, gpu, cp, stream, height, width, resident_blocks, target
):
    """A grid smaller than the work (each warp takes many items, the next one's rows staged
    while this one's are read) is exact."""
    frames, gradients = _batch_and_gradients(height, width, "reflect101")
    kernel = edge_kernels.load_kernel(0, Variant("l1", "reflect101"))
    kernel = dataclasses.replace(kernel, resident_blocks=resident_blocks)
    options = Options(threshold=60, border="reflect101")
    actual = run_kernel(gpu, cp, stream, kernel, frames, options.effective_threshold)
    assert_same(
        actual, expected_edges(gradients, options), f"{resident_blocks} blocks, {kernel.target}"
    )


@pytest.mark.parametrize("offset", [1, 2, 3, 4])
@pytest.mark.parametrize(("height", "width"), [(60, 256), (37, 100)])
def test_output_at_any_alignment(edge_kernels, gpu, cp, stream, offset, height, width):
    """An output array that does not start 4-byte aligned (a view into a larger buffer) is
    written exactly, and nothing outside it is touched."""
    frames, gradients = _batch_and_gradients(height, width, "replicate")
    options = Options(threshold=90)
    kernel = edge_kernels.load_kernel(0, Variant())
    size = frames.shape[0] * height * width
    with stream:
        frames_dev = cp.asarray(frames)
        flat = cp.full(offset + size + 16, POISON, dtype=cp.uint8)
        edges_dev = flat[offset : offset + size].reshape(frames.shape[:3])
        gpu.launch_edges(kernel, frames_dev, edges_dev, options.effective_threshold, stream)
        everything = flat.get(stream=stream)
    stream.synchronize()
    actual = everything[offset : offset + size].reshape(frames.shape[:3])
    assert_same(actual, expected_edges(gradients, options), f"output offset {offset}")
    assert (everything[:offset] == POISON).all() and (everything[offset + size :] == POISON).all()


@pytest.mark.parametrize("norm", NORMS)
def test_the_grid_is_held_to_its_warps_an_sm_and_every_block_that_fits_is_exact_too(
    edge_kernels, gpu, cp, stream, norm
):
    """The persistent grid is blocks_per_sm blocks an SM, never more than fit; a grid of
    every block that fits (the benchmark's comparison) computes the same bytes."""
    sms = cp.cuda.Device(0).attributes["MultiProcessorCount"]
    kernel = edge_kernels.load_kernel(0, Variant(norm))
    fitting = kernel.fitting_blocks // sms
    assert kernel.fitting_blocks == fitting * sms and fitting >= 1
    assert kernel.resident_blocks == kernels.blocks_per_sm(kernel.variant, fitting) * sms
    assert gpu.grid_for(kernel, 32, 1080, 1920)[0] == kernel.resident_blocks
    # Enough 1080p frames that every warp of the larger grid has items.
    frames = np.random.default_rng(11).integers(0, 256, (6, 1080, 1920, 3), dtype=np.uint8)
    options = Options(threshold=120, norm=norm)
    expected = reference.detect_batch(frames, options)
    for grid in (kernel, dataclasses.replace(kernel, resident_blocks=kernel.fitting_blocks)):
        actual = run_kernel(gpu, cp, stream, grid, frames, options.effective_threshold)
        assert_same(actual, expected, f"{grid.resident_blocks} blocks")


def test_more_frames_than_a_grid_dimension_holds(edge_kernels, gpu, cp, stream):
    """65,537 frames in one launch (more than gridDim.y's 65,535) are all computed."""
    frames = np.random.default_rng(7).integers(0, 256, (65_537, 3, 5, 3), dtype=np.uint8)
    options = Options(threshold=100)
    kernel = edge_kernels.load_kernel(0, Variant())
    actual = run_kernel(gpu, cp, stream, kernel, frames, options.effective_threshold)
    assert_same(actual, reference.detect_batch(frames, options), "65537 frames of 3x5")


def test_8k_frame(edge_kernels, gpu, cp, stream):
    """A 4320x7680 photograph (8K) matches the reference."""
    photos = _photos()
    if not photos:
        pytest.skip("scikit-image is not installed (photographs for the 8K frame)")
    frame = cv2.resize(photos[0], (7680, 4320), interpolation=cv2.INTER_CUBIC)[np.newaxis]
    options = Options(threshold=40, norm="l2", border="reflect101")
    kernel = edge_kernels.load_kernel(0, Variant("l2", "reflect101"))
    actual = run_kernel(gpu, cp, stream, kernel, frame, options.effective_threshold)
    assert_same(actual, reference.detect_batch(frame, options), "8K")


def test_photographs_are_not_trivial(gpu):
    """The photo frames of the batches exist here and produce some edges and some non-edges."""
    if not _photos():
        pytest.skip("scikit-image is not installed")
    frames, gradients = _batch_and_gradients(481, 641, "replicate")
    edges = expected_edges(gradients, Options())
    assert 0 < np.count_nonzero(edges[-1]) < edges[-1].size


# ---- the backend -------------------------------------------------------------------------------


@pytest.mark.parametrize(("height", "width"), [(17, 31), (481, 641), (1080, 1920)])
def test_detect_batch_equals_per_frame(gpu, height, width):
    """detect() on a batch equals detect() frame by frame, and the reference."""
    options = Options(threshold=70, norm="l2", border="constant")
    backend = gpu.CudaBackend(options)
    frames, _ = _batch_and_gradients(height, width, "constant")
    batch = backend.detect(frames)
    one_by_one = np.concatenate([backend.detect(frame[np.newaxis]) for frame in frames])
    assert batch.dtype == np.uint8 and batch.shape == frames.shape[:3]
    assert_same(batch, one_by_one, "batch vs per frame")
    assert_same(batch, reference.detect_batch(frames, options), "batch vs reference")


def test_detect_accepts_a_single_frame_and_reuses_buffers(gpu):
    """A (H, W, 3) frame gives (1, H, W); a smaller call after a larger one is still exact."""
    backend = gpu.CudaBackend(Options())
    big, _ = _batch_and_gradients(481, 641, "replicate")
    small = big[0, :17, :31]
    backend.detect(big)
    actual = backend.detect(small)
    assert actual.shape == (1, 17, 31)
    assert_same(actual, reference.detect_batch(small, Options()), "small after big")


def test_backend_identity(gpu):
    """The backend names itself and its device."""
    backend = gpu.CudaBackend(Options())
    assert backend.name == "cuda"
    assert "device 0" in backend.device_name and "sm_" in backend.device_name


def test_misaligned_frames_are_rejected(edge_kernels, gpu, cp, stream):
    """The kernel needs 16-byte aligned frames; an offset view is refused with the reason."""
    flat = cp.zeros(1 + 2 * 5 * 7 * 3, dtype=cp.uint8)
    frames_dev = flat[1:].reshape(2, 5, 7, 3)
    edges_dev = cp.zeros((2, 5, 7), dtype=cp.uint8)
    with pytest.raises(ValueError, match="aligned"):
        gpu.launch_edges(edge_kernels.load_kernel(0, Variant()), frames_dev, edges_dev, 100, stream)


def test_wrong_output_shape_is_rejected(edge_kernels, gpu, cp, stream):
    """An output array of the wrong shape is refused, naming both shapes."""
    frames_dev = cp.zeros((2, 5, 7, 3), dtype=cp.uint8)
    edges_dev = cp.zeros((2, 7, 5), dtype=cp.uint8)
    with pytest.raises(ValueError, match=r"\(2, 5, 7\)"):
        gpu.launch_edges(edge_kernels.load_kernel(0, Variant()), frames_dev, edges_dev, 100, stream)


def test_pre_volta_devices_are_refused_with_the_reason(edge_kernels, gpu, monkeypatch):
    """A device below compute capability 7.0 is unusable, and the reason says what it has and
    what the kernel needs."""
    monkeypatch.setattr(edge_kernels, "compute_capability", lambda device: (6, 1))
    reason = edge_kernels.unusable_reason(0)
    assert reason is not None
    assert "compute capability 6.1" in reason and "needs 7.0 or newer" in reason


def test_a_forced_architecture_newer_than_the_device_is_refused(edge_kernels, gpu, monkeypatch):
    """EDGECLI_CUDA_ARCH cannot ask for more than the GPU has: the reason names both."""
    from edgecli.cuda import build

    for module in (edge_kernels, build):  # the check, and the compiler that reads the arch
        monkeypatch.setattr(module, "compute_capability", lambda device: (7, 5))
    # Not the kernels the real (newer) device loaded before.
    monkeypatch.setattr(edge_kernels, "_kernels", {})
    monkeypatch.setenv(ARCH_ENV, "80")
    reason = edge_kernels.unusable_reason(0, Variant("l2", "constant"))
    assert reason is not None and "EDGECLI_CUDA_ARCH=80" in reason and "sm_75" in reason


LOAD_AND_DETECT = """
import numpy as np
from edgecli.edges import reference
from edgecli.edges.cuda_backend import CudaBackend
from edgecli.options.params import Options
frames = np.random.default_rng(5).integers(0, 256, (2, 33, 65, 3), dtype=np.uint8)
options = Options(norm="l2", threshold=50)
edges = CudaBackend(options).detect(frames)
assert np.array_equal(edges, reference.detect_batch(frames, options)), "edges differ"
"""


def test_compiled_kernels_are_kept_on_disk_and_a_broken_one_is_rebuilt(gpu, tmp_path):
    """A first run compiles the kernel into the cache folder; a later one loads it from there;
    a corrupt file there is compiled anew, not an error; every run's edges are exact."""
    import subprocess
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    env.pop(ARCH_ENV, None)
    folder = tmp_path / "edgecli" / "kernels"

    def run() -> None:
        done = subprocess.run(
            [sys.executable, "-c", LOAD_AND_DETECT],
            env=env,
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

    run()
    cached = list(folder.iterdir())
    assert [p.suffix for p in cached] == [".cubin"]  # <key>.sm_XY.cubin: machine code
    assert cached[0].name.split(".")[1].startswith("sm_")
    compiled = cached[0].read_bytes()
    run()  # from the cache
    assert list(folder.iterdir()) == cached and cached[0].read_bytes() == compiled
    cached[0].write_bytes(b"not a module")
    run()  # rebuilt
    assert list(folder.iterdir()) == cached
    assert cached[0].read_bytes() not in (b"", b"not a module")


def test_info_names_the_kernel_form_and_the_compute_capability(gpu):
    """edgecli info says the CUDA backend is usable, on which compute capability, and which
    form of the kernel it runs, compiled for what."""
    from click.testing import CliRunner

    from edgecli.cli import main

    result = CliRunner().invoke(main, ["info"])
    assert result.exit_code == 0, result.output
    assert "cuda: usable:" in result.output and "compute capability" in result.output
    assert "kernel: portable shared-memory form" in result.output


def test_the_check_compiles_the_variant_in_use(edge_kernels, gpu, monkeypatch):
    """select_backend's check compiles the options' kernel variant, not the default one too."""
    from edgecli.edges import backends

    loaded = []
    real = edge_kernels.load_kernel
    monkeypatch.setattr(edge_kernels, "load_kernel", lambda d, v: loaded.append(v) or real(d, v))
    options = Options(norm="l2", border="constant")
    backends.select_backend(options)
    assert {(v.norm, v.border) for v in loaded} == {("l2", "constant")}


def test_device_out_of_range_is_reported(edge_kernels, gpu, cp):
    """unusable_reason names a device index that does not exist, and never raises."""
    count = cp.cuda.runtime.getDeviceCount()
    reason = edge_kernels.unusable_reason(count)
    assert reason is not None and str(count) in reason
    assert edge_kernels.unusable_reason(0) is None
