"""What the benchmark scripts share: a log line, inputs of any length made of links, where
runs write (tmpfs or disk), a whole edgecli run watched for stalls, the check that two runs
wrote the same PNGs, a task's rate on threads, and the few sums their figures take (medians,
ratios, the steady rate between two runs)."""

from __future__ import annotations

import hashlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# edgecli as `python -m edgecli` runs it, plus every thread's stack on SIGUSR1.
CHILD = REPO / "benchmarks" / "soak_child.py"


def watched_command(*edgecli_args: str) -> list[str]:
    """The command of an ``edgecli`` run (``run INPUT -o OUT ...``) through CHILD."""
    return [sys.executable, "-X", "faulthandler", str(CHILD), *edgecli_args]


def watched_run(
    command: list[str], env: dict, deadline_s: float, grace_s: float, stdout: Path, stderr: Path
) -> tuple[float, int | None]:
    """Run ``command`` in a session of its own: (wall seconds, exit code), or (seconds, None)
    when it passed ``deadline_s``: then SIGUSR1 first (the child dumps its stacks), and after
    ``grace_s`` SIGKILL to its whole session (any process it started goes too)."""
    with stdout.open("wb") as out, stderr.open("wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True
        )
        try:
            code = child.wait(timeout=deadline_s)
            return time.perf_counter() - start, code
        except subprocess.TimeoutExpired:
            wall = time.perf_counter() - start
            os.kill(child.pid, signal.SIGUSR1)
            time.sleep(grace_s)
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended in the grace time after all
                pass
            child.wait()
            return wall, None


def log(message: str) -> None:
    print(message, flush=True)


# Where a benchmark's runs write, by name: memory, or the disk /tmp is on (TMPDIR to move it).
OUTPUT_ROOTS = {"tmpfs": "/dev/shm", "disk": None}


def output_root(name: str) -> Path:
    """The folder ``name`` (tmpfs, disk, or a path) names, which must exist."""
    root = Path(OUTPUT_ROOTS[name] or tempfile.gettempdir()) if name in OUTPUT_ROOTS else Path(name)
    if not root.is_dir():
        raise SystemExit(f"output location {name!r}: {root} is not a folder")
    return root


def run_folders(prefix: str, into: str, env: dict) -> tuple[Path, Path]:
    """A scratch folder, and one in ``into`` (tmpfs, disk or a folder) for the runs' PNGs;
    ``env``, the runs' environment, gets a bytecode cache in the scratch folder, so that runs
    after the first start as an installed package does."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    outputs = Path(tempfile.mkdtemp(prefix=f"{prefix}-out-", dir=output_root(into)))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pyc")
    return scratch, outputs


def symlink_folder(frames: list[Path], count: int, folder: Path) -> Path:
    """``count`` symlinks frame_0000... cycling over ``frames``: an input of any length."""
    folder.mkdir(parents=True)
    digits = max(4, len(str(count - 1)))
    for i in range(count):
        source = frames[i % len(frames)]
        (folder / f"frame_{i:0{digits}d}{source.suffix}").symlink_to(source.resolve())
    return folder


def video_copies(clip: Path, copies: int, folder: Path) -> str:
    """A quoted glob naming ``copies`` symlinks to ``clip`` (pan_00.mp4, ...): one edgecli
    INPUT of any length, whose frames are written as pan_00_000000.png, ... (edgecli takes
    one INPUT, and a folder INPUT holds images only, so several videos come as a glob)."""
    folder.mkdir(parents=True)
    digits = max(2, len(str(copies - 1)))
    for i in range(copies):
        (folder / f"{clip.stem}_{i:0{digits}d}{clip.suffix}").symlink_to(clip.resolve())
    return str(folder / f"{clip.stem}_*{clip.suffix}")


def png_digests(folder: Path) -> dict[str, str]:
    """Each PNG in ``folder`` by name, as a digest of its bytes: two runs that wrote the same
    files compare equal (edgecli's encoder is deterministic)."""

    def one(path: Path) -> tuple[str, str]:
        return path.name, hashlib.sha1(path.read_bytes()).hexdigest()

    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(one, sorted(folder.glob("*.png"))))


def threaded_rate(task: Callable, items: Sequence, threads: int, count: int) -> float:
    """Calls a second of ``task`` on ``threads`` threads, ``count`` calls in all over ``items``
    (cycled), each thread taking the next call when its last one returns."""
    taken = iter(range(count))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                index = next(taken, None)
            if index is None:
                return
            task(items[index % len(items)])

    pool = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return count / (time.perf_counter() - start)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def steady_fps(frames: int, wall_n: float, short_frames: int, wall_k: float) -> float | None:
    """Frames per second of the frames a full run has beyond a short one: start-up cancels."""
    if frames <= short_frames or wall_n <= wall_k:
        return None  # too few frames, or noise larger than the difference
    return round((frames - short_frames) / (wall_n - wall_k), 2)
