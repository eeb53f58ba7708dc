"""PNGs out: encode edge maps and write them atomically into the output folder."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import cv2
import numpy as np

from .errors import OutputError

TEMP_PREFIX = ".edgecli-"
TEMP_SUFFIX = ".tmp"

# 1-bit grayscale PNG: measured fastest and smallest. The filter is set to NONE and no
# compression level is given, because an explicit level switches off libpng's RLE strategy.
PNG_1BIT = [cv2.IMWRITE_PNG_BILEVEL, 1, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]
PNG_8BIT: list[int] = []

# mkstemp creates files 0600; outputs get the usual 0666 & ~umask. The umask can only be
# read by setting it, so read it once here, before any worker thread exists.
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


def encode_png(edges: np.ndarray, bits: int) -> bytes:
    """PNG bytes of one (H, W) 0/255 edge map, 1-bit or 8-bit grayscale."""
    ok, encoded = cv2.imencode(".png", edges, PNG_1BIT if bits == 1 else PNG_8BIT)
    if not ok:
        raise OutputError(f"PNG encoding failed for an edge map of shape {edges.shape}")
    return encoded.tobytes()


def prepare_output_dir(out_dir: Path) -> Path:
    """Create the output folder if needed; refuse a file or a folder we cannot write."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: output path exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create output folder ({exc.strerror})") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise OutputError(f"{out_dir}: output folder is not writable")
    return out_dir


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either absent, old, or complete.

    The bytes go to a temporary file in the same folder (same filesystem, so the rename is
    atomic), which replaces the final name only once it is fully written and closed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # The PID in the name lets a later run tell a dead run's leftovers from a live one's.
    prefix = f"{TEMP_PREFIX}{os.getpid()}-"
    fd, temp = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
        os.replace(temp, path)
    except OSError as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: cannot write ({reason})") from None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True


def remove_stale_temporaries(out_dir: Path) -> int:
    """Delete temporaries that runs killed mid-write left behind; return how many.

    Only those whose writer process is gone: another edgecli writing into the same folder
    right now keeps its files.
    """
    removed = 0
    for temp in out_dir.rglob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
        pid = temp.name[len(TEMP_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and _process_alive(int(pid)):
            continue
        try:
            temp.unlink()
            removed += 1
        except OSError:
            pass
    return removed
