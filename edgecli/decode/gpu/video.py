"""Video on the GPU: NVDEC sessions side by side, one a video or a segment of one, each
converting NVDEC's planes to the contract's frames (``nv12_to_bgr``, by each video's
:class:`.NvdecPlan`) into a ring of slots."""

from __future__ import annotations

import queue
import threading
import time
from functools import partial

import cupy

from ...errors import FrameError
from ...workers import Raised
from ..cpu import check_size
from ..engines import import_nvc, nvdec_missing
from ..nvdec import NvdecPlan, plan_video
from ..segments import Schedule, Segment, keyframes
from .convert import launch_nv12_to_bgr
from .slots import CPU, DeviceBatch, SlotRing, Stopped, frames_a_batch, upload

NVDEC = "nvdec"
NVDEC_APPROX = "nvdec-approx"  # --decode gpu's frames where the conversion is not cv2's
# Decoder sessions at once. Alone, NVDEC on the H200 gave 583 fps with 1, 1,518 with 4, 1,870
# with 8 (1080p H.264, decode and conversion), but whole runs, where the PNGs set the pace, went
# faster with 4 than with 8, with segments cut at keyframes too (benchmarks/RESULTS.md).
VIDEO_SESSIONS = 4
VIDEO_BATCH = 16  # frames a get_batch_frames call, and a DeviceBatch
VIDEO_SLOTS = 3  # a session's ring: a batch decoding, one waiting, one on the GPU


class _Done:
    """A session has no more jobs."""


class SessionDecoder:
    """One session's NVDEC decoder, kept from video to video: ``reconfigure_decoder`` points
    it at the next in 1-3 ms and its first frames follow in 2-30, where a new decoder takes
    50-150 ms to its first frames and letting one go 90-250 ms (H200, PyNvVideoCodec 2.2.4;
    benchmarks/RESULTS.md). Its frames equal a new decoder's, at any size, up or down.
    A SimpleDecoder: the library's ThreadedDecoder, which decodes ahead on a thread of its own,
    gave the same frames 0-10% faster but crashed 1 run in 12-20 with 8 sessions (RESULTS.md)."""

    def __init__(self, device: int):
        self.device = device
        self.decoder = None

    def open(self, path):
        """The decoder, pointed at the video at ``path``; raises what the library raises
        where it cannot open it."""
        if self.decoder is not None:
            try:
                self.decoder.reconfigure_decoder(str(path))
                return self.decoder
            except Exception:  # a new decoder tries it, and says why it cannot
                self.decoder = None
        nvc = import_nvc()
        self.decoder = nvc.SimpleDecoder(
            str(path), gpu_id=self.device, use_device_memory=True,
            output_color_type=nvc.OutputColorType.NATIVE,
        )  # fmt: skip
        return self.decoder

    def discard(self) -> None:
        """After a failure: the next video gets a new decoder."""
        self.decoder = None


class VideoFleet:
    """Decodes every video of a run, ``sessions`` at a time, each on a thread of its own,
    into DeviceBatches in the order they are ready (frames keep their own output names).

    A video NVDEC decodes (:func:`.plan_video`: exactly, where ``exact_only``) is decoded
    there, cut at its keyframes into segments for sessions that would otherwise idle
    (:class:`.Schedule`); any other is decoded by the CPU decoder (cv2.VideoCapture, as
    without GPU decoding) on the session's thread and uploaded.
    ``wanted(name, pixels)`` is --skip-existing's test, ``skipped()`` counts what it keeps.
    """

    def __init__(
        self, device, sources, max_pixels, wanted, skipped, clock, exact_only=True, sessions=None
    ):
        self.device, self.max_pixels, self.exact_only = device, max_pixels, exact_only
        self.wanted, self.skipped, self.clock = wanted, skipped, clock
        self.schedule = Schedule(  # the frames --start, --end and --frames keep of each
            Segment(s) if s.selection is None else Segment(s, s.selection.start, s.selection.stop)
            for s in sources
        )
        self.plans: dict = {}  # path: its NvdecPlan, or why the CPU decodes it
        self.notes: dict = {}  # path: which decoder had the video and why, where not NVDEC exactly
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self.stop = threading.Event()
        # As many sessions as VIDEO_SESSIONS even for one video: it is cut for them.
        count = sessions or VIDEO_SESSIONS
        self.sessions = count
        self.threads = [
            threading.Thread(target=self._session, name=f"edgecli-nvdec-{i}", daemon=True)
            for i in range(count)
        ]
        self.running = count
        for thread in self.threads:
            thread.start()

    def _session(self) -> None:
        decoder = SessionDecoder(self.device)
        try:
            cupy.cuda.Device(self.device).use()
            stream = cupy.cuda.Stream(non_blocking=True)
            ring = SlotRing(VIDEO_SLOTS, self.stop)
            while not self.stop.is_set():
                segment = self.schedule.take()
                if segment is None:  # every frame is decoded, or the fleet is closed
                    return
                try:
                    self._run(segment, stream, ring, decoder)
                except Stopped:
                    return
                except FrameError as exc:
                    self.out.put(exc)
                finally:
                    self.schedule.done(segment)
        except BaseException as exc:  # re-raised on the consumer's thread
            self.out.put(Raised(exc))
        finally:
            # Done before the decoder goes: its teardown (90-250 ms) is not waited for.
            self.out.put(_Done)

    def _run(self, segment: Segment, stream, ring: SlotRing, decoder: SessionDecoder) -> None:
        path = segment.source.path
        if path not in self.plans:  # asked once a video, not once a segment
            missing = partial(nvdec_missing, self.device)
            self.plans[path] = plan_video(path, missing, self.exact_only)
        plan = self.plans[path]
        if isinstance(plan, NvdecPlan):
            if not plan.exact:
                self.notes.setdefault(path, f"{NVDEC_APPROX}: {plan.inexact}")
            self._nvdec(segment, plan, stream, ring, decoder)
        else:
            self.notes.setdefault(path, f"{CPU}: {plan}")
            self._cpu(segment, stream, ring)

    def _nvdec(
        self, segment: Segment, plan: NvdecPlan, stream, ring: SlotRing, held: SessionDecoder
    ) -> None:
        """``segment``'s frames from NVDEC, as far as no other session cuts it off. Where NVDEC
        cannot open the video, or stops short of the frames its container declares (a
        truncated or damaged file), the CPU decodes the rest, as it would without GPU
        decoding: its frames, and its error if it has one."""
        source, path = segment.source, segment.source.path
        try:
            decoder = held.open(path)
            metadata = decoder.get_stream_metadata()
            width, height, total = metadata.width, metadata.height, len(decoder)
        except Exception:  # the CPU decoder opens it, or says why it cannot
            held.discard()
            self.schedule.keep(segment)
            self.notes[path] = f"{CPU}: NVDEC could not open it"
            return self._cpu(segment, stream, ring)
        if width % 2 or height % 2:  # VP9 or AV1: NVDEC's 4:2:0 surfaces are of even sizes
            self.schedule.keep(segment)
            self.notes[path] = f"{CPU}: an odd size, {width}x{height}"
            return self._cpu(segment, stream, ring)
        check_size(str(path), width * height, self.max_pixels)
        per_batch = frames_a_batch(VIDEO_BATCH, width * height)
        self.schedule.started(segment, total, keyframes(path))
        index = segment.start
        while (end := self.schedule.claim(segment, index, per_batch)) > index:
            if self.stop.is_set():
                raise Stopped
            began = time.perf_counter()
            try:
                if index == segment.start and index:
                    decoder.seek_to_index(index)
                # Never past the end, where the library prints a line per frame asked for.
                decoded = decoder.get_batch_frames(end - index)
            except Exception:
                decoded = None
            if not decoded:
                held.discard()  # not trusted with the next video
                self.schedule.keep(segment)
                self.notes[path] = f"{CPU} from frame {index}: NVDEC stopped there"
                rest = Segment(source, index, None if segment.stop == total else segment.stop)
                return self._cpu(rest, stream, ring)
            self._convert(source, index, decoded, plan, (height, width), stream, ring, began)
            index += len(decoded)

    def _convert(self, source, index, decoded: list, plan, shape, stream, ring, began) -> None:
        """NVDEC's frames ``decoded`` (frames ``index`` on of ``source``, each of ``shape``
        as decoded) converted and turned by ``plan`` into a slot as a DeviceBatch; those
        --skip-existing keeps, left out. Returns once the conversions have read the frames:
        the decoder reuses them."""
        height, width = shape
        out_h, out_w = (width, height) if plan.rotation in (90, 270) else (height, width)
        waited = time.perf_counter()
        slot = ring.take(stream)
        began += time.perf_counter() - waited  # a wait for the consumer is not NVDEC's time
        frames = slot.buffer("frames", len(decoded) * height * width * 3)
        frames = frames.reshape(len(decoded), out_h, out_w, 3)
        names, sources = [], []
        coefficients = plan.conversion.coefficients()
        with stream:
            for offset, frame in enumerate(decoded):
                if not source.kept(index + offset):  # --every: decoded, not converted
                    continue
                name = source.frame_name(index + offset)
                if not self.wanted(name, lambda: width * height):
                    self.skipped()
                    continue
                planes = cupy.from_dlpack(frame)  # waits, on this stream, for the decode
                pitch = planes.strides[0]
                launch_nv12_to_bgr(
                    self.device, planes.data.ptr, pitch, planes.data.ptr + pitch * height, pitch,
                    frames[len(names)], stream, coefficients=coefficients,
                    rotation=plan.rotation, depth=plan.depth,
                )  # fmt: skip
                names.append(name)
                sources.append(f"{source.path} [frame {index + offset}]")
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(stream)
        stream.synchronize()
        elapsed_ms = (time.perf_counter() - began) * 1e3
        decoder = NVDEC if plan.exact else NVDEC_APPROX
        self._put(names, sources, frames, ready, slot, decoder, elapsed_ms, "gpu_decode")

    def _cpu(self, segment: Segment, stream, ring: SlotRing) -> None:
        """The CPU decoder's frames ``segment.start`` to ``segment.stop`` of a video (one NVDEC
        cannot decode exactly, or the rest of one it failed on), uploaded; its errors are the
        CPU's."""
        batch: list = []
        # Raises what the CPU path raises; the frames before the segment's start are decoded,
        # not converted.
        frames = segment.source.frames(self.max_pixels, segment.start, segment.stop)
        try:
            while True:
                started = time.perf_counter()
                frame = next(frames, None)
                if frame is None:
                    return
                if self.stop.is_set():
                    raise Stopped
                if isinstance(frame, FrameError):
                    self.out.put(frame)
                    continue
                pixels = frame.pixels.shape[0] * frame.pixels.shape[1]
                if not self.wanted(frame.out_name, lambda p=pixels: p):
                    self.skipped()
                    continue
                elapsed_ms = (time.perf_counter() - started) * 1e3
                self.clock.record("read", elapsed_ms, frame.out_name, "nvdec")
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
        slot = ring.take(stream)  # a wait for the consumer: not the session's time
        began = time.perf_counter()
        shape = batch[0].pixels.shape
        frames = slot.buffer("frames", len(batch) * shape[0] * shape[1] * 3)
        frames = frames.reshape(len(batch), *shape)
        upload(frames, [f.pixels for f in batch], stream)
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(stream)
        elapsed_ms = (time.perf_counter() - began) * 1e3
        names = [f.out_name for f in batch]
        self._put(names, [f.source for f in batch], frames, ready, slot, CPU, elapsed_ms, "upload")
        batch.clear()

    def _put(self, names, sources, frames, ready, slot, decoder, elapsed_ms, stage) -> None:
        """A batch to the consumer; ``elapsed_ms``: the session's time on it, as ``stage``."""
        if not names:
            slot.free.set()
            return
        batch = DeviceBatch(
            names, sources, frames[: len(names)], ready, slot, {decoder: len(names)},
            decode_ms=elapsed_ms, timed=("nvdec", stage),
        )  # fmt: skip
        self.out.put(batch)

    def ready(self):
        """The batches and errors ready now, without waiting."""
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
        """Stops the sessions. Those still running (the run ended early) are waited for,
        since they may be converting into their slots; those done have only their decoder to
        let go, which the run does not wait for."""
        self.stop.set()
        self.schedule.close()
        if self.running:
            for thread in self.threads:
                thread.join()
