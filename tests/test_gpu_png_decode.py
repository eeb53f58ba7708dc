"""PNG folders under --decode gpu on the GPU's own PNG decoder (inflate.cu, then png.cu)
against --decode cpu, file for file (needs CUDA). The frames each unfilter launch writes are
poisoned just before it runs, so a pixel it never wrote fails the comparison."""

from __future__ import annotations

import pytest

import edgecli

from .helpers import same_pixels
from .png_corpus import mutations, own_files
from .test_gpu_decode_pipeline import png_folder

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def decoder_from_the_first_file(gpu, monkeypatch):
    """Every PNG to the GPU's decoder (none to the CPU while its kernels load), and its frames
    poisoned before the unfilter kernel writes them."""
    from edgecli.decode.gpu import png as gpu_png
    from edgecli.decode.gpu import pngs

    monkeypatch.setattr(pngs.PngDecoder, "ready", lambda self: self.opened.result() is None)
    launch = gpu_png.launch_png_to_bgr

    def poisoned(function, data, image_stride, out, status, **options):
        out.data.memset_async(0x5A, out.nbytes, options["stream"])
        launch(function, data, image_stride, out, status, **options)

    monkeypatch.setattr(gpu_png, "launch_png_to_bgr", poisoned)


def run_both(source, tmp_path, **options):
    cpu = edgecli.process(source, tmp_path / "cpu", backend="cuda", decode="cpu", **options)
    gpu = edgecli.process(source, tmp_path / "gpu", backend="cuda", decode="gpu", **options)
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    assert gpu.failed == cpu.failed
    return cpu, gpu


def test_a_folder_of_pngs_decodes_on_the_gpu_as_on_the_cpu(tmp_path):
    """Layouts in runs, a turned one, and the files left to the CPU (interlaced, damaged)."""
    folder = png_folder(tmp_path / "in")
    _, gpu = run_both(folder, tmp_path, on_error="skip")
    assert gpu.decoders.get("gpu-png") == 13  # every PNG but d1 (interlaced) and e0 (damaged)


def test_every_layout_of_the_corpus_as_on_the_cpu(tmp_path):
    """Every colour type and depth, filters, IDAT splits and zlib settings of the corpus."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name, data in own_files().items():
        (folder / f"{name}.png").write_bytes(data)
    _, gpu = run_both(folder, tmp_path, on_error="skip")
    assert gpu.decoders.get("gpu-png", 0) > len(own_files()) // 2


@pytest.mark.parametrize("seed", range(3))
def test_mutated_pngs_fail_or_decode_as_on_the_cpu(tmp_path, seed):
    """Corrupt and truncated variants of corpus files (bit flips with CRCs matched, so the
    inflate kernel meets them; wrong Adler-32s; cuts anywhere) give the CPU's frames and the
    CPU's errors, file for file, whichever decoder had them."""
    folder = tmp_path / "in"
    folder.mkdir()
    names = sorted(own_files())
    for name in names[seed::7][:6]:
        for i, (_, data) in enumerate(mutations(own_files()[name], seed)):
            (folder / f"{name}-{i:03d}.png").write_bytes(data)
    cpu, gpu = run_both(folder, tmp_path, on_error="skip")
    assert cpu.failed and gpu.frames == cpu.frames


class _Size:
    def __init__(self, width, height):
        self.width, self.height = width, height


def test_a_gpu_with_little_free_memory_gets_smaller_png_batches(tmp_path, monkeypatch):
    """The PNG decoder's batches hold what PNG_MEMORY_SHARE of the GPU's free memory allows
    (fewer large frames, never none), and a run with batches of one or two frames still
    decodes every file as the CPU does."""
    import cupy

    from edgecli.decode.gpu import pngs

    free = 2 * 10**9
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (free, 4 * free))
    decoder = pngs.PngDecoder(0, 1 << 28)
    try:
        decoder.opened.result()
        fitting = int(free * pngs.PNG_MEMORY_SHARE) // (pngs.PNG_THREADS * 13)
        assert decoder.batch_for(_Size(1920, 1080)) == fitting // (1920 * 1080) == 3
        assert decoder.batch_for(_Size(64, 64)) == pngs.PNG_BATCH
        assert decoder.batch_for(_Size(20000, 20000)) == 1
    finally:
        decoder.close()
    free = 4 * 13 * pngs.PNG_THREADS * 2 * 21 * 34  # batches of two of the folder's 21x34
    folder = png_folder(tmp_path / "in")
    run_both(folder, tmp_path, on_error="skip")
