"""Stand-in backends, for tests and benchmarks on machines without a GPU.

A normal run never uses this module. The pipeline drives the CUDA backend through a small
protocol (:mod:`edgecli.pipeline.protocols` writes it down; :mod:`edgecli.edges.ring` implements
it): ``backend.slab_ring(size)`` gives a ring whose ``fill(shape, capacity)`` takes its next slab,
once released, for a batch: the caller copies frames into its ``inputs`` (capacity, H, W, 3),
then ``submit(n)`` gives a batch in flight with ``ready()`` (done yet? never waits),
``result()`` (wait; edge maps and GPU milliseconds) and ``release()`` (its encoders are done
with the output).
:class:`StandInGpuBackend` implements that protocol with host memory and a pool of threads
in place of CUDA streams, so the pipeline's batching, ordering, slab reuse and bounded
memory run anywhere, and it checks the pipeline keeps the protocol's rules. What it computes
is a function it is given: the CPU reference (tests), or :class:`PrecomputedEdges` (a
zero-cost backend, for measuring the pipeline's own ceiling in ``benchmarks/e2e.py``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from edgecli.edges.reference import detect_batch
from edgecli.inputs.sources import discover
from edgecli.options.params import Options

# How long a stand-in slab waits for its encoders before calling it a deadlock.
SLAB_TIMEOUT_S = 30.0

# Threads that run the stand-in batches, as many streams' worth as any test or benchmark uses:
# shared by every ring, started once. (A thread started per batch made the pipeline's main
# thread wait for each start, up to milliseconds under a busy GIL: 28% of its time in a JPEG
# run of benchmarks/e2e.py on the H200, which then under-stated the GPU path's ceiling.)
STREAM_THREADS = 8
_streams: ThreadPoolExecutor | None = None
_streams_lock = threading.Lock()

Compute = Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]]


def _stream_pool() -> ThreadPoolExecutor:
    global _streams
    with _streams_lock:
        if _streams is None:
            _streams = ThreadPoolExecutor(STREAM_THREADS, thread_name_prefix="edgecli-stand-in")
        return _streams


class StandInBatch:
    """A submitted batch, computed on a stand-in stream thread as a CUDA stream would."""

    def __init__(self, ring: StandInRing, slab: int, frames: list[np.ndarray], delay_s: float):
        self.ring, self.slab = ring, slab
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.edges: np.ndarray | None = None
        self.gpu_ms: dict[str, float] = {}
        _stream_pool().submit(self._run, frames, delay_s)

    def _run(self, frames: list[np.ndarray], delay_s: float) -> None:
        try:
            if delay_s:
                time.sleep(delay_s)
            start = time.perf_counter()
            edges = self.ring.compute(frames)
            n, (h, w) = len(frames), frames[0].shape[:2]
            # Like the real slab, the result lives in the slab's one output buffer, which
            # the slab's next batch overwrites: a slab released before its encoders finished
            # shows up as wrong pixels in the PNGs.
            out = self.ring.outputs[self.slab]
            if out is None or out.size < n * h * w:
                out = self.ring.outputs[self.slab] = np.empty(n * h * w, np.uint8)
            view = out[: n * h * w].reshape(n, h, w)
            for i, frame_edges in enumerate(edges):
                np.copyto(view[i], frame_edges)
            self.edges = view
            self.gpu_ms = {
                "upload": 0.0,
                "kernel": (time.perf_counter() - start) * 1e3,
                "download": 0.0,
            }
        except BaseException as exc:  # re-raised by result(), on the pipeline's thread
            self.error = exc
        finally:
            self.done.set()

    def ready(self) -> bool:
        return self.done.is_set()

    def result(self) -> tuple[np.ndarray, dict[str, float]]:
        self.done.wait()
        with self.ring.lock:
            self.ring.collected += 1
        if self.error is not None:
            raise self.error
        return self.edges, self.gpu_ms

    def release(self) -> None:
        self.ring.free[self.slab].set()


class StandInRing:
    """Stands in for ``streaming.SlabRing``: ``size`` slabs used in turn, each with one input
    and one output buffer.

    It raises if the pipeline breaks the protocol: a slab filled while another is, more than
    ``streams`` batches in flight, a batch larger than its slab was filled for, a slab never
    released.
    """

    def __init__(
        self, size: int, streams: int, compute: Compute, max_delay_s=0.0, poison: bool = True
    ):
        self.size, self.streams, self.compute = size, streams, compute
        self.max_delay_s, self.poison = max_delay_s, poison
        self.rng = np.random.default_rng(0)
        self.lock = threading.Lock()
        self.free = [threading.Event() for _ in range(size)]
        for event in self.free:
            event.set()
        self.inputs: list[np.ndarray | None] = [None] * size
        self.outputs: list[np.ndarray | None] = [None] * size
        self.turn = self.submitted = self.collected = 0
        self.filling: StandInFilling | None = None
        self.batch_sizes: list[int] = []

    def fill(
        self, shape: tuple[int, ...], capacity: int, host_input: bool = True
    ) -> StandInFilling:
        if self.filling is not None:
            raise RuntimeError("a slab was filled while another one was being filled")
        slab, self.turn = self.turn, (self.turn + 1) % self.size
        if not self.free[slab].wait(SLAB_TIMEOUT_S):
            raise RuntimeError(f"slab {slab} was never released by its encoders")
        self.free[slab].clear()
        size = capacity * int(np.prod(shape))
        buffer = self.inputs[slab]
        if buffer is None or buffer.size < size:
            buffer = self.inputs[slab] = np.empty(size, np.uint8)
        if self.poison:  # a frame the caller never copied in then shows in the PNGs
            buffer[:size].fill(0x5A)
        inputs = buffer[:size].reshape(capacity, *shape)
        self.filling = StandInFilling(self, slab, inputs, host_input)
        return self.filling

    def submit(self, filling: StandInFilling, n: int, frames=None, then=None) -> StandInBatch:
        if filling is not self.filling:
            raise RuntimeError("a batch was submitted from a slab not being filled")
        if not 1 <= n <= len(filling.inputs):
            raise RuntimeError(f"a batch of {n} in a slab filled for {len(filling.inputs)}")
        if (frames is None) != filling.host_input:
            raise RuntimeError("a slab filled for host frames got device ones, or the reverse")
        with self.lock:
            in_flight = self.submitted - self.collected
            if in_flight >= self.streams:
                raise RuntimeError(f"{in_flight + 1} batches on the GPU, more than {self.streams}")
            self.submitted += 1
        self.filling = None
        self.batch_sizes.append(n)
        # Like the real slab, the batch is computed from the slab's own input buffer, or
        # from the decoder's (copied now: its slot is handed back once the kernel is queued).
        frames = list(filling.inputs[:n]) if frames is None else [f.copy() for f in frames]
        if then is not None:
            then(None)
        return StandInBatch(self, filling.slab, frames, self.max_delay_s * self.rng.random())


class StandInFilling:
    """A slab of a :class:`StandInRing` being filled with a batch's frames."""

    def __init__(self, ring: StandInRing, slab: int, inputs: np.ndarray, host_input=True):
        self.ring, self.slab, self.inputs = ring, slab, inputs
        self.host_input = host_input

    def submit(self, n: int) -> StandInBatch:
        return self.ring.submit(self, n)

    def submit_device(self, frames, ready=None, then=None) -> StandInBatch:
        return self.ring.submit(self, len(frames), frames, then)

    def release(self) -> None:
        if self.ring.filling is self:
            self.ring.filling = None
        self.ring.free[self.slab].set()


class StandInGpuBackend:
    """Drives the pipeline's GPU path (``runs_on_host = False``) with host threads.

    ``compute`` maps a batch's frames to their edge maps; by default the CPU reference.
    ``max_delay_s`` delays each batch by a random time up to it, so batches finish out of
    step with submission, as on CUDA streams. ``poison`` fills each slab's input with a
    value no frame copy leaves there (0x5A) before the caller copies a batch in, so that a
    frame never copied in makes wrong PNGs rather than stale right ones; it costs a memset of
    the slab a batch, which a benchmark of the pipeline's own cost leaves out.
    """

    name = "stand-in-gpu"
    device_name = "host threads"
    runs_on_host = False

    def __init__(
        self,
        options: Options,
        compute: Compute | None = None,
        max_delay_s: float = 0.0,
        poison: bool = True,
    ):
        self.options = options
        self.compute = compute or (lambda frames: detect_batch(np.stack(frames), options))
        self.max_delay_s, self.poison = max_delay_s, poison
        self.rings: list[StandInRing] = []

    def slab_ring(self, slabs: int) -> StandInRing:
        ring = StandInRing(slabs, self.options.streams, self.compute, self.max_delay_s, self.poison)
        self.rings.append(ring)
        return ring

    def gpu_decoders(self, options: Options, sources: list):
        """Stand-in GPU decoding (:class:`StandInDecoders`) unless ``--decode cpu``; PNGs
        too under ``--decode gpu``, as :func:`edgecli.decode.plan.plan` chooses."""
        if options.decode == "cpu":
            return None
        png = options.decode == "gpu"
        return lambda: StandInDecoders(options.max_pixels, self.decode_batch, png)

    decode_batch = 4  # files a stand-in JPEG batch: small, so tests cross batch boundaries


def fingerprint(pixels: np.ndarray) -> bytes:
    """A digest of a frame's shape and nine of its rows: tells the frames of one input apart
    in microseconds, where hashing every byte of a 1080p frame would take a millisecond."""
    rows = pixels[np.linspace(0, pixels.shape[0] - 1, 9).astype(int)]
    digest = hashlib.blake2b(repr(pixels.shape).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(rows).data)
    return digest.digest()


class PrecomputedEdges:
    """Edge maps computed once per distinct frame, then looked up: a backend that costs
    nothing per frame but gives each frame its real edges, so PNG encoding (whose cost
    depends on the content) costs what it does in a real run.

    As a backend it runs on the host (``runs_on_host``), like the CPU one; its ``lookup``
    is the ``compute`` of a :class:`StandInGpuBackend` for the GPU path.
    """

    name = "precomputed"
    device_name = "lookup table"
    runs_on_host = True

    def __init__(self, edges: dict[bytes, np.ndarray]):
        self.edges = edges

    @classmethod
    def of_inputs(cls, inputs: Sequence[str | Path], options: Options, workers: int = 1):
        """Decode every frame each INPUT names, as the pipeline does, and compute its edges.

        Raises ValueError if two frames with different edges share a fingerprint.
        """
        edges: dict[bytes, np.ndarray] = {}
        lock = threading.Lock()

        def add(pixels: np.ndarray) -> None:
            key = fingerprint(pixels)
            frame_edges = detect_batch(pixels[np.newaxis], options)[0]
            frame_edges.flags.writeable = False  # shared by every frame that looks it up
            with lock:
                if key in edges and not np.array_equal(edges[key], frame_edges):
                    raise ValueError("two different frames share a fingerprint")
                edges[key] = frame_edges

        def decode_add(source) -> None:
            add(source.decode(options.max_pixels).pixels)

        def tasks():
            for source in (source for arg in inputs for source in discover(arg)):
                if source.multi_frame:  # decoded in order here, computed on the pool
                    for frame in source.frames(options.max_pixels):
                        yield add, frame.pixels
                else:
                    yield decode_add, source

        pending: deque = deque()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fn, arg in tasks():
                pending.append(pool.submit(fn, arg))
                while len(pending) > 2 * workers:  # bounds the frames held at once
                    pending.popleft().result()
            while pending:
                pending.popleft().result()
        return cls(edges)

    def lookup(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        try:
            return [self.edges[fingerprint(frame)] for frame in frames]
        except KeyError:
            raise KeyError("a frame that was not precomputed") from None

    def detect(self, frames_bgr: np.ndarray) -> np.ndarray:
        edges = self.lookup(frames_bgr)
        return edges[0][np.newaxis] if len(edges) == 1 else np.stack(edges)  # 1: no copy


class StandInDeviceBatch:
    """Stands in for ``edgecli.decode.gpu.slots.DeviceBatch``: frames "on the device" (host
    arrays here), and the protocol's checks: consumed or discarded exactly once."""

    timed = ("jpeg", "gpu_decode")  # as the JPEG engines' batches

    def __init__(self, names, sources, frames, decoders, errors=()):
        self.names, self.sources, self.frames = names, sources, frames
        self.decoders, self.errors = decoders, list(errors)
        self.ready = None
        self.handed_back = 0
        self.elapsed_ms = 0.0  # the stand-in decoder's time on the batch

    def decode_ms(self) -> float:
        return self.elapsed_ms

    def consumed(self, stream) -> None:
        self.handed_back += 1

    def discard(self) -> None:
        self.handed_back += 1

    def result(self) -> StandInDeviceBatch:
        return self


class StandInJpegDecoder:
    """Stands in for ``edgecli.decode.gpu.jpeg.JpegDecoder``: decodes each batch with cv2 on a
    thread of its own (the pipeline's grouping, ordering and error handling are what is tested), and
    checks every batch shares one key. Like the engines, it decodes whatever cv2.imdecode
    gives a frame for, damaged scans too; a file it cannot decode, or whose name holds
    "engine-refuses", fails the batch as nvJPEG would, so the CPU decodes that batch instead."""

    name = "stand-in-jpeg"
    kind = "EncodedJpeg"  # what its batches hold

    def __init__(self, max_pixels: int, batch: int):
        self.max_pixels, self.batch = max_pixels, batch
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"edgecli-{self.name}")
        self.batches: list[StandInDeviceBatch] = []

    def ready(self) -> bool:
        return True

    def batch_for(self, header) -> int:
        """As the real decoder's: ``batch`` files, fewer where they are large (here at most
        3000 pixels a batch, so tests reach the limit with small files)."""
        return max(1, min(self.batch, 3000 // max(header.width * header.height, 1)))

    def failure(self) -> str | None:
        return None

    def submit(self, items):
        limit = self.batch_for(items[0].header)
        kinds = {type(item).__name__ for item in items}
        if len({item.key() for item in items}) != 1 or not 1 <= len(items) <= limit:
            raise RuntimeError(f"a batch of {len(items)} files with several keys")
        if kinds != {self.kind}:
            raise RuntimeError(f"a {self.name} batch of {sorted(kinds)}")
        return self.executor.submit(self._timed_decode, items)

    def _timed_decode(self, items) -> StandInDeviceBatch:
        start = time.perf_counter()
        batch = self._decode(items)
        batch.elapsed_ms = (time.perf_counter() - start) * 1e3
        return batch

    def _decode(self, items) -> StandInDeviceBatch:
        from edgecli.decode.cpu import decode_image
        from edgecli.decode.jpeg_header import scan_damage
        from edgecli.errors import FrameError

        refused = any("engine-refuses" in item.source for item in items)
        # The GPU's check of the planned scans, which passes what the CPU's walk passes (on
        # the GPU it may pass less): a batch with a file it does not pass goes to the CPU.
        refused = refused or any(
            getattr(item, "plan", None) is not None and scan_damage(item.data) is not None
            for item in items
        )
        if not refused:
            frames = [
                cv2.imdecode(np.frombuffer(i.data, np.uint8), cv2.IMREAD_COLOR) for i in items
            ]
            if all(frame is not None for frame in frames):
                names, sources = [i.out_name for i in items], [i.source for i in items]
                batch = StandInDeviceBatch(
                    names, sources, np.stack(frames), {self.name: len(names)}, []
                )
                self.batches.append(batch)
                return batch
            refused = True
        names, sources, frames, errors = [], [], [], []
        for item in items:
            try:
                frames.append(decode_image(Path(item.path), item.data, self.max_pixels))
            except FrameError as exc:
                errors.append(exc)
                continue
            names.append(item.out_name)
            sources.append(item.source)
        decoder = "cpu" if refused else self.name
        stacked = np.stack(frames) if frames else np.empty((0, 1, 1, 3), np.uint8)
        batch = StandInDeviceBatch(names, sources, stacked, {decoder: len(names)}, errors)
        self.batches.append(batch)
        return batch

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


class StandInPngDecoder(StandInJpegDecoder):
    """Stands in for ``edgecli.decode.gpu.pngs.PngDecoder`` as StandInJpegDecoder does for the
    JPEG decoder (a file named "engine-refuses" goes to the CPU with its batch)."""

    name = "stand-in-png"
    kind = "EncodedPng"

    def _decode(self, items) -> StandInDeviceBatch:
        try:
            return super()._decode(items)
        finally:  # as the real decoder: the files' bytes are spent, their buffers reused
            for item in items:
                item.release()


class StandInDecoders:
    """Stands in for ``edgecli.decode.gpu.decoders.GpuDecoders``: JPEGs, and PNGs where
    ``png`` (``video`` is False)."""

    video = False
    notice = None

    def __init__(self, max_pixels: int, batch: int, png: bool = False):
        self.jpeg = StandInJpegDecoder(max_pixels, batch)
        self.png = StandInPngDecoder(max_pixels, batch) if png else None
        self.lanes = {"jpeg": 1, "png": 1} if png else {"jpeg": 1}

    def videos(self) -> dict[str, str]:
        return {}  # no videos: they are the CPU's without a word, as without GPU decoding

    def close(self) -> None:
        self.jpeg.close()
        if self.png is not None:
            self.png.close()
