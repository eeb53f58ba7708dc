"""A/B of the PNG encoder processes of tree 01bb145 (dropped: no faster) against the worker
threads (runner's start_encoders replaced by one that gives None): whole processes, 3
alternating rounds, on 2400 PNG and JPEG links, and a JPEG run into tmpfs (/dev/shm), where
the disk is not the limit. It runs in a worktree of 01bb145, where the processes exist, with
``bench_data/png`` and ``/tmp/j2400`` (2400 links to ``bench_data/q95/jpeg``) made there:

    git worktree add ../edgecli-01bb145 01bb145
    cp benchmarks/experiments/encoder_ab.py ../edgecli-01bb145/ && cd ../edgecli-01bb145
    PYTHONPATH=. python3 encoder_ab.py
"""

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "benchmarks")
from e2e import symlink_folder  # as e2e.py has it at 01bb145

THREADS = (
    "import edgecli.pipeline.runner as r; r.start_encoders = lambda *a: None; "
    "import sys; from edgecli.cli import main; sys.argv[0] = 'edgecli'; main()"
)
PROCS = "import sys; from edgecli.cli import main; sys.argv[0] = 'edgecli'; main()"


def whole(code, src, out, *extra):
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "run",
            str(src),
            "-o",
            str(out),
            "-q",
            "--json-summary",
            f"{out}.json",
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    w = time.perf_counter() - t
    if r.returncode:
        print("FAIL", r.stderr[-300:])
    s = json.loads(Path(f"{out}.json").read_text())
    return w, s


png = symlink_folder(sorted(Path("bench_data/png").iterdir()), 2400, Path("/tmp/png2400"))
jpg = Path("/tmp/j2400")
for label, src, extra in (
    ("PNG folder, auto", png, ()),
    ("JPEG folder, gpu", jpg, ("--decode", "gpu")),
):
    times = {"processes": [], "threads": []}
    for rnd in range(3):
        for name in ("processes", "threads") if rnd % 2 == 0 else ("threads", "processes"):
            w, s = whole(
                PROCS if name == "processes" else THREADS, src, Path("/tmp/ab-out"), *extra
            )
            times[name].append(w)
    for name, ws in times.items():
        median = statistics.median(ws)
        print(f"{label:<18} {name:<9}: median {median:.3f} s = {2400 / median:.0f} fps "
              f"({min(ws):.2f}-{max(ws):.2f})", flush=True)  # fmt: skip
for name, code in (("processes", PROCS), ("threads", THREADS)):
    ws = [whole(code, jpg, Path("/dev/shm/ab-out"), "--decode", "gpu")[0] for _ in range(2)]
    print(f"JPEG gpu into /dev/shm, {name}: {min(ws):.3f} s = {2400 / min(ws):.0f} fps", flush=True)
shutil.rmtree("/dev/shm/ab-out", ignore_errors=True)
