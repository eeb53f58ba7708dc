"""Encode and write: PNG tasks on the worker pool, or on the encoder processes
(:mod:`edgecli.encoders`) for rows the GPU packed into their shared buffers; a window of them
outstanding."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from ..memory import FrameBudget
from ..params import Options
from ..png import PackedEdges, encode_png
from ..sinks import (
    write_atomic,
)
from ..sources import (
    Frame,
)
from ..timing import WaitClock


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
        encoders=None,
    ):
        self.pool, self.out_dir, self.options, self.clock = pool, out_dir, options, clock
        self.window, self.on_done = window, on_done
        self.budget = budget or FrameBudget(None, 0)
        self.pending: deque[Future] = deque()
        self.waits = WaitClock()
        # With ``keep_written``, the output names, as each PNG is in place (what clears a
        # folder's mixed mark); else nothing is kept a frame.
        self.written: list[str] | None = [] if keep_written else None
        self.encoders = encoders  # EncoderProcesses, or None: every PNG on the pool
        self.by_processes = 0  # PNGs the encoder processes wrote

    def write_batch(self, names: list[str], edges: list, done: Callable) -> None:
        """A batch's PNGs, from its edge maps or packed rows; ``done`` is called once for
        each, when its ``edges`` are no longer read. Rows in the encoder processes' buffers
        go to them, the rest to the pool."""
        encoders = self.encoders
        if encoders is None or not all(isinstance(e, PackedEdges) for e in edges) \
                or not all(encoders.owns(e.rows) for e in edges):  # fmt: skip
            for name, frame_edges in zip(names, edges, strict=True):
                self.submit(self.encode_write, name, frame_edges, done)
            return
        items = [(name, self.out_dir / name, e) for name, e in zip(names, edges, strict=True)]
        for future in encoders.submit(items, done, self._written_by_process):
            self._outstanding(future)

    def _written_by_process(self, name: str, encode_ms: float, write_ms: float) -> None:
        self.by_processes += 1  # on the encoders' one collector thread
        self.clock.record("encode", encode_ms, name)
        self.clock.record("write", write_ms, name)
        if self.written is not None:
            self.written.append(name)

    def encode_write(self, name: str, edges: np.ndarray, done: Callable | None = None) -> None:
        """Encode and write one PNG; ``done`` is called once ``edges`` is no longer read."""
        try:
            with self.clock.timed("encode", name):
                data = encode_png(edges, self.options.png_bits)
        finally:
            if done is not None:
                done()
        with self.clock.timed("write", name):
            write_atomic(self.out_dir / name, data)
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
        self._outstanding(self.pool.submit(fn, *args))

    def _outstanding(self, future: Future) -> None:
        self.pending.append(future)
        while len(self.pending) > self.window:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        with self.waits.timed("encode"):
            self.pending.popleft().result()  # re-raises a worker's error here
        self.on_done()

    def drain(self) -> None:
        while self.pending:
            self._finish_oldest()
