"""When each phase of one whole ``edgecli run`` happens, in seconds from the process's start
(its start time in /proc, Linux): printed to stderr at exit.

    PYTHONPATH=. python3 benchmarks/timeline.py run DIR -o OUT -q --decode gpu

The arguments are edgecli's; the phases are the pipeline's functions, wrapped here.
"""

import atexit
import os
import sys
import time


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


def main() -> None:
    mark("python started, script running")
    atexit.register(report)
    import edgecli.cli

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
