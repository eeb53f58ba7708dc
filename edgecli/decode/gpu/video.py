"""Video on the GPU: NVDEC sessions side by side, one a video or a segment of one, each
converting NV12 to the contract's frames (``nv12_to_bgr``) into a ring of slots."""

from __future__ import annotations

import queue
import threading
import time

import cupy

from ...errors import FrameError
from ...workers import Raised
from ..cpu import check_size
from ..engines import import_nvc
from ..h264 import stream_reason
from ..mp4 import MP4_CONTAINERS
from ..segments import Schedule, Segment, keyframes
from .convert import launch_nv12_to_bgr
from .slots import CPU, DeviceBatch, SlotRing, Stopped, frames_a_batch, upload

NVDEC = "nvdec"
# Decoder sessions at once. Alone, NVDEC on the H200 gave 583 fps with 1, 1,518 with 4, 1,870
# with 8 (1080p H.264, decode and conversion), but whole runs, where the PNGs set the pace, went
# faster with 4 than with 8, with segments cut at keyframes too (benchmarks/RESULTS.md).
VIDEO_SESSIONS = 4
VIDEO_BATCH = 16  # frames a get_batch_frames call, and a DeviceBatch
VIDEO_SLOTS = 3  # a session's ring: a batch decoding, one waiting, one on the GPU
# Containers whose frame index PyNvVideoCodec's SimpleDecoder gets right: on a Matroska clip
# with B-frames its frames came out of order (benchmarks/RESULTS.md), so others stay on the CPU.
NVDEC_CONTAINERS = MP4_CONTAINERS


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

    A video NVDEC decodes exactly (``nvdec_reason`` is None) is decoded there, cut at its
    keyframes into segments for sessions that would otherwise idle (:class:`.Schedule`); any
    other is decoded by the CPU decoder (cv2.VideoCapture, as without GPU decoding) on the
    session's thread and uploaded.
    ``wanted(name, pixels)`` is --skip-existing's test, ``skipped()`` counts what it keeps.
    """

    def __init__(self, device, sources, max_pixels, wanted, skipped, clock, sessions=None):
        self.device, self.max_pixels = device, max_pixels
        self.wanted, self.skipped, self.clock = wanted, skipped, clock
        self.schedule = Schedule(  # the frames --start, --end and --frames keep of each
            Segment(s) if s.selection is None else Segment(s, s.selection.start, s.selection.stop)
            for s in sources
        )
        self.exact: dict = {}  # path: whether NVDEC decodes it exactly (nvdec_reason)
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
        if path not in self.exact:  # asked once a video, not once a segment
            self.exact[path] = nvdec_reason(path) is None
        if self.exact[path]:
            self._nvdec(segment, stream, ring, decoder)
        else:
            self._cpu(segment, stream, ring)

    def _nvdec(self, segment: Segment, stream, ring: SlotRing, held: SessionDecoder) -> None:
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
                rest = Segment(source, index, None if segment.stop == total else segment.stop)
                return self._cpu(rest, stream, ring)
            self._convert(source, index, decoded, (height, width), stream, ring, began)
            index += len(decoded)

    def _convert(self, source, index: int, decoded: list, shape, stream, ring, began) -> None:
        """NVDEC's NV12 frames ``decoded`` (frames ``index`` on of ``source``, each of
        ``shape``) converted into a slot as a DeviceBatch; those --skip-existing keeps, left
        out. Returns once the conversions have read the frames: the decoder reuses them."""
        height, width = shape
        waited = time.perf_counter()
        slot = ring.take(stream)
        began += time.perf_counter() - waited  # a wait for the consumer is not NVDEC's time
        frames = slot.buffer("frames", len(decoded) * height * width * 3)
        frames = frames.reshape(len(decoded), height, width, 3)
        names, sources = [], []
        with stream:
            for offset, frame in enumerate(decoded):
                if not source.kept(index + offset):  # --every: decoded, not converted
                    continue
                name = source.frame_name(index + offset)
                if not self.wanted(name, lambda: width * height):
                    self.skipped()
                    continue
                nv12 = cupy.from_dlpack(frame)  # waits, on this stream, for the decode
                pitch = nv12.strides[0]
                launch_nv12_to_bgr(
                    self.device, nv12.data.ptr, pitch, nv12.data.ptr + pitch * height, pitch,
                    frames[len(names)], stream,
                )  # fmt: skip
                names.append(name)
                sources.append(f"{source.path} [frame {index + offset}]")
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(stream)
        stream.synchronize()
        elapsed_ms = (time.perf_counter() - began) * 1e3
        self._put(names, sources, frames, ready, slot, NVDEC, elapsed_ms, "gpu_decode")

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


def _value(getter) -> str:
    """A demuxer property as lower-case text: PyNvVideoCodec gives enums or ints."""
    value = getter()
    return str(getattr(value, "name", value)).lower().rsplit(".", 1)[-1]


def nvdec_reason(path) -> str | None:
    """None when NVDEC and ``nv12_to_bgr`` give exactly cv2.VideoCapture's frames of the video
    at ``path``: 8-bit 4:2:0 progressive H.264 in MP4 or QuickTime, BT.601 (or untagged)
    limited range, shown as decoded (not turned, cut or begun past a keyframe); else why not.
    The demuxer reports codec, depth and sampling, but not the stream's colour tags (it said
    "unspecified" of a BT.709 clip) or how FFmpeg presents the frames: :mod:`edgecli.decode.h264`
    reads those from the file, as FFmpeg resolves them for cv2."""
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
