"""JPEG files for jpeg_check.cu's tests, on the host (tests/test_jpeg_check.py) and on the GPU
(tests/test_gpu_jpeg_check.py): whole files, files damaged in their scans every way
tests/test_jpeg_scans.py damages them, and the checks both make of the kernel's statuses."""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from edgecli import native
from edgecli.decode.gpu import jpeg_check
from edgecli.decode.jpeg_header import scan_damage

from .media import photo
from .test_jpeg_scans import MUTATIONS, SAMPLINGS, encode, marked, mutate, noise

ROOT = Path(__file__).resolve().parent.parent
POISON = -7  # in every status before a launch: a file the kernel never judged keeps it

# Runs a launch: (files, plans) -> statuses (host arrays in, a host array out).
Check = Callable[[list[bytes], list[bytes]], np.ndarray]


def plan(data: bytes) -> bytes | str | None:
    return native.c.jpeg_scan_plan(data)


def statuses(launch, kernel, files: list[bytes], to_device=np.asarray, to_host=np.asarray):
    """The kernel's status of each of ``files`` (each must have a plan), through
    ``launch_jpeg_check`` as the decoder calls it; the status buffer poisoned first."""
    plans = [plan(f) for f in files]
    assert all(isinstance(p, bytes) for p in plans)
    return launched(launch, kernel, plans, to_device, to_host)


def launched(launch, kernel, plans: list[bytes], to_device=np.asarray, to_host=np.asarray):
    """The kernel's status of each of ``plans``, the status buffer poisoned first."""
    packed, starts = jpeg_check.pack_plans(plans)
    found = to_device(np.full(len(plans), POISON, np.int32))
    launch(kernel, to_device(packed), to_device(starts), found)
    found = to_host(found)
    assert POISON not in found.tolist()
    return found


def whole_files() -> list[bytes]:
    """Photos libjpeg-turbo decodes without a word, every one planned: the sample frames and
    test data (those of a single scan), every sampling, size and restart interval (none, 1 and
    3 MCUs) of tests/test_jpeg_scans.py, two larger ones with restart intervals, and large
    photos at several qualities, up to 1080p (a scan of about 30 lanes): the last five."""
    files = [p.read_bytes() for p in sorted(ROOT.glob("sample_frames/*.jpg"))]
    files += [p.read_bytes() for p in sorted(ROOT.glob("tests/data/*.jpg"))]
    sizes = [(1, 1), (1, 37), (37, 1), (17, 33), (120, 160)]
    files += [
        encode(sampling, height, width, restarts, optimize)
        for sampling, (height, width), restarts, optimize in itertools.product(
            SAMPLINGS, sizes, (0, 1, 3), (0, 1)
        )
    ]
    # Photos large enough that a scan is cut between many lanes; with a restart interval of a
    # 1080p frame's MCU row, and of every MCU, shared between them interval by interval.
    files += [encode("420", 1080, 1920, 120, False, 95, seed=7),
              encode("444", 480, 640, 1, False, 90, seed=8)]  # fmt: skip
    files += [
        encode(sampling, height, width, 0, False, quality, seed=seed)
        for seed, (sampling, (height, width), quality) in enumerate(
            [
                ("420", (1080, 1920), 95),
                ("444", (720, 1280), 75),
                ("422", (480, 854), 100),
                ("gray", (1080, 1920), 90),
                ("440", (600, 800), 50),
            ]
        )
    ]
    return [f for f in files if isinstance(plan(f), bytes)]


def other_encoders(folder: Path) -> dict[str, bytes]:
    """JPEGs that other encoders write, by name: Pillow's (every subsampling, qualities 50 to
    100, optimized tables or not) and, where imageio-ffmpeg is installed, FFmpeg's mjpeg
    encoder's frames of a clip (yuvj420p with optimal and default tables, yuvj422p at
    1366x768, yuvj444p, gray)."""
    import io
    import subprocess

    from PIL import Image  # (Pillow comes with imageio)

    from .helpers import H264_CLIP
    from .png_corpus import ffmpeg_exe

    found = {}
    image = cv2.cvtColor(photo(1080, 1920, seed=5), cv2.COLOR_BGR2RGB)
    for sub, quality, optimize in itertools.product((0, 1, 2), (50, 90, 100), (False, True)):
        out = io.BytesIO()
        Image.fromarray(image).save(
            out, "JPEG", quality=quality, subsampling=sub, optimize=optimize
        )
        found[f"pillow {sub} q{quality} {'optimized' if optimize else 'standard'}"] = out.getvalue()
    try:
        ffmpeg = ffmpeg_exe()
    except ImportError:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    kinds = {
        "ffmpeg yuvj420p": ["-q:v", "2"],
        "ffmpeg yuvj420p default tables": ["-q:v", "10", "-huffman", "default"],
        "ffmpeg yuvj422p 1366x768": ["-vf", "scale=1366:768", "-pix_fmt", "yuvj422p"],
        "ffmpeg yuvj444p": ["-pix_fmt", "yuvj444p", "-q:v", "3"],
        "ffmpeg gray": ["-pix_fmt", "gray"],
    }
    for i, (name, args) in enumerate(kinds.items()):
        pattern = folder / f"k{i}_%02d.jpg"
        subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(H264_CLIP), "-frames:v", "3",
                        *args, str(pattern)], check=True)  # fmt: skip
        for j in range(1, 4):
            found[f"{name} {j}"] = (folder / f"k{i}_{j:02d}.jpg").read_bytes()
    return found


def noise_files() -> list[bytes]:
    """Random pixels at quality 100, 96x128 to 480x640: nearly every coefficient coded, with
    its longest codes and most magnitude bits, where a lane's guessed decoding may take tens
    of kilobits to fall into step with the true one, or never within the grid."""
    files = [noise(s, h, w, opt) for s in ("444", "420") for opt in (0, 1) for h, w in
             ((96, 128), (480, 640))]  # fmt: skip
    return [f for f in files if isinstance(plan(f), bytes)]


def damaged_files(bases: list[bytes], per_kind: int, seed: int) -> list[bytes]:
    """``per_kind`` files damaged each of tests/test_jpeg_scans.py's ways, and as many with a
    marker put into their scans, from ``bases``: those with a plan."""
    rng = random.Random(seed)
    files = [mutate(rng.choice(bases), kind, rng) for kind in MUTATIONS for _ in range(per_kind)]
    files += [marked(rng.choice(bases), rng) for _ in range(per_kind)]
    return [f for f in files if isinstance(plan(f), bytes)]


def assert_never_passes_damage(found: np.ndarray, files: list[bytes], complaint=None) -> int:
    """Every file the kernel passed is one edgecli's own walk passes, and libjpeg-turbo decodes
    without a word (``complaint``, where libturbojpeg is there: tests/test_jpeg_scans.py holds
    the walk to it); the count passed."""
    passed = [f for f, s in zip(files, found.tolist(), strict=True) if s == jpeg_check.CLEAN]
    for data in passed:
        assert complaint is None or complaint(data) is None
        assert scan_damage(data) is None
    assert set(found.tolist()) <= set(jpeg_check.STATUSES)
    return len(passed)


def assert_lies_refused(launch, kernel, data: bytes, to_device=np.asarray, to_host=np.asarray):
    """Plans of ``data`` that lie (tables with no codes, a wrong magic, blocks past the limit,
    more data than the plan holds, more MCUs than the scan holds, a plan cut short) are all
    refused, and the kernel ends (a table of no codes fails every step: its loop must still
    end)."""
    base = bytearray(plan(data))
    empty = bytearray(base)
    for t in range(8):  # every table: no code of any length
        at = 48 + t * 2448
        empty[at : at + 2048] = bytes(2048)
        empty[at + 2048 : at + 2048 + 72] = struct.pack("<18i", *([-1] * 17 + [0xFFFFF]))
    wrong = [
        bytes(empty),
        b"XXXX" + bytes(base[4:]),
        bytes(base[:8]) + struct.pack("<I", 13) + bytes(base[12:]),
        bytes(base[:12]) + struct.pack("<I", len(base)) + bytes(base[16:]),
        bytes(base[:4]) + struct.pack("<I", 10**8) + bytes(base[8:]),
        bytes(base[:4096]),
    ]
    found = launched(launch, kernel, wrong, to_device, to_host).tolist()
    assert jpeg_check.CLEAN not in found
    assert found[1:4] == [jpeg_check.BAD_PLAN] * 3 and found[5] == jpeg_check.BAD_PLAN


def random_plans(data: bytes, count: int, seed: int) -> list[bytes]:
    """``count`` plans made from ``data``'s by random damage to their header fields, tables and
    scan data (bytes overwritten, a field set to a random or extreme value), then some cut short
    or grown, each still a multiple of 8 long: no file's, to be judged without a fault."""
    rng = random.Random(seed)
    base = plan(data)
    extreme = [0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]
    made = []
    for _ in range(count):
        p = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            kind = rng.randrange(3)
            if kind == 0:  # a header field
                field = rng.randrange(6)
                value = rng.choice(extreme + [rng.getrandbits(32)])
                p[4 * field : 4 * field + 4] = value.to_bytes(4, "little")
            elif kind == 1:  # the tables' bytes
                at = rng.randrange(24, jpeg_check.PLAN_BYTES - 8)
                p[at : at + 8] = rng.randbytes(8)
            else:  # the scan's data
                at = rng.randrange(jpeg_check.PLAN_BYTES, len(p) - 64)
                p[at : at + 64] = rng.randbytes(64)
        header = jpeg_check.PLAN_BYTES
        cut = rng.choice([None, None, header - 8, header, len(p) // 2])
        if cut is not None:
            p = p[: cut - cut % 8]
        elif rng.random() < 0.3:
            p += bytes(8 * rng.randint(1, 64))
        made.append(bytes(p))
    return made
