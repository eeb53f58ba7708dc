"""One pool of worker threads that runs its tasks by priority.

The pipeline's host work (decoding, the GPU path's copies into pinned memory, encoding and
writing) shares one set of ``workers`` threads, so that no more threads than cores compete,
with the work nearer the output first: a frame already decoded is finished before another is
started, and the slabs the encoders read from are freed soon. Two pools, one decoding and one
encoding, leave cores idle whenever one side waits for the other; one pool without priorities
makes encodes wait behind a window of decodes.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from .errors import ResourceError


@dataclass(frozen=True)
class Raised:
    """An exception on a thread of the run's (a reader, a decoder session), handed through its
    queue to the consumer to re-raise."""

    error: BaseException


class PriorityPool:
    """``workers`` threads named ``name_0``, ``name_1``, ... that run the submitted task of the
    lowest priority first, and tasks of the same priority in the order submitted.

    Like :class:`concurrent.futures.ThreadPoolExecutor`: ``submit`` returns a Future, and
    ``shutdown(cancel_futures=True)`` cancels the tasks not yet started and waits for the
    others. Usable as a context manager (shutdown on exit, waiting, cancelling nothing).
    """

    def __init__(self, workers: int, name: str):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._tasks: list[tuple] = []  # heap of (priority, sequence number, future, fn, args)
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._threads: list[threading.Thread] = []
        for i in range(workers):
            thread = threading.Thread(target=self._work, name=f"{name}_{i}")
            try:
                start_thread(thread, f"worker thread {i + 1} of {workers}")
            except ResourceError:
                self.shutdown(wait=True)  # the threads already started: stopped and joined
                raise
            self._threads.append(thread)

    def submit(self, priority: int, fn: Callable, *args) -> Future:
        future: Future = Future()
        with self._changed:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that is shut down")
            heapq.heappush(self._tasks, (priority, next(self._order), future, fn, args))
            self._changed.notify()
        return future

    def at(self, priority: int) -> Lane:
        """A view of this pool whose ``submit(fn, *args)`` submits at ``priority``."""
        return Lane(self, priority)

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._tasks and not self._closed:
                    self._changed.wait()
                if not self._tasks:  # shut down, and nothing left to run
                    return
                task = heapq.heappop(self._tasks)
            _run(*task[2:])
            task = None  # let go of its arguments (a frame, say) while waiting for the next

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        with self._changed:
            self._closed = True
            if cancel_futures:
                for _, _, future, _, _ in self._tasks:
                    future.cancel()
                self._tasks.clear()
            self._changed.notify_all()
        if wait:
            for thread in self._threads:
                thread.join()

    def __enter__(self) -> PriorityPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown(wait=True)


def start_thread(thread: threading.Thread, what: str) -> None:
    """Start ``thread``, or raise ResourceError saying what could not be started and why
    (threading raises RuntimeError when the system refuses a thread: ``ulimit -u``, that is
    RLIMIT_NPROC, or a cgroup's pids.max reached, or no memory left for its stack)."""
    try:
        thread.start()
    except RuntimeError as exc:
        raise ResourceError(
            f"cannot start {what} ({exc}): the system's limit on threads (ulimit -u, a "
            "container's pids limit) or memory is reached; run with fewer --workers"
        ) from None


def _run(future: Future, fn: Callable, args: tuple) -> None:
    if not future.set_running_or_notify_cancel():
        return  # cancelled
    try:
        result = fn(*args)
    except BaseException as exc:  # handed to whoever waits on the future
        future.set_exception(exc)
    else:
        future.set_result(result)


class Lane:
    """Tasks submitted to a :class:`PriorityPool` at one priority."""

    def __init__(self, pool: PriorityPool, priority: int):
        self.pool, self.priority = pool, priority

    def submit(self, fn: Callable, *args) -> Future:
        return self.pool.submit(self.priority, fn, *args)
