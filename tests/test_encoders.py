"""The PNG encoder processes (edgecli.encoders): PNGs from rows in shared memory, the same
bytes as the in-process encoder; errors and dead processes as one-line OutputErrors, never a
hang; a killed run leaves its processes to finish and exit. And the GPU path using them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import edgecli
from edgecli import pipeline
from edgecli.encoders import EncoderProcesses
from edgecli.errors import OutputError
from edgecli.params import Options
from edgecli.png import PackedEdges, encode_png_1bit, png_rows_1bit
from edgecli.testing import StandInGpuBackend

from .helpers import make_folder, same_bytes
from .media import REPO

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="Linux only (memfd)")

SHAPES = [(1, 1), (1, 37), (29, 1), (37, 101), (8, 8), (9, 17)]


def edge_maps(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.random(shape) < 0.3).astype(np.uint8) * 255 for shape in SHAPES]


def into_shared(encoders: EncoderProcesses, maps: list[np.ndarray]) -> list[PackedEdges]:
    """Each map's 1-bit rows, packed into one shared buffer at odd offsets."""
    rows = [png_rows_1bit(e) for e in maps]
    buffer = encoders.allocate(sum(r.nbytes + 3 for r in rows))
    buffer.fill(0xA5)  # poison: a byte read from outside a map's rows shows in its PNG
    packed, at = [], 3
    for r, e in zip(rows, maps, strict=True):
        view = buffer[at : at + r.nbytes].reshape(r.shape)
        view[:] = r
        packed.append(PackedEdges(view, e.shape[1]))
        at += r.nbytes + 3
    return packed


@pytest.fixture
def encoders():
    processes = EncoderProcesses(2)
    yield processes
    processes.close()


def test_pngs_from_shared_rows_equal_the_in_process_encoders(encoders, tmp_path):
    """Every shape, 1x1 to 37x101, through two processes: the bytes encode_png_1bit makes;
    ``done`` and ``written`` once for each PNG, before its future resolves."""
    maps = edge_maps()
    done, written = [], []
    items = [
        (f"f{i}", tmp_path / f"f{i}.png", p) for i, p in enumerate(into_shared(encoders, maps))
    ]
    futures = encoders.submit(items, lambda: done.append(1), lambda *a: written.append(a[0]))
    for future in futures:
        assert future.result(timeout=30) is None
    assert len(done) == len(maps) and sorted(written) == sorted(k for k, _, _ in items)
    for i, e in enumerate(maps):
        assert (tmp_path / f"f{i}.png").read_bytes() == encode_png_1bit(e)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"f{i}.png" for i in range(6))


def test_a_buffer_given_back_and_a_larger_one_made(encoders, tmp_path):
    """A slab's buffer is replaced by a larger one when a larger frame comes: the processes
    read the new one."""
    first = into_shared(encoders, edge_maps(1)[:2])
    for f in encoders.submit([("a", tmp_path / "a.png", first[0])], lambda: None, print):
        f.result(timeout=30)
    encoders.free(first[0].rows.base)
    maps = edge_maps(2)
    again = into_shared(encoders, maps)
    futures = encoders.submit([("b", tmp_path / "b.png", again[3])], lambda: None, lambda *a: 0)
    futures[0].result(timeout=30)
    assert (tmp_path / "b.png").read_bytes() == encode_png_1bit(maps[3])


def test_a_png_that_cannot_be_written_fails_with_its_path(encoders, tmp_path):
    """A PNG whose folder is a file: OutputError naming the PNG, in one line; nothing left
    behind; the next PNGs are written as usual."""
    (tmp_path / "file").write_text("x")
    packed = into_shared(encoders, edge_maps())
    bad = tmp_path / "file" / "f.png"
    [future] = encoders.submit([("f", bad, packed[3])], lambda: None, lambda *a: 0)
    with pytest.raises(OutputError, match=r"file/f\.png: cannot write") as caught:
        future.result(timeout=30)
    assert "\n" not in str(caught.value)
    [future] = encoders.submit([("g", tmp_path / "g.png", packed[3])], lambda: None, lambda *a: 0)
    future.result(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "g.png"]


def test_a_killed_process_fails_the_pngs_it_had_and_every_later_one(tmp_path):
    """An encoder process killed with SIGKILL: its PNGs, and every PNG submitted after,
    fail with an OutputError saying so (no future waits for ever), and closing returns."""
    encoders = EncoderProcesses(2)
    try:
        packed = into_shared(encoders, edge_maps())
        encoders.submit([("a", tmp_path / "a.png", packed[0])], lambda: None, lambda *a: 0)[
            0
        ].result(30)
        victim = encoders.processes[0].popen
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        deadline = time.monotonic() + 10
        while encoders.failure is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(
            OutputError, match=r"PNG encoder process \(pid \d+\) was killed by signal 9"
        ):
            encoders.submit([("b", tmp_path / "b.png", packed[1])], lambda: None, lambda *a: 0)
    finally:
        started = time.monotonic()
        encoders.close()
        assert time.monotonic() - started < 10


KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from pathlib import Path
    from edgecli.encoders import EncoderProcesses
    from edgecli.png import PackedEdges, png_rows_1bit
    out = Path(sys.argv[1])
    encoders = EncoderProcesses(2)
    rows = png_rows_1bit(np.full((600, 900), 255, np.uint8))
    buffer = encoders.allocate(rows.nbytes)
    buffer[:] = rows.ravel()
    packed = PackedEdges(buffer.reshape(rows.shape), 900)
    items = [(str(i), out / f"f{i:03d}.png", packed) for i in range(200)]
    futures = encoders.submit(items, lambda: None, lambda *a: None)
    futures[0].result(30)
    print(" ".join(str(p.popen.pid) for p in encoders.processes), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_run_killed_with_sigkill_leaves_whole_pngs_and_no_process(tmp_path):
    """kill -9 of the run's process: its encoder processes finish the PNGs they were sent
    and exit; every PNG there is whole (the in-process encoder's bytes), none half-written."""
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(out)], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)
    expected = encode_png_1bit(np.full((600, 900), 255, np.uint8))
    names = sorted(p.name for p in out.iterdir())
    assert names and all(n.endswith(".png") for n in names)  # no temporary left
    assert all((out / n).read_bytes() == expected for n in names)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited: its parent is gone too
        return stat.read().split(") ")[1][0] != "Z"


@pytest.mark.parametrize("batch", [1, 7])
def test_the_gpu_path_writes_through_the_processes(tmp_path, batch):
    """A run of 70 frames on the GPU path (stand-in) with 1-bit PNGs: the encoder processes,
    one a worker, write PNGs equal to the CPU backend's, byte for byte."""
    folder = make_folder(tmp_path / "in", 70, shape=(19, 45))
    options = Options(batch=batch, workers=2)
    backend = StandInGpuBackend(options)
    summary = pipeline.run(folder, tmp_path / "gpu", options, backend=backend)
    assert summary.frames == 70 and summary.encoder_processes == 2
    assert summary.stages["write"]["count"] == 70 and summary.stages["encode"]["count"] == 70
    edgecli.process(folder, tmp_path / "cpu", backend="cpu")
    same_bytes(tmp_path / "cpu", tmp_path / "gpu")


@pytest.mark.parametrize(
    "frames, png_bits, backend_name", [(70, 8, "stand-in"), (63, 1, "stand-in"), (70, 1, "cpu")]
)
def test_the_worker_threads_write_where_processes_do_not_pay(
    tmp_path, frames, png_bits, backend_name
):
    """8-bit PNGs (not packed by the GPU), runs under 64 frames and the CPU backend are
    written by the worker threads: no encoder process, the same PNGs."""
    folder = make_folder(tmp_path / "in", frames, shape=(11, 13))
    options = Options(png_bits=png_bits, workers=2)
    backend = StandInGpuBackend(options) if backend_name == "stand-in" else None
    summary = pipeline.run(
        folder, tmp_path / "a", replace_backend(options, backend_name), backend=backend
    )
    assert summary.frames == frames and summary.encoder_processes == 0
    edgecli.process(folder, tmp_path / "cpu", backend="cpu", png_bits=png_bits)
    same_bytes(tmp_path / "cpu", tmp_path / "a")


def replace_backend(options: Options, name: str) -> Options:
    from dataclasses import replace

    return replace(options, backend="cpu") if name == "cpu" else options


def test_a_folder_that_becomes_unwritable_mid_run_is_one_error(tmp_path):
    """The output folder's PNGs cannot be written (a file where a subfolder's PNG goes):
    the run raises the OutputError naming it, and leaves no temporary."""
    folder = make_folder(tmp_path / "in", 70, shape=(9, 10))
    out = tmp_path / "out"
    out.mkdir()
    (out / "frame_0040.png").mkdir()  # a folder where a PNG goes: its rename fails
    options = Options(workers=2)
    with pytest.raises(OutputError, match=r"frame_0040\.png: cannot write"):
        pipeline.run(folder, out, options, backend=StandInGpuBackend(options))
    assert not [
        p for p in Path(out).iterdir() if p.name.startswith(".edgecli-") and p.suffix == ".tmp"
    ]
