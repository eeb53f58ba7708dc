"""Encode and write: PNG tasks on the worker pool, a window of them outstanding."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from ..inputs.sources import Frame
from ..options.params import Options
from ..output.png import encode_png
from ..output.sinks import write_atomic
from ..output.timing import WaitClock
from .memory import FrameBudget


# Frames one task of a batch's encodes takes at most. A task a frame costs the main thread a
# hand-off a frame (a lock, a wake-up, the GIL won back from the worker it woke); a batch's
# frames go in tasks of up to this many, still at least one a worker where the batch has them.
FRAMES_A_TASK = 8


class Writer:
    """Encode-and-write tasks on the pool, at most ``window`` frames outstanding; ``on_done(n)``
    is told of every ``n`` frames finished. ``workers``: the pool's threads, which a batch's
    tasks are spread over."""

    def __init__(
        self,
        pool,
        out_dir: Path,
        options: Options,
        clock,
        window: int,
        on_done,
        budget=None,
        *,
        keep_written: bool = False,
        workers: int = 1,
    ):
        self.pool, self.out_dir, self.options, self.clock = pool, out_dir, options, clock
        self.window, self.on_done, self.workers = window, on_done, workers
        self.budget = budget or FrameBudget(None, 0)
        self.pending: deque[tuple[Future, int]] = deque()  # each task, and its frames
        self.outstanding = 0  # frames in the pending tasks
        self.waits = WaitClock()
        # With ``keep_written``, the output names, as each PNG is in place (what clears a
        # folder's mixed mark); else nothing is kept a frame.
        self.written: list[str] | None = [] if keep_written else None

    def encode_write(self, name: str, edges: np.ndarray, done: Callable | None = None) -> None:
        """Encode and write one PNG; ``done`` is called once ``edges`` is no longer read."""
        try:
            with self.clock.timed("encode", name):
                data = encode_png(edges, self.options.png_bits)
        finally:
            if done is not None:
                done()
        with self.clock.timed("write", name):
            # A --recursive run's subfolders of the output folder are made as they are needed.
            write_atomic(self.out_dir / name, data, make_folder=True)
        if self.written is not None:
            self.written.append(name)

    def encode_writes(self, names: list[str], edges, done: Callable) -> None:
        """:meth:`encode_write` for each of ``names`` and its ``edges[i]``, in one task;
        ``done`` is called once for every frame, written or not."""
        for i, name in enumerate(names):
            try:
                self.encode_write(name, edges[i], done)
            except BaseException:
                for _ in range(i + 1, len(names)):  # never encoded: their rows are let go too
                    done()
                raise

    def submit_batch(self, names: list[str], edges, done: Callable) -> None:
        """A batch's frames (``edges[i]`` the edge map of ``names[i]``), encoded and written
        in tasks of up to FRAMES_A_TASK, as many tasks as workers where the batch has the
        frames; ``done`` is called once a frame's edges are no longer read."""
        size = max(1, min(FRAMES_A_TASK, len(names) // self.workers))
        for start in range(0, len(names), size):
            part = names[start : start + size]
            self.submit(self.encode_writes, part, edges[start : start + size], done,
                        frames=len(part))  # fmt: skip

    def compute_encode_write(self, backend, frame: Frame) -> None:
        try:
            with self.clock.timed("compute", frame.out_name):
                edges = backend.detect(frame.pixels[np.newaxis])[0]
            self.encode_write(frame.out_name, edges)
        finally:  # its pixels, edges and PNG are gone with this task: its reservation too
            self.budget.release(frame.out_name)

    def submit(self, fn: Callable, *args, frames: int = 1) -> None:
        """``fn(*args)`` on the pool, a task of ``frames`` frames."""
        self.pending.append((self.pool.submit(fn, *args), frames))
        self.outstanding += frames
        while self.outstanding > self.window:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        task, frames = self.pending.popleft()
        with self.waits.timed("encode"):
            task.result()  # re-raises a worker's error here
        self.outstanding -= frames
        self.on_done(frames)

    def drain(self) -> None:
        while self.pending:
            self._finish_oldest()
