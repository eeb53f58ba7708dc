"""The interfaces the GPU path of the pipeline (:mod:`.batches`) drives, written down once:
the ring of slabs a backend streams batches through, and what GPU decoding hands it. The CUDA
implementations are :mod:`edgecli.edges.ring` and :mod:`edgecli.decode.gpu.slots`;
:mod:`tests.standins` has stand-ins for each, which run the pipeline's GPU path on host
threads. Typing only: nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np


class InFlight(Protocol):
    """A batch submitted to a slab's stream."""

    def ready(self) -> bool:
        """Whether :meth:`result` would return at once; never waits."""
        ...

    def result(self) -> tuple[Sequence[Any], dict[str, float]]:
        """Waits: the batch's edge maps (or packed PNG rows), valid until :meth:`release`,
        and the GPU milliseconds of each stage."""
        ...

    def release(self) -> None:
        """The encoders are done with the outputs: the slab may be filled again."""
        ...


class Filling(Protocol):
    """A slab taken for one batch: host frames are copied into ``inputs`` and submitted, or
    frames already on the device are submitted as they are."""

    inputs: np.ndarray | None  # (capacity, H, W, 3) pinned, for host frames; else None

    def submit(self, n: int) -> InFlight:
        """Upload ``inputs[:n]``, then kernel and download, on the slab's stream."""
        ...

    def submit_device(self, frames: Any, ready: Any, then: Callable | None = None) -> InFlight:
        """Kernel and download of device ``frames`` once the event ``ready`` fired;
        ``then(stream)`` once the kernel that reads them is queued."""
        ...

    def release(self) -> None:
        """Give the slab back unsubmitted."""
        ...


class SlabRing(Protocol):
    """Slabs used in turn; the caller keeps fewer batches in flight than there are slabs and
    collects them in order."""

    def fill(self, shape: tuple[int, ...], capacity: int, host_input: bool = True) -> Filling:
        """The next slab for up to ``capacity`` frames of ``shape`` (H, W, 3), once the
        encoders of its last batch are done with it."""
        ...


class DecodedBatch(Protocol):
    """Frames a GPU decoder put in device memory (edgecli.decode.gpu.slots.DeviceBatch)."""

    names: list[str]
    sources: list[str]
    frames: Any  # (n, H, W, 3) uint8 BGR on the device
    ready: Any  # the CUDA event after which they are there
    decoders: dict[str, int]  # frames per decoder
    errors: list  # FrameErrors of the batch's files that could not be decoded
    timed: tuple[str, str]  # the resource decode_ms() occupied, and the stage it counts as

    def result(self) -> DecodedBatch: ...

    def decode_ms(self) -> float: ...

    def consumed(self, stream: Any) -> None:
        """The kernel that reads the frames is queued on ``stream``: the buffer may be reused
        once it has run."""
        ...

    def discard(self) -> None: ...
