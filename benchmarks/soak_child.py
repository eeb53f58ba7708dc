"""``edgecli`` as ``python -m edgecli`` runs it, plus every thread's stack on SIGUSR1: the soak
(``soak.py``) starts each run through this, and signals a run past its deadline before it
kills it. Faulthandler's handler is C, so the stacks come even while every thread waits in C
(a lock, a read, a CUDA call) and no Python code can run.

    python -X faulthandler benchmarks/soak_child.py run INPUT -o OUT ...

Environment, read by this wrapper only (edgecli never sees a difference):

- ``SOAK_STACKS``: the file the stacks go to (default: stderr).
- ``SOAK_STALL``: make this run stall, to prove the watchdog: ``start`` waits forever before
  edgecli starts; ``write:N`` lets the run go until its Nth PNG write, which then waits
  forever on its worker thread, the rest of the pipeline stuck behind it (the write is
  replaced in this process only, where edgecli's writer looks it up).
- ``BENCH_SETTING``: a line of Python run before edgecli starts, a variant that ``pays.py``
  compares (a module constant set, an interpreter setting).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# As `python -m edgecli` from the checkout: edgecli from here, not this folder's modules.
sys.path[0] = str(REPO)

_stacks = None  # the open stacks file: faulthandler keeps its descriptor, not the object


def stall_forever() -> None:
    """What a stalled run does: wait on something that never comes."""
    threading.Event().wait()


def stall_at_write(n: int) -> None:
    """The ``n``th PNG write (counted over every writer thread) never returns."""
    from edgecli.pipeline import writer

    if not callable(getattr(writer, "write_atomic", None)):
        raise SystemExit("SOAK_STALL=write:N: edgecli.pipeline.writer.write_atomic is gone")
    write_atomic, lock, calls = writer.write_atomic, threading.Lock(), [0]

    def stalled_write(*args, **kwargs):
        with lock:
            calls[0] += 1
            mine = calls[0]
        if mine == n:
            stall_forever()
        return write_atomic(*args, **kwargs)

    writer.write_atomic = stalled_write


def main() -> None:
    global _stacks
    path = os.environ.get("SOAK_STACKS")
    _stacks = open(path, "w") if path else sys.stderr  # noqa: SIM115 - open for the process
    faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
    stall = os.environ.get("SOAK_STALL", "")
    if stall == "start":
        stall_forever()
    elif stall.startswith("write:"):
        stall_at_write(int(stall.split(":", 1)[1]))
    elif stall:
        raise SystemExit(f"SOAK_STALL={stall!r}: expected start or write:N")
    setting = os.environ.get("BENCH_SETTING", "")
    if setting:
        exec(setting, {})  # noqa: S102 - the benchmark's own line, not input
    from edgecli.cli import console

    console()


if __name__ == "__main__":
    main()
