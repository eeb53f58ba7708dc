"""Helpers shared by the test modules: the command through click's CliRunner and as a process,
folders of frames to run on, and comparisons of output folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
from click.testing import CliRunner

from edgecli.cli import main

from .media import REPO, photo

DATA = REPO / "tests" / "data"
H264_CLIP = DATA / "pan_h264.mp4"  # 24 frames of H.264, 4:2:0, BT.601 limited range


def invoke(*args):
    """``edgecli ARGS...`` through click's CliRunner, each argument as its str()."""
    return CliRunner().invoke(main, [str(a) for a in args])


def edgecli_command() -> list[str]:
    """The console script installed beside this Python, else ``python -m edgecli``."""
    script = shutil.which("edgecli", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "edgecli"]


def make_frames(folder: Path, shapes, name: str = "f{i:03d}.png") -> Path:
    """``folder`` (made) with one crop of the sample photographs per shape, frame ``i`` of
    ``shapes[i]`` under ``name.format(i=i)`` (the extension picks the format)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, shape in enumerate(shapes):
        assert cv2.imwrite(str(folder / name.format(i=i)), photo(*shape, seed=i))
    return folder


def make_folder(folder: Path, count: int, shape=(24, 32), name: str = "frame_{i:04d}.png") -> Path:
    """``folder`` with ``count`` frames of one ``shape`` (see make_frames)."""
    return make_frames(folder, [shape] * count, name)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder``, by its relative path, with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def same_bytes(a: Path, b: Path) -> None:
    """The two folders hold files of the same names, at least one, byte for byte the same."""
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) and names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def png_pixels(folder: Path) -> dict[str, np.ndarray]:
    """Each PNG in ``folder``, by name, as cv2 reads it unchanged (1-bit, 8-bit gray)."""
    return {p.name: cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(folder.glob("*.png"))}


def same_pixels(a: Path, b: Path) -> None:
    """The two folders hold files of the same names, with PNGs among them, and each PNG has the
    same pixels in both (its bytes may differ: another bit depth, say)."""
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    left, right = png_pixels(a), png_pixels(b)
    assert sorted(left) == sorted(right) and left
    for name in left:
        assert np.array_equal(left[name], right[name]), name


# Write one file with edgecli.output.sinks.write_atomic and die (os._exit) between writing its
# temporary and renaming it into place, as a run killed with SIGKILL there would (through the
# Python os calls, whose rename can be replaced; the C write names its temporaries alike).
_DIE_BEFORE_THE_RENAME = """
import os, sys
from pathlib import Path
from edgecli import native
from edgecli.output import sinks
native.c = None
os.replace = lambda *args, **kwargs: os._exit(0)
sinks.write_atomic(Path(sys.argv[1]) / "killed.png", b"partial")
os._exit(1)
"""


def dead_runs_temporary(folder: Path) -> Path:
    """The temporary a process of this host left in ``folder`` when it died mid-write (its
    name is the one edgecli gives it: ``.edgecli-<pid>-<n>@<host>.tmp``)."""
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    done = subprocess.run(
        [sys.executable, "-c", _DIE_BEFORE_THE_RENAME, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    left = sorted(set(folder.iterdir()) - before)
    assert len(left) == 1 and left[0].name.startswith(".edgecli-"), left
    return left[0]
