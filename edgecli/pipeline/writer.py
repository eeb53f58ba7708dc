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
        self.pending: deque[Future] = deque()
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

    def compute_encode_write(self, backend, frame: Frame) -> None:
        try:
            with self.clock.timed("compute", frame.out_name):
                edges = backend.detect(frame.pixels[np.newaxis])[0]
            self.encode_write(frame.out_name, edges)
        finally:  # its pixels, edges and PNG are gone with this task: its reservation too
            self.budget.release(frame.out_name)

    def submit(self, fn: Callable, *args) -> None:
        self.pending.append(self.pool.submit(fn, *args))
        while len(self.pending) > self.window:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        with self.waits.timed("encode"):
            self.pending.popleft().result()  # re-raises a worker's error here
        self.on_done()

    def drain(self) -> None:
        while self.pending:
            self._finish_oldest()
