"""The memory budget for frames in flight: how many bytes of frames a run may hold at once.

Without it, what a run holds is its window of frames times their size, and a frame's size is set by
its header: at the default --max-pixels a PNG of a few MB may declare 16384 x 16384 pixels,
gigabytes on the CPU backend, and a window of them more than any machine has. So each frame reserves
its cost before it is decoded, from the size its header declares, and gives it back once its edge
map is written (the CPU backend) or its pixels are in the GPU's pinned buffers; a frame whose cost
does not fit waits until others give theirs back (back-pressure), and a frame that could never fit,
even alone, is a FrameError naming it and both sizes.
"""

from __future__ import annotations

import os
import threading

from ..errors import FrameError

# What one frame costs while it is in flight, per pixel. On the host (the CPU backend) it is
# its file's bytes, its decoded pixels (3 bytes), its luma (1), int16 gradients (4) and its
# edge map (1), not all alive at once; 10 covers them and leaves room for what a worker's
# allocator keeps. On the GPU path the host holds only the decoded
# pixels until they are copied.
HOST_BYTES_PER_PIXEL = 10
DECODED_BYTES_PER_PIXEL = 3

# The default budget: this share of the memory available when the run starts.
DEFAULT_SHARE = 0.5


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def default_budget() -> int | None:
    available = available_memory()
    return None if available is None else int(available * DEFAULT_SHARE)


class FrameBudget:
    """Reservations of bytes, by frame name, that never add up to more than ``limit``.

    ``limit`` None: no budget (every call returns at once). Reservations are given back by
    name, from any thread; ``peak`` is the most ever reserved at once.
    """

    def __init__(self, limit: int | None, bytes_per_pixel: int):
        self.limit, self.bytes_per_pixel = limit, bytes_per_pixel
        self.reserved = 0
        self.peak = 0
        self._held: dict[str, int] = {}
        self._changed = threading.Condition()
        self._cancelled = False  # the run is ending: no one waits for room any more

    @property
    def active(self) -> bool:
        return self.limit is not None

    def cost(self, pixels: int | None) -> int:
        return 0 if pixels is None else pixels * self.bytes_per_pixel

    def _check(self, source: str, nbytes: int) -> None:
        if self.limit is not None and nbytes > self.limit:
            raise FrameError(
                source,
                f"a frame this size needs {nbytes} bytes in flight, more than the memory "
                f"budget of {self.limit} bytes (raise it with --max-memory)",
            )

    def _take(self, name: str, nbytes: int) -> None:
        self._held[name] = self._held.get(name, 0) + nbytes
        self.reserved += nbytes
        self.peak = max(self.peak, self.reserved)

    def try_reserve(self, name: str, nbytes: int, source: str) -> bool:
        """Reserve ``nbytes`` for ``name`` if they fit now; FrameError if they never can."""
        if self.limit is None or nbytes == 0:
            return True
        self._check(source, nbytes)
        with self._changed:
            if self.reserved + nbytes > self.limit:
                return False
            self._take(name, nbytes)
            return True

    def reserve(self, name: str, nbytes: int, source: str) -> None:
        """Reserve ``nbytes`` for ``name``, waiting until they fit. The caller must hold
        nothing that is given back only after this returns: what it waits for must be given
        back by others (a frame that fits always proceeds once nothing else is held)."""
        if self.limit is None or nbytes == 0:
            return
        self._check(source, nbytes)
        with self._changed:
            while self.reserved + nbytes > self.limit and not self._cancelled:
                self._changed.wait()
            if not self._cancelled:
                self._take(name, nbytes)

    def cancel(self) -> None:
        """End every wait for room, now and later: the run is stopping (a signal, an error)
        and the frames that would give room back will not be consumed. A reader waiting in
        :meth:`reserve` then returns at once, and finds its queue closed."""
        with self._changed:
            self._cancelled = True
            self._changed.notify_all()

    def release(self, name: str) -> None:
        """Give back what ``name`` holds, if anything."""
        if self.limit is None:
            return
        with self._changed:
            nbytes = self._held.pop(name, 0)
            if nbytes:
                self.reserved -= nbytes
                self._changed.notify_all()
