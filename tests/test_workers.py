"""The pipeline's worker pool: tasks by priority, futures, shutdown."""

from __future__ import annotations

import threading

import pytest

from edgecli.workers import PriorityPool


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


def test_threads_are_named_and_counted():
    names: set[str] = set()
    barrier = threading.Barrier(3, timeout=10)

    def meet() -> None:
        names.add(threading.current_thread().name)
        barrier.wait()  # all three tasks run at once: three threads

    with PriorityPool(3, "edgecli-worker") as pool:
        for future in [pool.submit(0, meet) for _ in range(3)]:
            future.result(10)
    assert names == {"edgecli-worker_0", "edgecli-worker_1", "edgecli-worker_2"}


def test_at_least_one_worker():
    with pytest.raises(ValueError, match="at least 1"):
        PriorityPool(0, "test-pool")
