"""jpeg_check.cu's real kernel, built for the CPU (tests/cuda_host.py) and launched through
edgecli.decode.gpu.jpeg_check as the decoder launches it: it passes every whole file planned
for it, and no file that libjpeg-turbo warns of (its own decoder, through libturbojpeg, is the
judge), under several orders of a block's threads; and the plans edgecli._native makes."""

from __future__ import annotations

import itertools
import re
import struct

import pytest

from edgecli import native
from edgecli.decode.gpu import jpeg_check
from edgecli.decode.jpeg_header import scan_damage, scan_plan
from tests import cuda_host

from .jpeg_check_cases import (
    assert_lies_refused,
    assert_never_passes_damage,
    damaged_files,
    launched,
    noise_files,
    other_encoders,
    plan,
    random_plans,
    statuses,
    whole_files,
)
from .test_jpeg_scans import encode, generated

WHOLE = whole_files()


@pytest.fixture(scope="session")
def host_kernel(tmp_path_factory):
    if native.c is None:
        pytest.skip("edgecli._native is not built: no plans to check")
    name = jpeg_check.KERNEL
    return cuda_host.for_tests(tmp_path_factory, "jpeg_check", (name,))[name]


@pytest.fixture(params=["forward", "reverse", 20261205])
def kernel(host_kernel, request):
    """The host build, its block's threads run in each order: results may not depend on it."""
    host_kernel.order = request.param
    yield host_kernel
    host_kernel.order = "forward"


def check(kernel, files):
    return statuses(jpeg_check.launch_jpeg_check, kernel, files)


def test_every_whole_photo_passes(kernel, complaint):
    """Whole photos of every sampling, size, quality and table choice, from 1x1 to 1080p: all
    passed, so none of them costs the CPU's walk."""
    assert len(WHOLE) > 150
    assert all(complaint(f) is None for f in WHOLE)
    found = check(kernel, WHOLE)
    assert found.tolist() == [jpeg_check.CLEAN] * len(WHOLE)


def test_damaged_files_never_pass(kernel, complaint):
    """Files damaged in their scans every way (bytes overwritten, zeroed, a bit flipped, cut
    short, bytes put in or taken out, markers put in), small and cut between many lanes: the
    kernel passes only those libjpeg-turbo decodes without a word, and finds most of the rest."""
    bases = WHOLE[-7:]  # the large photos, two with restart intervals
    bases += [encode(s, 120, 160, r, 1) for s in ("444", "420", "gray") for r in (0, 3)]
    files = damaged_files(bases, 40, seed=41)
    found = check(kernel, files)
    passed = assert_never_passes_damage(found, files, complaint)
    warned = sum(complaint(f) is not None for f in files)
    assert warned > len(files) // 2
    assert passed > (len(files) - warned) // 2  # damage libjpeg-turbo does not see passes too


def test_other_encoders_files_pass(kernel, complaint, tmp_path_factory):
    """JPEGs that Pillow and FFmpeg write, not edgecli's own test encoder: every one planned
    and passed, and libjpeg-turbo says nothing of them."""
    files = other_encoders(tmp_path_factory.mktemp("encoders"))
    assert len(files) >= 18
    names, datas = list(files), list(files.values())
    assert all(complaint(data) is None for data in datas)
    found = check(kernel, datas).tolist()
    assert [n for n, s in zip(names, found, strict=True) if s != jpeg_check.CLEAN] == []


def test_noise_passes_or_is_left_to_the_cpu(kernel, complaint):
    """Random pixels at quality 100, the slowest to fall into step: each passes, or comes back
    saying no lane met the next (the CPU then walks it); none is refused for anything else."""
    files = noise_files()
    found = check(kernel, files).tolist()
    assert set(found) <= {jpeg_check.CLEAN, jpeg_check.NO_SYNC}
    assert found.count(jpeg_check.CLEAN) >= len(files) // 2
    assert all(complaint(f) is None for f in files)


def test_the_end_of_the_scan(kernel, complaint):
    """What follows the last MCU: bytes before EOI are not passed (libjpeg-turbo may count them
    as extraneous), nor a scan cut short; data after EOI is libjpeg-turbo's to ignore, and
    passes; a marker other than EOI after the scan's data gets no plan (the CPU walks it)."""
    data = WHOLE[-5]
    after = data + b"trailing bytes"
    files = [
        after,
        data[:-2] + b"\x00" + data[-2:],
        data[: len(data) // 2] + b"\xff\xd9",
        data[:-3] + data[-2:],
    ]
    found = check(kernel, files).tolist()
    assert found[0] == jpeg_check.CLEAN and complaint(after) is None
    assert jpeg_check.CLEAN not in found[1:]
    for marked in (b"\xff\xfe\x00\x04ab", b"\xff\xd0", b"\xff\xc4\x00\x02"):
        other = data[:-2] + marked + data[-2:]
        assert plan(other) is None and scan_plan(other) == scan_damage(other)


def test_a_1080p_scan_is_cut_between_many_lanes(kernel):
    """A 1080p q95 frame's scan (about 500 KB) is cut between 30 lanes (16 KB each at least),
    and passes; so does a batch of it with files of one lane."""
    assert len(plan(WHOLE[-5])) > 30 * 16384
    found = check(kernel, [WHOLE[-5], WHOLE[0], WHOLE[-5], WHOLE[1]])
    assert found.tolist() == [jpeg_check.CLEAN] * 4


def test_plans_fit_the_kernel_and_give_the_walks_verdict_before_the_scan():
    """A plan is PLAN_BYTES of header and tables, then the scan's data without its stuffed
    zeros, padded to a multiple of 8; it counts the scan's MCUs; a file whose header the walk
    finds damaged gets the same words from the plan; restart intervals, progressive files and
    files of several scans get no plan (the CPU walks them)."""
    if native.c is None:
        pytest.skip("edgecli._native is not built")
    assert native.c.jpeg_plan_bytes() == jpeg_check.PLAN_BYTES
    data = encode("420", 120, 160, 0, True)
    made = plan(data)
    magic, mcus, blocks, data_bytes, restart, intervals = struct.unpack_from("<6I", made)
    sos = data.index(b"\xff\xda")
    scan = data[sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big") : -2]
    unstuffed = scan.replace(b"\xff\x00", b"\xff")
    assert (mcus, blocks, data_bytes, restart, intervals) == (80, 6, len(unstuffed), 0, 1)
    body = made[jpeg_check.PLAN_BYTES + 8 :]  # after the one interval's offset, 0
    assert made[jpeg_check.PLAN_BYTES : jpeg_check.PLAN_BYTES + 8] == bytes(8)
    assert body[:data_bytes] == unstuffed and set(body[data_bytes:]) == {0}
    assert len(made) % 8 == 0 and 8 <= len(body) - data_bytes < 16
    # A restart interval of 3 MCUs: 27 intervals, each at its offset in the data without its
    # stuffed zeros and restart markers (RST0, RST1, ... RST7, RST0, ...).
    restarted = encode("420", 120, 160, 3, True)
    made = plan(restarted)
    mcus, blocks, data_bytes, restart, intervals = struct.unpack_from("<5I", made, 4)
    assert (mcus, blocks, restart, intervals) == (80, 6, 3, 27)
    sos = restarted.index(b"\xff\xda")
    scan = restarted[sos + 2 + int.from_bytes(restarted[sos + 2 : sos + 4], "big") : -2]
    pieces = [p.replace(b"\xff\x00", b"\xff") for p in re.split(rb"\xff[\xd0-\xd7]", scan)]
    offsets = struct.unpack_from(f"<{intervals}I", made, jpeg_check.PLAN_BYTES)
    assert list(offsets) == list(itertools.accumulate(len(p) for p in [b""] + pieces[:-1]))
    data_at = jpeg_check.PLAN_BYTES + (4 * intervals + 7) // 8 * 8
    assert made[data_at : data_at + data_bytes] == b"".join(pieces)
    for path in sorted(cuda_host.Path(__file__).parent.glob("data/scans_*.jpg")):
        assert plan(path.read_bytes()) is None
    for data in generated()[:40]:
        made = plan(data)
        assert made is None or isinstance(made, bytes)
    # scan_plan gives scan_damage's verdict wherever it does not plan: damage found between
    # the frame's header and the scan, or none the walk looks for (bytes before the first
    # marker are the decoder's to refuse).
    sof = data.index(b"\xff\xc0")
    after = sof + 2 + int.from_bytes(data[sof + 2 : sof + 4], "big")
    damaged = data[:after] + b"\x00\x00" + data[after:]
    assert isinstance(plan(damaged), str)
    assert scan_plan(damaged) == scan_damage(damaged) == f"corrupt JPEG data ({plan(damaged)})"
    early = data[:2] + b"\x00\x00" + data[2:]
    assert scan_plan(early) is None and scan_damage(early) is None
    for data in generated():
        judged = scan_plan(data)
        assert judged == scan_damage(data) or isinstance(judged, bytes)


def test_plans_that_lie_are_refused_in_bounded_time(kernel):
    """Plans no file made (tables with no codes, a wrong magic, blocks past the limit, a scan
    past the file's end, more MCUs than the scan holds): every file comes back refused."""
    assert_lies_refused(jpeg_check.launch_jpeg_check, kernel, WHOLE[-5])


def test_random_plans_are_judged_without_a_fault(kernel):
    """Plans damaged at random (header fields, tables, scan data, lengths): every one gets a
    known status, the build's undefined-behaviour checks never trip, and the kernel ends."""
    plans = random_plans(WHOLE[-5], 60, seed=44) + random_plans(WHOLE[0], 60, seed=45)
    found = launched(jpeg_check.launch_jpeg_check, kernel, plans)
    assert set(found.tolist()) <= set(jpeg_check.STATUSES)
