"""tests/cuda_host.py's fibers: shared memory, barriers, warp functions and atomics on the CPU
mean what CUDA says they mean, and what a GPU leaves undefined is an error, not a result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests import cuda_host

PROBE = cuda_host.SOURCES / "shim_probe.cu"
KERNELS = (
    "block_sums",
    "racy_neighbours",
    "warp_functions",
    "wide_shuffles",
    "histogram",
    "undefined",
)
ORDERS = ("forward", "reverse", 2, 7, 12345)


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict[str, cuda_host.HostKernel]:
    if cuda_host.compiler() is None:
        pytest.skip("no C++ compiler to build the kernels for the host")
    folder = Path(tmp_path_factory.mktemp("shim_probe"))
    return cuda_host.load_file(PROBE, cuda_host.SOURCES / "shim_probe.cpp", KERNELS, folder)


@pytest.mark.parametrize("order", ORDERS)
def test_a_shared_memory_reduction_sums_each_block_under_every_order(probe, order):
    """Barriers hold every thread until all have written, whichever order they run in."""
    values = np.random.default_rng(1).integers(-1000, 1000, 5 * 256, dtype=np.int32)
    sums = np.full(5, -7, np.int32)
    kernel = probe["block_sums"]
    kernel.order = order
    kernel((5,), (256,), (values, sums))
    assert np.array_equal(sums, values.reshape(5, 256).sum(axis=1))


def test_a_missing_barrier_shows_as_results_that_depend_on_the_order(probe):
    """A read of another thread's write with no barrier between differs between two orders."""
    kernel = probe["racy_neighbours"]
    results = []
    for order in ("forward", "reverse"):
        out = np.full(256, -1, np.int32)
        kernel.order = order
        kernel((1,), (256,), (out,))
        results.append(out)
    assert not np.array_equal(results[0], results[1])


def _model(values: np.ndarray, width: int, delta: int) -> np.ndarray:
    """What CUDA's programming guide says each warp function gives, lane by lane."""
    out = np.full((values.size, 8), -1, np.int64)
    for base in range(0, values.size, 32):
        warp = values[base : base + 32]
        ballot = sum(1 << lane for lane in range(32) if warp[lane] & 1)
        for lane in range(32):
            group = lane // width * width
            up = lane - delta if lane - group >= delta else lane
            down = lane + delta if lane - group + delta < width else lane
            xor = lane ^ delta if (lane ^ delta) // width <= lane // width else lane
            row = out[base + lane]
            row[0] = warp[group + delta % width]
            row[1], row[2], row[3] = warp[up], warp[down], warp[xor]
            row[4] = np.uint32(ballot).view(np.int32)
            row[5] = int(ballot != 0)
            row[6] = int(ballot == 0xFFFFFFFF)
            if lane % 2 == 0:
                row[7] = warp[lane ^ 2]
    return out


@pytest.mark.parametrize("order", ("forward", "reverse", 3))
@pytest.mark.parametrize(("width", "delta"), [(32, 1), (32, 5), (16, 3), (8, 7), (4, 1), (32, 31)])
def test_warp_functions_give_what_cuda_documents(probe, width, delta, order):
    """Shuffles (all four, with widths), ballot, any and all, and a sub-warp mask."""
    rng = np.random.default_rng(width * 100 + delta)
    values = rng.integers(0, 1 << 20, 64, dtype=np.int32)
    values[32:] |= 1  # the second warp's predicates all hold: __all_sync is 1 there
    out = np.full(64 * 8, -9, np.int32)
    kernel = probe["warp_functions"]
    kernel.order = order
    kernel((1,), (64,), (values, np.int32(width), np.int32(delta), out))
    assert np.array_equal(out.reshape(64, 8), _model(values, width, delta))


def test_a_shuffle_moves_64_bit_values_and_floats_whole(probe):
    """The value's bytes cross a shuffle, whatever its type."""
    wide = np.arange(32, dtype=np.uint64) * np.uint64(0x0123456789ABCDEF)
    reals = np.linspace(-3.5, 7.25, 32, dtype=np.float32)
    wide_out = np.zeros(32, np.uint64)
    reals_out = np.zeros(32, np.float32)
    probe["wide_shuffles"]((1,), (32,), (wide, reals, wide_out, reals_out))
    assert np.array_equal(wide_out, np.append(wide[1:], wide[31]))
    assert np.array_equal(reals_out, reals[np.arange(32) ^ 1])


def test_atomics_count_across_blocks(probe):
    """atomicAdd from many threads and blocks counts every one."""
    values = np.random.default_rng(3).integers(0, 10, 1000, dtype=np.int32)
    counts = np.zeros(10, np.uint32)
    probe["histogram"]((8,), (128,), (values, np.int32(values.size), counts))
    assert np.array_equal(counts, np.bincount(values, minlength=10))


@pytest.mark.parametrize(
    ("which", "message"),
    [
        (0, "__syncthreads waited for a thread that had ended"),
        (1, "__syncthreads waited for a thread that had ended"),
        (2, "a warp function's mask leaves out the lane calling it"),
        (3, "a warp function's mask names a lane that ended or waits elsewhere"),
        (4, "a shuffle read a lane outside its mask"),
    ],
)
def test_what_a_gpu_leaves_undefined_fails_the_launch(probe, which, message):
    """A barrier not every thread meets, or a mask that cannot be met, is an error."""
    out = np.zeros(64, np.int32)
    with pytest.raises(cuda_host.HostLaunchError, match=message):
        probe["undefined"]((1,), (64,), (np.int32(which), out))


def test_a_launch_after_an_error_runs_normally(probe):
    """A failed launch leaves nothing behind that a later launch on the same thread sees."""
    with pytest.raises(cuda_host.HostLaunchError):
        probe["undefined"]((1,), (64,), (np.int32(1), np.zeros(64, np.int32)))
    values = np.arange(256, dtype=np.int32)
    sums = np.zeros(1, np.int32)
    probe["block_sums"]((1,), (256,), (values, sums))
    assert sums[0] == values.sum()
