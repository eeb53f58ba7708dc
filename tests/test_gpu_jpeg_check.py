"""jpeg_check.cu on the GPU (needs CUDA): the host tests' files (tests/jpeg_check_cases.py)
through the device, statuses poisoned first; and whole runs where the JPEG decoder's check
passes every whole file (each counted as the engines', none walked on the CPU) and sends every
file damaged in its scan to the CPU, whose verdict and words it then has."""

from __future__ import annotations

import random

import pytest

import edgecli
from edgecli.decode.gpu import jpeg_check
from edgecli.decode.jpeg_header import LIBJPEG_ONLY, scan_damage
from edgecli.errors import FrameError

from .helpers import same_pixels
from .jpeg_check_cases import (
    assert_lies_refused,
    assert_never_passes_damage,
    damaged_files,
    launched,
    noise_files,
    other_encoders,
    random_plans,
    statuses,
    whole_files,
)
from .test_jpeg_scans import MUTATIONS, encode, mutate
from .turbojpeg import decode_complaint, load

pytestmark = pytest.mark.gpu

WHOLE = whole_files()


@pytest.fixture(scope="module")
def kernel(gpu):
    """jpeg_check.cu's kernel on device 0, as the decoder loads it."""
    return jpeg_check.module(0)


def check(kernel, files):
    import cupy

    return statuses(
        jpeg_check.launch_jpeg_check, kernel, files, to_device=cupy.asarray, to_host=cupy.asnumpy
    )


def test_every_whole_photo_passes(kernel):
    assert check(kernel, WHOLE).tolist() == [jpeg_check.CLEAN] * len(WHOLE)


def test_other_encoders_files_pass(kernel, tmp_path_factory):
    files = other_encoders(tmp_path_factory.mktemp("encoders"))
    found = check(kernel, list(files.values())).tolist()
    assert [n for n, s in zip(files, found, strict=True) if s != jpeg_check.CLEAN] == []


def test_noise_passes_or_is_left_to_the_cpu(kernel):
    found = check(kernel, noise_files()).tolist()
    assert set(found) <= {jpeg_check.CLEAN, jpeg_check.NO_SYNC}


def test_damaged_files_never_pass(kernel):
    bases = WHOLE[-7:]  # the large photos, two with restart intervals
    bases += [encode(s, 120, 160, r, 1) for s in ("444", "420", "gray") for r in (0, 3)]
    files = damaged_files(bases, 100, seed=42)
    complaint = decode_complaint if load() is not None else None  # else the walk judges
    passed = assert_never_passes_damage(check(kernel, files), files, complaint)
    assert passed > 100


def test_damaged_plans_are_refused(kernel):
    import cupy

    assert_lies_refused(jpeg_check.launch_jpeg_check, kernel, WHOLE[-5], cupy.asarray, cupy.asnumpy)


def test_random_plans_are_judged_without_a_fault(kernel):
    import cupy

    plans = random_plans(WHOLE[-5], 60, seed=44) + random_plans(WHOLE[0], 60, seed=45)
    found = launched(jpeg_check.launch_jpeg_check, kernel, plans, cupy.asarray, cupy.asnumpy)
    assert set(found.tolist()) <= set(jpeg_check.STATUSES)


def test_a_batch_of_1080p_frames_passes(kernel):
    """A decoder's batch: 32 1080p q95 frames, each cut between the warp's 32 lanes."""
    files = [WHOLE[-5]] * 32
    assert check(kernel, files).tolist() == [jpeg_check.CLEAN] * 32


@pytest.fixture
def engines_for_every_file(gpu, monkeypatch):
    """Every JPEG of these short runs to the engines (auto waits for JPEG_MIN_FILES)."""
    from edgecli.decode import engines
    from edgecli.decode import plan as decoders
    from edgecli.decode.gpu import jpeg as gpu_jpeg

    reason = engines.jpeg_unusable_reason("hardware")
    if reason is not None:
        pytest.skip(f"nvJPEG's hardware decoder unusable: {reason}")
    monkeypatch.setattr(decoders, "JPEG_MIN_FILES", 1)
    monkeypatch.setattr(gpu_jpeg.JpegDecoder, "ready", lambda self: self.opened.result() is None)


@pytest.mark.parametrize("check", ["1", None], ids=["checked on the GPU", "walked on the CPU"])
def test_runs_pass_whole_files_and_send_damage_to_the_cpu(
    engines_for_every_file, check, tmp_path, monkeypatch
):
    """A folder of whole 720p photos and copies damaged in their scans, in one size so that they
    share batches, and noise the check may not pass: --decode auto equals --decode cpu (pixels,
    failures and their words); every file whose scans are whole is the engines', checked on
    the GPU (EDGECLI_GPU_SCAN_CHECK=1) or walked on the CPU (the default), every damaged one
    fails as on the CPU, and every one that libjpeg-turbo reads in a way of its own
    (LIBJPEG_ONLY) is the CPU's."""
    from edgecli.decode.gpu import jpeg as gpu_jpeg

    if check is not None:
        monkeypatch.setenv(gpu_jpeg.SCAN_CHECK_ENV, check)
    rng = random.Random(43)
    folder = tmp_path / "in"
    folder.mkdir()
    whole = [encode("420", 720, 1280, 0, bool(i % 2), 90) for i in range(4)]
    files = []
    for i in range(80):
        data = whole[i % 4]
        if i % 5 == 4:
            data = mutate(data, rng.choice(["flip", "zero", "overwrite", "remove"]), rng)
        files.append(data)
    files += noise_files()
    for i, data in enumerate(files):
        (folder / f"{i:03d}.jpg").write_bytes(data)
    damaged = sum(isinstance(scan_damage(data), str) for data in files)
    own = sum(scan_damage(data) is LIBJPEG_ONLY for data in files)  # the CPU's to decode
    assert 5 < damaged < 16 and own > 0
    cpu = edgecli.process(folder, tmp_path / "cpu", backend="cuda", decode="cpu", on_error="skip")
    auto = edgecli.process(folder, tmp_path / "auto", backend="cuda", decode="auto",
                           on_error="skip")  # fmt: skip
    same_pixels(tmp_path / "cpu", tmp_path / "auto")
    assert auto.failed == cpu.failed and len(auto.failed) == damaged
    assert auto.decoders == {"nvjpeg-hw": len(files) - damaged - own, "cpu": own}
    with pytest.raises(FrameError) as on_cpu:
        edgecli.process(folder, tmp_path / "c2", backend="cuda", decode="cpu")
    with pytest.raises(FrameError) as on_gpu:
        edgecli.process(folder, tmp_path / "a2", backend="cuda", decode="auto")
    assert str(on_gpu.value) == str(on_cpu.value)


@pytest.mark.parametrize("check", ["1", None], ids=["checked on the GPU", "walked on the CPU"])
def test_damaged_jpegs_of_every_kind_decode_as_on_the_cpu(
    engines_for_every_file, check, tmp_path, monkeypatch
):
    """240 720p files damaged in their scans in every way test_jpeg_scans damages them, from
    bases of three samplings, both table kinds and two qualities: --decode auto writes the
    pixels --decode cpu writes and fails the same files, whether the GPU checks the scans or
    the CPU walks them; among them files that only libjpeg-turbo reads as cv2 does."""
    from edgecli.decode.gpu import jpeg as gpu_jpeg

    if check is not None:
        monkeypatch.setenv(gpu_jpeg.SCAN_CHECK_ENV, check)
    bases = [encode(sampling, 720, 1280, 0, optimize, quality)
             for sampling in ("420", "422", "444") for optimize in (False, True)
             for quality in (75, 95)]  # fmt: skip
    rng = random.Random(47)
    folder = tmp_path / "in"
    folder.mkdir()
    files = [mutate(rng.choice(bases), kind, rng) for kind in MUTATIONS for _ in range(40)]
    for i, data in enumerate(files):
        (folder / f"{i:03d}.jpg").write_bytes(data)
    assert sum(scan_damage(data) is LIBJPEG_ONLY for data in files) > 5
    cpu = edgecli.process(folder, tmp_path / "cpu", backend="cuda", decode="cpu", on_error="skip")
    auto = edgecli.process(folder, tmp_path / "auto", backend="cuda", decode="auto",
                           on_error="skip")  # fmt: skip
    same_pixels(tmp_path / "cpu", tmp_path / "auto")
    assert sorted(map(str, auto.failed)) == sorted(map(str, cpu.failed))
    assert auto.decoders.get("nvjpeg-hw", 0) > 100


def test_without_the_check_every_scan_is_walked_on_the_cpu(
    engines_for_every_file, tmp_path, monkeypatch
):
    """By default the kernel is never launched; with EDGECLI_GPU_SCAN_CHECK=1 it is, and the
    outputs are the same."""
    from edgecli.decode.gpu import jpeg as gpu_jpeg

    calls = []
    checked = jpeg_check.launch_jpeg_check

    def launched(*args, **kwargs):
        calls.append(len(args))
        return checked(*args, **kwargs)

    monkeypatch.setattr(jpeg_check, "launch_jpeg_check", launched)
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(8):
        (folder / f"{i}.jpg").write_bytes(WHOLE[-5])
    monkeypatch.delenv(gpu_jpeg.SCAN_CHECK_ENV, raising=False)
    off = edgecli.process(folder, tmp_path / "off", backend="cuda", decode="auto")
    assert calls == []
    monkeypatch.setenv(gpu_jpeg.SCAN_CHECK_ENV, "1")
    on = edgecli.process(folder, tmp_path / "on", backend="cuda", decode="auto")
    assert calls
    assert off.decoders == on.decoders == {"nvjpeg-hw": 8}
    same_pixels(tmp_path / "on", tmp_path / "off")
