"""JPEGs damaged in their scans through the JPEG engines (needs CUDA): each file's scans are
walked on the CPU as it is read (edgecli._native's jpeg_scan_damage), so that --decode auto
gives every whole file to the engines, fails every damaged one in the CPU decoder's words, and
leaves to the CPU every one that libjpeg-turbo alone reads as cv2 does."""

from __future__ import annotations

import random

import pytest

import edgecli
from edgecli.decode.jpeg_header import LIBJPEG_ONLY, scan_damage
from edgecli.errors import FrameError

from .helpers import same_pixels
from .test_jpeg_scans import MUTATIONS, encode, mutate, noise

pytestmark = pytest.mark.gpu


def test_runs_pass_whole_files_and_send_damage_to_the_cpu(gpu_decode, tmp_path):
    """A folder of whole 720p photos and copies damaged in their scans, in one size so that they
    share batches, and random pixels at quality 100 (every coefficient coded, with its longest
    codes): --decode auto equals --decode cpu (pixels, failures and their words); every file
    whose scans are whole is the engines', every damaged one fails as on the CPU, and every one
    that libjpeg-turbo reads in a way of its own (LIBJPEG_ONLY) is the CPU's."""
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
    files += [noise(s, h, w, opt) for s in ("444", "420") for opt in (0, 1)
              for h, w in ((96, 128), (480, 640))]  # fmt: skip
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


def test_damaged_jpegs_of_every_kind_decode_as_on_the_cpu(gpu_decode, tmp_path):
    """240 720p files damaged in their scans in every way test_jpeg_scans damages them, from
    bases of three samplings, both table kinds and two qualities: --decode auto writes the
    pixels --decode cpu writes and fails the same files; among them files that only
    libjpeg-turbo reads as cv2 does (one of them misread into DCs no encoder writes, which
    libjpeg-turbo's inverse DCT takes out of range and the engines' clamps)."""
    bases = [encode(sampling, 720, 1280, 0, optimize, quality)
             for sampling in ("420", "422", "444") for optimize in (False, True)
             for quality in (75, 95)]  # fmt: skip
    rng = random.Random(47)
    folder = tmp_path / "in"
    folder.mkdir()
    files = [mutate(rng.choice(bases), kind, rng) for kind in MUTATIONS for _ in range(40)]
    for i, data in enumerate(files):
        (folder / f"{i:03d}.jpg").write_bytes(data)
    verdicts = [scan_damage(data) for data in files]
    whole, own = verdicts.count(None), sum(v is LIBJPEG_ONLY for v in verdicts)
    assert whole > 50 and own > 5
    cpu = edgecli.process(folder, tmp_path / "cpu", backend="cuda", decode="cpu", on_error="skip")
    auto = edgecli.process(folder, tmp_path / "auto", backend="cuda", decode="auto",
                           on_error="skip")  # fmt: skip
    same_pixels(tmp_path / "cpu", tmp_path / "auto")
    assert sorted(map(str, auto.failed)) == sorted(map(str, cpu.failed))
    assert len(auto.failed) == len(files) - whole - own
    assert auto.decoders == {"nvjpeg-hw": whole, "cpu": own}
