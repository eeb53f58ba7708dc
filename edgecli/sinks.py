"""PNGs out: encode edge maps and write them atomically into the output folder."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import socket
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .errors import OutputError
from .sources import PNG_SIGNATURE

TEMP_PREFIX = ".edgecli-"
TEMP_SUFFIX = ".tmp"

# 8-bit grayscale PNG: OpenCV's defaults.
PNG_8BIT: list[int] = []

# 1-bit grayscale PNG, the default, is written here: NumPy packs the rows, or the GPU does on
# the CUDA path (a nonzero pixel is a 1 bit, which reads back as 255), each row has filter
# type 0 (none), and zlib compresses with its run-length strategy, as libpng does for
# OpenCV's IMWRITE_PNG_BILEVEL: the same size within 0.6%, 2.3-3.3x faster than cv2.imencode
# on one core (benchmarks/png_encode.py, benchmarks/RESULTS.md). zlib lets go of
# the GIL while it compresses and checksums.
_IHDR_GRAY_1BIT = (1, 0, 0, 0, 0)  # bit depth 1, grayscale, deflate, adaptive filters, no interlace

# Temporaries are named by the process, a count and the host: unique in this process, and a
# dead run's leftover of the same name (its PID reused) is stepped over, as O_EXCL refuses it.
# The host, because shards on several hosts write into one shared folder (--shard), and a PID
# says whether its writer is alive only on the host that gave it.
_temp_numbers = itertools.count()
_HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"
# Another host's temporary is removed only once it is this old: a live writer renames its
# temporary within seconds, and clocks of hosts sharing a file system differ by far less.
FOREIGN_TEMP_STALE_S = 3600


def png_row_bytes_1bit(width: int) -> int:
    """Bytes of one scanline of a 1-bit PNG ``width`` pixels wide: its filter byte, then the
    pixels' bits, ceil(width / 8) bytes."""
    return 1 + (width + 7) // 8


@dataclass(frozen=True)
class PackedEdges:
    """An edge map already packed as the scanlines of a 1-bit PNG (by the GPU: cuda/edges.cu,
    ``pack_rows_1bit``): ``rows`` is (H, 1 + ceil(width / 8)) uint8, as :func:`png_rows_1bit`
    makes them."""

    rows: np.ndarray
    width: int

    def __post_init__(self) -> None:
        rows, row_bytes = self.rows, png_row_bytes_1bit(self.width)
        if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != row_bytes:
            raise ValueError(
                f"packed rows of a {self.width}-pixel-wide map must be uint8 shaped "
                f"(H, {row_bytes}), got {rows.dtype} {rows.shape}"
            )


def encode_png(edges: np.ndarray | PackedEdges, bits: int) -> bytes:
    """PNG bytes of one (H, W) 0/255 edge map, 1-bit or 8-bit grayscale; a
    :class:`PackedEdges` makes a 1-bit PNG only."""
    if isinstance(edges, PackedEdges):
        if bits != 1:
            raise ValueError(f"packed edge rows make 1-bit PNGs, not {bits}-bit")
        return png_from_rows_1bit(edges.rows, edges.width)
    if bits == 1:
        return encode_png_1bit(edges)
    ok, encoded = cv2.imencode(".png", edges, PNG_8BIT)
    if not ok:
        raise OutputError(f"PNG encoding failed for an edge map of shape {edges.shape}")
    return encoded.tobytes()


def encode_png_1bit(edges: np.ndarray) -> bytes:
    """A 1-bit grayscale PNG of an (H, W) uint8 edge map: nonzero pixels white."""
    return png_from_rows_1bit(png_rows_1bit(edges), edges.shape[1])


def png_rows_1bit(edges: np.ndarray) -> np.ndarray:
    """The scanlines of a 1-bit grayscale PNG of an (H, W) edge map: (H, 1 + ceil(W / 8))
    uint8, each a filter byte 0 (none), then the pixels as bits, the first in the most
    significant bit, a nonzero pixel a 1 and the last byte padded with 0 bits.

    ``np.packbits`` holds the GIL: on 16 threads of the H200 host it packed no more maps a
    second than on one (benchmarks/RESULTS.md), so the GPU path packs on the device
    (:class:`PackedEdges`)."""
    height, width = edges.shape
    rows = np.zeros((height, png_row_bytes_1bit(width)), np.uint8)
    rows[:, 1:] = np.packbits(edges, axis=1)
    return rows


def png_from_rows_1bit(rows: np.ndarray, width: int) -> bytes:
    """A 1-bit grayscale PNG of ``width`` pixels a row from its scanlines (:func:`png_rows_1bit`
    or the GPU's), compressed by zlib, which lets go of the GIL while it works."""
    height = rows.shape[0]
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    image_data = [deflate.compress(rows), deflate.flush()]
    header = struct.pack(">II5B", width, height, *_IHDR_GRAY_1BIT)
    # One join: the compressed bytes are copied once, with the GIL held.
    return b"".join(
        [
            PNG_SIGNATURE,
            *_png_chunk(b"IHDR", [header]),
            *_png_chunk(b"IDAT", image_data),
            *_png_chunk(b"IEND", []),
        ]
    )


def _png_chunk(kind: bytes, parts: list[bytes]) -> list[bytes]:
    """The pieces of a PNG chunk whose data is ``parts`` joined: length, type, data, and the
    CRC-32 of type and data."""
    crc = zlib.crc32(kind)
    for part in parts:
        crc = zlib.crc32(part, crc)
    return [struct.pack(">I", sum(map(len, parts))), kind, *parts, struct.pack(">I", crc)]


def check_output_name(out_dir: Path) -> None:
    """Refuse an output folder whose name the file system's encoding rejects (a lone
    surrogate from a library caller, say): every later look at it would raise."""
    try:
        os.fsencode(out_dir)
    except UnicodeEncodeError:
        reason = "its name is not valid in the file system's encoding"
        raise OutputError(f"{out_dir}: cannot create output folder ({reason})") from None


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
    atomic), which replaces the final name only once it is fully written and closed. It is
    created with mode 0666, less the umask, as any new file. Four system calls (open, write,
    close, rename) where tempfile, a file object and a mkdir a frame made thirteen: each lets
    go of the GIL and must win it back (see sources.read_file).
    """
    temp = None
    try:
        fd, temp = _create_temporary(path)
        try:
            with memoryview(data) as view:
                written = 0
                while written < len(view):
                    written += os.write(fd, view[written:])
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: cannot write ({reason})") from None


def _create_temporary(path: Path, make_folder: bool = True) -> tuple[int, Path]:
    """A new, empty temporary beside ``path``, open for writing (its folder made if missing,
    with ``make_folder``), and its path; OSError if it cannot be made."""
    made_folder = not make_folder
    while True:
        # The PID in the name lets a later run tell a dead run's leftovers from a live one's.
        number = next(_temp_numbers)
        temp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{number}@{_HOST}{TEMP_SUFFIX}")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), temp
        except FileExistsError:
            continue
        except FileNotFoundError:
            if made_folder:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            made_folder = True


class ReportFile:
    """A file written whole at the end of a run (the JSON summary, the timings CSV).

    Its temporary is created beside it at once, so that a name that cannot be written (a
    missing or read-only folder, a name the file system's encoding rejects) fails the run
    before any frame; :meth:`write` fills the temporary and renames it into place, and
    :meth:`discard` removes it: a failed run leaves neither an empty file nor a truncated old
    one.
    """

    def __init__(self, path: str | os.PathLike, what: str):
        self.path, self.what = Path(path), what
        self.temp: Path | None = None
        try:
            os.fsencode(self.path)  # the temporary's name is valid where this one may not be
        except UnicodeEncodeError:
            raise self._error("its name is not valid in the file system's encoding") from None
        if self.path.is_dir():
            raise self._error("it is a folder")
        try:
            fd, self.temp = _create_temporary(self.path, make_folder=False)
        except ValueError as exc:  # a NUL in the name
            raise self._error(f"invalid file name: {exc}") from None
        except OSError as exc:
            raise self._error(exc.strerror or str(exc)) from None
        os.close(fd)

    def _error(self, reason: str) -> OutputError:
        return OutputError(f"{self.path}: cannot write {self.what} ({reason})")

    def write(self, fill) -> None:
        """``fill(temporary_path)`` writes the content; then it replaces ``path``, whole."""
        try:
            fill(self.temp)
            os.replace(self.temp, self.path)
        except OSError as exc:
            self.discard()
            reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
            raise self._error(reason) from None
        self.temp = None

    def discard(self) -> None:
        if self.temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temp)
            self.temp = None


def open_reports(paths: dict[str, Path]) -> dict[str, ReportFile]:
    """A :class:`ReportFile` for each ``{what: path}``; if one cannot be made, none is left."""
    opened: dict[str, ReportFile] = {}
    try:
        for what, path in paths.items():
            opened[what] = ReportFile(path, what)
    except BaseException:
        discard_reports(opened)
        raise
    return opened


def write_reports(files: dict[str, ReportFile], fills: dict) -> None:
    """Write each report with its ``fills[what]``; if one fails, the rest are discarded."""
    try:
        for what, report in files.items():
            report.write(fills[what])
    except BaseException:
        discard_reports(files)
        raise


def discard_reports(files: dict[str, ReportFile]) -> None:
    for report in files.values():
        report.discard()


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
    right now keeps its files. A temporary another host made (a shard writing into a shared
    folder) is removed only once it is :data:`FOREIGN_TEMP_STALE_S` old, since this host
    cannot tell whether its writer lives.
    """
    removed = 0
    now = time.time()
    for temp in out_dir.rglob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
        owner, _, host = temp.name[len(TEMP_PREFIX) : -len(TEMP_SUFFIX)].partition("@")
        pid = owner.split("-", 1)[0]
        if host and host != _HOST:
            try:
                if now - temp.stat().st_mtime < FOREIGN_TEMP_STALE_S:
                    continue
            except OSError:
                continue
        elif pid.isdigit() and _process_alive(int(pid)):
            continue
        try:
            temp.unlink()
            removed += 1
        except OSError:
            pass
    return removed
