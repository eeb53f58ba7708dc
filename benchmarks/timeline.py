"""When each phase of one whole ``edgecli run`` happens, in seconds from the process's start
(its start time in /proc, Linux): printed to stderr at exit.

    PYTHONPATH=. python3 benchmarks/timeline.py run DIR -o OUT -q --decode gpu
    PYTHONPATH=. python3 benchmarks/timeline.py --spans 0.25 run DIR -o OUT -q --decode gpu

The arguments are edgecli's; the phases are the pipeline's functions, wrapped here. With
``--spans STEP``, also what each kind of thread was doing, STEP seconds a line: the average
number of files being read or decoded on the CPU, GPU decoder batches (PNG: being gathered on
the host, then on the GPU; JPEG: in the engines), videos (or parts of one) on the NVDEC
sessions, encoder tasks, and what the main thread waited for. The steady rate is set by
whichever of these stays full while the others wait.
"""

import atexit
import os
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager


def since_start() -> float:
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")


marks: list[tuple[float, str]] = []


def mark(what: str) -> None:
    marks.append((since_start(), what))


def report() -> None:
    mark("atexit")
    sys.stderr.write("\n".join(f"{t:7.3f}  {what}" for t, what in marks) + "\n")


def wrap(owner, name: str, label: str, once: bool = False) -> None:
    """Mark when ``owner.name`` begins and ends (with ``once``, its first call only)."""
    function, seen = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        first = not seen
        seen.append(1)
        if first or not once:
            mark(f"{label} begins")
        try:
            return function(*args, **kwargs)
        finally:
            if first or not once:
                mark(f"{label} ends")

    setattr(owner, name, wrapped)


spans: list[tuple[str, float, float]] = []  # (what, start, end), from any thread
spans_lock = threading.Lock()


def span(owner, name: str, label: str) -> None:
    """Record every call of ``owner.name`` as a span ``label``, on whichever thread runs it."""
    function = getattr(owner, name)

    def wrapped(*args, **kwargs):
        start = since_start()
        try:
            return function(*args, **kwargs)
        finally:
            with spans_lock:
                spans.append((label, start, since_start()))

    setattr(owner, name, wrapped)


def wait_spans(clock_class) -> None:
    """Each of the main thread's waits (WaitClock.timed) as a span ``main waits <what>``."""
    timed = clock_class.timed

    @contextmanager
    def wrapped(self, what: str):
        start = since_start()
        try:
            with timed(self, what):
                yield
        finally:
            with spans_lock:
                spans.append((f"main waits {what}", start, since_start()))

    clock_class.timed = wrapped


def occupancy(step: float) -> str:
    """The spans as a table: a line every ``step`` seconds, a column a label, each cell the
    average number of its spans open in that interval (a column of 1.0 was busy throughout)."""
    if not spans:
        return "no spans recorded"
    labels = sorted({label for label, _, _ in spans}, key=lambda x: (x.startswith("main"), x))
    first = min(start for _, start, _ in spans)
    last = max(end for _, _, end in spans)
    lines = int((last - first) / step) + 1
    open_s = defaultdict(lambda: [0.0] * lines)
    for label, start, end in spans:
        row = open_s[label]
        i = int((start - first) / step)
        while i < lines and first + i * step < end:
            low, high = first + i * step, first + (i + 1) * step
            row[i] += max(0.0, min(end, high) - max(start, low))
            i += 1
    width = max(8, *map(len, labels))
    out = ["".join(["      t"] + [f"  {label:>{width}}" for label in labels])]
    for i in range(lines):
        cells = "".join(f"  {open_s[label][i] / step:>{width}.2f}" for label in labels)
        out.append(f"{first + i * step:7.2f}{cells}")
    total = last - first
    cells = "".join(f"  {sum(open_s[label]) / total:>{width}.2f}" for label in labels)
    out.append(f"{'mean':>7}{cells}")
    return "\n".join(out)


def record_spans(step: float) -> None:
    from edgecli.inputs import sources
    from edgecli.output import timing
    from edgecli.pipeline import reader, writer

    span(reader.FrameReader, "read_for_gpu", "files read")
    span(sources.ImageSource, "decode", "CPU decodes")
    span(writer.Writer, "encode_write", "encode tasks")
    wait_spans(timing.WaitClock)
    try:  # the GPU decoders, where CuPy is installed
        from edgecli.decode.gpu import jpeg, pngs, video
    except ImportError:
        pass
    else:
        span(pngs.PngDecoder, "_decode", "PNG batches")
        span(pngs, "copy_streams", "PNG gathers")
        span(jpeg.JpegDecoder, "_decode", "JPEG batches")
        span(video.VideoFleet, "_run", "NVDEC segments")
    atexit.register(lambda: sys.stderr.write(occupancy(step) + "\n"))


def main() -> None:
    mark("python started, script running")
    atexit.register(report)
    step = None
    if sys.argv[1:2] == ["--spans"]:
        step = float(sys.argv[2])
        del sys.argv[1:3]
    import edgecli.cli

    if step is not None:
        record_spans(step)

    mark("edgecli.cli imported")
    from edgecli.pipeline import batches, runner, writer

    wrap(runner, "checked_sources", "list and check the sources")
    wrap(runner, "select_backend", "select the backend (import CuPy, load the kernel)")
    wrap(runner, "gpu_decoders", "plan the GPU decoders (wait for nvJPEG)")
    wrap(runner, "prepare_output_dir", "prepare the output folder")
    wrap(batches.GpuBatches, "submit_decoded", "first GPU-decoded batch to the kernel", once=True)
    wrap(writer.Writer, "drain", "drain the writer")
    wrap(runner, "_run_into", "the run proper")
    sys.argv = ["edgecli", *sys.argv[1:]]
    try:
        edgecli.cli.main()
    finally:
        mark("main returned")


if __name__ == "__main__":
    main()
