"""inflate.cu's real kernel, built for the CPU (tests/cuda_host.py) and launched through
edgecli.decode.gpu.inflate as the decoder launches it, against zlib: every stream it calls OK
holds exactly zlib's bytes, every stream zlib refuses gets another status, and no stream writes
outside its own range. Each batch runs twice over differently poisoned outputs, with guard
ranges between the streams, and under several orders of the block's threads."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecli.cuda.compiling import kernel_path
from edgecli.decode.gpu import inflate
from tests import cuda_host

from .inflate_cases import (
    STRATEGIES,
    assert_as_zlib,
    assert_no_wrong_ok,
    compress,
    corrupted,
    cut_off,
    cut_short,
    flushed,
    hand_made,
    inflate_both,
    scanlines,
    sized_data,
    zlib_verdict,
)

HAND_MADE = hand_made()


@pytest.fixture(scope="session")
def host_kernel(tmp_path_factory):
    """inflate.cu's kernel built for the host, kept between sessions beside pytest's temporary
    folders (a skip saying why where there is no C++ compiler)."""
    return cuda_host.for_tests(tmp_path_factory, "inflate", (inflate.KERNEL,))[inflate.KERNEL]


@pytest.fixture(params=["forward", "reverse", 20261205])
def kernel(host_kernel, request):
    """The host build, its block's threads run in each order: results may not depend on it."""
    host_kernel.order = request.param
    yield host_kernel
    host_kernel.order = "forward"


@pytest.mark.parametrize("wbits", range(9, 16))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_level_strategy_and_window(kernel, strategy, wbits, rng):
    """zlib's streams at levels 0-9 with each strategy and window inflate to zlib's bytes."""
    data = scanlines(rng, 6000)
    streams = [compress(data, level, wbits, STRATEGIES[strategy]) for level in range(10)]
    assert_as_zlib(kernel, streams, [len(data)] * 10)


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_sizes_in_one_batch(kernel, level, rng):
    """A batch of streams of very different sizes, each to its own range, all as zlib."""
    data = sized_data(rng)
    assert_as_zlib(kernel, [compress(d, level) for d in data], [len(d) for d in data])


@pytest.mark.parametrize(
    "mode", [zlib.Z_SYNC_FLUSH, zlib.Z_FULL_FLUSH, zlib.Z_PARTIAL_FLUSH, zlib.Z_BLOCK]
)
def test_flushed_streams(kernel, mode, rng):
    """Streams with empty stored or fixed blocks between their parts inflate as zlib."""
    data = scanlines(rng, 20_000)
    assert_as_zlib(kernel, [flushed(data, mode), flushed(b"", mode)], [len(data), 0])


def test_hand_made_streams(kernel):
    """Streams written bit by bit get their expected status; those called OK hold zlib's bytes,
    those with a status zlib shares zlib refuses too (the others it may accept)."""
    names = list(HAND_MADE)
    streams, sizes, expected = zip(*HAND_MADE.values(), strict=True)
    outputs, status = inflate_both(kernel, streams, sizes)
    for name, stream, size, want, got, out in zip(
        names, streams, sizes, expected, status, outputs, strict=True
    ):
        assert got == want, f"{name}: {inflate.reason(got)}, expected {inflate.reason(want)}"
        verdict = zlib_verdict(stream, size)
        if got == inflate.OK:
            assert verdict is not None and np.array_equal(out, np.frombuffer(verdict, np.uint8))
        elif got not in inflate.CPU_DECIDES:
            assert verdict is None, f"{name}: zlib accepts what the kernel calls an error"


def test_corrupt_streams(kernel):
    """Hundreds of damaged streams (seeded): none called OK unless zlib inflates it to exactly
    those bytes, none writes outside its range, every launch ends."""
    assert_no_wrong_ok(kernel, *corrupted(20261205, 300))


def test_cut_short_streams(host_kernel, rng):
    """A stream cut after any of its bytes is found truncated and writes only its own range."""
    streams, size = cut_short(rng)
    _, status = inflate_both(host_kernel, streams, [size] * len(streams))
    assert [inflate.STATUSES[s].name for s in status] == ["truncated"] * len(streams)


def test_output_longer_than_its_size(host_kernel, rng):
    """A stream whose output runs past its size, wherever in a literal or a match the size
    falls, stops there (output_long) and writes only its own range."""
    streams, sizes = cut_off(rng)
    _, status = inflate_both(host_kernel, streams, sizes)
    assert [inflate.STATUSES[s].name for s in status] == ["output_long"] * len(streams)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.binary(max_size=200), size=st.integers(0, 600), header=st.booleans())
def test_arbitrary_bytes(host_kernel, body, size, header):
    """Any bytes, after a valid zlib header or not, for any size: OK only with zlib's bytes."""
    stream = (b"\x78\x9c" if header else b"") + body
    assert_no_wrong_ok(host_kernel, [stream], [size])


def test_statuses_named():
    """Every status inflate.cu can return has a name and a reason on the Python side."""
    source = kernel_path(inflate.INFLATE_FILE).read_text()
    block = source.split("// Statuses:", 1)[1].split("// A table entry", 1)[0]
    defined = {int(v): n.lower() for n, v in re.findall(r"#define INFLATE_(\w+) (\d+)", block)}
    assert defined == {code: status.name for code, status in inflate.STATUSES.items()}
    assert inflate.CPU_DECIDES < set(defined)


@pytest.mark.parametrize(
    "change",
    [
        {"src_start": np.zeros(3, np.uint64)},
        {"dst_start": np.zeros(2, np.int64)},
        {"status": np.zeros(2, np.int64)},
        {"dst": np.zeros(4, np.int8)},
    ],
    ids=["src_start length", "dst_start dtype", "status dtype", "dst dtype"],
)
def test_launch_refuses_mismatched_buffers(change):
    """Offsets that are not n + 1 uint64, a status that is not int32 or bytes that are not
    uint8 are refused before anything runs, naming the buffers."""
    buffers = {
        "src": np.zeros(4, np.uint8),
        "src_start": np.zeros(2, np.uint64),
        "dst": np.zeros(4, np.uint8),
        "dst_start": np.zeros(2, np.uint64),
        "status": np.zeros(1, np.int32),
    } | change

    def never(*args, **kwargs):
        raise AssertionError("launched")

    with pytest.raises(ValueError, match="inflate buffers do not fit"):
        inflate.launch_inflate(never, **buffers)


def test_backward_offsets_refused(host_kernel):
    """A stream whose offsets run backwards is refused (bad_range) and writes nothing, while
    its neighbour inflates."""
    good = compress(b"neighbour" * 50)
    src = np.frombuffer(good, np.uint8).copy()
    src_start = np.array([0, len(good), 4], np.uint64)  # stream 1 ends before it starts
    dst_start = np.array([0, 450, 470], np.uint64)
    dst = np.full(470, 0xA5, np.uint8)
    status = np.full(2, -1, np.int32)
    inflate.launch_inflate(host_kernel, src, src_start, dst, dst_start, status)
    assert [inflate.STATUSES[s].name for s in status] == ["ok", "bad_range"]
    assert dst[:450].tobytes() == b"neighbour" * 50 and (dst[450:] == 0xA5).all()
