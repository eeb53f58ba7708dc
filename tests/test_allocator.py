"""edgecli.keep_freed_memory: glibc's malloc keeps what a run frees, so the next frame's
buffers are not faulted in anew. Each case runs in a process of its own: the setting is
process-wide and for good."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="keep_freed_memory sets glibc's malloc only"
)

# The CPU reference on 1080p frames that another thread allocated (as the pipeline hands
# frames between threads); prints keep_freed_memory's answer and the page faults a frame.
WORKLOAD = """
import queue, resource, sys, threading
import numpy as np
import edgecli
from edgecli.params import Options
from edgecli.reference import detect_frame

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
