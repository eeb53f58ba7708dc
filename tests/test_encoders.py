"""The PNG encoder processes (edgecli.encoders): the PNGs they write are the worker threads'
byte for byte, errors are the threads' errors, a process that dies costs no PNG, and none
outlives its run, even one killed by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from edgecli import encoders, pipeline
from edgecli.errors import OutputError
from edgecli.params import Options
from edgecli.pipeline import runner
from edgecli.png import encode_png_1bit, png_rows_1bit
from edgecli.sinks import write_atomic
from edgecli.testing import StandInGpuBackend

from .helpers import make_frames, same_bytes

pytestmark = pytest.mark.skipif(
    encoders.unavailable_reason() is not None,
    reason=f"encoder processes cannot run here: {encoders.unavailable_reason()}",
)

SHAPES = [(1, 1), (1, 37), (29, 1), (33, 17), (120, 161), (8, 8), (7, 9)]


def edge_map(shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(shape) < 0.3, 255, 0).astype(np.uint8)


@pytest.fixture
def processes():
    started = encoders.EncoderProcesses(3)
    assert started.wait_started() == 3
    yield started
    started.close()


def test_processes_write_the_threads_bytes(processes, tmp_path):
    """Every shape, odd ones too, and a map far larger than a process's first buffer (which
    grows for it) gives the bytes encode_png_1bit gives; ``done`` is called once each."""
    shapes = [*SHAPES, (2000, 2100)]  # 2000 rows of 264 bytes: 528 KB
    called = []
    for i, shape in enumerate(shapes):
        edges = edge_map(shape, i)
        took = processes.encode_write(
            png_rows_1bit(edges), shape[1], tmp_path / f"{i}.png", lambda i=i: called.append(i)
        )
        assert took is not None and all(ms >= 0 for ms in took)
        assert (tmp_path / f"{i}.png").read_bytes() == encode_png_1bit(edges), shape
    assert called == list(range(len(shapes)))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{i}.png" for i in range(8))


def test_a_grown_buffer_is_read_whole(monkeypatch, tmp_path):
    monkeypatch.setattr(encoders, "FIRST_BUFFER_BYTES", 64)
    grown = encoders.EncoderProcesses(1)
    grown.wait_started()
    try:
        for i, shape in enumerate([(4, 4), (300, 200), (5, 3), (600, 400)]):
            edges = edge_map(shape, i)
            assert grown.encode_write(png_rows_1bit(edges), shape[1], tmp_path / "a.png", list)
            assert (tmp_path / "a.png").read_bytes() == encode_png_1bit(edges), shape
    finally:
        grown.close()


def test_a_write_error_is_the_threads_error(processes, tmp_path):
    """An unwritable PNG raises the OutputError a thread's write_atomic raises, word for word,
    and leaves the process ready for the next PNG."""
    edges = edge_map((9, 9), 0)
    (tmp_path / "a-file").write_bytes(b"")
    missing = tmp_path / "a-file" / "a.png"  # a folder that is a file (root may write anywhere)
    with pytest.raises(OutputError) as from_thread:
        write_atomic(missing, encode_png_1bit(edges))
    for _ in range(4):  # more than the processes: each one that failed is used again
        with pytest.raises(OutputError) as from_process:
            processes.encode_write(png_rows_1bit(edges), 9, missing, list)
        assert str(from_process.value) == str(from_thread.value)
    assert processes.encode_write(png_rows_1bit(edges), 9, tmp_path / "b.png", list)
    assert (tmp_path / "b.png").read_bytes() == encode_png_1bit(edges)


def test_a_dead_process_costs_no_png(processes, tmp_path):
    """Kill the processes one by one: each PNG is still written, the same bytes, and once
    none is left encode_write says so (None) without calling ``done``."""
    for process in processes._all:
        process.popen.kill()
        process.popen.wait()
    for i in range(3):
        edges = edge_map((40, 50), i)
        called: list[int] = []
        took = processes.encode_write(png_rows_1bit(edges), 50, tmp_path / f"{i}.png",
                                      lambda called=called: called.append(1))  # fmt: skip
        assert took is not None and called == [1]
        assert (tmp_path / f"{i}.png").read_bytes() == encode_png_1bit(edges)
    called = []
    assert processes.encode_write(png_rows_1bit(edge_map((4, 4), 9)), 4, tmp_path / "x.png",
                                  lambda: called.append(1)) is None  # fmt: skip
    assert called == [] and not (tmp_path / "x.png").exists()


def test_closing_ends_every_process(tmp_path):
    started = encoders.EncoderProcesses(4)
    assert started.wait_started() == 4
    popens = [p.popen for p in started._all]
    assert started.encode_write(png_rows_1bit(edge_map((3, 3), 0)), 3, tmp_path / "a.png", list)
    started.close()
    assert all(p.poll() is not None for p in popens)


def test_no_process_outlives_a_killed_run(tmp_path):
    """A run's process killed by SIGKILL: its encoder processes see their sockets end and
    exit (none left running, none a zombie of ours for long)."""
    code = textwrap.dedent(
        """
        import sys, time
        from edgecli import encoders
        started = encoders.EncoderProcesses(3)
        started.wait_started()
        print(" ".join(str(p.popen.pid) for p in started._all), flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(pids) == 3
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _running(pid)]
        time.sleep(0.05)
    assert alive == []


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init in the end, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_ctrl_c_does_not_reach_them(processes, tmp_path):
    """They run in sessions of their own, and ignore SIGINT besides: the run decides when
    they stop (at the end of their sockets), so the PNGs in flight are written."""
    for process in processes._all:
        assert os.getsid(process.popen.pid) == process.popen.pid
        deadline = time.monotonic() + 30  # until it has started, and ignores SIGINT
        while not _ignores_sigint(process.popen.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(process.popen.pid, signal.SIGINT)
    time.sleep(0.2)
    assert all(p.popen.poll() is None for p in processes._all)
    assert processes.encode_write(png_rows_1bit(edge_map((5, 6), 1)), 6, tmp_path / "a.png", list)


def _ignores_sigint(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        ignored = next(line for line in status if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@pytest.fixture
def frames(tmp_path):
    """More still images than ENCODER_MIN_FILES, of shapes that change from frame to frame."""
    count = encoders.ENCODER_MIN_FILES + 6
    return make_frames(tmp_path / "in", [SHAPES[i % len(SHAPES)] for i in range(count)])


def test_a_gpu_run_with_processes_writes_the_cpu_backends_bytes(frames, tmp_path, monkeypatch):
    """The GPU path with packed rows (a stand-in of the CUDA backend) hands its PNGs to one
    process a worker (here all started before the first PNG, so that each PNG is theirs);
    its files are the CPU backend's, byte for byte, its summary counts the processes and
    times every PNG's encoding and writing."""
    start = runner.start_encoders

    def started(*args):
        processes = start(*args)
        if processes is not None:
            processes.wait_started()
        return processes

    requests = []
    request = encoders._Process.request

    def counted(self, *args):
        requests.append(args[-1])
        return request(self, *args)

    monkeypatch.setattr(runner, "start_encoders", started)
    monkeypatch.setattr(encoders._Process, "request", counted)
    options = Options(workers=3, batch=4, streams=2)
    backend = StandInGpuBackend(options, max_delay_s=0.002, packed=True)
    summary = pipeline.run(frames, tmp_path / "gpu", options, backend=backend)
    assert summary.encoder_processes == 3
    count = encoders.ENCODER_MIN_FILES + 6
    assert summary.frames == summary.stages["encode"]["count"] == count
    assert summary.stages["write"]["count"] == count == len(requests)
    pipeline.run(frames, tmp_path / "cpu", Options(backend="cpu"))
    same_bytes(tmp_path / "gpu", tmp_path / "cpu")


def test_short_runs_and_unpacked_maps_keep_the_threads(frames, tmp_path):
    options = Options(workers=2)
    few = sorted(frames.iterdir())[: encoders.ENCODER_MIN_FILES - 1]
    short = pipeline.run([str(p) for p in few], tmp_path / "short", options,
                         backend=StandInGpuBackend(options, packed=True))  # fmt: skip
    assert short.encoder_processes == 0 and short.frames == len(few)
    unpacked = pipeline.run(frames, tmp_path / "unpacked", options,
                            backend=StandInGpuBackend(options))  # fmt: skip
    assert unpacked.encoder_processes == 0
    assert unpacked.as_json()["encoder_processes"] == 0
