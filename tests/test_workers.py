"""The pipeline's worker pool: tasks by priority, futures, shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import cv2
import numpy as np
import pytest

from edgecli.workers import PriorityPool

from .helpers import make_frames
from .media import REPO


def _blocked_pool() -> tuple[PriorityPool, threading.Event]:
    """A one-thread pool whose thread is busy until the returned event is set."""
    pool = PriorityPool(1, "test-pool")
    release, started = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(10)

    pool.submit(0, block)
    assert started.wait(10)
    return pool, release


def test_lowest_priority_first_and_in_order_within_one():
    pool, release = _blocked_pool()
    ran: list[str] = []
    for priority, name in [(2, "decode a"), (1, "encode a"), (2, "decode b"), (0, "copy")]:
        pool.submit(priority, ran.append, name)
    pool.at(1).submit(ran.append, "encode b")
    release.set()
    pool.shutdown(wait=True)
    assert ran == ["copy", "encode a", "encode b", "decode a", "decode b"]


def test_results_and_errors_come_back_through_the_futures():
    with PriorityPool(2, "test-pool") as pool:
        assert pool.submit(1, pow, 2, 10).result(10) == 1024
        failing = pool.submit(1, int, "not a number")
        with pytest.raises(ValueError, match="not a number"):
            failing.result(10)
        assert pool.submit(0, str, 5).result(10) == "5"  # the pool outlives a task's error


def test_shutdown_cancelling_drops_queued_tasks_and_waits_for_running_ones():
    pool, release = _blocked_pool()
    ran: list[int] = []
    queued = [pool.submit(1, ran.append, i) for i in range(3)]
    threading.Timer(0.05, release.set).start()
    pool.shutdown(wait=True, cancel_futures=True)  # returns once the blocked task is done
    assert release.is_set()
    assert all(future.cancelled() for future in queued)
    assert ran == []
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(0, print)


def test_shutdown_without_cancelling_runs_what_was_queued():
    pool, release = _blocked_pool()
    ran: list[int] = []
    for i in range(3):
        pool.submit(1, ran.append, i)
    release.set()
    pool.shutdown(wait=True)
    assert ran == [0, 1, 2]


def test_a_pool_runs_as_many_tasks_at_once_as_it_has_threads():
    """A pool of 3 runs three tasks at once (they meet at a barrier), on three threads it
    keeps for later tasks, and never a fourth beside them."""
    threads: set[int] = set()
    running, peak = [0], [0]
    lock = threading.Lock()
    barrier = threading.Barrier(3, timeout=10)

    def meet() -> None:
        with lock:
            threads.add(threading.get_ident())
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        barrier.wait()  # returns once three tasks run at once
        with lock:
            running[0] -= 1

    with PriorityPool(3, "test-pool") as pool:
        for future in [pool.submit(0, meet) for _ in range(9)]:
            future.result(10)
    assert peak[0] == 3 and len(threads) == 3


def test_at_least_one_worker():
    with pytest.raises(ValueError, match="at least 1"):
        PriorityPool(0, "test-pool")


REFUSE_THREADS = """
import threading, sys
real_start, started, allowed = threading.Thread.start, [], [int(sys.argv[1])]
def start(thread):  # as threading does once RLIMIT_NPROC (ulimit -u) is reached
    if len(started) >= allowed[0]:
        raise RuntimeError("can't start new thread")
    started.append(thread)
    real_start(thread)
threading.Thread.start = start
"""


def with_threads_refused(after: int, code: str, *args) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python whose threading refuses every thread after the first
    ``after``. It must exit within 30 s: a thread left waiting keeps a process from exiting."""
    try:
        return subprocess.run(
            [sys.executable, "-c", REFUSE_THREADS + code, str(after), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail("hung: the threads that did start were never stopped")


def test_a_pool_whose_threads_cannot_all_start_stops_those_that_did():
    """The 4th thread of 6 refused: an EdgecliError naming it and the system's refusal, and
    the 3 threads started already are stopped (the process exits)."""
    code = """
from edgecli import EdgecliError
from edgecli.workers import PriorityPool
try:
    PriorityPool(6, "test-pool")
except EdgecliError as exc:
    print(exc, threading.active_count())
"""
    result = with_threads_refused(3, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cannot start worker thread 4 of 6 (can't start new thread)")
    assert result.stdout.endswith(" 1\n")  # only the main thread is left


@pytest.mark.parametrize(
    "kind, after, refused",
    [
        # A run's first thread keeps its claim on the output folder (edgecli.output.claims) fresh.
        ("folder", 0, "the thread that keeps the output folder's claim fresh"),
        ("folder", 3, "worker thread 3 of 3"),
        ("tiff", 4, "a reader thread"),  # the workers start, a multi-page file's reader not
    ],
)
def test_a_run_that_cannot_start_its_threads_fails_with_one_error(tmp_path, kind, after, refused):
    """A run whose worker or reader threads are refused raises an EdgecliError with exit
    code 1 naming the thread, and leaves no thread of its own running."""
    if kind == "folder":
        source = make_frames(tmp_path / "in", [(10, 10)] * 3)
    else:
        source = tmp_path / "pages.tiff"
        assert cv2.imwritemulti(str(source), [np.zeros((8, 8, 3), np.uint8)] * 3)
    code = """
import edgecli
allowed[0] = 1000  # a normal run first: what it leaves running (tqdm's monitor) is not ours
edgecli.process(sys.argv[2], sys.argv[3], backend="cpu", workers=3)
threads, allowed[0] = threading.active_count(), len(started) + int(sys.argv[1])
try:
    edgecli.process(sys.argv[2], sys.argv[3], backend="cpu", workers=3)
except edgecli.EdgecliError as exc:
    print(exc.exit_code, exc, threading.active_count() - threads, sep="|")
"""
    result = with_threads_refused(after, code, source, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    code, message, more_threads = result.stdout.rstrip("\n").split("|")
    assert (code, more_threads) == ("1", "0") and message.startswith(f"cannot start {refused} (")


def test_the_command_reports_threads_it_cannot_start_in_one_line(tmp_path):
    """edgecli run with its threads refused: exit 1, one Error line, no traceback."""
    folder = make_frames(tmp_path / "in", [(10, 10)] * 3)
    code = "from edgecli.cli import main; sys.argv[:2] = ['edgecli']; main()"
    args = ["run", folder, "-o", tmp_path / "out", "--backend", "cpu", "--workers", "2"]
    result = with_threads_refused(1, code, *args)  # the one: the claim's (edgecli.output.claims)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cannot start worker thread 1 of 2 (can't start new")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
