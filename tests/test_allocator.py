"""edgecli.keep_freed_memory, which `edgecli run` sets: glibc's malloc keeps what a run frees,
so the next frame's buffers are not faulted in anew. Each case runs in a process of its own:
the setting is process-wide and for good."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import cv2
import pytest

import edgecli

from .media import REPO, photo

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="keep_freed_memory sets glibc's malloc only"
)

# The CPU reference on 1080p frames that another thread allocated (as the pipeline hands
# frames between threads); prints keep_freed_memory's answer and the page faults a frame.
WORKLOAD = """
import queue, resource, sys, threading
import numpy as np
import edgecli
from edgecli.options.params import Options
from edgecli.edges.reference import detect_frame

applied = edgecli.keep_freed_memory() if sys.argv[1] == "keep" else None
frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), np.uint8)
handoff = queue.Queue(maxsize=2)

def produce():
    for _ in range(10):
        handoff.put(frame.copy())
    handoff.put(None)

detect_frame(frame, Options())
thread = threading.Thread(target=produce)
thread.start()
before, frames = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, 0
while (item := handoff.get()) is not None:
    detect_frame(item, Options())
    del item
    frames += 1
thread.join()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // frames)
"""


def run_workload(mode: str, **env: str) -> tuple[str, int]:
    result = subprocess.run(
        [sys.executable, "-c", WORKLOAD, mode],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env,
    )
    applied, faults = result.stdout.split()
    return applied, int(faults)


def test_freed_frames_are_reused_not_faulted_in_again():
    """With the setting, a frame's buffers fault in a twentieth as many pages (about 250
    against 5,600 here); 5x fewer is asked."""
    applied, kept = run_workload("keep")
    _, default = run_workload("default")
    assert applied == "True"
    assert kept * 5 < default, (kept, default)


@pytest.mark.parametrize(
    "setting",
    [
        "MALLOC_TRIM_THRESHOLD_=0",
        "MALLOC_MMAP_THRESHOLD_=65536",
        "GLIBC_TUNABLES=glibc.malloc.arena_max=1",
    ],
)
def test_malloc_settings_made_in_the_environment_are_left_alone(setting):
    name, value = setting.split("=", 1)
    applied, _ = run_workload("keep", **{name: value})
    assert applied == "False"


# `edgecli run ARGS...` in this process (click's CliRunner: the command's own code), after the
# imports it makes; prints the page faults of the run itself, then how many MB the process gave
# back on freeing a 24 MB block after the run (glibc's defaults give back a block that size).
COMMAND = """
import resource, sys
from click.testing import CliRunner
import cv2, numpy, edgecli.edges.cpu, edgecli.pipeline
from edgecli.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
result = CliRunner().invoke(main, sys.argv[1:])
assert result.exit_code == 0, result.output
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()

block = numpy.ones(24 << 20, numpy.uint8)
held = resident()
del block
print(faults, (held - resident()) >> 20)
"""


def run_the_command(args: list[str], **env: str) -> tuple[int, int]:
    """The page faults of `edgecli run ARGS...`, and the MB a 24 MB block freed after it gave
    back (COMMAND)."""
    result = subprocess.run(
        [sys.executable, "-c", COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        | {"PYTHONPATH": str(REPO)}
        | env,
    )
    assert result.returncode == 0, result.stderr
    faults, given_back = result.stdout.split()
    return int(faults), int(given_back)


def test_the_command_keeps_freed_memory_for_its_frames(tmp_path):
    """`edgecli run` sets malloc to keep what its frames free before the run starts (README),
    so its page faults stop growing with its frames. 1080p frames on 2 workers: 96 more frames
    fault in under 2,100 more pages here, where GLIBC_TUNABLES, set, leaves malloc as it is
    and they mostly fault in 30,000-38,000 more per 48 frames (a decoded frame alone is 1,518
    pages); under 100 pages a frame is asked. (Totals against glibc's defaults are not
    compared: those thresholds adapt as a run goes, and a run's total ranged 16,000-48,000.)
    A 24 MB block freed after the run stays in the process, which glibc's defaults give back."""
    edgecli.detect_edges(photo(8, 8), backend="cpu")  # the CPU backend's check, done and cached
    ok, data = cv2.imencode(".jpg", photo(1080, 1920))
    assert ok
    runs = []
    for frames in (48, 144):
        folder = tmp_path / f"in{frames}"
        folder.mkdir()
        for i in range(frames):
            (folder / f"f{i:03d}.jpg").write_bytes(data.tobytes())
        out = tmp_path / f"out{frames}"
        args = ["run", str(folder), "--backend", "cpu", "--workers", "2", "-q", "-o", str(out)]
        runs.append(run_the_command(args))
    (faults, given_back), (more_faults, more_given_back) = runs
    assert more_faults - faults < 100 * (144 - 48), runs
    assert given_back == more_given_back == 0, runs
