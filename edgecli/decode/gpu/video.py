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
from ..mp4 import frame_count
from ..nvdec import NvdecPlan, plan_video
from ..segments import Schedule, Segment, keyframes
from .convert import launch_nv12_to_bgr
from .slots import CPU, DeviceBatch, SlotRing, Stopped, frames_a_batch, upload

NVDEC = "nvdec"
NVDEC_APPROX = "nvdec-approx"  # --decode gpu's frames where the conversion is not cv2's
# Decoder sessions at once. NVDEC alone decodes more with each session added, but in a whole
# run past 4 the main thread's hand-offs set the pace: a run is no faster, and each session
# holds a ring of batches in GPU memory (measured: benchmarks/RESULTS.md, "Long runs").
VIDEO_SESSIONS = 4
VIDEO_BATCH = 16  # frames a get_batch_frames call, and a DeviceBatch
VIDEO_SLOTS = 3  # a session's ring: a batch decoding, one waiting, one on the GPU


class _Done:
    """A session has no more jobs."""


class SessionDecoder:
    """One session's NVDEC decoders, kept from video to video.

    The SimpleDecoder (:meth:`open`): ``reconfigure_decoder`` points it at the next video,
    whose first frames then follow far sooner than a new decoder's would, and no decoder's
    slow teardown is paid between videos. Its frames equal a new decoder's, at any size, up or
    down. A SimpleDecoder, not the library's ThreadedDecoder (which decodes ahead on a thread
    of its own): that one is not reliable with several sessions at once, and decoding ahead
    gains little.

    The decoder fed packet by packet (:meth:`for_packets`): the end of a video's stream
    flushes it, after which it takes the next stream of the same codec, size and depth as a
    new decoder would, with the same saving."""

    def __init__(self, device: int):
        self.device = device
        self.decoder = None
        self.packet_decoder = None
        self.packet_key: tuple | None = None  # what packet_decoder was made for

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

    def for_packets(self, demuxer, depth: int, stream):
        """A decoder for the packets of ``demuxer``'s ``depth``-bit video, copying its frames
        on ``stream``: the last video's, where that had the same codec, size and depth and was
        fed to the end of its stream (else :meth:`drop_packets` dropped it), or a new one. Raises
        what the library raises where it cannot make one."""
        key = (demuxer.GetNvCodecId(), demuxer.Width(), demuxer.Height(), depth, stream.ptr)
        if key != self.packet_key:
            self.drop_packets()  # let go before the new one is made
            self.packet_decoder = import_nvc().CreateDecoder(
                gpuid=self.device, codec=key[0], cudacontext=0, cudastream=stream.ptr,
                usedevicememory=True,
            )  # fmt: skip
            self.packet_key = key
        return self.packet_decoder

    def discard(self) -> None:
        """After a failure: the next video gets a new SimpleDecoder."""
        self.decoder = None

    def drop_packets(self) -> None:
        """After a failure, or a video left before the end of its stream: the next video fed
        packet by packet gets a new decoder."""
        self.packet_decoder = self.packet_key = None


class _Filler:
    """NVDEC frames of one video converted and turned by its plan into one slot, as they
    come, and handed on as a DeviceBatch (:meth:`put`); those --every or --skip-existing
    leave out are not converted."""

    def __init__(self, fleet, source, plan: NvdecPlan, shape, stream, ring: SlotRing, most,
                 began: float | None = None):  # fmt: skip
        """``began``: when NVDEC began on these frames (perf_counter; None: now)."""
        self.fleet, self.source, self.plan, self.stream = fleet, source, plan, stream
        self.height, self.width = shape
        self.most = most
        turned = plan.rotation in (90, 270)
        out_h, out_w = (self.width, self.height) if turned else (self.height, self.width)
        waited = time.perf_counter()
        self.slot = ring.take(stream)
        # A wait for the consumer is not NVDEC's time.
        self.began = (waited if began is None else began) + time.perf_counter() - waited
        frames = self.slot.buffer("frames", most * self.height * self.width * 3)
        self.frames = frames.reshape(most, out_h, out_w, 3)
        self.coefficients = plan.conversion.coefficients()
        self.names: list[str] = []
        self.sources: list[str] = []
        self.taken = 0  # frames offered, converted or not

    def full(self) -> bool:
        return self.taken >= self.most

    def add(self, frame, index: int) -> None:
        """Frame ``index`` of the video, enqueued for conversion on the stream (once it is
        decoded: the DLPack import waits for that on the stream)."""
        self.taken += 1
        source, width, height = self.source, self.width, self.height
        if not source.kept(index):  # --every: decoded, not converted
            return
        name = source.frame_name(index)
        if not self.fleet.wanted(name, lambda: width * height):
            self.fleet.skipped()
            return
        with self.stream:
            planes = cupy.from_dlpack(frame)
        pitch = planes.strides[0]
        launch_nv12_to_bgr(
            self.fleet.device, planes.data.ptr, pitch, planes.data.ptr + pitch * height, pitch,
            self.frames[len(self.names)], self.stream, coefficients=self.coefficients,
            rotation=self.plan.rotation, depth=self.plan.depth,
        )  # fmt: skip
        self.names.append(name)
        self.sources.append(f"{source.path} [frame {index}]")

    def wait(self) -> None:
        """Until the conversions enqueued so far have read their frames."""
        self.stream.synchronize()

    def put(self) -> None:
        """The frames converted so far to the consumer, once read from the decoder's."""
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record(self.stream)
        self.wait()
        elapsed_ms = (time.perf_counter() - self.began) * 1e3
        decoder = NVDEC if self.plan.exact else NVDEC_APPROX
        self.fleet.put_batch(self.names, self.sources, self.frames, ready, self.slot, decoder,
                             elapsed_ms, "gpu_decode")  # fmt: skip


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
            # Done before the decoder goes: its slow teardown is not waited for.
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
            if plan.packets:
                self._packets(segment, plan, stream, ring, decoder)
            else:
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
            filler = _Filler(self, source, plan, (height, width), stream, ring, len(decoded),
                             began)  # fmt: skip
            for offset, frame in enumerate(decoded):
                filler.add(frame, index + offset)
            filler.put()  # the decoder reuses the frames: converted before the next batch
            index += len(decoded)

    def _packets(
        self, segment: Segment, plan: NvdecPlan, stream, ring: SlotRing, held: SessionDecoder
    ) -> None:
        """``segment``'s frames from NVDEC fed packet by packet from PyNvVideoCodec's demuxer,
        which gives cv2's frames in cv2's order and count for HEVC, VP9 and Matroska where its
        SimpleDecoder repeats or drops some (:data:`edgecli.decode.nvdec.ORDER_CHECKED`). Never
        cut: the packets are read from the start. Where NVDEC cannot open the video or fails
        in it, or gives fewer frames than an MP4 holds, the CPU decodes the rest, with its
        error if any."""
        source, path = segment.source, segment.source.path
        self.schedule.keep(segment)
        index = 0
        try:
            demuxer = import_nvc().CreateDemuxer(str(path))
            height, width = demuxer.Height(), demuxer.Width()
            decoder = held.for_packets(demuxer, plan.depth, stream)
        except Exception:  # the CPU decoder opens it, or says why it cannot
            held.drop_packets()
            self.notes[path] = f"{CPU}: NVDEC could not open it"
            return self._cpu(segment, stream, ring)
        if width % 2 or height % 2:  # NVDEC's 4:2:0 surfaces are of even sizes
            self.notes[path] = f"{CPU}: an odd size, {width}x{height}"
            return self._cpu(segment, stream, ring)
        check_size(str(path), width * height, self.max_pixels)
        per_batch = frames_a_batch(VIDEO_BATCH, width * height)
        stop = segment.stop
        filler = None
        try:
            for packet in demuxer:
                if stop is not None and index >= stop:
                    held.drop_packets()  # its stream not ended: frames of this video still in it
                    break
                if self.stop.is_set():
                    raise Stopped
                # The decoder copies each frame it returns into a surface of its own on the
                # session's stream, where a later frame's copy into the same surface follows
                # the conversions enqueued before it: no wait between packets.
                decoded = decoder.Decode(packet)
                for frame in decoded:
                    if index >= segment.start and (stop is None or index < stop):
                        if filler is None:
                            filler = _Filler(self, source, plan, (height, width), stream,
                                             ring, per_batch)  # fmt: skip
                        filler.add(frame, index)
                        if filler.full():
                            filler.put()
                            filler = None
                    index += 1
        except Stopped:
            raise
        except Exception:
            held.drop_packets()
            if filler is not None:
                filler.put()
            self.notes[path] = f"{CPU} from frame {index}: NVDEC stopped there"
            return self._cpu(Segment(source, max(index, segment.start), stop), stream, ring)
        if filler is not None:
            filler.put()
        expected = frame_count(path)
        if expected is not None and index < expected and (stop is None or index < stop):
            # Cut short: the CPU decoder says how, as it would without NVDEC.
            held.drop_packets()
            self.notes[path] = f"{CPU} from frame {index}: NVDEC stopped there"
            self._cpu(Segment(source, index, None), stream, ring)

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
        self.put_batch(
            names, [f.source for f in batch], frames, ready, slot, CPU, elapsed_ms, "upload"
        )
        batch.clear()

    def put_batch(self, names, sources, frames, ready, slot, decoder, elapsed_ms, stage) -> None:
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
