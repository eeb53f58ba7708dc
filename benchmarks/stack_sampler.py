"""Where a run's threads spend their time: sample every thread's stack during an in-process
``edgecli.pipeline.run``, at a Python switch interval of your choice.

    python benchmarks/stack_sampler.py INPUT DECODE[:SWITCH_S] [DECODE[:SWITCH_S] ...]

    python benchmarks/stack_sampler.py bench_data/q95/jpeg auto:0.005 auto:0.0005

Each argument after INPUT is one run: its ``--decode`` and, after a colon, the value given to
``sys.setswitchinterval`` (default Python's 0.005 s). Every 2 ms a thread takes each other
thread's innermost frames; the report gives each run's rate and main-thread waits, the share
of samples in which the workers were idle, and the main thread's commonest stacks. A thread
waiting for the GIL shows at the line it is waiting to run. Outputs go to a temporary folder.
"""

from __future__ import annotations

import collections
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from edgecli.params import Options  # noqa: E402
from edgecli.pipeline import run  # noqa: E402

SAMPLE_S = 0.002


def sample(stacks: collections.Counter, stop: threading.Event) -> None:
    names: dict[int, str] = {}
    me = threading.get_ident()
    while not stop.is_set():
        for thread in threading.enumerate():
            names[thread.ident] = thread.name
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            name = names.get(ident, "?")
            group = "main" if name == "MainThread" else name.rstrip("0123456789_-")
            lines = []
            while frame is not None and len(lines) < 4:
                code = frame.f_code
                lines.append(f"{Path(code.co_filename).name}:{code.co_name}:{frame.f_lineno}")
                frame = frame.f_back
            stacks[(group, " < ".join(lines))] += 1
        time.sleep(SAMPLE_S)


def main() -> None:
    source, specs = sys.argv[1], sys.argv[2:]
    if not specs:
        sys.exit(__doc__)
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-sampler-"))
    try:
        for spec in specs:
            decode, _, interval = spec.partition(":")
            sys.setswitchinterval(float(interval or 0.005))
            stacks: collections.Counter = collections.Counter()
            stop = threading.Event()
            sampler = threading.Thread(target=sample, args=(stacks, stop), daemon=True)
            sampler.start()
            start = time.perf_counter()
            summary = run(source, scratch / spec.replace(":", "-"), Options(decode=decode))
            wall = time.perf_counter() - start
            stop.set()
            sampler.join()
            print(f"== --decode {decode}, switch interval {sys.getswitchinterval()} s: "
                  f"{summary.frames} frames in {wall:.2f} s ({summary.frames / wall:.0f} fps), "
                  f"decoders {summary.decoders}")  # fmt: skip
            print(f"   main thread waited: {summary.main_thread_waits_s}")
            workers = {k: n for k, n in stacks.items() if k[0] == "edgecli-worker"}
            idle = sum(n for k, n in workers.items() if "workers.py:_work" in k[1].split(" < ")[1])
            print(
                f"   workers idle in {100 * idle / max(sum(workers.values()), 1):.0f}% of samples"
            )
            main_total = sum(n for k, n in stacks.items() if k[0] == "main")
            for (group, stack), n in stacks.most_common():
                if group == "main" and n / main_total >= 0.05:
                    print(f"   main {100 * n / main_total:5.1f}%  {stack}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
