"""The GPU side of GPU decoding: ``cuda/decode.cu``'s conversions, launched on CuPy streams.

Decoders hand over planes in device memory (nvJPEG: Y, Cb, Cr at their native sampling;
NVDEC: NV12); these kernels turn them into the contract's BGR frames, bit for bit as the CPU
decoders do, straight into the device buffer the edge kernel reads. Imports CuPy.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from functools import cache

import cupy
import numpy as np

from ..errors import FrameError, GpuMemoryError
from ..workers import Raised
from .jpeg_planes import CHROMA_FACTORS, chroma_shape
from .nvjpeg import NvjpegError
from .plan import EncodedJpeg, import_nvc

DECODE_FILE = "decode.cu"
BLOCK = (32, 8, 1)

_lock = threading.Lock()


KERNELS = ("jpeg_planes_to_bgr", "nv12_to_bgr")


@cache
def _module(device: int) -> dict:
    from ..gpu import compute_capability, load_kernels

    major, minor = compute_capability(device)
    with cupy.cuda.Device(device):
        functions, _ = load_kernels(DECODE_FILE, KERNELS, (), 10 * major + minor)
    return dict(zip(KERNELS, functions, strict=True))


def module(device: int) -> dict:
    """decode.cu's kernels on ``device``, by name: compiled once a machine (the kernel cache),
    loaded once a process, whichever decoder thread asks first."""
    with _lock:
        return _module(device)


def _grid(width: int, height: int, depth: int = 1) -> tuple[int, int, int]:
    return (-(-width // BLOCK[0]), -(-height // BLOCK[1]), depth)


def launch_jpeg_to_bgr(
    device: int,
    planes: cupy.ndarray,
    frame_bytes: int,
    out: cupy.ndarray,
    height: int,
    width: int,
    factors: tuple[int, int] | None,
    orientation: int,
    stream: cupy.cuda.Stream,
) -> None:
    """Enqueue the BGR frames of ``out`` (N, H', W', 3) from the planes of N JPEGs of
    height x width in ``planes`` (frame f at f * frame_bytes: Y, then Cb and Cr), chroma
    sampled by ``factors`` (Y's over the chroma planes'; None for gray), turned by EXIF
    ``orientation``."""
    fx, fy = factors or (0, 0)
    cw = -(-width // fx) if fx else 0
    ch = -(-height // fy) if fy else 0
    n, out_h, out_w = out.shape[:3]
    if n == 0:
        return
    function = module(device)["jpeg_planes_to_bgr"]
    args = (
        planes, np.int64(frame_bytes), out, np.int32(height), np.int32(width), np.int32(cw),
        np.int32(ch), np.int32(fx), np.int32(fy), np.int32(orientation),
    )  # fmt: skip
    function(_grid(out_w, out_h, n), BLOCK, args, stream=stream)


def launch_nv12_to_bgr(
    device: int,
    y_ptr: int,
    y_pitch: int,
    uv_ptr: int,
    uv_pitch: int,
    out: cupy.ndarray,
    stream: cupy.cuda.Stream,
) -> None:
    """Enqueue the BGR frame ``out`` (H, W, 3) from an NV12 frame's planes (device pointers
    and pitches in bytes), as cv2.VideoCapture converts BT.601 limited-range yuv420p."""
    height, width = out.shape[:2]
    function = module(device)["nv12_to_bgr"]
    args = (
        np.uint64(y_ptr), np.int32(y_pitch), np.uint64(uv_ptr), np.int32(uv_pitch), out,
        np.int32(height), np.int32(width),
    )  # fmt: skip
    function(_grid(width, height), BLOCK, args, stream=stream)


# ---------------------------------------------------------------------------------------------
# Decoded batches and the ring of device buffers they are decoded into


class Stopped(Exception):
    """The run ended while a decoder waited for a buffer."""


class Slot:
    """Device buffers for one decoded batch, reused in turn. ``free`` is set once the batch
    decoded into it last was handed to the edge kernel (or dropped); ``consumed`` is the CUDA
    event after that kernel, which a decoder's stream waits on before writing here again, so
    no thread ever waits for the GPU to reuse a slot."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self.free.set()
        self.consumed = cupy.cuda.Event(disable_timing=True)
        self.buffers: dict[str, cupy.ndarray] = {}

    def buffer(self, name: str, nbytes: int) -> cupy.ndarray:
        """The slot's buffer ``name``, grown to ``nbytes`` (a fresh allocation: aligned)."""
        held = self.buffers.get(name)
        if held is None or held.size < nbytes:
            self.buffers.pop(name, None)  # freed before the larger one is allocated
            try:
                held = self.buffers[name] = cupy.empty(max(nbytes, 1), dtype=np.uint8)
            except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError) as exc:
                raise GpuMemoryError(
                    f"cannot allocate {nbytes / 1e6:.0f} MB of GPU memory for decoded frames "
                    f"({exc}); use --decode cpu, or free the GPU"
                ) from None
        return held[:nbytes]


class SlotRing:
    """``size`` slots used in turn by one decoder: GPU memory bounded by the options, never
    by the number of files."""

    def __init__(self, size: int, stop: threading.Event):
        self.slots = [Slot() for _ in range(size)]
        self.turn = 0
        self.stop = stop

    def take(self, stream: cupy.cuda.Stream) -> Slot:
        slot = self.slots[self.turn]
        self.turn = (self.turn + 1) % len(self.slots)
        while not slot.free.wait(0.05):
            if self.stop.is_set():
                raise Stopped
        slot.free.clear()
        stream.wait_event(slot.consumed)  # the kernel that read it last has run
        return slot


class DeviceBatch:
    """Frames decoded on the GPU into a slot: ``frames`` (n, H, W, 3) BGR, valid on the device
    once ``ready`` has fired. ``errors``: files of the batch that could not be decoded
    (FrameError, each as the CPU decoder words it); ``decoders``: frames per decoder."""

    def __init__(self, names, sources, frames, ready, slot, decoders, errors=(), started=None,
                 decode_ms=None):  # fmt: skip
        self.names, self.sources, self.frames = names, sources, frames
        self.ready, self.slot, self.decoders = ready, slot, decoders
        self.errors = list(errors)
        self.started = started  # a CUDA event before the decode, for its time
        self._decode_ms = decode_ms

    def decode_ms(self) -> float:
        """Milliseconds the batch took to decode (once it is ready)."""
        if self._decode_ms is None:
            self._decode_ms = cupy.cuda.get_elapsed_time(self.started, self.ready)
        return self._decode_ms

    def consumed(self, stream: cupy.cuda.Stream) -> None:
        """Called once the edge kernel that reads the frames is enqueued on ``stream``."""
        self.slot.consumed.record(stream)
        self.slot.free.set()

    def discard(self) -> None:
        """Give the slot back unread."""
        self.slot.free.set()

    def result(self) -> DeviceBatch:
        return self


# ---------------------------------------------------------------------------------------------
# JPEG: nvJPEG's batched decoder to planes, then jpeg_planes_to_bgr into the slot

JPEG_ENGINE, JPEG_CUDA, CPU = "nvjpeg-hw", "nvjpeg-cuda", "cpu"
# Files a decode call: the engines decoded 5,385 fps in batches of 32 and 5,483 in batches of 64
# (1080p, one thread; benchmarks/RESULTS.md, "GPU decoding").
JPEG_BATCH = 32
# ... and at most this many pixels a batch (32 1080p frames), so a ring of larger frames (8K, say)
# holds as much GPU memory as one of 1080p frames, not 16 times as much.
BATCH_PIXELS = 32 * 1920 * 1080


def frames_a_batch(most: int, pixels: int) -> int:
    """Frames of ``pixels`` each a decoded batch holds: ``most``, fewer past BATCH_PIXELS."""
    return max(1, min(most, BATCH_PIXELS // max(pixels, 1)))


def upload(frames: cupy.ndarray, pixels: list[np.ndarray], stream: cupy.cuda.Stream) -> None:
    """CPU-decoded ``pixels`` into ``frames[:len(pixels)]`` on ``stream``, done when it
    returns (the copies from pageable memory have read them)."""
    for i, image in enumerate(pixels):
        frames[i].set(image, stream=stream)
    stream.synchronize()


# Batches decoded ahead of the edge kernel, and the ring that holds them and those in flight.
JPEG_AHEAD = 2
JPEG_SLOTS = JPEG_AHEAD + 3


class JpegDecoder:
    """Decodes batches of JPEGs on one thread of its own (nvJPEG's state is not thread-safe;
    two threads, each with a decoder of its own, fed the engines less than one:
    benchmarks/RESULTS.md)."""

    def __init__(self, device: int, backend: str, max_pixels: int):
        from concurrent.futures import ThreadPoolExecutor

        self.device, self.backend, self.max_pixels = device, backend, max_pixels
        self.name = JPEG_ENGINE if backend == "hardware" else JPEG_CUDA
        self.stop = threading.Event()  # set by close: a decode waiting for a slot gives up
        self.batch = JPEG_BATCH
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="edgecli-nvjpeg")
        self.opened = self.executor.submit(self._open)

    def _open(self) -> None:
        from .plan import take_jpeg_decoder

        cupy.cuda.Device(self.device).use()
        self.decoder = take_jpeg_decoder(self.backend, self.device)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.ring = SlotRing(JPEG_SLOTS, self.stop)
        module(self.device)

    def ready(self) -> bool:
        """Whether the decoder is open, never waiting (until it is, JPEGs go to the CPU)."""
        return self.opened.done() and self.opened.exception() is None

    def failure(self) -> str | None:
        """Why the decoder could not open, once that is known; else None."""
        if not self.opened.done() or self.opened.exception() is None:
            return None
        return str(self.opened.exception())

    def batch_for(self, header) -> int:
        """Files a batch of ``header``'s size holds: JPEG_BATCH, fewer for large frames."""
        return frames_a_batch(self.batch, header.width * header.height)

    def submit(self, items: list[EncodedJpeg]):
        """A Future of the DeviceBatch of ``items`` (which share a key)."""
        return self.executor.submit(self._decode, items)

    def _decode(self, items: list[EncodedJpeg]) -> DeviceBatch:
        self.opened.result()
        header = items[0].header
        height, width, sampling = header.height, header.width, header.subsampling
        luma = height * width
        if sampling == "gray":
            factors, chroma = None, (0, 0)
        else:
            factors, chroma = CHROMA_FACTORS[sampling], chroma_shape(sampling, width, height)
        frame_bytes = luma + 2 * chroma[0] * chroma[1]
        n = len(items)
        out_h, out_w = (width, height) if header.orientation >= 5 else (height, width)
        slot = self.ring.take(self.stream)
        planes = slot.buffer("planes", n * frame_bytes)
        frames = slot.buffer("frames", n * out_h * out_w * 3).reshape(n, out_h, out_w, 3)
        started, ready = cupy.cuda.Event(), cupy.cuda.Event()
        started.record(self.stream)
        base = planes.data.ptr
        destinations = []
        for i in range(n):
            y = base + i * frame_bytes
            if factors is None:  # nvJPEG writes Y only; the chroma pointers stay unused
                destinations.append([(y, width)])
            else:
                cb = y + luma
                cr = cb + chroma[0] * chroma[1]
                destinations.append([(y, width), (cb, chroma[1]), (cr, chroma[1])])
        try:
            self.decoder.decode([item.data for item in items], destinations, self.stream.ptr)
        except NvjpegError:
            # A file the engines refuse fails the whole call: the CPU decodes the batch
            # instead, each file as it would any other (its error, if any, is the CPU's).
            return self._on_cpu(items, slot, frames, started, ready)
        launch_jpeg_to_bgr(
            self.device, planes, frame_bytes, frames, height, width, factors,
            header.orientation, self.stream,
        )  # fmt: skip
        ready.record(self.stream)
        names = [item.out_name for item in items]
        sources = [item.source for item in items]
        return DeviceBatch(names, sources, frames, ready, slot, {self.name: n}, (), started)

    def _on_cpu(self, items, slot, frames, started, ready) -> DeviceBatch:
        from .cpu import decode_image

        names, sources, errors, decoded = [], [], [], []
        for item in items:
            try:
                pixels = decode_image(item.path, item.data, self.max_pixels)
            except FrameError as exc:
                errors.append(exc)
                continue
            if pixels.shape != frames.shape[1:]:
                errors.append(FrameError(item.source, f"decoded as {pixels.shape}, its header "
                                                      f"says {frames.shape[1:]}"))  # fmt: skip
                continue
            decoded.append(pixels)
            names.append(item.out_name)
            sources.append(item.source)
        upload(frames, decoded, self.stream)
        ready.record(self.stream)
        frames = frames[: len(names)]
        return DeviceBatch(names, sources, frames, ready, slot, {CPU: len(names)}, errors, started)

    def close(self) -> None:
        from .plan import keep_jpeg_decoder

        self.stop.set()
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self.opened.done() and self.opened.exception() is None:
            keep_jpeg_decoder(self.decoder, self.backend, self.device)


# ---------------------------------------------------------------------------------------------
# Video: NVDEC sessions side by side, one a video or a segment of one

NVDEC = "nvdec"
# Decoder sessions at once: on the H200, 1 gave 583 fps, 4 1,518, 8 1,870 and 12 1,884 (1080p
# H.264, decode and conversion; benchmarks/RESULTS.md).
VIDEO_SESSIONS = 8
VIDEO_BATCH = 16  # frames a get_batch_frames call, and a DeviceBatch
VIDEO_SLOTS = 3  # a session's ring: a batch decoding, one waiting, one on the GPU
# A video is split into segments, decoded side by side, only where each gets this many frames:
# a segment starting between keyframes first decodes from the keyframe before it.
MIN_SEGMENT = 60
# Containers whose frame index PyNvVideoCodec's SimpleDecoder gets right: on a Matroska clip
# with B-frames its frames came out of order (benchmarks/RESULTS.md), so others stay on the CPU.
NVDEC_CONTAINERS = (".mp4", ".m4v", ".mov")


@dataclass(frozen=True)
class VideoJob:
    """Frames ``start`` to ``stop`` (None: the end) of one video; ``split``: whether it may
    still be split into segments for idle sessions."""

    source: object  # SequenceSource
    start: int = 0
    stop: int | None = None
    split: bool = True


class _Done:
    """A session has no more jobs."""


class VideoFleet:
    """Decodes every video of a run, ``sessions`` at a time, each on a thread of its own,
    into DeviceBatches in the order they are ready (frames keep their own output names).

    A video NVDEC decodes exactly (``nvdec_reason`` is None) is decoded there, split into
    segments where sessions would otherwise idle; any other is decoded by the CPU decoder
    (cv2.VideoCapture, as without GPU decoding) on the session's thread and uploaded.
    ``wanted(name, pixels)`` is --skip-existing's test, ``skipped()`` counts what it keeps.
    """

    def __init__(self, device, sources, max_pixels, wanted, skipped, clock, sessions=None):
        import queue

        self.device, self.max_pixels = device, max_pixels
        self.wanted, self.skipped, self.clock = wanted, skipped, clock
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        for source in sources:
            self.jobs.put(VideoJob(source))
        self.pending = len(sources)  # jobs not yet finished; guarded by self.lock
        self.lock = threading.Lock()
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self.stop = threading.Event()
        # As many sessions as VIDEO_SESSIONS even for one video: it is split for them.
        count = sessions or VIDEO_SESSIONS
        self.sessions = count
        self.threads = [
            threading.Thread(target=self._session, name=f"edgecli-nvdec-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self.threads:
            thread.start()
        self.running = count

    def _session(self) -> None:
        import queue

        try:
            cupy.cuda.Device(self.device).use()
            stream = cupy.cuda.Stream(non_blocking=True)
            ring = SlotRing(VIDEO_SLOTS, self.stop)
            while not self.stop.is_set():
                try:
                    job = self.jobs.get(timeout=0.05)
                except queue.Empty:
                    with self.lock:
                        if self.pending == 0:
                            return
                    continue
                try:
                    self._run(job, stream, ring)
                except Stopped:
                    return
                except FrameError as exc:
                    self.out.put(exc)
                finally:
                    with self.lock:
                        self.pending -= 1
        except BaseException as exc:  # re-raised on the consumer's thread
            self.out.put(Raised(exc))
        finally:
            self.out.put(_Done)

    def _run(self, job: VideoJob, stream, ring: SlotRing) -> None:
        if nvdec_reason(job.source.path) is None:
            self._nvdec(job, stream, ring)
        else:
            self._cpu(job, stream, ring)

    def _nvdec(self, job: VideoJob, stream, ring: SlotRing) -> None:
        """``job``'s frames from NVDEC. Where NVDEC cannot open the video, or stops short of
        the frames its container declares (a truncated or damaged file), the CPU decodes the
        rest, as it would without GPU decoding: its frames, and its error if it has one."""
        nvc = import_nvc()
        from .cpu import check_size

        source, path = job.source, job.source.path
        try:
            decoder = nvc.SimpleDecoder(
                str(path), gpu_id=self.device, use_device_memory=True,
                output_color_type=nvc.OutputColorType.NATIVE,
            )  # fmt: skip
            metadata = decoder.get_stream_metadata()
            width, height, total = metadata.width, metadata.height, len(decoder)
        except Exception:  # the CPU decoder opens it, or says why it cannot
            return self._cpu(job, stream, ring)
        check_size(str(path), width * height, self.max_pixels)
        per_batch = frames_a_batch(VIDEO_BATCH, width * height)
        stop = total if job.stop is None else job.stop
        if job.split and job.stop is None:
            stop = self._split(job, total)
        index = job.start
        while index < stop:
            if self.stop.is_set():
                raise Stopped
            began = time.perf_counter()
            try:
                if index == job.start and index:
                    decoder.seek_to_index(index)
                # Never past the end, where the library prints a line per frame asked for.
                decoded = decoder.get_batch_frames(min(per_batch, stop - index))
            except Exception:
                decoded = None
            if not decoded:
                rest = VideoJob(source, index, None if stop == total else stop, split=False)
                return self._cpu(rest, stream, ring)
            slot = ring.take(stream)
            frames = slot.buffer("frames", len(decoded) * height * width * 3)
            frames = frames.reshape(len(decoded), height, width, 3)
            names, sources = [], []
            with stream:
                for offset, frame in enumerate(decoded):
                    name = source.frame_name(index + offset)
                    if not self.wanted(name, lambda: width * height):
                        self.skipped()
                        continue
                    nv12 = cupy.from_dlpack(frame)  # waits, on this stream, for the decode
                    pitch = nv12.strides[0]
                    launch_nv12_to_bgr(
                        self.device, nv12.data.ptr, pitch, nv12.data.ptr + pitch * height,
                        pitch, frames[len(names)], stream,
                    )  # fmt: skip
                    names.append(name)
                    sources.append(f"{path} [frame {index + offset}]")
            ready = cupy.cuda.Event(disable_timing=True)
            ready.record(stream)
            stream.synchronize()  # the decoder reuses its surfaces on the next call
            index += len(decoded)
            elapsed_ms = (time.perf_counter() - began) * 1e3
            self._put(names, sources, frames, ready, slot, NVDEC, elapsed_ms)

    def _split(self, job: VideoJob, total: int) -> int:
        """Hand segments of ``job``'s video to idle sessions; return where its own part ends."""
        with self.lock:
            others = self.sessions - 1 - (self.pending - 1)  # sessions with no job to take
            parts = min(others + 1, total // MIN_SEGMENT)
            if parts < 2:
                return total
            self.pending += parts - 1
        bounds = [total * k // parts for k in range(parts + 1)]
        for k in range(1, parts):
            self.jobs.put(VideoJob(job.source, bounds[k], bounds[k + 1], split=False))
        return bounds[1]

    def _cpu(self, job: VideoJob, stream, ring: SlotRing) -> None:
        """The CPU decoder's frames ``job.start`` to ``job.stop`` of a video (one NVDEC cannot
        decode exactly, or the rest of one it failed on), uploaded; its errors are the CPU's."""
        batch: list = []
        frames = job.source.frames(self.max_pixels)  # raises what the CPU path raises
        try:
            for index in itertools.count():
                started = time.perf_counter()
                frame = next(frames, None)
                if frame is None or (job.stop is not None and index >= job.stop):
                    return
                if self.stop.is_set():
                    raise Stopped
                if index < job.start:
                    continue
                if isinstance(frame, FrameError):
                    self.out.put(frame)
                    continue
                pixels = frame.pixels.shape[0] * frame.pixels.shape[1]
                if not self.wanted(frame.out_name, lambda p=pixels: p):
                    self.skipped()
                    continue
                self.clock.record("read", (time.perf_counter() - started) * 1e3, frame.out_name)
                if batch and frame.pixels.shape != batch[0].pixels.shape:
                    self._upload(batch, stream, ring)
                batch.append(frame)
                if len(batch) >= frames_a_batch(VIDEO_BATCH, pixels):
                    self._upload(batch, stream, ring)
        finally:
            frames.close()  # a segment ends before the video does: its reader is let go now
            # The frames before an error the decoder raises at the end are the CPU's too.
            if batch and not self.stop.is_set():
                self._upload(batch, stream, ring)

    def _upload(self, batch: list, stream, ring: SlotRing) -> None:
        """The CPU-decoded frames of ``batch`` into a slot, as a DeviceBatch, and ``batch``
        emptied (its time: the upload's; their decode is timed as "read", as on the CPU)."""
        began = time.perf_counter()
        slot = ring.take(stream)
        shape = batch[0].pixels.shape
        frames = slot.buffer("frames", len(batch) * shape[0] * shape[1] * 3)
        frames = frames.reshape(len(batch), *shape)
        upload(frames, [f.pixels for f in batch], stream)
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(stream)
        elapsed_ms = (time.perf_counter() - began) * 1e3
        names = [f.out_name for f in batch]
        self._put(names, [f.source for f in batch], frames, ready, slot, CPU, elapsed_ms)
        batch.clear()

    def _put(self, names, sources, frames, ready, slot, decoder, elapsed_ms) -> None:
        if not names:
            slot.free.set()
            return
        batch = DeviceBatch(
            names, sources, frames[: len(names)], ready, slot, {decoder: len(names)},
            decode_ms=elapsed_ms,
        )  # fmt: skip
        self.out.put(batch)

    def ready(self):
        """The batches and errors ready now, without waiting."""
        import queue

        while self.running:
            try:
                item = self.out.get_nowait()
            except queue.Empty:
                return
            yield from self._item(item)

    def rest(self):
        """Every batch and error still to come, waiting for them."""
        while self.running:
            yield from self._item(self.out.get())

    def _item(self, item):
        if item is _Done:
            self.running -= 1
        elif isinstance(item, Raised):
            raise item.error
        else:
            yield item

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def _value(getter) -> str:
    """A demuxer property as lower-case text: PyNvVideoCodec gives enums or ints."""
    value = getter()
    return str(getattr(value, "name", value)).lower().rsplit(".", 1)[-1]


def nvdec_reason(path) -> str | None:
    """None when NVDEC and ``nv12_to_bgr`` give exactly cv2.VideoCapture's frames of the video
    at ``path``: 8-bit 4:2:0 progressive H.264 in MP4 or QuickTime, BT.601 (or untagged)
    limited range; else why not. The demuxer reports codec, depth and sampling, but not the
    stream's colour tags (it said "unspecified" of a BT.709 clip): :mod:`edgecli.decode.h264` reads
    those from the SPS and the container, as FFmpeg resolves them for cv2."""
    from .h264 import stream_reason

    nvc = import_nvc()

    if path.suffix.lower() not in NVDEC_CONTAINERS:
        return f"{path.suffix} container"
    try:
        demuxer = nvc.CreateDemuxer(str(path))
        codec = _value(demuxer.GetNvCodecId)
        depth = int(demuxer.BitDepth())
        chroma = _value(demuxer.ChromaFormat)
    except Exception as exc:  # not a stream the demuxer reads: the CPU decoder says why
        return f"the demuxer cannot read it ({type(exc).__name__})"
    if codec != "h264":
        return f"codec {codec}"
    if depth != 8 or "420" not in chroma:
        return f"{depth}-bit {chroma}"
    return stream_reason(path)


# ---------------------------------------------------------------------------------------------
# The decoders of one run


class GpuDecoders:
    """The GPU decoders of one run: ``jpeg`` (a JpegDecoder, or None) and ``video`` (whether
    videos go to a VideoFleet); ``notice``: what --decode auto left on the CPU, and why."""

    def __init__(self, device: int, max_pixels: int, jpeg_backend, video: bool, notice):
        self.device, self.max_pixels = device, max_pixels
        self.jpeg = JpegDecoder(device, jpeg_backend, max_pixels) if jpeg_backend else None
        self.video = video
        self.notice = notice
        self.lanes = 1
        self.fleets: list[VideoFleet] = []

    def fleet(self, sources, wanted, skipped, clock) -> VideoFleet:
        fleet = VideoFleet(self.device, sources, self.max_pixels, wanted, skipped, clock)
        self.lanes = max(self.lanes, fleet.sessions)
        self.fleets.append(fleet)
        return fleet

    def close(self) -> None:
        for fleet in self.fleets:
            fleet.close()
        if self.jpeg is not None:
            self.jpeg.close()
