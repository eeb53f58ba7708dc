"""Encode and write: PNG tasks on the worker pool, a window of them outstanding."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from ..inputs.sources import Frame
from ..options.params import Options
from ..output.png import encode_png
from ..output.sinks import write_atomic
from ..output.timing import WaitClock
from .budget import FrameBudget

# Frames an encode task of a GPU batch takes. Each task is a hand-off from the main thread,
# which then waits to win the GIL back from the workers: a few frames a task cut those waits
# as many times, and a batch still spreads over several workers.
FRAMES_A_TASK = 8


class CountDown:
    """Calls ``then`` once ``count`` calls of :meth:`done` have come, from any threads."""

    def __init__(self, count: int, then: Callable[[], None]):
        self.count, self.then = count, then
        self.lock = threading.Lock()

    def done(self) -> None:
        with self.lock:
            self.count -= 1
            last = self.count == 0
        if last:
            self.then()


class Writer:
    """Encode-and-write tasks on the pool, at most ``window`` outstanding."""

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
    ):
        self.pool, self.out_dir, self.options, self.clock = pool, out_dir, options, clock
        self.window, self.on_done = window, on_done
        self.budget = budget or FrameBudget(None, 0)
        self.pending: deque[tuple[Future, int]] = deque()  # each task, and its frames
        self.waits = WaitClock()
        # With ``keep_written``, the output names, as each PNG is in place (what clears a
        # folder's mixed mark); else nothing is kept a frame.
        self.written: list[str] | None = [] if keep_written else None

    def encode_write(self, names: Sequence[str], edges: Sequence, done: Callable | None = None):
        """Encode and write the PNGs ``names`` of the maps ``edges``; ``done`` is called once
        no map is read any more."""
        try:
            encoded = []
            for name, frame_edges in zip(names, edges, strict=True):
                with self.clock.timed("encode", name):
                    encoded.append(encode_png(frame_edges, self.options.png_bits))
        finally:
            if done is not None:
                done()
        for name, data in zip(names, encoded, strict=True):
            with self.clock.timed("write", name):
                # A --recursive run's subfolders of the output folder are made as needed.
                write_atomic(self.out_dir / name, data, make_folder=True)
            if self.written is not None:
                self.written.append(name)

    def encode_batch(self, names: Sequence[str], edges: Sequence, then: Callable[[], None]):
        """The maps of a batch to the encoders, FRAMES_A_TASK a task; ``then`` is called once
        every task has read its maps."""
        starts = range(0, len(names), FRAMES_A_TASK)
        read = CountDown(len(starts), then)
        for start in starts:
            part = slice(start, start + FRAMES_A_TASK)
            self.submit(self.encode_write, names[part], edges[part], read.done,
                        frames=len(names[part]))  # fmt: skip

    def compute_encode_write(self, backend, frame: Frame) -> None:
        try:
            with self.clock.timed("compute", frame.out_name):
                edges = backend.detect(frame.pixels[np.newaxis])[0]
            self.encode_write([frame.out_name], [edges])
        finally:  # its pixels, edges and PNG are gone with this task: its reservation too
            self.budget.release(frame.out_name)

    def submit(self, fn: Callable, *args, frames: int = 1) -> None:
        """``fn(*args)`` on the pool: a task that writes ``frames`` PNGs."""
        self.pending.append((self.pool.submit(fn, *args), frames))
        while len(self.pending) > self.window:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        future, frames = self.pending.popleft()
        with self.waits.timed("encode"):
            future.result()  # re-raises a worker's error here
        self.on_done(frames)

    def drain(self) -> None:
        while self.pending:
            self._finish_oldest()
