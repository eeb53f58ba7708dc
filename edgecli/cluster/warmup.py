"""A Dask worker's preload for the clusters edgecli starts (``--scheduler local:N``,
``--device`` with several GPUs): the work a task would otherwise begin with, begun as the
worker starts, on a thread of its own, while the client lists the sources.

The worker process imports the pipeline (NumPy, OpenCV) and, where its tasks will run on a
GPU, starts CuPy on it, compiles or loads the options' kernel variant and opens the JPEG
engines' decoder, which is kept for the first task (:mod:`edgecli.decode.engines`): all of it
slow, and otherwise paid by each worker's first task. What it cannot do is left for the task,
which then says why, as a run would.
"""

from __future__ import annotations

import json
import os
import threading

from ..decode import engines
from ..options.params import Options

WARM_UP_ENV = "EDGECLI_WARM_UP"  # what to start: {"cuda": bool, "jpeg": bool, "norm", "border"}


def settings(options, kind: str, inputs: list[str]) -> dict:
    """What a worker of a ``kind`` cluster (``local``, ``devices``) should start for a run
    of ``inputs`` with ``options`` (as :func:`edgecli.cluster.run.task_options` sets them)."""
    from ..decode.plan import engines_wanted  # NumPy, OpenCV: kept out of a worker's preload

    cuda = options.backend == "cuda" or (kind == "devices" and options.backend == "auto")
    jpeg = cuda and engines_wanted(options, inputs)
    return {"cuda": cuda, "jpeg": jpeg, "norm": options.norm, "border": options.border}


def dask_setup(worker) -> None:
    """Dask's preload hook: start warming up, never holding up the worker's start."""
    wanted = json.loads(os.environ.get(WARM_UP_ENV) or "{}")
    threading.Thread(target=warm_up, args=(wanted,), name="edgecli-warm-up", daemon=True).start()


def warm_up(wanted: dict) -> None:
    try:
        from .. import pipeline  # noqa: F401 -- on this thread: NumPy, OpenCV, the pipeline

        if not wanted.get("cuda"):
            return
        from ..edges.backends import cuda_unusable_reason  # on this thread, as the pipeline

        options = Options(norm=wanted["norm"], border=wanted["border"])
        if cuda_unusable_reason(0, options) is None and wanted.get("jpeg"):
            engines.open_jpeg_decoder("hardware", 0)
    except Exception:  # noqa: S110 -- the task meets the same problem, and reports it
        pass
