"""Decoded frames in, read ahead: still images on the worker pool, each video or multi-frame
file on a reader thread of its own (the next one opened ahead), JPEGs grouped into batches for
the GPU's decoder, and the videos of a GPU-decoding run handed to its NVDEC sessions. Bounded
by a window of frames and the memory budget, whatever the number of files."""

from __future__ import annotations

import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache, partial

from ..decode.cpu import ReadBuffers, check_size, declared_pixels, decode_image, read_walked
from ..decode.jpeg_header import (
    JPEG_SUFFIXES,
    LIBJPEG_ONLY,
    UNWALKED,
    EncodedJpeg,
    parse_header,
    scan_damage,
)
from ..decode.plan import PNG_SUFFIX
from ..decode.png_layout import EncodedPng, PngDamage, gpu_reason, read_layout
from ..errors import FrameError
from ..inputs.sources import Frame
from ..options.params import Options
from ..output.png import PNG_SIGNATURE
from ..output.timing import READ_AHEAD, StageClock, WaitClock
from ..workers import Raised, start_thread
from .budget import FrameBudget


@dataclass(frozen=True)
class Failure:
    """A frame (or a whole source) that could not be decoded, in --on-error skip mode;
    ``frames``: the frames it costs (those missing from a video that ended early)."""

    source: str
    reason: str
    frames: int = 1


class _End:
    """Marks the end of a read-ahead queue."""


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
            self._put(Raised(exc), last=True)

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
                if isinstance(item, Raised):
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
# being consumed: enough to have it open and decoding, with its slow first frame done. It reads
# on at full depth when its turn comes; a whole window here as well would hold nearly a second
# window of frames in memory.
FOLLOWING_DEPTH = 2
# Files a read task for the GPU's decoders takes, in order. Each task is a hand-off from the
# main thread, which then waits to win the GIL back from the workers: a few files a task cut
# those waits as many times. Such files hold their bytes only, and are read up to this many
# times the window ahead.
FILES_A_READ = 8


class FrameReader:
    """Decoded frames in input order, read ``window`` ahead.

    Still images decode on the pool. A video or multi-frame file decodes in order from its one
    reader, on a thread of its own, so that reader never waits for the consumer; and while one
    is read, the next input, if it is one too, is opened and read ahead by a reader of its own,
    so that opening it (a decoder's start costs the time of many frames) overlaps the frames
    before it. The reader being consumed runs
    at most ``window`` frames ahead, the next one at most ``FOLLOWING_DEPTH`` until its turn
    comes: so the frames held stay those of one window, not two. Frames whose output
    ``wanted`` rejects (whole already, under --skip-existing) are not decoded where that can
    be avoided.

    Under an active ``budget`` (:mod:`edgecli.pipeline.budget`) each frame reserves its cost: a
    still image from its header, before its decode is submitted (while it does not fit, the frames
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
        # GPU decoders (edgecli.decode.gpu.decoders.GpuDecoders, or a stand-in): JPEGs go to
        # gpu.jpeg and PNGs to gpu.png in batches, videos to gpu.fleet(...); None: every frame
        # is decoded on the CPU.
        self.gpu = gpu
        # PNGs for the GPU's decoder are read into buffers used again batch after batch (the
        # decoder gives them back once it has gathered their streams).
        self.png_buffers = ReadBuffers() if gpu is not None and gpu.png is not None else None
        self.waits = WaitClock()
        self.skipped_existing = 0
        self._skipped_lock = threading.Lock()  # readers count from their own threads

    def count_skipped(self) -> None:
        """Count one output skipped as whole already (--skip-existing); any thread may."""
        with self._skipped_lock:
            self.skipped_existing += 1

    def decode(self, source, read: Callable | None = None) -> Frame | Failure:
        """``source`` decoded on the CPU (or what ``read(source)`` makes of it), a Failure
        where it cannot be; either way its reservation goes with an error."""
        try:
            if read is not None:
                return read(source)
            with self.clock.timed("decode", source.out_name):
                return source.decode(self.options.max_pixels)
        except FrameError as exc:
            self.budget.release(source.out_name)
            return self.failure(exc)
        except BaseException:
            self.budget.release(source.out_name)
            raise

    def read_files(self, sources: list) -> list:
        """:meth:`read_for_gpu` of each of ``sources``, in order, in one task."""
        return [self.decode(source, self.read_for_gpu) for source in sources]

    def failure(self, exc: FrameError) -> Failure:
        """``exc`` as the run's Failure under --on-error skip; raised under fail."""
        if self.options.on_error == "fail":
            raise exc
        return Failure(exc.source, exc.reason, exc.frames)

    def _sequence_items(self, source, turn: threading.Event) -> Iterator[Frame | Failure]:
        frames = source.frames(self.options.max_pixels)
        while True:
            # Begun before its turn, the next sequence's reader runs beside the reader of the
            # one being read (one lane): the time it takes to open and start it is hidden.
            resource = "reader" if turn.is_set() else READ_AHEAD
            start = time.perf_counter()
            try:
                frame = next(frames, None)
            except FrameError as exc:  # the rest of this source is unreadable
                yield self.failure(exc)
                return
            if frame is None:
                return
            if isinstance(frame, FrameError):  # this frame is unreadable, the next may not be
                yield self.failure(frame)
                continue
            if not self.wanted(frame.out_name, partial(operator.mul, *frame.pixels.shape[:2])):
                self.count_skipped()
                continue
            self.clock.record("read", (time.perf_counter() - start) * 1e3, frame.out_name, resource)
            height, width = frame.pixels.shape[:2]
            if turn.is_set():  # read ahead as the next sequence: no reservation (see frames)
                try:
                    cost = self.budget.cost(height * width)
                    self.budget.reserve(frame.out_name, cost, frame.source)
                except FrameError as exc:
                    yield self.failure(exc)
                    continue
            yield frame

    def image_cost(self, header_pixels: Callable[[], int | None]) -> int:
        """A still image's cost from its header (read only under a budget); 0 for one over
        --max-pixels, which its decode refuses, saying so, before allocating it."""
        if not self.budget.active:
            return 0
        pixels = header_pixels()
        return 0 if pixels is None or pixels > self.options.max_pixels else self.budget.cost(pixels)

    def read_sequence(self, source, depth: int, turn: threading.Event) -> RunAhead:
        """A reader of one sequence's items, started now, at most ``depth`` items ahead;
        its frames reserve their memory once ``turn`` is set."""
        items = self._sequence_items(source, turn)
        # Left early (a stop, an error), the run frees no more room: end the reader's wait.
        return RunAhead(items, depth, "edgecli-reader", self.waits, "decode", self.budget.cancel)

    def read_for_gpu(self, source) -> Frame | object:
        """A still image read on the pool: an EncodedJpeg or EncodedPng for the GPU's decoder
        of its kind where that decodes the file exactly, else the CPU's frame (from the bytes
        read). Its time is the CPU's "decode" in the one case, as reading the file is part of
        any CPU decode, and "load" in the other."""
        start = time.perf_counter()
        data, walked, buffers = self._read(source)
        encoded = None
        try:
            encoded = self._encoded(source, data, walked, buffers)
            if encoded is None:
                try:
                    pixels = decode_image(source.path, data, self.options.max_pixels, walked)
                finally:
                    elapsed_ms = (time.perf_counter() - start) * 1e3
                    self.clock.record("decode", elapsed_ms, source.out_name)
                return Frame(source.out_name, str(source.path), pixels)
        finally:
            if encoded is None and buffers is not None:  # spent here, not by the GPU's decoder
                buffers.give(data)
        # The GPU decodes it into memory of its own: no host frame to reserve room for.
        self.budget.release(source.out_name)
        self.clock.record("load", (time.perf_counter() - start) * 1e3, source.out_name)
        return encoded

    def _read(self, source) -> tuple[bytes | memoryview, object, ReadBuffers | None]:
        """The file's bytes, the walk's verdict on them, and the buffers they may be in (to be
        given back once spent)."""
        if self.png_buffers is not None and source.path.suffix.lower() == PNG_SUFFIX:
            return self.png_buffers.read(source.path), UNWALKED, self.png_buffers  # no scans
        return *read_walked(source.path), None

    def _encoded(
        self, source, data: bytes | memoryview, walked, buffers: ReadBuffers | None
    ) -> EncodedJpeg | EncodedPng | None:
        """The file's bytes as the GPU's decoder of its kind takes them, or None where the CPU
        decodes it: a kind no GPU decoder of this run takes, a file that decoder would not
        decode exactly, a PNG whose chunks are damaged (the CPU words the error), or a decoder
        still opening (it takes a while: the CPU decodes meanwhile)."""
        path = str(source.path)
        if data[:2] == b"\xff\xd8":
            decoder, header = self.gpu.jpeg, parse_header(data)
            if decoder is None or header is None or header.gpu_reason is not None:
                return None
            if not decoder.ready():
                return None
            check_size(path, header.width * header.height, self.options.max_pixels)
            # as decode_image judges it (nvJPEG decodes past damage), from read_walked's walk
            judged = scan_damage(data, walked)
            if isinstance(judged, str):
                raise FrameError(path, judged)
            if judged is LIBJPEG_ONLY:
                return None
            return EncodedJpeg(source.out_name, path, source.path, data, header)
        if data[:8] == PNG_SIGNATURE and self.gpu.png is not None and self.gpu.png.ready():
            try:
                layout = read_layout(data)
            except PngDamage:
                return None
            if gpu_reason(layout) is not None:
                return None
            check_size(path, layout.width * layout.height, self.options.max_pixels)
            return EncodedPng(source.out_name, path, source.path, data, layout, buffers)
        return None

    def frames(self, sources: list) -> Iterator[Frame | Failure | object]:
        """Every frame of ``sources``: Frames (decoded on the host), Failures, and batches
        decoded on the GPU (with ``result()``), which come in the order they are ready.
        The videos' NVDEC sessions start now, not at the first frame asked for: a new decoder
        is slow to give its first frames, a wait the caller's own start-up can fill (the
        GPU decoders' ``close`` stops them, should no frame ever be asked for)."""
        fleet = None
        if self.gpu is not None and self.gpu.video:
            videos = [s for s in sources if s.multi_frame and s.kind == "video"]
            if videos:
                sources = [s for s in sources if not (s.multi_frame and s.kind == "video")]
                fleet = self.gpu.fleet(videos, self.wanted, self.count_skipped, self.clock)
        return self._frames(sources, fleet)

    def _frames(self, sources: list, fleet) -> Iterator[Frame | Failure | object]:
        try:
            for item in self._in_order(sources):
                yield item
                if fleet is not None:
                    yield from self._fleet_items(fleet.ready())
            if fleet is not None:
                yield from self._fleet_items(self._waited(fleet.rest(), "gpu_decode"))
        finally:
            if fleet is not None:
                fleet.close()

    def _waited(self, items: Iterable, what: str) -> Iterator:
        """``items``, each waited for on the main thread under ``what`` in :attr:`waits`."""
        items = iter(items)
        while True:
            with self.waits.timed(what):
                item = next(items, _End)
            if item is _End:
                return
            yield item

    def _fleet_items(self, items) -> Iterator:
        for item in items:
            yield self.failure(item) if isinstance(item, FrameError) else item

    def _in_order(self, sources: list) -> Iterator[Frame | Failure | object]:
        return _InOrder(self, sources).items()


class _InOrder:
    """One pass of :meth:`FrameReader.frames` over its host-decoded sources, in order: the
    still images on the pool (oldest first; a window of them at most), the JPEGs and PNGs read
    for the GPU's decoders, grouped into the next batch (in order, sharing a key), and the
    sequence being read, with the next one read ahead."""

    def __init__(self, reader: FrameReader, sources: list):
        self.reader, self.sources = reader, sources
        self.pending: deque[Future] = deque()  # still images on the pool, oldest first
        self.current: RunAhead | None = None  # the sequence being read
        self.following: RunAhead | None = None  # the next one's reader, once started
        self.following_turn = threading.Event()  # set when the next one becomes the one read
        gpu = reader.gpu
        # Each GPU decoder of still images, by the suffixes it takes.
        self.decoders = {}
        if gpu is not None and gpu.jpeg is not None:
            self.decoders.update(dict.fromkeys(JPEG_SUFFIXES, gpu.jpeg))
        if gpu is not None and gpu.png is not None:
            self.decoders[PNG_SUFFIX] = gpu.png
        self.group: list = []  # EncodedJpegs or EncodedPngs for a GPU decoder's next batch
        self.to_read: list = []  # sources for the GPU's decoders not yet handed to the pool

    def items(self) -> Iterator[Frame | Failure | object]:
        try:
            for i, source in enumerate(self.sources):
                if source.multi_frame:
                    yield from self._sequence(i, source)
                else:
                    yield from self._image(source)
            self._read()
            while self.pending:
                yield from self._oldest()
            yield from self._flush()
        finally:  # the run may end early: stop the readers' threads
            self.reader.budget.cancel()  # a reader waiting for room would never get it
            for started in (self.current, self.following):
                if started is not None:
                    started.close()

    def _decoder(self, item):
        return self.reader.gpu.jpeg if isinstance(item, EncodedJpeg) else self.reader.gpu.png

    def _flush(self) -> Iterator:
        """The files grouped so far, to their GPU decoder as one batch."""
        if self.group:
            yield self._decoder(self.group[0]).submit(list(self.group))
            self.group.clear()

    def _read(self) -> None:
        """The files waiting to be read for the GPU's decoders, to the pool as one task."""
        if self.to_read:
            reader = self.reader
            self.pending.append(reader.read_pool.submit(reader.read_files, list(self.to_read)))
            self.to_read.clear()

    def _oldest(self) -> Iterator:
        """The oldest still images' frames or failures, once decoded (one image, or a task's
        files read for the GPU's decoders); a file read for a GPU decoder joins the group
        instead (which goes first where it cannot join)."""
        with self.reader.waits.timed("decode"):
            done = self.pending.popleft().result()
        for item in done if isinstance(done, list) else (done,):
            if not isinstance(item, (Frame, Failure)):  # read for a GPU decoder
                group = self.group
                full = len(group) >= self._decoder(item).batch_for(item.header)
                if group and (item.key() != group[0].key() or full):
                    yield from self._flush()
                group.append(item)
                continue
            yield from self._flush()
            yield item

    def _sequence(self, i: int, source) -> Iterator:
        """A video's (or multi-frame file's) frames, after the images before it."""
        reader, sources = self.reader, self.sources
        if self.following is None:
            turn = threading.Event()
            turn.set()  # its turn has come: none is read before it
            self.current = reader.read_sequence(source, reader.window, turn)
        else:
            self.current, turn, self.following = self.following, self.following_turn, None
        # Its turn: its frames reserve memory from now on, and it reads at full depth. Read
        # ahead as the next one, it held at most FOLLOWING_DEPTH + 1 frames unreserved:
        # reserving them could wait for room that only the sequence before it, waiting for
        # its turn to come, would give back.
        turn.set()
        self.current.widen(reader.window)
        if i + 1 < len(sources) and sources[i + 1].multi_frame:
            self.following_turn = threading.Event()
            self.following = reader.read_sequence(
                sources[i + 1], FOLLOWING_DEPTH, self.following_turn
            )
        self._read()
        while self.pending:  # the images before it come first
            yield from self._oldest()
        yield from self._flush()
        yield from self.current  # its frames, read ahead in the reader's own queue

    def _image(self, source) -> Iterator:
        """A still image: to the pool (or, a file for a GPU decoder, to be read), once the budget
        has room for it; the oldest ones out while the window is full."""
        reader = self.reader
        header_pixels = cache(partial(declared_pixels, source.path))  # read once
        # A file for a GPU decoder holds no decoded frame on the host: it reserves nothing,
        # and its header is not read here, on the main thread, where each system call waits to
        # win the GIL back from busy workers (a third of the main thread's time at the engines'
        # rate). Only --max-memory, a limit the user set, still has every file's size weighed
        # first, for the few the CPU decodes.
        for_gpu = source.path.suffix.lower() in self.decoders
        if reader.wanted(source.out_name, header_pixels):
            try:
                weigh = not for_gpu or reader.options.max_memory is not None
                cost = reader.image_cost(header_pixels) if weigh else 0
                while not reader.budget.try_reserve(source.out_name, cost, str(source.path)):
                    self._read()  # the files it holds room for give it back once read
                    if not self.pending:  # all it waits for is downstream: given back
                        reader.budget.reserve(source.out_name, cost, str(source.path))
                        break
                    yield from self._oldest()
            except FrameError as exc:
                yield reader.failure(exc)
                return
            if for_gpu:
                self.to_read.append(source)
                if len(self.to_read) >= FILES_A_READ:
                    self._read()
            else:
                self._read()  # the files before it come first
                self.pending.append(reader.pool.submit(reader.decode, source))
        else:
            reader.count_skipped()
        while len(self.pending) >= reader.window:
            yield from self._oldest()
