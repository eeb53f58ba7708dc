"""The run's wiring: check the inputs, choose the backend and decoders, prepare the output
folder, start the pool, reader, ring and writer, and make the summary."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..decode.cpu import declared_pixels
from ..decode.plan import open_early, plan
from ..edges import backends
from ..edges.backends import select_backend
from ..errors import CudaUnavailableError, FrameError, OutputError
from ..inputs.overwrites import refuse_overwriting_inputs, refuse_special_outputs
from ..inputs.sources import Frame, count_frames, discover_inputs, input_list, select_frames
from ..options.params import Options, check_path, cpu_if_small
from ..options.shards import format_shard, shard_of
from ..output import golden, resume
from ..output.claims import claimed
from ..output.sinks import (
    check_output_name,
    discard_reports,
    open_reports,
    prepare_output_dir,
    remove_stale_temporaries,
    write_reports,
)
from ..output.timing import HANDOFF, READ_AHEAD, StageClock, Summary
from ..version import __version__
from ..workers import PriorityPool
from .batches import DecodeTally, run_on_gpu
from .budget import DECODED_BYTES_PER_PIXEL, HOST_BYTES_PER_PIXEL, FrameBudget, default_budget
from .reader import FOLLOWING_DEPTH, Failure, FrameReader
from .threshold import resolve as resolve_threshold
from .writer import Writer

# Slabs beyond the batches on the GPU: a collected batch's slab is refilled only this many
# batches later, which gives its PNG encoders that long to finish reading it. With none spare,
# the slab just collected would be the next one to fill, and the main thread would wait for all
# of its encodes before every submit; past two, more would only hold more pinned memory.
SPARE_SLABS = 2

# Decoded frames read ahead of the main thread, and edge maps waiting for their PNGs, at most,
# each: this many per worker, plus a batch.
WINDOW_PER_WORKER = 2


# The worker pool's priorities: the lowest runs first. Copies into pinned memory hold up the
# main thread, and so the GPU; an encode finishes a frame and frees its slab; a decode starts one.
COPY, ENCODE, DECODE = 0, 1, 2


def frame_budget(options: Options, backend, workers: int, window: int) -> FrameBudget:
    """The run's memory budget for frames in flight (:mod:`edgecli.pipeline.budget`): --max-memory,
    or a share of the memory available now. It is left inactive (no header is read for it) where
    even the most frames the queues can hold, each of --max-pixels, fit in it."""
    per_pixel = HOST_BYTES_PER_PIXEL if backend.runs_on_host else DECODED_BYTES_PER_PIXEL
    limit = options.max_memory or default_budget()
    # The frames the queues can hold at once: a window waiting for the main thread, a
    # sequence's queue and the next one's, a window waiting for PNGs, one on every worker.
    most = 3 * window + FOLLOWING_DEPTH + workers + 2
    if limit is None or limit >= most * options.max_pixels * per_pixel:
        return FrameBudget(None, per_pixel)
    return FrameBudget(limit, per_pixel)


class _NoBar:
    """The progress of a run that shows none (-q, a library call): nothing drawn, and no tqdm
    imported (a share of a short run's start-up that a bar nobody sees need not cost)."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(sources: list, shown: bool):
    """The run's progress bar: tqdm's over the run's frames where ``shown``, else none."""
    if not shown:
        return _NoBar()
    from tqdm import tqdm  # only where a bar is drawn: see _NoBar

    if not any(source.multi_frame for source in sources):  # a frame a file: nothing to open
        return tqdm(total=len(sources), **_BAR)
    return _CountingBar(tqdm(total=None, **_BAR), sources)


_BAR = {"unit": "frame", "dynamic_ncols": True, "leave": False}


class _CountingBar:
    """A progress bar whose total is counted on a thread of its own: an MP4's frame count is read
    from its sample table, but another video's comes from opening a decoder in cv2
    (:func:`edgecli.inputs.sources.count_frames`), which the run does not wait for. Until the count
    is in, the bar counts frames without a total."""

    def __init__(self, bar, sources: list):
        self.bar = bar
        self.closing = threading.Event()
        self.counter = threading.Thread(
            target=self._count, args=(sources,), name="edgecli-count", daemon=True
        )
        self.counter.start()

    def _count(self, sources: list) -> None:
        total = count_frames(sources, stop=self.closing)
        if total is None:
            return
        with self.bar.get_lock():
            self.bar.total = total
            self.bar.refresh(nolock=True)

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self) -> None:
        """The count stops after the file it is opening (a run is never left behind with a
        thread in OpenCV), and the bar is cleared."""
        self.closing.set()
        self.counter.join()
        self.bar.close()


def _above_bar(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say``, printing above the progress bar rather than onto its line: the bar is cleared
    first and drawn again after, as ``tqdm.write`` does (``say`` may print any way it likes)."""
    from tqdm import tqdm  # only where a bar is drawn: see _NoBar

    def said(message: str) -> None:
        with tqdm.external_write_mode(file=sys.stderr):
            say(message)

    return said


def checked_sources(
    inputs: list[str], output, options: Options, reports: dict, notify=lambda message: None
) -> list:
    """The sources of the whole run, once they are known not to collide, no output (a PNG,
    a frame name, a report in ``reports``) would overwrite an input, and no output name holds
    a link, device or FIFO; ``notify`` hears of what a folder scan leaves out (links that
    loop or lead nowhere, earlier output folders: :func:`edgecli.inputs.sources.folder_files`)."""
    sources = discover_inputs(
        inputs, recursive=options.recursive, exclude=Path(output), notify=notify
    )
    # Before the folder's record is read: a FIFO there would hold the run up for good.
    refuse_special_outputs(sources, Path(output))
    refuse_overwriting_inputs(
        inputs,
        sources,
        Path(output),
        recursive=options.recursive,
        reports=reports,
        own_output=resume.read_manifest(Path(output)) is not None,
    )
    return select_frames(sources, options.selection)


def listed_run(inputs: list[str], output, options: Options, reports: dict, notify):
    """:func:`checked_sources`, and ``options`` with the threshold that ``-t auto`` or ``-t P%``
    chooses from them: from the whole run's frames, before it is cut into shards or tasks, so
    that each one picks the same."""
    sources = checked_sources(inputs, output, options, reports, notify)
    return sources, resolve_threshold(options, sources, notify)


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
    write_expected: str | Path | None = None,
    backend=None,
    sources: list | None = None,
) -> Summary:
    """Process every frame ``inputs`` name (one INPUT or a list, in order) into PNGs in
    ``output``; return the summary.

    ``stop``, when set (by a signal handler, say), ends the run early: no new frame is
    started, frames in flight are finished (each PNG appears whole or not at all), and the
    summary says it was interrupted. ``timings_csv`` names a file for one row per frame,
    ``json_summary`` one for the summary as JSON, ``write_expected`` one for the manifest of
    the outputs (:mod:`edgecli.output.golden`; not for an interrupted run): each is written at the
    end, only if the run returns, by the rules of :class:`edgecli.output.sinks.ReportFile` (their
    names are checked against the inputs, and their temporaries made, before any frame is
    read).
    ``backend``, if given, is used instead of the one ``options.backend`` selects: a
    stand-in from :mod:`tests.standins`, say, in a test or a benchmark. ``sources``, if
    given, are this process's sources of ``inputs``, already listed, checked against the
    output folder and (with ``options.shard``) split: a cluster's client does that once for
    all its tasks (:mod:`edgecli.cluster.run`), which then skip it.
    """
    started = time.perf_counter()
    notify, warn, stop = run_callbacks(notify, warn, stop)
    inputs = input_list(inputs)
    reports = {"timings CSV": timings_csv, "JSON summary": json_summary, "manifest": write_expected}

    def body(checked: dict) -> tuple[Summary, StageClock]:
        return _run_opened(
            inputs, output, options, checked, progress, notify, warn, stop, backend, sources,
            started, per_frame=timings_csv is not None,
        )  # fmt: skip

    return with_reports(output, reports, body)


def run_callbacks(notify, warn, stop) -> tuple[Callable, Callable, threading.Event]:
    """A run's defaults where the caller gave none: notices (which backend, and why) dropped,
    warnings (a frame skipped under --on-error skip) where the notices go, a stop never set."""
    notify = notify or (lambda message: None)
    return notify, warn or notify, stop or threading.Event()


def with_reports(output, paths: dict, body: Callable[[dict], tuple]):
    """The skeleton every run shares (the plain one, a shard, a cluster's client): the output
    folder's name and each report's path (``paths``: by what it holds; None where not asked
    for) checked, and the reports opened, before any frame is read or any mark is made in the
    output folder, so that a report that cannot be written fails the run there, leaving
    everything as it was; then ``body(reports)``, the run proper, which returns its summary
    and the clock that timed it (None: no per-frame rows); then the reports written from
    them. A failed run leaves no report, not even an empty one."""
    check_path("output folder", output)
    check_output_name(Path(output))
    reports = {
        what: Path(check_path(f"{what} path", path))
        for what, path in paths.items()
        if path is not None
    }
    report_files = open_reports(reports, Path(output))
    try:
        summary, clock = body(reports)
    except BaseException:
        discard_reports(report_files)
        raise
    write_reports(report_files, report_contents(summary, clock))
    return summary


def _run_opened(
    inputs, output, options, reports, progress, notify, warn, stop, backend, sources, started,
    *, per_frame: bool,
) -> tuple[Summary, StageClock]:  # fmt: skip
    """:func:`run`, once its reports are open: the summary, and the clock that timed it."""
    run_size = None
    listed = sources is None  # a run of its own, not a task of a cluster's (sources given)
    if listed:
        if backend is None:  # the JPEG engines' decoder opens while the sources are listed
            open_early(options, inputs=inputs)
        sources, options = listed_run(inputs, output, options, reports, notify)
        if options.shard is not None:
            # Names and inputs were checked across the whole run; this process does its part.
            run_size = len(sources)
            sources = shard_of(sources, *options.shard)
    if options.shard is not None and not sources:
        return _empty_shard(output, options, started, backend, run_size, notify, per_frame)
    if backend is None:
        small = (
            listed
            and cpu_if_small(options.backend, options.decode)
            and small_run(sources, options.worker_count)
        )
        if not small:
            open_early(options, sources=sources)  # or else now, while CuPy starts
        choice = select_backend(options, small)
        if choice.notice:
            notify(choice.notice)
        backend = choice.backend
    # Which GPU decoders can run is settled before the output folder is touched: --decode gpu
    # where none can is an error (exit 4) with nothing written.
    gpu_decoding = gpu_decoders(options, backend, sources)
    out_dir = prepare_output_dir(Path(output))
    with claimed(out_dir, options):  # refuses a run of other options writing there now
        return _run_into(
            out_dir, sources, options, backend, progress, warn, stop, started,
            per_frame=per_frame, gpu_decoding=gpu_decoding,
        )  # fmt: skip


# A still image's pixels the CPU backend's workers each get through, decoded, edge-mapped and
# written, in the time CUDA's start costs a run over the CPU backend's (CuPy, the context, the
# kernels: a third of a second), with room to spare: a run of fewer goes to the CPU under
# --backend auto, and the outputs are the same.
SMALL_RUN_PIXELS = 4_000_000
# Files whose headers are read to weigh a run: past this many a worker, it is not small.
SMALL_RUN_FILES = 16


def small_run(sources: list, workers: int) -> bool:
    """Whether ``sources`` are still images the CPU backend's ``workers`` are done with before
    CUDA would have started: at most SMALL_RUN_PIXELS a worker, by their headers (a video, or a
    file whose header says nothing, is not)."""
    if len(sources) > SMALL_RUN_FILES * workers:
        return False
    total = 0
    for source in sources:
        pixels = None if source.multi_frame else declared_pixels(source.path)
        if pixels is None:
            return False
        total += pixels
        if total > SMALL_RUN_PIXELS * workers:
            return False
    return True


def report_contents(summary: Summary, clock: StageClock | None = None) -> dict:
    """The bytes of each report the run may write, by what it holds, each made when asked:
    the manifest of --write-expected only for a run that went to its end (an interrupted
    one's folder is not the whole run)."""

    def manifest() -> bytes | None:
        if summary.interrupted:
            return None
        out_dir = Path(summary.output)
        made = golden.build_manifest(out_dir, summary.params, summary.decoders, __version__)
        return golden.manifest_bytes(made)

    return {
        "timings CSV": lambda: clock.csv_text().encode("utf-8"),
        "JSON summary": lambda: (summary.dumps() + "\n").encode("utf-8"),
        "manifest": manifest,
    }


def gpu_decoders(options: Options, backend, sources: list):
    """A function that opens the run's GPU decoders, or None where every frame is decoded
    on the CPU (--decode cpu, the CPU backend, no JPEG or video among the sources). The plan
    of what decodes where is made here, once (:func:`edgecli.decode.plan.plan`), and handed to
    the decoders it opens. CudaUnavailableError (exit 4) for --decode gpu where no GPU decoder
    can run."""
    if options.decode == "cpu":
        return None
    if backend.runs_on_host:  # the CPU backend: frames stay on the host
        if options.decode == "gpu" and options.backend == "cpu":
            raise CudaUnavailableError("--decode gpu needs the CUDA backend, not --backend cpu")
        if options.decode == "gpu":
            reason = backends.cuda_unusable_reason(options.device, options)
            why = reason or "a stand-in backend runs"
            raise CudaUnavailableError(f"--decode gpu needs the CUDA backend: {why}")
        return None
    stand_in = getattr(backend, "gpu_decoders", None)
    if stand_in is not None:  # a stand-in GPU backend brings its own decoders (tests.standins)
        return stand_in(options, sources)
    chosen = plan(options, sources)
    if chosen is None:
        return None

    def open_decoders():
        from ..decode.gpu.decoders import GpuDecoders  # imports CuPy: only where one runs

        return GpuDecoders(chosen)

    return open_decoders


def _empty_shard(
    output, options, started, backend, run_size, notify, per_frame: bool
) -> tuple[Summary, StageClock]:
    """The summary of a shard with no sources (of ``run_size`` in the run, if known): 0
    frames. The output folder is not touched; the reports asked for are written (a scheduler
    collecting one per shard finds it)."""
    # What would fail its sibling shards fails it too: an output path that is a file, a CUDA
    # backend asked for that cannot run here.
    if Path(output).exists() and not Path(output).is_dir():
        raise OutputError(f"{output}: output path exists and is not a folder")
    if backend is None and options.backend == "cuda":
        select_backend(options)
    of = f"the run has {run_size}, split by size" if run_size is not None else "split by size"
    notify(
        f"shard {format_shard(options.shard)} has no sources ({of}); nothing to do, nothing written"
    )
    clock = StageClock(per_frame=per_frame)
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
    return summary, clock


def summary_params(options: Options) -> dict:
    """The summary's ``params``: the options that decide the bytes, and the shard run."""
    params = options.edge_params() | {
        "png_bits": options.png_bits,
        "shard": format_shard(options.shard),
    }
    if options.threshold_rule is not None:
        params["threshold_rule"] = options.threshold_rule
    if options.selection is not None:
        params["frames"] = {
            "start": options.start, "end": options.end, "every": options.every,
            "max": options.max_frames,
        }  # fmt: skip
    return params


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
    state = RunState(out_dir, sources, options, progress, warn, stop, per_frame)
    workers = options.worker_count
    window = WINDOW_PER_WORKER * workers + options.batch
    budget = frame_budget(options, backend, workers, window)
    try:
        pool = PriorityPool(workers, "edgecli-worker")
    except BaseException:  # its threads could not all be started: no run, and no bar left
        state.bar.close()
        raise
    gpu = ring = None
    with pool:
        writer = Writer(
            pool.at(ENCODE), out_dir, options, state.clock, window, state.bar.update, budget,
            keep_written=mixed,
        )  # fmt: skip
        try:
            if gpu_decoding is not None:
                gpu = gpu_decoding()
                if gpu.notice:
                    state.warn(gpu.notice)
            reader = FrameReader(
                pool.at(DECODE), state.clock, options, state.wanted, window, budget, gpu,
                pool.at(COPY),
            )  # fmt: skip
            state.reader = reader
            frames = state.decoded_frames(reader)  # the NVDEC sessions start, if any
            if not backend.runs_on_host:
                ring = backend.slab_ring(options.streams + SPARE_SLABS)
            flowing = time.perf_counter()
            if ring is None:  # the CPU backend: compute on every worker, frame by frame
                for frame in frames:
                    writer.submit(writer.compute_encode_write, backend, frame)
            else:
                run_on_gpu(
                    ring, frames, options, pool.at(COPY), state.clock, writer, reader.waits,
                    budget.release if budget.active else None, state.failed, state.tally,
                )  # fmt: skip
            writer.drain()
            # The main thread's own work while frames flowed: its time less its waits.
            waited = reader.waits.total_s() + writer.waits.total_s()
            handoff_s = max(time.perf_counter() - flowing - waited, 0.0)
            state.clock.add_busy("main", HANDOFF, handoff_s * 1e3)
        finally:
            # On an error, frames not yet started are dropped; those in flight finish
            # (their PNGs are written whole, by rename) before the pool is gone.
            if gpu is not None:
                if gpu.jpeg is not None and gpu.jpeg.failure():
                    state.warn(f"JPEGs decoded on the CPU: the GPU's JPEG decoder did not "
                               f"open ({gpu.jpeg.failure()})")  # fmt: skip
                gpu.close()
            pool.shutdown(wait=True, cancel_futures=True)
            state.bar.close()
    if mixed and not stop.is_set():
        resume.finish(out_dir, options, writer.written)
    summary = state.summary(backend, started, writer, gpu, on_host=ring is None)
    return summary, state.clock


class RunState:
    """What a run keeps while it goes: its clock, failures, progress bar and pixel count,
    the --skip-existing test, and the summary made of them at the end."""

    def __init__(self, out_dir, sources, options, progress, warn, stop, per_frame):
        self.out_dir, self.sources, self.options, self.stop = out_dir, sources, options, stop
        self.clock = StageClock(per_frame=per_frame)
        self.tally = DecodeTally()
        self.failures: list[Failure] = []
        self.megapixels = 0.0
        self.reader: FrameReader | None = None
        self.bar = _progress_bar(sources, progress)
        self.warn = _above_bar(warn) if progress else warn

    def wanted(self, name: str, expected_pixels: Callable[[], int | None]) -> bool:
        """False for an output --skip-existing keeps: whole, as large as its source."""
        options = self.options
        return not (
            options.skip_existing
            and resume.output_is_whole(self.out_dir / name, options.png_bits, expected_pixels)
        )

    def decoded_frames(self, reader: FrameReader) -> Iterator[Frame]:
        """The reader's frames (and GPU-decoded batches), the failures told and counted; the
        reader's GPU decoders start now (:meth:`FrameReader.frames`)."""
        return self._told(reader.frames(self.sources))

    def _told(self, items) -> Iterator[Frame]:
        for item in items:
            if self.stop.is_set():
                return
            if isinstance(item, Failure):
                self._failed(item)
                continue
            if isinstance(item, Frame):  # a batch the GPU decodes is counted when it is in
                self.megapixels += item.pixels.shape[0] * item.pixels.shape[1] / 1e6
            yield item

    def failed(self, error: FrameError) -> None:
        """A file a GPU-decoded batch could not decode (raises under --on-error fail)."""
        self._failed(self.reader.failure(error))

    def _failed(self, failure: Failure) -> None:
        self.failures.append(failure)
        self.warn(f"skipped {failure.source}: {failure.reason}")
        self.bar.update(failure.frames)

    def summary(self, backend, started, writer, gpu, *, on_host: bool) -> Summary:
        stats = self.clock.stats()
        reader, options = self.reader, self.options
        # Each resource's lanes: what it can run at once (timing.find_bottleneck).
        lanes = {"workers": options.worker_count, "reader": 1, READ_AHEAD: 1, "main": 1}
        if not on_host:
            lanes["gpu"] = options.streams
        if gpu is not None:
            lanes |= gpu.lanes
        # In the order of the sources, whichever decoder found them first: a file that a GPU
        # batch hands back to the CPU fails after the files read after it.
        order = {str(source.path): i for i, source in enumerate(self.sources)}
        failures = sorted(self.failures, key=lambda f: order.get(f.source, len(order)))
        return Summary(
            frames=stats.get("write", {}).get("count", 0),
            failed=[{"source": f.source, "reason": f.reason, "frames": f.frames} for f in failures],
            wall_s=time.perf_counter() - started,
            backend=backend.name,
            device=backend.device_name,
            params=summary_params(options),
            workers=options.worker_count,
            output=str(self.out_dir),
            stages=stats,
            megapixels=self.megapixels + self.tally.megapixels,
            skipped_existing=reader.skipped_existing if reader is not None else 0,
            interrupted=self.stop.is_set(),
            main_thread_waits_s=(reader.waits.totals() if reader else {}) | writer.waits.totals(),
            decoders=_decoders(self.tally.frames, stats, on_host),
            videos=gpu.videos() if gpu is not None else {},
            busy=self.clock.busy(),
            lanes=lanes,
        )


def _decoders(counted: dict[str, int], stats: dict, on_host: bool) -> dict[str, int]:
    """Frames per decoder, of those written: on the CPU backend every one is the CPU's."""
    written = stats.get("write", {}).get("count", 0)
    if on_host:
        return {"cpu": written} if written else {}
    return {name: n for name, n in sorted(counted.items()) if n}
