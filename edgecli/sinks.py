"""Files out: the output folder, PNGs and reports written atomically into it (by rename),
and a killed run's temporaries removed. The PNG format itself is :mod:`edgecli.png`."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from . import native
from .errors import OutputError

T = TypeVar("T")

TEMP_PREFIX = ".edgecli-"
TEMP_SUFFIX = ".tmp"

# Temporaries are named by the process, a count and the host: unique in this process, and a
# dead run's leftover of the same name (its PID reused) is stepped over, as O_EXCL refuses it.
# The host, because shards on several hosts write into one shared folder (--shard), and a PID
# says whether its writer is alive only on the host that gave it.
_temp_numbers = itertools.count()
HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"
# Another host's temporary is removed only once it is this old: a live writer renames its
# temporary within seconds, and clocks of hosts sharing a file system differ by far less.
FOREIGN_TEMP_STALE_S = 3600
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


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
    close, rename), no more, and where :mod:`edgecli.native` is built one release of the GIL
    for all four: in Python each lets go of the GIL and must win it back from the worker
    threads (see decode.cpu.read_file).
    """
    try:
        _at_new_temporary(path, lambda temp: _write_whole(data, temp, path))
    except OSError as exc:
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: cannot write ({reason})") from None


def _write_whole(data: bytes, temp: Path, path: Path) -> None:
    """Create ``temp`` (O_EXCL), write ``data``, close it and rename it to ``path``; on a failure
    once it is made, remove it. The OSError of the failing call propagates."""
    if native.c is not None:
        native.c.write_file(data, temp, path)
        return
    fd = os.open(temp, _NEW_FILE, 0o666)
    try:
        try:
            with memoryview(data) as view:
                written = 0
                while written < len(view):
                    written += os.write(fd, view[written:])
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _at_new_temporary(path: Path, make: Callable[[Path], T], make_folder: bool = True) -> T:
    """``make(temp)`` for a temporary name beside ``path`` that no file holds: a name taken
    (``make`` raises FileExistsError) is stepped over for the next, and a missing folder is
    made once (with ``make_folder``) and ``make`` tried again."""
    made_folder = not make_folder
    while True:
        # The PID in the name lets a later run tell a dead run's leftovers from a live one's.
        number = next(_temp_numbers)
        temp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{number}@{HOST}{TEMP_SUFFIX}")
        try:
            return make(temp)
        except FileExistsError:
            continue
        except FileNotFoundError:
            if made_folder:
                raise
            path.parent.mkdir(parents=True, exist_ok=True)
            made_folder = True


def _create_temporary(path: Path, make_folder: bool = True) -> tuple[int, Path]:
    """A new, empty temporary beside ``path``, open for writing (its folder made if missing,
    with ``make_folder``), and its path; OSError if it cannot be made."""
    return _at_new_temporary(
        path, lambda temp: (os.open(temp, _NEW_FILE, 0o666), temp), make_folder
    )


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


def process_alive(pid: int) -> bool:
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
        if host and host != HOST:
            try:
                if now - temp.stat().st_mtime < FOREIGN_TEMP_STALE_S:
                    continue
            except OSError:
                continue
        elif pid.isascii() and pid.isdigit() and process_alive(int(pid)):
            continue
        try:
            temp.unlink()
            removed += 1
        except OSError:
            pass
    return removed
