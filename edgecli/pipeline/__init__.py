"""The run: sources -> decode -> backend -> encode and write -> summary.

One pool of worker threads does the host work, by priority: copying frames into the GPU's
pinned buffers first, then encoding and writing (and, for the CPU backend, computing first, so
every core computes), then decoding (see :mod:`edgecli.workers`). OpenCV and NumPy release the
GIL in their heavy loops, so threads scale over cores without copying frames between
processes. The main thread submits the decodes, batches, drives the GPU and hands edge maps to
the encoders.
Queues are bounded, whatever the number of frames: ``window`` decoded frames wait for the main
thread (a video's or multi-frame file's in its reader's queue, and ``FOLLOWING_DEPTH`` more in
the next file's), and at most ``window`` edge maps wait for their PNGs.
"""

from __future__ import annotations

from .batches import run_on_gpu
from .reader import FOLLOWING_DEPTH, Failure, FrameReader, RunAhead
from .runner import (
    SPARE_SLABS,
    WINDOW_PER_WORKER,
    checked_sources,
    listed_run,
    run,
    run_callbacks,
    summary_params,
    with_reports,
)
from .writer import Writer

__all__ = [
    "FOLLOWING_DEPTH", "SPARE_SLABS", "WINDOW_PER_WORKER", "Failure", "FrameReader", "RunAhead",
    "Writer", "checked_sources", "listed_run", "run", "run_callbacks",
    "run_on_gpu", "summary_params", "with_reports",
]  # fmt: skip
