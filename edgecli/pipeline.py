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

import operator
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from . import resume
from .backends import select_backend
from .decoders import JPEG_SUFFIXES
from .errors import CudaUnavailableError, FrameError, OutputError
from .memory import DECODED_BYTES_PER_PIXEL, HOST_BYTES_PER_PIXEL, FrameBudget, default_budget
from .params import Options, check_path
from .png import encode_png
from .shards import format_shard, shard_of
from .sinks import (
    check_output_name,
    discard_reports,
    open_reports,
    prepare_output_dir,
    remove_stale_temporaries,
    write_atomic,
    write_reports,
)
from .sources import (
    Frame,
    check_size,
    count_frames,
    declared_pixels,
    decode_image,
    discover_inputs,
    input_list,
    read_file,
    refuse_overwriting_inputs,
)
from .timing import StageClock, Summary, WaitClock
from .workers import Lane, PriorityPool, start_thread


@dataclass(frozen=True)
class Failure:
    """A frame (or a whole source) that could not be decoded, in --on-error skip mode."""

    source: str
    reason: str


class _End:
    """Marks the end of a read-ahead queue."""


@dataclass(frozen=True)
class _Raised:
    """An exception on a read-ahead thread, handed to the consumer to re-raise."""

    error: BaseException


class RunAhead:
    """Iterate ``items`` on a thread of its own, started at once, at most ``depth`` items ahead
    of the consumer (:meth:`widen` raises that).

    The consumer gets the items in order, with the time it waits for them in ``waits`` under
    ``stage``; an exception on the thread is raised in the consumer. :meth:`close` (also
    called when the iteration ends or is closed) stops the thread, at its next item, and
    waits for it; if the consumer leaves before the end, ``abandon`` is called first, to end
    any wait of the thread's own that only the consumer would end (a memory budget's).
    """

    def __init__(
        self,
        items: Iterable,
        depth: int,
        name: str,
        waits: WaitClock,
        stage: str,
        abandon: Callable[[], None] | None = None,
    ):
        self.queued: deque = deque()
        self.abandon = abandon
        self.finished = False  # the consumer took the last item
        self.depth = depth
        self.changed = threading.Condition()  # an item queued or taken, depth or stop changed
        self.stopped = False
        self.waits, self.stage = waits, stage
        self.thread = threading.Thread(target=self._produce, args=(items,), name=name, daemon=True)
        start_thread(self.thread, "a reader thread")

    def widen(self, depth: int) -> None:
        """Let the thread run up to ``depth`` items ahead from now on."""
        with self.changed:
            self.depth = max(self.depth, depth)
            self.changed.notify_all()

    def _put(self, item, *, last: bool = False) -> bool:
        """Queue ``item`` once there is room (the last, which holds no frame, at once)."""
        with self.changed:
            while not (last or self.stopped or len(self.queued) < self.depth):
                self.changed.wait()
            if self.stopped:
                return False
            self.queued.append(item)
            self.changed.notify_all()
            return True

    def _produce(self, items: Iterable) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
            self._put(_End, last=True)
        except BaseException as exc:  # re-raised on the consumer's thread
            self._put(_Raised(exc), last=True)

    def _take(self):
        with self.waits.timed(self.stage), self.changed:
            while not self.queued:
                self.changed.wait()
            item = self.queued.popleft()
            self.changed.notify_all()
            return item

    def __iter__(self) -> Iterator:
        try:
            while True:
                item = self._take()
                if item is _End:
                    self.finished = True
                    return
                if isinstance(item, _Raised):
                    raise item.error
                yield item
        finally:
            self.close()

    def close(self) -> None:
        with self.changed:
            self.stopped = True
            self.changed.notify_all()
        if not self.finished and self.abandon is not None:
            self.abandon()
        self.thread.join()


# Frames the next video (or multi-frame file) is read ahead while the one before it is still
# being consumed: enough to have it open and decoding, with its slow first frame (on the H200,
# 60-90 ms after the 60 ms of opening an H.264 clip) done. It reads on at full depth when its
# turn comes; a whole window here as well held 65 frames more (400 MB of 1080p) on a run of
# three clips.
FOLLOWING_DEPTH = 2


class FrameReader:
    """Decoded frames in input order, read ``window`` ahead.

    Still images decode on the pool. A video or multi-frame file decodes in order from its one
    reader, on a thread of its own, so that reader never waits for the consumer; and while one
    is read, the next input, if it is one too, is opened and read ahead by a reader of its own,
    so that opening it (on the H200 about 130 ms for an H.264 clip: a quarter of the time one
    reader takes for 240 frames) overlaps the frames before it. The reader being consumed runs
    at most ``window`` frames ahead, the next one at most ``FOLLOWING_DEPTH`` until its turn
    comes: so the frames held stay those of one window, not two. Frames whose output
    ``wanted`` rejects (whole already, under --skip-existing) are not decoded where that can
    be avoided.

    Under an active ``budget`` (:mod:`edgecli.memory`) each frame reserves its cost: a still
    image from its header, before its decode is submitted (while it does not fit, the frames
    decoded already are handed on first, then the main thread waits); a sequence's frame on
    its reader, once decoded, before it is queued, once its turn has come. The next sequence,
    read ahead, reserves nothing for its few frames (FOLLOWING_DEPTH and one being decoded):
    what it held would be given back only after the one before it, which might wait for it.
    """

    def __init__(
        self, pool, clock: StageClock, options: Options, wanted, window: int, budget=None,
        gpu=None, read_pool=None,
    ):  # fmt: skip
        self.pool, self.clock, self.options, self.wanted = pool, clock, options, wanted
        # Files read for the GPU's JPEG decoder come before encodes (they feed the engines, and
        # take a fraction of a millisecond), on ``read_pool``; decodes on the CPU come after.
        self.read_pool = read_pool or pool
        self.window = window
        self.budget = budget or FrameBudget(None, 0)
        # GPU decoders (gpu_decode.GpuDecoders, or a stand-in): JPEGs go to gpu.jpeg in
        # batches, videos to gpu.fleet(...); None: every frame is decoded on the CPU.
        self.gpu = gpu
        self.waits = WaitClock()
        self.skipped_existing = 0
        self._skipped_lock = threading.Lock()  # readers count from their own threads

    def _skipped(self) -> None:
        with self._skipped_lock:
            self.skipped_existing += 1

    def _decode(self, source, read: Callable | None = None) -> Frame | Failure:
        """``source`` decoded on the CPU (or what ``read(source)`` makes of it), a Failure
        where it cannot be; either way its reservation goes with an error."""
        try:
            if read is not None:
                return read(source)
            with self.clock.timed("decode", source.out_name):
                return source.decode(self.options.max_pixels)
        except FrameError as exc:
            self.budget.release(source.out_name)
            return self._failure(exc)
        except BaseException:
            self.budget.release(source.out_name)
            raise

    def _failure(self, exc: FrameError) -> Failure:
        if self.options.on_error == "fail":
            raise exc
        return Failure(exc.source, exc.reason)

    def _sequence_items(self, source, turn: threading.Event) -> Iterator[Frame | Failure]:
        frames = source.frames(self.options.max_pixels)
        while True:
            start = time.perf_counter()
            try:
                frame = next(frames, None)
            except FrameError as exc:  # the rest of this source is unreadable
                yield self._failure(exc)
                return
            if frame is None:
                return
            if isinstance(frame, FrameError):  # this frame is unreadable, the next may not be
                yield self._failure(frame)
                continue
            if not self.wanted(frame.out_name, partial(operator.mul, *frame.pixels.shape[:2])):
                self._skipped()
                continue
            self.clock.record("read", (time.perf_counter() - start) * 1e3, frame.out_name)
            height, width = frame.pixels.shape[:2]
            if turn.is_set():  # read ahead as the next sequence: no reservation (see frames)
                try:
                    cost = self.budget.cost(height * width)
                    self.budget.reserve(frame.out_name, cost, frame.source)
                except FrameError as exc:
                    yield self._failure(exc)
                    continue
            yield frame

    def _cost(self, header_pixels: Callable[[], int | None]) -> int:
        """A still image's cost from its header (read only under a budget); 0 for one over
        --max-pixels, which its decode refuses, saying so, before allocating it."""
        if not self.budget.active:
            return 0
        pixels = header_pixels()
        return 0 if pixels is None or pixels > self.options.max_pixels else self.budget.cost(pixels)

    def _sequence(self, source, depth: int, turn: threading.Event) -> RunAhead:
        """A reader of one sequence's items, started now, at most ``depth`` items ahead;
        its frames reserve their memory once ``turn`` is set."""
        items = self._sequence_items(source, turn)
        # Left early (a stop, an error), the run frees no more room: end the reader's wait.
        return RunAhead(items, depth, "edgecli-reader", self.waits, "decode", self.budget.cancel)

    def _read_for_gpu(self, source) -> Frame | object:
        """A still image read on the pool: an EncodedJpeg for the GPU's JPEG decoder where
        it decodes the file exactly, else the CPU's frame (from the bytes read)."""
        from .jpeg_planes import parse_header

        data = read_file(source.path)
        header = parse_header(data) if data[:2] == b"\xff\xd8" else None
        # Until the GPU's decoder is open (it takes a while), the CPU decodes.
        if header is None or header.gpu_reason is not None or not self.gpu.jpeg.ready():
            with self.clock.timed("decode", source.out_name):
                pixels = decode_image(source.path, data, self.options.max_pixels)
            return Frame(source.out_name, str(source.path), pixels)
        check_size(str(source.path), header.width * header.height, self.options.max_pixels)
        # The GPU decodes it into memory of its own: no host frame to reserve room for.
        self.budget.release(source.out_name)
        return self.gpu.encoded(source.out_name, str(source.path), source.path, data, header)

    def frames(self, sources: list) -> Iterator[Frame | Failure | object]:
        """Every frame of ``sources``: Frames (decoded on the host), Failures, and batches
        decoded on the GPU (with ``result()``), which come in the order they are ready."""
        fleet = None
        if self.gpu is not None and self.gpu.video:
            videos = [s for s in sources if s.multi_frame and s.kind == "video"]
            if videos:
                sources = [s for s in sources if not (s.multi_frame and s.kind == "video")]
                fleet = self.gpu.fleet(videos, self.wanted, self._skipped, self.clock)
        try:
            for item in self._in_order(sources):
                yield item
                if fleet is not None:
                    yield from self._fleet_items(fleet.ready())
            if fleet is not None:
                yield from self._fleet_items(fleet.rest())
        finally:
            if fleet is not None:
                fleet.close()

    def _fleet_items(self, items) -> Iterator:
        for item in items:
            yield self._failure(item) if isinstance(item, FrameError) else item

    def _in_order(self, sources: list) -> Iterator[Frame | Failure | object]:
        pending: deque[Future] = deque()  # still images on the pool, oldest first
        reader: RunAhead | None = None  # the sequence being read
        following: RunAhead | None = None  # the next one's reader, once started
        following_turn = threading.Event()  # set when the next one becomes the one read

        jpeg = self.gpu.jpeg if self.gpu is not None else None
        group: list = []  # EncodedJpegs for the GPU's next batch, in order, sharing a key

        def flush() -> Iterator:
            if group:
                yield jpeg.submit(list(group))
                group.clear()

        def oldest() -> Iterator:
            with self.waits.timed("decode"):
                item = pending.popleft().result()
            if not isinstance(item, (Frame, Failure)):  # read for the GPU's JPEG decoder
                full = len(group) >= jpeg.batch_for(item.header)
                if group and (item.key() != group[0].key() or full):
                    yield from flush()
                group.append(item)
                return
            yield from flush()
            yield item

        try:
            for i, source in enumerate(sources):
                if source.multi_frame:
                    if following is None:
                        turn = threading.Event()
                        reader = self._sequence(source, self.window, turn)
                    else:
                        reader, turn, following = following, following_turn, None
                    # Its turn: its frames reserve memory from now on, and it reads at full
                    # depth. Read ahead as the next one, it held at most FOLLOWING_DEPTH + 1
                    # frames unreserved: reserving them could wait for room that only the
                    # sequence before it, waiting for its turn to come, would give back.
                    turn.set()
                    reader.widen(self.window)
                    if i + 1 < len(sources) and sources[i + 1].multi_frame:
                        following_turn = threading.Event()
                        following = self._sequence(sources[i + 1], FOLLOWING_DEPTH, following_turn)
                    while pending:  # the images before it come first
                        yield from oldest()
                    yield from flush()
                    yield from reader  # its frames, read ahead in the reader's own queue
                    continue
                header_pixels = cache(partial(declared_pixels, source.path))  # read once
                # A JPEG for the GPU's decoder holds no decoded frame on the host: it reserves
                # nothing, and its header is not read here, on the main thread, where each
                # system call waits to win the GIL back from busy workers (a third of the main
                # thread's time at the engines' rate). Only --max-memory, a limit the user set,
                # still has every file's size weighed first, for the few the CPU decodes.
                for_gpu = jpeg is not None and source.path.suffix.lower() in JPEG_SUFFIXES
                if self.wanted(source.out_name, header_pixels):
                    try:
                        weigh = not for_gpu or self.options.max_memory is not None
                        cost = self._cost(header_pixels) if weigh else 0
                        while not self.budget.try_reserve(source.out_name, cost, str(source.path)):
                            if not pending:  # all it waits for is downstream: given back
                                self.budget.reserve(source.out_name, cost, str(source.path))
                                break
                            yield from oldest()
                    except FrameError as exc:
                        yield self._failure(exc)
                        continue
                    if for_gpu:
                        task = self.read_pool.submit(self._decode, source, self._read_for_gpu)
                        pending.append(task)
                    else:
                        pending.append(self.pool.submit(self._decode, source))
                else:
                    self._skipped()
                while len(pending) >= self.window:
                    yield from oldest()
            while pending:
                yield from oldest()
            yield from flush()
        finally:  # the run may end early: stop the readers' threads
            self.budget.cancel()  # a reader waiting for room would never get it
            for started in (reader, following):
                if started is not None:
                    started.close()


def copy_frame(pixels: np.ndarray, out: np.ndarray) -> None:
    """Copy a decoded frame into its place in a slab's pinned input: a worker's task."""
    np.copyto(out, pixels)


@dataclass
class DecodeTally:
    """Frames by the decoder that gave them, and the megapixels of those the GPU decoded."""

    frames: dict[str, int] = field(default_factory=dict)
    megapixels: float = 0.0

    def add(self, counts: dict[str, int], megapixels: float = 0.0) -> None:
        for name, count in counts.items():
            self.frames[name] = self.frames.get(name, 0) + count
        self.megapixels += megapixels


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


# Slabs beyond the batches on the GPU: a collected batch's slab is refilled only this many
# batches later, which gives its PNG encoders that long to finish reading it. With none spare,
# the slab just collected was the next one to fill, so the main thread waited for all of its
# encodes before every submit. (On 240-frame runs on the H200 this made no difference that
# the noise let us see: benchmarks/RESULTS.md, version 4.)
SPARE_SLABS = 2

# Decoded frames read ahead of the main thread, and edge maps waiting for their PNGs, at most,
# each: this many per worker, plus a batch.
WINDOW_PER_WORKER = 2

# Batches the GPU's decoders work on while the main thread hands the one before them to the
# kernel (the JPEG decoder's ring holds these, those on the GPU, and one more).
DECODE_AHEAD = 2


def _raise(error: BaseException) -> None:
    raise error


# The worker pool's priorities: the lowest runs first. Copies into pinned memory hold up the
# main thread, and so the GPU; an encode finishes a frame and frees its slab; a decode starts one.
COPY, ENCODE, DECODE = 0, 1, 2


def run_on_gpu(
    ring,
    frames: Iterable[Frame],
    options: Options,
    copies: Lane,
    clock: StageClock,
    writer: Writer,
    waits: WaitClock,
    on_copied: Callable[[str], None] | None = None,
    on_failed: Callable[[FrameError], None] | None = None,
    tally: DecodeTally | None = None,
) -> float:
    """Stream ``frames`` through the GPU in batches of up to ``options.batch`` same-shape
    frames, ``options.streams`` batches in flight; return the GPU's busy seconds.

    A batch takes the ring's next slab with its first frame, and each frame is copied into
    the slab's pinned input by a task on ``copies`` as soon as it is here, so the copies
    overlap the wait for the next frames; the batch is submitted once full, at a change of
    frame shape, or at the end, in one upload. (Before: each frame staged in pinned memory
    of its own and uploaded by one call per frame, each of which made the main thread give
    up the GIL and win it back from busy workers; on the H200 with JPEG input, the main
    thread was blocked 94% of the run, 60% of it in those calls.) Batches are collected in the
    order submitted, each as soon as a batch starts after it is done, or when its stream is
    needed; the ring has SPARE_SLABS more slabs than batches in flight, and a slab
    is refilled once its frames' PNGs are all encoded (the encoders read its pinned output
    directly). ``on_copied(name)`` is called once a frame is in its slab.

    Items of ``frames`` that are not Frames are batches the GPU decodes (futures of
    gpu_decode.DeviceBatch): up to DECODE_AHEAD of them decode while the one before goes to
    the kernel, which reads the decoder's buffer. ``on_failed(error)`` is told of each file
    such a batch could not decode; ``tally`` counts the frames each decoder gave.
    """
    on_failed = on_failed or _raise
    tally = tally or DecodeTally()
    in_flight: deque = deque()
    busy_ms = 0.0
    batch: list[Frame] = []
    copied: list[Future] = []
    filling = None
    decoding: deque = deque()  # batches decoding on the GPU, oldest first (their futures)

    def collect() -> None:
        nonlocal busy_ms
        names, pending, decoded = in_flight.popleft()
        with waits.timed("gpu"):
            edges, gpu_ms = pending.result()
        busy_ms += sum(gpu_ms.values())
        if decoded is not None:  # frames the GPU decoded: their decode's time, shared
            gpu_ms = gpu_ms | {"gpu_decode": decoded.decode_ms()}
        encoded = CountDown(len(names), pending.release)
        for name, frame_edges in zip(names, edges, strict=True):
            for stage, ms in gpu_ms.items():  # a batch's GPU time, shared by its frames
                clock.record(stage, ms / len(names), name)
            writer.submit(writer.encode_write, name, frame_edges, encoded.done)

    def make_room() -> None:
        """Hand finished batches to the encoders now, not when their stream is next needed:
        their slabs come free sooner, and the encoders get work while it waits."""
        while in_flight and (len(in_flight) == options.streams or in_flight[0][1].ready()):
            collect()

    def submit_decoded() -> None:
        """The oldest batch decoding on the GPU, once its decoder has queued it: its frames
        go to the kernel straight from the decoder's buffer."""
        with waits.timed("gpu_decode"):
            decoded = decoding.popleft().result()
        for error in decoded.errors:
            on_failed(error)
        tally.add(decoded.decoders, decoded.frames.size / 3e6)
        if not decoded.names:
            decoded.discard()
            return
        make_room()
        n = len(decoded.names)
        with waits.timed("submit"):  # the encoders of the slab's last batch
            target = ring.fill(decoded.frames.shape[1:], n, host_input=False)
        flight = target.submit_device(decoded.frames, decoded.ready, decoded.consumed)
        in_flight.append((decoded.names, flight, decoded))

    def submit() -> None:
        with waits.timed("submit"):  # the batch's last copies into pinned memory
            for copy in copied:
                copy.result()  # raises a copy's error, if any
        # Only the names stay: the frames' pixels are in the slab now, and can be freed.
        names = [frame.out_name for frame in batch]
        in_flight.append((names, filling.submit(len(batch)), None))
        tally.add({"cpu": len(batch)})
        batch.clear()
        copied.clear()

    for frame in frames:
        if not isinstance(frame, Frame):  # a batch the GPU decodes
            if batch:
                submit()
            decoding.append(frame)
            if len(decoding) > DECODE_AHEAD:
                submit_decoded()
            continue
        while decoding:
            submit_decoded()
        shape = frame.pixels.shape
        if batch and (len(batch) == options.batch or shape != batch[0].pixels.shape):
            submit()
        if not batch:
            make_room()
            with waits.timed("submit"):  # the encoders of the slab's last batch
                filling = ring.fill(shape, options.batch)
        copy = copies.submit(copy_frame, frame.pixels, filling.inputs[len(batch)])
        if on_copied is not None:  # called on the worker, as the copy ends
            copy.add_done_callback(lambda _, name=frame.out_name: on_copied(name))
        copied.append(copy)
        batch.append(frame)
    if batch:
        submit()
    while decoding:
        submit_decoded()
    while in_flight:
        collect()
    return busy_ms / 1e3


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


def frame_budget(options: Options, backend, workers: int, window: int) -> FrameBudget:
    """The run's memory budget for frames in flight (:mod:`edgecli.memory`): --max-memory, or
    a share of the memory available now. It is left inactive (no header is read for it) where
    even the most frames the queues can hold, each of --max-pixels, fit in it."""
    per_pixel = HOST_BYTES_PER_PIXEL if backend.runs_on_host else DECODED_BYTES_PER_PIXEL
    limit = options.max_memory or default_budget()
    # The frames the queues can hold at once: a window waiting for the main thread, a
    # sequence's queue and the next one's, a window waiting for PNGs, one on every worker.
    most = 3 * window + FOLLOWING_DEPTH + workers + 2
    if limit is None or limit >= most * options.max_pixels * per_pixel:
        return FrameBudget(None, per_pixel)
    return FrameBudget(limit, per_pixel)


def _above_bar(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say``, printing above the progress bar rather than onto its line: the bar is cleared
    first and drawn again after, as ``tqdm.write`` does (``say`` may print any way it likes)."""

    def said(message: str) -> None:
        with tqdm.external_write_mode(file=sys.stderr):
            say(message)

    return said


def checked_sources(inputs: list[str], output, options: Options, reports: dict) -> list:
    """The sources of the whole run, once they are known not to collide and no output (a PNG,
    a frame name, a report in ``reports``) would overwrite an input."""
    sources = discover_inputs(inputs, recursive=options.recursive, exclude=Path(output))
    refuse_overwriting_inputs(
        inputs,
        sources,
        Path(output),
        recursive=options.recursive,
        reports=reports,
        own_output=resume.read_manifest(Path(output)) is not None,
    )
    return sources


def run(
    inputs,
    output,
    options: Options,
    *,
    progress: bool = False,
    notify: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    timings_csv: str | Path | None = None,
    json_summary: str | Path | None = None,
    backend=None,
) -> Summary:
    """Process every frame ``inputs`` name (one INPUT or a list, in order) into PNGs in
    ``output``; return the summary.

    ``stop``, when set (by a signal handler, say), ends the run early: no new frame is
    started, frames in flight are finished (each PNG appears whole or not at all), and the
    summary says it was interrupted. ``timings_csv`` names a file for one row per frame,
    ``json_summary`` one for the summary as JSON: both are written at the end, whole, and
    only if the run returns (their names are checked, and their temporaries made, before any
    frame is read).
    ``backend``, if given, is used instead of the one ``options.backend`` selects: a
    stand-in from :mod:`edgecli.testing`, say, in a test or a benchmark.
    """
    started = time.perf_counter()
    notify = notify or (lambda message: None)  # information: which backend, and why
    warn = warn or notify  # a frame skipped under --on-error skip
    stop = stop or threading.Event()
    inputs = input_list(inputs)
    check_path("output folder", output)
    check_output_name(Path(output))
    reports = {  # the files written at the end beside the PNGs, by what they hold
        what: Path(check_path(f"{what} path", path))
        for what, path in (("timings CSV", timings_csv), ("JSON summary", json_summary))
        if path is not None
    }
    sources = checked_sources(inputs, output, options, reports)
    if options.shard is not None:
        # Names and inputs were checked across the whole run above; this process does its part.
        run_size = len(sources)
        sources = shard_of(sources, *options.shard)
        if not sources:
            # What would fail its sibling shards fails it too: an output path that is a file,
            # a CUDA backend asked for that cannot run here.
            if Path(output).exists() and not Path(output).is_dir():
                raise OutputError(f"{output}: output path exists and is not a folder")
            if backend is None and options.backend == "cuda":
                select_backend(options)
            notify(
                f"shard {format_shard(options.shard)} has no sources (the run has {run_size}, "
                "split by size); nothing to do, nothing written"
            )
            return _empty_shard(output, options, reports, started)
    if backend is None:
        choice = select_backend(options)
        if choice.notice:
            notify(choice.notice)
        backend = choice.backend
    # Which GPU decoders can run is settled before the output folder is touched: --decode gpu
    # where none can is an error (exit 4) with nothing written.
    gpu_decoding = gpu_decoders(options, backend, sources)
    out_dir = prepare_output_dir(Path(output))
    # Opened now, before any mark is made in the output folder: a report that cannot be
    # written fails the run here, leaving the folder as it was.
    report_files = open_reports(reports)
    try:
        summary, clock = _run_into(
            out_dir, sources, options, backend, progress, warn, stop, started,
            per_frame=timings_csv is not None, gpu_decoding=gpu_decoding,
        )  # fmt: skip
    except BaseException:  # a failed run leaves no report, not even an empty one
        discard_reports(report_files)
        raise
    write_reports(
        report_files,
        {
            "timings CSV": clock.write_csv,
            "JSON summary": lambda path: path.write_text(summary.dumps() + "\n", "utf-8"),
        },
    )
    return summary


def gpu_decoders(options: Options, backend, sources: list):
    """A function that opens the run's GPU decoders, or None where every frame is decoded
    on the CPU (--decode cpu, the CPU backend, no JPEG or video among the sources).
    CudaUnavailableError (exit 4) for --decode gpu where no GPU decoder can run."""
    if options.decode == "cpu":
        return None
    plan = getattr(backend, "gpu_decoders", None)
    if plan is None:
        if options.decode == "gpu" and options.backend == "cpu":
            raise CudaUnavailableError("--decode gpu needs the CUDA backend, not --backend cpu")
        if options.decode == "gpu":
            from .backends import cuda_unusable_reason

            why = cuda_unusable_reason(options.device, options) or "a stand-in backend runs"
            raise CudaUnavailableError(f"--decode gpu needs the CUDA backend: {why}")
        return None
    return plan(options, sources)


def _empty_shard(output, options: Options, reports: dict, started: float) -> Summary:
    """The summary of a shard with no sources: 0 frames. The output folder is not touched;
    the reports asked for are written (a scheduler collecting one per shard finds it)."""
    clock = StageClock(per_frame="timings CSV" in reports)
    summary = Summary(
        frames=0,
        failed=[],
        wall_s=time.perf_counter() - started,
        backend="none",
        device="none",
        params=summary_params(options),
        workers=options.worker_count,
        output=str(output),
    )
    write_reports(
        open_reports(reports),
        {
            "timings CSV": clock.write_csv,
            "JSON summary": lambda path: path.write_text(summary.dumps() + "\n", "utf-8"),
        },
    )
    return summary


def summary_params(options: Options) -> dict:
    """The summary's ``params``: the options that decide the bytes, and the shard run."""
    return options.edge_params() | {
        "png_bits": options.png_bits,
        "shard": format_shard(options.shard),
    }


def _run_into(
    out_dir,
    sources,
    options,
    backend,
    progress,
    warn,
    stop,
    started,
    *,
    per_frame: bool,
    gpu_decoding=None,
) -> tuple[Summary, StageClock]:
    """The run proper, once the inputs, the backend and the output folder are settled: the
    summary, and the clock that timed it (``per_frame``: with a row per frame).
    ``gpu_decoding()``, if given, opens the run's GPU decoders."""
    remove_stale_temporaries(out_dir)
    mixed = resume.begin(out_dir, options)  # refuses a stale --skip-existing, records options

    def wanted(name: str, expected_pixels: Callable[[], int | None]) -> bool:
        """False for an output --skip-existing keeps: whole, as large as its source."""
        return not (
            options.skip_existing
            and resume.output_is_whole(out_dir / name, options.png_bits, expected_pixels)
        )

    clock = StageClock(per_frame=per_frame)
    tally = DecodeTally()
    workers = options.worker_count
    window = WINDOW_PER_WORKER * workers + options.batch
    budget = frame_budget(options, backend, workers, window)
    failures: list[Failure] = []
    megapixels = 0.0
    gpu_busy_s = None
    bar = tqdm(
        total=count_frames(sources) if progress else None,
        disable=not progress,
        unit="frame",
        dynamic_ncols=True,
        leave=False,
    )
    if progress:
        warn = _above_bar(warn)

    def decoded_frames(reader: FrameReader) -> Iterator[Frame]:
        nonlocal megapixels
        for item in reader.frames(sources):
            if stop.is_set():
                return
            if isinstance(item, Failure):
                failures.append(item)
                warn(f"skipped {item.source}: {item.reason}")
                bar.update(1)
                continue
            if isinstance(item, Frame):  # a batch the GPU decodes is counted when it is in
                megapixels += item.pixels.shape[0] * item.pixels.shape[1] / 1e6
            yield item

    try:
        pool = PriorityPool(workers, "edgecli-worker")
    except BaseException:  # its threads could not all be started: no run, and no bar left
        bar.close()
        raise
    with pool:
        writer = Writer(
            pool.at(ENCODE),
            out_dir,
            options,
            clock,
            window,
            lambda: bar.update(1),
            budget,
            keep_written=mixed,
        )
        gpu = None
        if gpu_decoding is not None:
            gpu = gpu_decoding()
            if gpu.notice:
                warn(gpu.notice)
        reader = FrameReader(
            pool.at(DECODE), clock, options, wanted, window, budget, gpu, pool.at(COPY)
        )
        ring = None
        if not backend.runs_on_host:
            ring = backend.slab_ring(options.streams + SPARE_SLABS)

        def failed(error: FrameError) -> None:  # a file a GPU-decoded batch could not decode
            failure = reader._failure(error)  # raises under --on-error fail
            failures.append(failure)
            warn(f"skipped {failure.source}: {failure.reason}")
            bar.update(1)

        try:
            if ring is None:  # the CPU backend: compute on every worker, frame by frame
                for frame in decoded_frames(reader):
                    writer.submit(writer.compute_encode_write, backend, frame)
            else:
                gpu_busy_s = run_on_gpu(
                    ring,
                    decoded_frames(reader),
                    options,
                    pool.at(COPY),
                    clock,
                    writer,
                    reader.waits,
                    budget.release if budget.active else None,
                    failed,
                    tally,
                )
            writer.drain()
        finally:
            # On an error, frames not yet started are dropped; those in flight finish
            # (their PNGs are written whole, by rename) before the pool is gone.
            if gpu is not None:
                if gpu.jpeg is not None and gpu.jpeg.failure():
                    warn(f"JPEGs decoded on the CPU: the GPU's JPEG decoder did not open "
                         f"({gpu.jpeg.failure()})")  # fmt: skip
                gpu.close()
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
    if mixed and not stop.is_set():
        resume.finish(out_dir, options, writer.written)
    stats = clock.stats()
    summary = Summary(
        frames=stats.get("write", {}).get("count", 0),
        failed=[{"source": f.source, "reason": f.reason} for f in failures],
        wall_s=time.perf_counter() - started,
        backend=backend.name,
        device=backend.device_name,
        params=summary_params(options),
        workers=workers,
        output=str(out_dir),
        stages=stats,
        megapixels=megapixels + tally.megapixels,
        skipped_existing=reader.skipped_existing,
        interrupted=stop.is_set(),
        gpu_busy_s=gpu_busy_s,
        main_thread_waits_s=reader.waits.totals() | writer.waits.totals(),
        decoders=_decoders(tally.frames, stats, ring is None),
        decode_lanes=gpu.lanes if gpu is not None else 1,
    )
    return summary, clock


def _decoders(counted: dict[str, int], stats: dict, on_host: bool) -> dict[str, int]:
    """Frames per decoder, of those written: on the CPU backend every one is the CPU's."""
    written = stats.get("write", {}).get("count", 0)
    if on_host:
        return {"cpu": written} if written else {}
    return {name: n for name, n in sorted(counted.items()) if n}
