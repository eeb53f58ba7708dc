"""Edge maps packed into 1-bit PNG scanlines on the GPU (cuda/edges.cu, pack_rows_1bit), byte
for byte as edgecli.output.png.png_rows_1bit packs them on the host (needs CUDA).

Every output byte value is a valid packing, so no single poison can expose an unwritten byte:
each launch runs twice, over two different poisons, and both must give the host's bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgecli.edges import reference
from edgecli.edges.variants import Variant
from edgecli.options.params import Options
from edgecli.output.png import PackedEdges, png_rows_1bit

from .media import photo

pytestmark = pytest.mark.gpu

POISONS = (0x5A, 0xA5)
# Multiples of 8 take the 8-byte loads, the rest the byte-wise path and a padded last byte.
WIDTHS = [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 641, 1920]


def edge_maps(shape: tuple[int, ...], content: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    on = rng.integers(0, 2, shape, dtype=np.uint8)
    if content == "0/255":
        return on * np.uint8(255)
    if content == "any nonzero":  # 1..255: each must pack as a 1
        return on * rng.integers(1, 256, shape, dtype=np.uint8)
    return np.full(shape, 255 if content == "white" else 0, np.uint8)


def pack_on_gpu(gpu, cp, stream, edges: np.ndarray, poison: int) -> np.ndarray:
    from edgecli.edges.kernels import load_kernel

    n, h, w = edges.shape
    with stream:
        edges_dev = cp.asarray(edges)
        rows_dev = cp.full((n, h, 1 + (w + 7) // 8), poison, dtype=cp.uint8)
        gpu.launch_pack_rows(load_kernel(0, Variant()), edges_dev, rows_dev, stream)
        rows = rows_dev.get(stream=stream)
    stream.synchronize()
    return rows


def assert_packs_as_the_host(gpu, cp, stream, edges: np.ndarray) -> None:
    expected = np.stack([png_rows_1bit(e) for e in edges])
    for poison in POISONS:
        rows = pack_on_gpu(gpu, cp, stream, edges, poison)
        assert rows.shape == expected.shape
        if not np.array_equal(rows, expected):
            bad = tuple(int(i) for i in np.argwhere(rows != expected)[0])
            raise AssertionError(
                f"poison {poison:#x}: byte {bad} is {rows[bad]:#04x}, want {expected[bad]:#04x}"
            )


@pytest.mark.parametrize("content", ["0/255", "any nonzero", "white", "black"])
@pytest.mark.parametrize("width", WIDTHS)
def test_packing_equals_the_host(gpu, cp, stream, width, content):
    """Every width, over a batch of frames (rows of a frame follow the last row of the one
    before, so rows of odd widths start at every alignment)."""
    edges = edge_maps((3, 5, width), content, seed=width)
    assert_packs_as_the_host(gpu, cp, stream, edges)


def test_packing_more_bytes_than_the_grid_covers(gpu, cp, stream):
    """Four 4K maps: more output bytes than PACK_BLOCKS x PACK_THREADS, so threads loop."""
    edges = edge_maps((4, 2160, 3840), "0/255", seed=4)
    assert edges.shape[0] * 2160 * 481 > gpu.PACK_BLOCKS * gpu.PACK_THREADS
    assert_packs_as_the_host(gpu, cp, stream, edges)


def test_packing_rejects_mismatched_arrays(edge_kernels, gpu, cp, stream):
    """Rows of the wrong shape or type are refused, naming the shape wanted."""
    kernel = edge_kernels.load_kernel(0, Variant())
    edges_dev = cp.zeros((2, 5, 13), dtype=cp.uint8)
    with pytest.raises(ValueError, match=r"\(2, 5, 3\)"):
        gpu.launch_pack_rows(kernel, edges_dev, cp.zeros((2, 5, 2), dtype=cp.uint8), stream)
    with pytest.raises(ValueError, match="uint8"):
        gpu.launch_pack_rows(kernel, edges_dev.astype(cp.int16), cp.zeros((2, 5, 3)), stream)


@pytest.mark.parametrize(("bits", "packed"), [(1, True), (8, False)])
def test_the_ring_packs_batches_for_1bit_pngs(gpu, bits, packed):
    """For 1-bit PNGs the backend's ring gives each frame as PackedEdges of the reference's
    edges; for 8-bit PNGs, the edge maps themselves."""
    ring = gpu.CudaBackend(Options(png_bits=bits)).slab_ring(2)
    frames = np.stack([photo(37, 100, seed=i) for i in range(3)])
    expected = reference.detect_batch(frames, Options())
    filling = ring.fill(frames.shape[1:], 4)  # room for 4: a batch of 3 uses a prefix
    try:
        filling.inputs[:3] = frames
        in_flight = filling.submit(3)
        outputs, stages = in_flight.result()
        compressed = {"deflate"} if ring.slabs[0].deflate is not None else set()
        assert set(stages) == {"upload", "kernel", "download"} | compressed
        if packed:
            assert [type(o) for o in outputs] == [PackedEdges] * 3
            assert {o.width for o in outputs} == {100}
            rows = np.stack([o.rows for o in outputs])
            np.testing.assert_array_equal(rows, np.stack([png_rows_1bit(e) for e in expected]))
        else:
            np.testing.assert_array_equal(outputs, expected)
    finally:
        filling.release()
