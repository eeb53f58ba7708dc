"""``edgecli run``: the options, the process set up for a run, the run (one pipeline or a
cluster of them), the golden-output check and the exit code."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_SKIPPED,
    EdgecliError,
    ExpectationError,
    OptionError,
)
from ..options.params import (
    DECODES,
    ON_ERROR,
    Options,
    check_path,
    cpu_if_small,
    parse_devices,
)
from ..options.shards import parse_shard
from .common import (
    EdgecliClickError,
    edge_options,
    keep_standard_streams_open,
    notifier,
    say,
    selection_options,
)
from .types import ByteSize, Threshold, WholeNumber

# sys.setswitchinterval for a run (see prepare_process).
SWITCH_INTERVAL_S = 0.0005


@contextmanager
def stop_on_signals():
    """A first SIGINT/SIGTERM sets the event (the run winds down and reports); a second
    exits at once. Either way no partial PNG exists: each is renamed into place whole."""
    stop = threading.Event()
    received: list[int] = []

    def handler(signum, frame):
        if stop.is_set():
            os._exit(128 + signum)
        received.append(signum)
        stop.set()

    if threading.current_thread() is not threading.main_thread():  # e.g. under a test runner
        yield stop, received
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop, received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@click.command()
@click.argument("inputs", metavar="INPUT...", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="DIR",  # a str, checked by the run: Path("") would be ".", and a click.Path
    # stats it, which raises for a name the file system's encoding rejects
    help="Folder to write edge PNGs into (created if missing; existing files are overwritten).",
)
@click.option(
    "-t",
    "--threshold",
    type=Threshold(),
    default=None,
    help="Edge when the gradient magnitude is strictly greater than this. auto: chosen once "
    "for the run by Otsu's rule from 8 frames spread over it; P% (e.g. 5%): the smallest "
    "threshold that marks at most P percent of those frames' pixels. Canny: LOW,HIGH "
    "(decimals allowed, as cv2.Canny's), or auto: Otsu's as HIGH, half of it as LOW.  "
    "[default: 100; canny: 100,200]",
)
@edge_options
@click.option(
    "--decode",
    type=click.Choice(DECODES),
    default=Options.decode,
    show_default=True,
    help="Where frames are decoded. auto: JPEGs on the GPU's JPEG engines and 8-bit H.264, "
    "HEVC and VP9 on NVDEC wherever that gives exactly the CPU decoder's frames, the CPU "
    "elsewhere; gpu: "
    "on the GPU wherever it can decode at all (exit 4 if no GPU decoder can run); cpu: "
    "always on the CPU.",
)
@click.option(
    "--png-bits",
    type=click.Choice(["1", "8"]),
    default=str(Options.png_bits),
    show_default=True,
    help="1-bit grayscale PNG (smallest, fastest) or 8-bit; both read back as 0/255.",
)
@click.option(
    "--workers",
    type=WholeNumber(1),
    default=None,
    help="Worker threads: they decode, encode and write; at most 4 per usable CPU core.  "
    "[default: one per usable CPU core]",
)
@click.option(
    "--batch",
    type=WholeNumber(1),
    default=Options.batch,
    show_default=True,
    help="Same-size frames per GPU launch.",
)
@click.option(
    "--streams",
    type=WholeNumber(1),
    default=Options.streams,
    show_default=True,
    help="CUDA streams to overlap copies with compute.",
)
@click.option(
    "--device",
    "device_text",
    metavar="N|N,M,...|all",
    default=str(Options.device),
    show_default=True,
    help="CUDA device index; several (0,2) or all: one worker process a GPU, the sources "
    "shared out between them as they go (needs the cluster extra).",
)
@click.option(
    "--on-error",
    type=click.Choice(ON_ERROR),
    default=Options.on_error,
    show_default=True,
    help="fail: stop at the first bad frame (exit 1). skip: report it, go on (exit 3).",
)
@click.option(
    "--skip-existing",
    is_flag=True,
    help="Resume: keep whole output PNGs; refused if the folder was made with other options.",
)
@click.option(
    "--max-pixels",
    type=WholeNumber(1),
    default=Options.max_pixels,
    show_default=True,
    help="Refuse frames whose header declares more pixels than this.",
)
@click.option(
    "--max-memory",
    type=ByteSize(),
    default=None,
    help="Bytes of frames in flight at once (K, M, G suffixes); a frame waits for room, one "
    "that cannot fit alone fails.  [default: half the memory available]",
)
@click.option(
    "--shard",
    metavar="I/N",  # a str, parsed by edgecli.options.shards: a bad value is an Error: line, exit 2
    default=None,
    help="Run only part I of N (0 <= I < N) of the sources, split by size; N such runs "
    "into one folder make the whole run.",
)
@click.option(
    "--json-summary",
    "json_summary",
    metavar="PATH|-",
    default=None,
    help="Also write the summary as JSON to PATH, or to stdout with '-'.",
)
@click.option(
    "--timings-csv",
    metavar="PATH|-",  # a str, as -o is
    default=None,
    help="Write one row per frame (milliseconds per stage) to this CSV file, or to stdout "
    "with '-'.",
)
@click.option(
    "--scheduler",
    metavar="local:N|tcp://HOST:PORT",
    default=None,
    help="Run as shards on a Dask cluster: a LocalCluster of N worker processes, or a running "
    "scheduler (needs the cluster extra).",
)
@selection_options
@click.option(
    "--write-expected",
    metavar="PATH|-",
    default=None,
    help="After the run, write a manifest of its outputs (options and a hash of each PNG's "
    "pixels) to PATH, or to stdout with '-', for --expect.",
)
@click.option(
    "--expect",
    metavar="PATH",
    default=None,
    help="After the run, compare the output folder with the manifest at PATH: exit 5, "
    "listing each frame that differs, is missing or is extra, or the options that differ.",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Nothing on success: no progress bar, no summary (frames skipped and errors are "
    "still said, on stderr).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Say what is being done before the run, and after it the time of every stage.",
)
def run(
    inputs,
    output,
    png_bits,
    shard,
    json_summary,
    timings_csv,
    scheduler,
    write_expected,
    expect,
    quiet,
    verbose,
    device_text,
    **fields,
) -> None:
    """Detect edges in every frame of each INPUT and write one PNG per frame.

    An INPUT is a folder of images (png, jpg, jpeg, bmp, tif, tiff, webp, gif) and videos, a
    video file, a single image, a multi-frame image (animated GIF/WebP/PNG, multi-page TIFF)
    or a quoted glob such as 'shots/*.jpg'; several are read in the order given. An image
    a.jpg becomes a.png; frame 7 of clip.mp4 becomes clip_000007.png. The summary goes to
    stderr.
    """
    keep_standard_streams_open()
    try:
        devices = parse_devices(device_text)
    except OptionError as exc:
        raise click.BadParameter(str(exc), param_hint="'--device'") from None
    fields["device"] = devices[0] if devices else 0
    prepare_process(fields, devices, verbose, inputs)

    warn = say

    notify = notifier(quiet=quiet, verbose=verbose)

    try:
        shard = None if shard is None else parse_shard(shard)
        options = Options(png_bits=int(png_bits), shard=shard, **fields)
        if verbose:
            notify(f"options: {json.dumps(options.as_dict())}")
        check_golden_options(write_expected, expect, shard)
        run_pipeline, extra = choose_runner(devices, scheduler, timings_csv, options)
        with stop_on_signals() as (stop, received):
            summary = run_pipeline(
                inputs,
                output,
                options,
                progress=not quiet and sys.stderr is not None and sys.stderr.isatty(),
                notify=notify,
                warn=warn,
                stop=stop,
                json_summary=json_summary,
                write_expected=write_expected,
                **extra,
            )
        try:
            if not quiet:
                click.echo(summary.format_text(verbose), err=True)
            if not summary.interrupted and expect is not None:
                compare_golden(summary, expect, warn)
        except KeyboardInterrupt:  # the run is done and its files are whole: say so
            click.echo(f"Error: interrupted by SIGINT; {summary.frames} frame(s) written", err=True)
            sys.exit(EXIT_SIGINT)
    except EdgecliError as exc:
        raise EdgecliClickError(exc) from None
    exit_for(summary, received)


# Image files named one by one, at most this many: a run --backend auto may give the CPU
# (edgecli.pipeline.runner.small_run), for which the CUDA driver is not started early.
FEW_IMAGE_FILES = 4


def few_image_files(inputs) -> bool:
    """Whether ``inputs`` name at most FEW_IMAGE_FILES image files (no folder, glob or video),
    as far as their names and a stat tell."""
    from ..decode.kinds import IMAGE_EXTENSIONS  # the stages' modules: when a command runs

    return 0 < len(inputs) <= FEW_IMAGE_FILES and all(
        os.path.isfile(text) and text.lower().endswith(IMAGE_EXTENSIONS) for text in inputs
    )


def prepare_process(
    fields: dict, devices: list[int] | None, verbose: bool, inputs: tuple[str, ...] = ()
) -> None:
    """This process set up for a run: the CUDA driver started early (one GPU; not for a few
    image files, which --backend auto may well run on the CPU), FFmpeg's and OpenCV's own
    logging quiet (unless -v), freed memory kept, a short GIL switch interval."""
    # A few image files may well run on the CPU (edgecli.pipeline.runner.small_run decides
    # once their headers are read): CUDA starts then, where it is needed after all.
    few = cpu_if_small(fields["backend"], fields["decode"]) and few_image_files(inputs)
    if fields["backend"] != "cpu" and (devices is None or len(devices) == 1) and not few:
        from ..cuda.driver import start_driver  # ctypes: not at every command's start-up

        start_driver(fields["device"])  # the CUDA driver starts while the rest is imported
    if not verbose:
        # FFmpeg and OpenCV log straight to stderr (e.g. "moov atom not found" before our
        # own one-line error); keep them quiet unless asked. Read when the backend loads.
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # AV_LOG_QUIET
        os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
        # Decoders warn about the corrupt files we already report in one line each.
        warnings.simplefilter("ignore")
    from ..pipeline.allocator import keep_freed_memory  # edgecli.pipeline: NumPy, OpenCV

    keep_freed_memory()  # this process is ours: frames' buffers reused, not faulted in anew
    # A thread back from a system call or zlib waits for the GIL until its holder lets go, at
    # most this long: at the GPU decoders' rates every encoder thread queues behind it, and
    # Python's default (5 ms) leaves them waiting far longer than a PNG takes to compress.
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def choose_runner(devices: list[int] | None, scheduler: str | None, timings_csv, options):
    """The function that runs the job (one pipeline, or a cluster of them) and the keyword
    arguments it takes beyond the common ones. Several GPUs (``--device 0,1`` or ``all``)
    make a cluster of one worker a GPU where this process sees a GPU; where it sees none,
    one run, which says why CUDA is unusable (a notice under --backend auto, exit 4 under
    --backend cuda) rather than workers named for GPUs that are not there."""
    from ..pipeline import run as run_pipeline  # NumPy, OpenCV: not at the CLI's start-up

    extra = {"timings_csv": timings_csv}
    # One device needs no look at the others (cuInit on this thread: start-up time).
    listed = devices is not None and len(devices) > 1
    gpus = gpu_ids(devices) if devices is None or listed else []
    if listed or len(gpus) > 1:  # what cannot be combined with several GPUs, wherever run
        what = "--device with several GPUs"
        if scheduler is not None:
            raise OptionError(
                f"{what} cannot be combined with --scheduler (a Dask worker's GPU is its "
                "CUDA_VISIBLE_DEVICES)"
            )
        if timings_csv is not None:
            raise OptionError(f"--timings-csv cannot be combined with {what}")
        if options.shard is not None:
            raise OptionError(f"{what} runs every shard itself; it cannot be combined with --shard")
    if scheduler is not None or len(gpus) > 1:
        from ..cluster.run import run_on_cluster as run_pipeline  # NumPy, OpenCV; Dask once it runs

        if timings_csv is not None:
            raise OptionError("--timings-csv cannot be combined with --scheduler")
        extra = {"scheduler": scheduler} if scheduler is not None else {"devices": gpus}
    return run_pipeline, extra


def check_golden_options(write_expected, expect, shard) -> None:
    """Refuse --write-expected and --expect where they cannot mean what they say; read the
    manifest of --expect now, so that one that is not a manifest fails before the run."""
    if write_expected is not None and expect is not None:
        raise OptionError("--write-expected and --expect cannot be combined: make, then check")
    if (write_expected or expect) is not None and shard is not None:
        flag = "--write-expected" if write_expected is not None else "--expect"
        raise OptionError(f"{flag} takes a whole run's folder; run it without --shard")
    if expect is not None:
        from ..output.golden import read_manifest  # a stage: not at the CLI's start-up

        read_manifest(Path(check_path("--expect path", expect)))


def compare_golden(summary, expect, warn) -> None:
    """--expect: the output folder checked against a manifest, each difference on a line of
    its own before the error (exit 5). (--write-expected's manifest is one of the run's
    reports: :func:`edgecli.pipeline.run`.)"""
    from ..output import golden  # a stage: not at the CLI's start-up

    try:
        golden.check(Path(expect), Path(summary.output), summary.params)
    except ExpectationError as exc:
        for problem in exc.problems:
            warn(problem)
        raise


def exit_for(summary, received: list[int]) -> None:
    """The run's exit code, where it is not 0: interrupted (130, 143) or frames skipped (3)."""
    if summary.interrupted:
        name = "SIGTERM" if received and received[0] == signal.SIGTERM else "SIGINT"
        click.echo(f"Error: interrupted by {name}; {summary.frames} frame(s) written", err=True)
        sys.exit(EXIT_SIGTERM if name == "SIGTERM" else EXIT_SIGINT)
    if summary.failed:
        click.echo(f"Error: {summary.frames_failed} frame(s) skipped after errors", err=True)
        sys.exit(EXIT_SKIPPED)


def gpu_ids(devices: list[int] | None) -> list[str]:
    """The CUDA_VISIBLE_DEVICES ids of ``--device``'s GPUs (None: all of them): this
    process's own ids where it sees the device, else the index as given (a worker then says
    what is wrong with it, as a plain run would); none where it sees no GPU at all."""
    from ..cuda.driver import visible_devices  # ctypes: not at every command's start-up

    visible = visible_devices()
    if devices is None or not visible:
        return visible
    return [visible[i] if i < len(visible) else str(i) for i in devices]
