"""--decode on a machine without a GPU: the option, its errors, and the pipeline's handling of
GPU-decoded batches with stand-in decoders (tests.standins): grouping JPEGs into batches that
share a size, sampling and orientation, handing each decoder buffer back exactly once, falling
back to the CPU for a batch the decoder refuses, and errors and outputs exactly as the CPU
decoder's. tests/test_gpu_decode.py runs the real decoders on a GPU."""

from __future__ import annotations

import json
import struct
import zlib

import cv2
import numpy as np
import pytest

from edgecli.decode import engines
from edgecli.decode import plan as decoders
from edgecli.errors import EXIT_CUDA_UNUSABLE, EXIT_USAGE, CudaUnavailableError, FrameError
from edgecli.inputs.sources import discover
from edgecli.options.params import Options
from edgecli.pipeline import reader as reader_module
from edgecli.pipeline import run

from .helpers import DATA, invoke, same_pixels
from .media import photo
from .png_corpus import chunk, chunks, encode_png
from .standins import StandInGpuBackend


def jpeg(image: np.ndarray, **params) -> bytes:
    flags = [cv2.IMWRITE_JPEG_QUALITY, 90]
    for key, value in params.items():
        flags += [getattr(cv2, key), value]
    ok, data = cv2.imencode(".jpg", image, flags)
    assert ok
    return data.tobytes()


@pytest.fixture
def folder(tmp_path):
    """JPEGs in runs of one key longer than a stand-in batch, key changes, a PNG between
    them, a progressive JPEG (CPU), one the stand-in engine refuses, and a 4:4:4 run."""
    root = tmp_path / "in"
    root.mkdir()
    for i in range(9):
        (root / f"a{i}.jpg").write_bytes(jpeg(photo(21, 34, seed=i)))
    (root / "b0.jpg").write_bytes(jpeg(photo(34, 21)))
    cv2.imwrite(str(root / "b1.png"), photo(10, 12))
    for i in range(3):
        (root / f"c{i}.jpg").write_bytes(jpeg(photo(21, 34, seed=i)))
    (root / "d0.jpg").write_bytes(jpeg(photo(21, 34), IMWRITE_JPEG_PROGRESSIVE=1))
    (root / "e0-engine-refuses.jpg").write_bytes(jpeg(photo(21, 34, seed=5)))
    for i in range(5):
        data = jpeg(photo(21, 34, seed=i), IMWRITE_JPEG_SAMPLING_FACTOR=0x111111)
        (root / f"f{i}.jpg").write_bytes(data)
    return root


def stand_in_run(source, out, **fields):
    options = Options(**fields)
    backend = StandInGpuBackend(options)
    decoded = []
    real = backend.gpu_decoders

    def watched(options, sources):
        opener = real(options, sources)
        if opener is None:
            return None

        def opened():
            gpu = opener()
            decoded.append(gpu.jpeg)
            return gpu

        return opened

    backend.gpu_decoders = watched
    return run(source, out, options, backend=backend), decoded


@pytest.mark.parametrize("files_a_read", [1, 3, reader_module.FILES_A_READ])
def test_stand_in_gpu_decoding_gives_the_cpu_frames(folder, tmp_path, monkeypatch, files_a_read):
    """Whatever the files a read task takes, the batches are the same, in order."""
    monkeypatch.setattr(reader_module, "FILES_A_READ", files_a_read)
    run(folder, tmp_path / "cpu", Options(backend="cpu"))
    summary, decoders_used = stand_in_run(folder, tmp_path / "gpu")
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    # 18 JPEGs the stand-in engine decodes, and on the CPU: the PNG, the progressive file
    # and the batch of the refused one (which is alone in its batch: its neighbours differ).
    assert summary.decoders == {"cpu": 3, "stand-in-jpeg": 18}
    batches = decoders_used[0].batches
    assert [len(b.names) for b in batches] == [4, 4, 1, 1, 3, 1, 4, 1]
    assert all(b.handed_back == 1 for b in batches)


def test_stand_in_decode_cpu_decodes_everything_on_the_cpu(folder, tmp_path):
    summary, decoders_used = stand_in_run(folder, tmp_path / "gpu", decode="cpu")
    assert summary.decoders == {"cpu": 21} and decoders_used == []


def test_damaged_files_fail_as_on_the_cpu(folder, tmp_path):
    """Truncated, empty and garbled JPEGs give the GPU path the CPU's failures and errors."""
    whole = (folder / "a0.jpg").read_bytes()
    (folder / "a1.jpg").write_bytes(whole[: len(whole) // 2])  # truncated: no EOI
    (folder / "a2.jpg").write_bytes(b"")
    garbled = bytearray(whole)  # a stray marker mid-scan, EOI intact: the engines decode it
    middle = (whole.index(b"\xff\xda") + len(whole)) // 2
    garbled[middle : middle + 2] = b"\xff\x37"
    (folder / "c2.jpg").write_bytes(garbled)
    cpu = run(folder, tmp_path / "cpu", Options(backend="cpu", on_error="skip"))
    gpu, _ = stand_in_run(folder, tmp_path / "gpu", on_error="skip")
    assert gpu.failed == cpu.failed and len(gpu.failed) == 3
    assert cpu.failed[2]["reason"].startswith("corrupt JPEG data (")
    assert "marker 0x37" in cpu.failed[2]["reason"]
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    with pytest.raises(FrameError) as on_cpu:
        run(folder, tmp_path / "cpu2", Options(backend="cpu"))
    with pytest.raises(FrameError) as on_gpu:
        stand_in_run(folder, tmp_path / "gpu2")
    assert str(on_gpu.value) == str(on_cpu.value)
    assert not [p for p in (tmp_path / "gpu2").iterdir() if p.suffix == ".tmp"]


def test_skip_existing_decodes_only_what_is_missing(folder, tmp_path):
    out = tmp_path / "out"
    stand_in_run(folder, out)
    for name in ("a3.png", "a4.png", "f1.png"):
        (out / name).unlink()
    again, used = stand_in_run(folder, out, skip_existing=True)
    assert again.frames == 3 and again.skipped_existing == 18
    assert sum(len(b.names) for b in used[0].batches) == 3
    run(folder, tmp_path / "cpu", Options(backend="cpu"))
    same_pixels(tmp_path / "cpu", out)


def test_decode_option_is_validated():
    with pytest.raises(ValueError, match="decode must be one of"):
        Options(decode="nvdec")
    result = invoke("run", "x", "-o", "y", "--decode", "nvdec")
    assert result.exit_code == EXIT_USAGE and "'nvdec' is not one of" in result.output


def test_decode_gpu_on_the_cpu_backend_is_exit_4(folder, tmp_path):
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "--decode", "gpu")
    assert result.exit_code == EXIT_CUDA_UNUSABLE
    assert result.output.strip().splitlines()[-1] == (
        "Error: --decode gpu needs the CUDA backend, not --backend cpu"
    )
    assert not out.exists()


def test_decode_gpu_without_cuda_names_what_is_missing(folder, tmp_path, monkeypatch):
    """--backend auto falls back to the CPU where CUDA cannot run; --decode gpu then cannot."""
    monkeypatch.setattr(
        "edgecli.edges.backends.cuda_unusable_reason",
        lambda device=0, options=None: "no CUDA device",
    )
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--decode", "gpu")
    assert result.exit_code == EXIT_CUDA_UNUSABLE
    assert result.output.strip().splitlines()[-1] == (
        "Error: --decode gpu needs the CUDA backend: no CUDA device"
    )
    assert not out.exists()


def test_decode_gpu_where_no_gpu_decoder_runs_names_what_is_missing(folder, monkeypatch):
    """Without JPEG engines or NVDEC, --decode gpu on JPEGs fails naming both; PNGs it can
    still decode (their decoder is CUDA kernels), so a run with PNGs goes on."""
    monkeypatch.setattr(engines, "jpeg_unusable_reason", lambda backend, **_: f"no {backend}")
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: "no NVDEC library")
    assert decoders.plan(Options(decode="gpu"), discover(str(folder))).png
    (folder / "b1.png").unlink()
    with pytest.raises(CudaUnavailableError) as error:
        decoders.plan(Options(decode="gpu"), discover(str(folder)))
    assert str(error.value) == (
        "--decode gpu: no GPU decoder can run here; JPEG: no hardware; video: no NVDEC library"
    )


def chosen(options, sources) -> dict | None:
    """What plan() sends to the GPU for a run of ``sources``, or None: nothing."""
    decided = decoders.plan(options, sources)
    if decided is None:
        return None
    return {"jpeg": decided.jpeg_backend, "video": decided.video, "notice": decided.notice}


def test_decode_gpu_takes_the_cuda_backend_only_without_engines(folder, monkeypatch):
    monkeypatch.setattr(
        engines, "jpeg_unusable_reason", lambda b, **_: "no engines" if b == "hardware" else None
    )
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: None)
    sources = discover(str(folder))
    assert chosen(Options(decode="gpu"), sources) == {
        "jpeg": "cuda", "video": False, "notice": None,
    }  # fmt: skip


def test_decode_gpu_on_videos_only_does_not_wait_for_the_jpeg_engines(tmp_path, monkeypatch):
    """Opening the JPEG engines takes 0.6-0.9 s: --decode gpu asks for them where there are
    JPEGs (or nothing NVDEC decodes), not for a run of videos only (files, globs or a folder),
    before listing (by the INPUTs' names) or after; without NVDEC, that run names only what
    it lacks."""
    asked = []
    monkeypatch.setattr(engines, "jpeg_unusable_reason", lambda b, **_: asked.append(b))
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: None)
    clip = tmp_path / "clip.mp4"
    clip.write_bytes((DATA / "pan_h264.mp4").read_bytes())
    gpu = Options(decode="gpu")
    assert chosen(gpu, discover(str(clip))) == {"jpeg": None, "video": True, "notice": None}
    assert asked == []
    assert not decoders.engines_wanted(gpu, [str(clip), str(tmp_path / "more" / "*.MOV")])
    assert not decoders.engines_wanted(gpu, [str(clip), str(tmp_path)])  # a folder of videos
    (tmp_path / "still.jpg").write_bytes(jpeg(photo(5, 6)))
    assert decoders.engines_wanted(gpu, [str(clip), str(tmp_path)])  # a folder with an image
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: "no NVDEC library")
    with pytest.raises(CudaUnavailableError) as error:
        decoders.plan(gpu, discover(str(clip)))
    assert str(error.value) == "--decode gpu: no GPU decoder can run here; video: no NVDEC library"
    assert asked == []
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: None)
    assert chosen(gpu, discover(str(tmp_path / "*"))) == {
        "jpeg": "hardware", "video": True, "notice": None,
    }  # fmt: skip
    assert asked == ["hardware"]


def test_decode_gpu_on_pngs_does_not_wait_for_the_jpeg_engines(tmp_path, monkeypatch):
    """PNGs decode on CUDA kernels: --decode gpu asks for the JPEG engines, whose opening
    takes the better part of a second, only once a JPEG is among the files, before listing
    (by the INPUTs' names) or after."""
    asked = []
    monkeypatch.setattr(engines, "_opening", {})  # no decoder opened by an earlier test
    monkeypatch.setattr(engines, "jpeg_unusable_reason", lambda b, **_: asked.append(b))
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: "no NVDEC library")
    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        assert cv2.imwrite(str(folder / f"f{i}.png"), photo(6, 5, seed=i))
    gpu = Options(decode="gpu")
    assert not decoders.engines_wanted(gpu, [str(folder)])
    assert not decoders.engines_wanted(gpu, [str(folder / "*.png")])
    planned = decoders.plan(gpu, discover(str(folder)))
    assert planned.png and planned.jpeg_backend is None
    assert asked == []
    (folder / "g.jpg").write_bytes(jpeg(photo(5, 6)))
    assert decoders.engines_wanted(gpu, [str(folder)])
    assert decoders.plan(gpu, discover(str(folder))).jpeg_backend == "hardware"
    assert asked == ["hardware"]


def test_auto_sends_jpegs_to_the_engines_only_in_long_runs(folder, monkeypatch):
    """Opening the engines costs about a second: auto uses them from JPEG_MIN_FILES JPEGs on
    (and never asks nvJPEG's CUDA backend, which is not exact)."""
    monkeypatch.setattr(engines, "nvjpeg_missing", lambda: None)
    sources = discover(str(folder))
    assert len(sources) == 21 and chosen(Options(), sources) is None  # 20 JPEGs
    monkeypatch.setattr(decoders, "JPEG_MIN_FILES", 21)
    assert chosen(Options(), sources) is None
    monkeypatch.setattr(decoders, "JPEG_MIN_FILES", 20)
    assert chosen(Options(), sources) == {
        "jpeg": "hardware", "video": False, "notice": None,
    }  # fmt: skip
    monkeypatch.setattr(engines, "nvjpeg_missing", lambda: "libnvjpeg is not installed")
    assert chosen(Options(), sources) is None


def test_auto_keeps_jpegs_on_the_cpu_where_their_scans_cannot_be_judged(
    folder, tmp_path, monkeypatch
):
    """Without edgecli._native's walk of a JPEG's Huffman codes, damage libjpeg-turbo reads in
    a way of its own passes for whole, and the engines would give such a file other pixels:
    auto then keeps JPEGs on the CPU, before listing and after, and says why where the run has
    another GPU decoder; --decode gpu still asks for the engines."""
    from edgecli import native

    asked = []
    monkeypatch.setattr(engines, "_opening", {})
    monkeypatch.setattr(engines, "open_jpeg_decoder", lambda b, d: asked.append(b))
    monkeypatch.setattr(engines, "nvjpeg_missing", lambda: None)
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: None)
    monkeypatch.setattr(decoders, "JPEG_MIN_FILES", 20)
    (folder / "clip.mp4").write_bytes((DATA / "nvdec_250x142.mp4").read_bytes())
    sources = discover(str(folder))
    assert chosen(Options(), sources) == {"jpeg": "hardware", "video": True, "notice": None}
    assert decoders.engines_wanted(Options(), [str(folder)])
    monkeypatch.setattr(native, "c", None)
    assert chosen(Options(), sources) == {
        "jpeg": None,
        "video": True,
        "notice": "decoding on the CPU: JPEG: edgecli._native, which reads a JPEG's scans as "
        "libjpeg-turbo does, is not built",
    }
    assert not decoders.engines_wanted(Options(), [str(folder)])
    decoders.open_early(Options(), sources=sources)
    decoders.open_early(Options(), inputs=[str(folder)])
    assert asked == []
    assert decoders.engines_wanted(Options(decode="gpu"), [str(folder)])
    decoders.open_early(Options(decode="gpu"), sources=sources)
    assert asked == ["hardware"]


def test_json_summary_names_the_decoders(folder, tmp_path):
    summary, _ = stand_in_run(folder, tmp_path / "gpu")
    data = json.loads(summary.dumps())
    assert data["decoders"] == {"cpu": 3, "stand-in-jpeg": 18}
    assert "decode_lanes" not in data


def test_a_stop_mid_run_finishes_what_is_in_flight(folder, tmp_path):
    """SIGINT's stop with GPU decoding: the batches decoding are finished, nothing new is
    started, and every PNG in the folder is whole (no temporaries left)."""
    import threading

    for i in range(40):
        (folder / f"g{i:02d}.jpg").write_bytes(jpeg(photo(21, 34, seed=i)))
    stop = threading.Event()
    out = tmp_path / "gpu"
    options = Options()
    backend = StandInGpuBackend(options, max_delay_s=0.01)
    seen = []

    def compute(frames):
        seen.append(len(frames))
        if sum(seen) >= 8:
            stop.set()
        return StandInGpuBackend(options).compute(frames)

    backend.compute = compute
    summary = run(folder, out, options, backend=backend, stop=stop)
    assert summary.interrupted and 8 <= summary.frames < 61
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]
    written = sorted(p.name for p in out.glob("*.png"))
    assert len(written) == summary.frames
    reference = tmp_path / "cpu"
    run(folder, reference, Options(backend="cpu"))
    for name in written:
        want = cv2.imread(str(reference / name), cv2.IMREAD_UNCHANGED)
        assert np.array_equal(cv2.imread(str(out / name), cv2.IMREAD_UNCHANGED), want), name


def test_info_names_the_gpu_decoders_or_why_not(monkeypatch):
    from edgecli.cli.info import decoder_lines

    monkeypatch.setattr(engines, "jpeg_unusable_reason", lambda backend: "no JPEG engines")
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: "no libnvcuvid.so.1")
    assert decoder_lines() == [
        "jpeg decoding (--decode auto): CPU (no JPEG engines)",
        "video decoding (--decode auto): CPU (no libnvcuvid.so.1)",
        "png decoding (--decode auto): CPU; GPU under --decode gpu (edgecli's inflate and "
        "unfilter kernels)",
    ]


def test_info_keeps_jpegs_on_the_cpu_without_the_scan_walk(monkeypatch):
    from edgecli import native
    from edgecli.cli.info import decoder_lines

    monkeypatch.setattr(engines, "jpeg_unusable_reason", lambda backend: None)
    monkeypatch.setattr(engines, "video_unusable_reason", lambda: "no libnvcuvid.so.1")
    monkeypatch.setattr(native, "c", None)
    assert decoder_lines()[0] == (
        "jpeg decoding (--decode auto): CPU (edgecli._native, which reads a JPEG's scans as "
        "libjpeg-turbo does, is not built)"
    )


def test_batches_of_large_frames_hold_fewer_files(tmp_path):
    """A decoded batch is held to a number of pixels (GPU memory stays that of its ring of
    batches, whatever the frame size): 4 small files a stand-in batch, but 2 of 1500 pixels
    and 1 of 2400, then the CPU's frames all the same."""
    root = tmp_path / "in"
    root.mkdir()
    for i, (h, w) in enumerate([(30, 50)] * 5 + [(40, 60)] * 3):
        (root / f"{i}.jpg").write_bytes(jpeg(photo(h, w, seed=i)))
    summary, used = stand_in_run(root, tmp_path / "gpu")
    assert [len(b.names) for b in used[0].batches] == [2, 2, 1, 1, 1, 1]
    run(root, tmp_path / "cpu", Options(backend="cpu"))
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")


def png_folder(root):
    """PNGs of three layouts in runs longer than a stand-in batch, a turned one (eXIf), and
    those the GPU's PNG decoder leaves to the CPU: interlaced, damaged chunks, an image the
    stand-in engine refuses; JPEGs between them."""
    root.mkdir()
    for i in range(6):
        cv2.imwrite(str(root / f"a{i}.png"), photo(21, 34, seed=i))
    cv2.imwrite(str(root / "b0.jpg"), photo(21, 34))
    for i in range(5):
        gray = cv2.cvtColor(photo(13, 9, seed=i), cv2.COLOR_BGR2GRAY).astype(np.uint16) * 257
        cv2.imwrite(str(root / f"c{i}.png"), gray)
    samples = (np.arange(21 * 34 * 3) % 251).reshape(21, 34, 3).astype(np.uint16)
    (root / "d0.png").write_bytes(encode_png(samples, 2, 8, after=[exif_chunk(6)]))
    (root / "d1.png").write_bytes(encode_png(samples, 2, 8, interlaced=True))
    whole = (root / "a0.png").read_bytes()
    (root / "e0.png").write_bytes(whole[: len(whole) // 2])
    (root / "e1-engine-refuses.png").write_bytes(whole)
    return root


def exif_chunk(orientation: int) -> bytes:
    tiff = b"MM" + struct.pack(">HIH", 42, 8, 1)
    tiff += struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    return chunk(b"eXIf", tiff)


def test_decode_gpu_sends_pngs_to_the_png_decoder_in_batches_of_one_layout(tmp_path):
    """Under --decode gpu each PNG the GPU decodes exactly goes to its decoder in batches of
    one layout and turn, the rest to the CPU, and the outputs and errors are the CPU's."""
    folder = png_folder(tmp_path / "in")
    cpu = run(folder, tmp_path / "cpu", Options(backend="cpu", on_error="skip"))
    options = Options(decode="gpu", on_error="skip")
    backend = StandInGpuBackend(options)
    used = []
    real = backend.gpu_decoders

    def watched(options, sources):
        opener = real(options, sources)

        def opened():
            used.append(opener())
            return used[-1]

        return opened

    backend.gpu_decoders = watched
    gpu = run(folder, tmp_path / "gpu", options, backend=backend)
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    assert gpu.failed == cpu.failed and [f["source"] for f in gpu.failed] == [
        str(folder / "e0.png")
    ]
    # a0-a5 and c0-c4 in batches of 4 at most, d0 alone; d1 (interlaced) and e1 (refused with
    # its batch, alone) on the CPU with the JPEG... which the JPEG stand-in takes.
    assert gpu.decoders == {"stand-in-png": 12, "stand-in-jpeg": 1, "cpu": 2}
    batches = used[0].png.batches
    assert [len(b.names) for b in batches] == [4, 2, 4, 1, 1, 1]
    assert all(b.handed_back == 1 for b in batches)


def test_files_a_gpu_batch_hands_back_fail_in_the_order_of_the_sources(tmp_path):
    """A PNG whose chunks are whole but whose image data is not goes to the GPU's decoder and
    fails only when its batch hands it back to the CPU, after a damaged file read after it has
    failed: the summary lists the failures in the order of the files all the same."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        cv2.imwrite(str(folder / f"a{i}.png"), photo(21, 34, seed=i))
    whole = (folder / "a0.png").read_bytes()
    at, _, length = next(c for c in chunks(whole) if c[1] == b"IDAT")
    broken = bytearray(whole)
    broken[at + 8 + length // 2] ^= 0xFF
    crc = zlib.crc32(bytes(broken[at + 4 : at + 8 + length]))
    broken[at + 8 + length : at + 12 + length] = struct.pack(">I", crc)
    (folder / "a1.png").write_bytes(bytes(broken))  # CRCs whole: only the decoder finds it
    (folder / "b0.png").write_bytes(whole[: len(whole) // 2])  # cut: refused when read
    cpu = run(folder, tmp_path / "cpu", Options(backend="cpu", on_error="skip"))
    options = Options(decode="gpu", on_error="skip")
    gpu = run(folder, tmp_path / "gpu", options, backend=StandInGpuBackend(options))
    assert [f["source"] for f in cpu.failed] == [str(folder / n) for n in ("a1.png", "b0.png")]
    assert gpu.failed == cpu.failed
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")


def test_pngs_read_for_the_gpu_reuse_their_buffers_and_keep_their_bytes(tmp_path, monkeypatch):
    """A folder of many more PNGs than a run holds at once, read for the GPU's decoder into
    buffers used again once their batch is decoded: the outputs are the CPU's (a buffer lent
    again too soon would give a batch another file's bytes), and far fewer buffers are made
    than there are files."""
    from edgecli import native

    if native.c is None:
        pytest.skip("edgecli._native is not built: PNGs are read into bytes of their own")
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(360):
        cv2.imwrite(str(folder / f"a{i:03}.png"), photo(21, 34, seed=i))
    made = []
    real = native.c.uninitialized
    monkeypatch.setattr(native.c, "uninitialized", lambda size: made.append(size) or real(size))
    options = Options(decode="gpu", workers=2, batch=4)
    summary = run(folder, tmp_path / "gpu", options, backend=StandInGpuBackend(options))
    assert summary.decoders == {"stand-in-png": 360}
    run(folder, tmp_path / "cpu", Options(backend="cpu"))
    same_pixels(tmp_path / "cpu", tmp_path / "gpu")
    assert 0 < len(made) <= 120  # a run holds some 70 of them at once
