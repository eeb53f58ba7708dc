"""The GPU path's batching: frames (or batches the GPU decoded) into the slab ring, the kernel
and the packed rows back, batches handed to the encoders in order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from ..errors import FrameError
from ..inputs.sources import Frame
from ..options.params import Options
from ..output.timing import StageClock, WaitClock
from ..workers import Lane
from .protocols import DecodedBatch, SlabRing
from .writer import Writer


def copy_frame(clock: StageClock, frame: Frame, out: np.ndarray) -> None:
    """Copy a decoded frame into its place in a slab's pinned input: a worker's task."""
    with clock.timed("copy", frame.out_name):
        np.copyto(out, frame.pixels)


@dataclass
class DecodeTally:
    """Frames by the decoder that gave them, and the megapixels of those the GPU decoded."""

    frames: dict[str, int] = field(default_factory=dict)
    megapixels: float = 0.0

    def add(self, counts: dict[str, int], megapixels: float = 0.0) -> None:
        for name, count in counts.items():
            self.frames[name] = self.frames.get(name, 0) + count
        self.megapixels += megapixels


# Decoded batches the run holds while the main thread hands the one before them to the kernel,
# where a batch does not say (its decoder's ``ahead``): a video session's, a stand-in's.
DECODE_AHEAD = 2


def _raise(error: BaseException) -> None:
    raise error


def run_on_gpu(
    ring: SlabRing,
    frames: Iterable[Frame | DecodedBatch],
    options: Options,
    copies: Lane,
    clock: StageClock,
    writer: Writer,
    waits: WaitClock,
    on_copied: Callable[[str], None] | None = None,
    on_failed: Callable[[FrameError], None] | None = None,
    tally: DecodeTally | None = None,
) -> None:
    """Stream ``frames`` through the GPU in batches of up to ``options.batch`` same-shape
    frames, ``options.streams`` batches in flight; each batch's GPU time goes to ``clock``.

    A batch takes the ring's next slab with its first frame, and each frame is copied into
    the slab's pinned input by a task on ``copies`` as soon as it is here, so the copies
    overlap the wait for the next frames; the batch is submitted once full, at a change of
    frame shape, or at the end, in one upload (one call a frame made the main thread give up
    the GIL and win it back from busy workers each time). Batches are collected in the order
    submitted, each as soon as a batch starts after it is done, or when its stream is
    needed; the ring has SPARE_SLABS more slabs than batches in flight, and a slab is refilled
    once its frames' PNGs are all encoded (the encoders read its pinned output directly).
    ``on_copied(name)`` is called once a frame is in its slab.

    Items of ``frames`` that are not Frames are batches the GPU decodes (futures of
    edgecli.decode.gpu.slots.DeviceBatch): up to DECODE_AHEAD of them decode while the one
    before goes to the kernel, which reads the decoder's buffer. ``on_failed(error)`` is told of
    each file such a batch could not decode; ``tally`` counts the frames each decoder gave.
    """
    batches = GpuBatches(ring, options, copies, clock, writer, waits, on_copied, on_failed, tally)
    for frame in frames:
        if isinstance(frame, Frame):
            batches.add_frame(frame)
        else:
            batches.add_decoded(frame)
    batches.finish()


class GpuBatches:
    """:func:`run_on_gpu`'s state: the batch being filled, the batches the GPU decodes, and
    those in flight on the ring, collected in order."""

    def __init__(self, ring, options, copies, clock, writer, waits, on_copied, on_failed, tally):
        self.ring, self.options, self.copies = ring, options, copies
        self.clock, self.writer, self.waits = clock, writer, waits
        self.on_copied, self.on_failed = on_copied, on_failed or _raise
        self.tally = tally or DecodeTally()
        self.in_flight: deque = deque()  # (names, InFlight, DeviceBatch or None), in order
        self.batch: list[Frame] = []  # host frames of the batch being filled
        self.copied: list[Future] = []  # their copies into its slab
        self.filling = None
        self.decoding: deque = deque()  # batches decoding on the GPU, oldest first

    def add_frame(self, frame: Frame) -> None:
        """A host frame: into the batch being filled (a new one where shape or size says)."""
        while self.decoding:
            self.submit_decoded()
        batch, shape = self.batch, frame.pixels.shape
        if batch and (len(batch) == self.options.batch or shape != batch[0].pixels.shape):
            self.submit()
        if not batch:
            self.make_room()
            with self.waits.timed("submit"):  # the encoders of the slab's last batch
                self.filling = self.ring.fill(shape, self.options.batch)
        copy = self.copies.submit(copy_frame, self.clock, frame, self.filling.inputs[len(batch)])
        if self.on_copied is not None:  # called on the worker, as the copy ends
            copy.add_done_callback(lambda _, name=frame.out_name: self.on_copied(name))
        self.copied.append(copy)
        batch.append(frame)

    def add_decoded(self, decoding) -> None:
        """A batch the GPU decodes: queued, the oldest submitted once more wait than its
        decoder keeps going at once (its ``ahead``, else DECODE_AHEAD)."""
        if self.batch:
            self.submit()
        self.decoding.append(decoding)
        while len(self.decoding) > getattr(decoding, "ahead", DECODE_AHEAD):
            self.submit_decoded()

    def finish(self) -> None:
        if self.batch:
            self.submit()
        while self.decoding:
            self.submit_decoded()
        while self.in_flight:
            self.collect()

    def collect(self) -> None:
        """The oldest batch in flight, once done: its edge maps to the encoders."""
        names, pending, decoded = self.in_flight.popleft()
        with self.waits.timed("gpu"):
            edges, gpu_ms = pending.result()
        # A batch's times, shared by its frames: on its stream, and in its decoder (the JPEG
        # engines or an NVDEC session, each saying which resource it occupied, and as what).
        timed = [(stage, ms, None) for stage, ms in gpu_ms.items()]
        if decoded is not None:
            resource, stage = decoded.timed
            timed.append((stage, decoded.decode_ms(), resource))
        for stage, ms, resource in timed:
            self.clock.record_each(stage, ms / len(names), names, resource)
        self.writer.encode_batch(names, edges, pending.release)

    def make_room(self) -> None:
        """Hand finished batches to the encoders now, not when their stream is next needed:
        their slabs come free sooner, and the encoders get work while it waits."""
        in_flight = self.in_flight
        while in_flight and (len(in_flight) == self.options.streams or in_flight[0][1].ready()):
            self.collect()

    def submit_decoded(self) -> None:
        """The oldest batch decoding on the GPU, once its decoder has queued it: its frames
        go to the kernel straight from the decoder's buffer."""
        with self.waits.timed("gpu_decode"):
            decoded = self.decoding.popleft().result()
        for error in decoded.errors:
            self.on_failed(error)
        self.tally.add(decoded.decoders, decoded.frames.size / 3e6)
        if not decoded.names:
            decoded.discard()
            return
        self.make_room()
        n = len(decoded.names)
        with self.waits.timed("submit"):  # the encoders of the slab's last batch
            target = self.ring.fill(decoded.frames.shape[1:], n, host_input=False)
        flight = target.submit_device(decoded.frames, decoded.ready, decoded.consumed)
        self.in_flight.append((decoded.names, flight, decoded))

    def submit(self) -> None:
        """The batch being filled, once its copies are done: upload, kernel, download."""
        with self.waits.timed("submit"):  # the batch's last copies into pinned memory
            for copy in self.copied:
                copy.result()  # raises a copy's error, if any
        # Only the names stay: the frames' pixels are in the slab now, and can be freed.
        names = [frame.out_name for frame in self.batch]
        self.in_flight.append((names, self.filling.submit(len(self.batch)), None))
        self.tally.add({"cpu": len(self.batch)})
        self.batch.clear()
        self.copied.clear()
