"""Files out, every path edgecli writes: the output folder, the PNGs and edgecli's own files
(its run record, its cache) written atomically (by rename), the reports the user names
(:class:`ReportFile`), and a killed run's temporaries removed. The PNG format itself is
:mod:`edgecli.output.png`; which outputs would overwrite an input is
:mod:`edgecli.inputs.overwrites`."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .. import native
from ..errors import OptionError, OutputError

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


def write_atomic(path: Path, data: bytes, *, make_folder: bool = False) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either absent, old, or complete.

    For the files edgecli owns (PNGs in the output folder, its run record, its cache): the
    rename replaces whatever entry is at ``path``, a link included, and never writes through
    it. Its folder is made where missing only with ``make_folder``: a folder edgecli owns (a
    subfolder of the output folder, the cache), never one the user named.

    The bytes go to a temporary file in the same folder (same filesystem, so the rename is
    atomic), which replaces the final name only once it is fully written and closed. It is
    created with mode 0666, less the umask, as any new file. Four system calls (open, write,
    close, rename), no more, and where :mod:`edgecli.native` is built one release of the GIL
    for all four: in Python each lets go of the GIL and must win it back from the worker
    threads (see decode.cpu.read_file).
    """
    try:
        _at_new_temporary(path, lambda temp: _write_whole(data, temp, path), make_folder)
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
        _write_all(fd, data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a write may take only part of it), then close ``fd``."""
    try:
        with memoryview(data) as view:
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
    finally:
        os.close(fd)


def _at_new_temporary(path: Path, make: Callable[[Path], T], make_folder: bool) -> T:
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


# A report named so is written to standard output, as command-line tools take "-".
STDOUT = "-"

# The folders of the file descriptors' names (/dev/stdout is /proc/self/fd/1, /dev/fd/N is
# /proc/self/fd/N), as realpath has them: a report named so is written into the descriptor's file.
_DESCRIPTOR_FOLDER = re.compile(r"/proc/[^/]+(/task/[^/]+)?/fd")
MAX_LINK_HOPS = 40  # as the kernel follows at most (ELOOP past that)


class ReportFile:
    """A file the user names for a report, written whole at the end (the JSON summary, the
    timings CSV, the manifest of --write-expected, the preview's sheet and page).

    Where it goes is settled when it is made, before any frame, as the shell's ``>`` would:

    - ``-`` (:data:`STDOUT`): written to standard output;
    - a character device or FIFO (``/dev/null``, a terminal, a pipe), or a file descriptor's
      name (``/dev/stdout``, ``/dev/fd/N``): written into, never replaced;
    - a symbolic link (a chain of them too): written through to its target, at the target's
      real path, the link left as it is;
    - otherwise a regular file, new or not: a temporary is created beside it (beside the
      link's target) at once and renamed onto it by :meth:`write`, so the file is whole, or
      as it was, at every moment.

    A folder, a block device or a socket is refused, and so is a name whose folder does not
    exist (none is made). :meth:`discard` removes the temporary: a run that fails leaves
    neither an empty file nor a truncated old one.
    """

    def __init__(self, path: str | os.PathLike, what: str, output_folder: Path | None = None):
        self.path, self.what = Path(path), what
        self.temp: Path | None = None
        self.stdout = os.fspath(path) == STDOUT
        if self.stdout:
            self.target, self.into = self.path, True
            return
        try:
            os.fsencode(self.path)  # the temporary's name is valid where this one may not be
        except UnicodeEncodeError:
            raise self._error("its name is not valid in the file system's encoding") from None
        try:
            self.target, self.into = self._where()
            if self.into:
                if not os.access(self.path, os.W_OK):
                    raise self._error("Permission denied")
                return
            self.temp = self._new_temporary()
        except ValueError as exc:  # a NUL in the name
            raise self._error(f"invalid file name: {exc}") from None
        except FileNotFoundError:
            # The run's output folder is the one folder it may make: a report in it that is
            # not there yet gets its temporary at the end.
            folder = self.target.parent
            if output_folder is None or not _same_path(folder, output_folder):
                raise self._error(f"folder {folder} does not exist") from None
        except OSError as exc:
            raise self._error(exc.strerror or str(exc)) from None

    def _new_temporary(self) -> Path:
        fd, temp = _at_new_temporary(
            self.target, lambda temp: (os.open(temp, _NEW_FILE, 0o666), temp), False
        )
        os.close(fd)
        return temp

    def _where(self) -> tuple[Path, bool]:
        """The path written, and whether it is written into (a device, a FIFO, a descriptor)
        rather than replaced by rename."""
        try:
            found = os.stat(self.path)  # through any link
        except FileNotFoundError:
            found = None  # a new file, or a link to one
        if found is not None and stat.S_ISDIR(found.st_mode):
            raise self._error("it is a folder")
        if _names_a_descriptor(self.path):
            if found is None:
                raise self._error("no such file descriptor")
            return self.path, True
        if found is not None and not stat.S_ISREG(found.st_mode):
            if stat.S_ISCHR(found.st_mode) or stat.S_ISFIFO(found.st_mode):
                return self.path, True
            kind = "a block device" if stat.S_ISBLK(found.st_mode) else "not a regular file"
            raise self._error(f"it is {kind}")
        if os.path.islink(self.path):
            return Path(os.path.realpath(self.path)), False
        return self.path, False

    def _error(self, reason: str) -> OutputError:
        return OutputError(f"{self.path}: cannot write {self.what} ({reason})")

    def write(self, data: bytes) -> None:
        """Write ``data``: into the device, FIFO or descriptor, or to the temporary, which
        then replaces the target whole."""
        if self.stdout:
            _write_stdout(data)
            return
        try:
            if self.into:
                # Appending, so a descriptor's regular file (>> log) keeps what it holds.
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            else:
                self.temp = self.temp or self._new_temporary()
                fd = os.open(self.temp, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
            _write_all(fd, data)
            if not self.into:
                _keep_mode(self.target, self.temp)
                os.replace(self.temp, self.target)
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


def _write_stdout(data: bytes) -> None:
    """``data`` on ``sys.stdout``, after what was printed there before (nothing where the
    process was started with stdout closed)."""
    stream = sys.stdout
    if stream is None:
        return
    stream.flush()
    buffer = getattr(stream, "buffer", None)  # a caller's own text stream may have none
    if buffer is None:
        stream.write(data.decode("utf-8"))
    else:
        buffer.write(data)
    stream.flush()


def _keep_mode(target: Path, temp: Path) -> None:
    """The file replacing ``target`` gets its permissions, as the shell's ``>`` keeps them: a
    private report stays private."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return
    os.chmod(temp, stat.S_IMODE(mode))


def _names_a_descriptor(path: Path) -> bool:
    """Whether ``path``, or a link on the way to its target, is a file descriptor's name
    (``/dev/stdout``, ``/proc/self/fd/1``): its target is whatever the descriptor holds (a
    pipe, a terminal, a file the shell opened), which only writing into it reaches."""
    hop = os.fspath(path)
    for _ in range(MAX_LINK_HOPS):
        if _DESCRIPTOR_FOLDER.fullmatch(os.path.realpath(os.path.dirname(hop) or ".")):
            return True
        if not os.path.islink(hop):
            return False
        hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
    return False


def _same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def write_report(path: str | os.PathLike, what: str, data: bytes) -> None:
    """Write one report now, by the rules of :class:`ReportFile`."""
    ReportFile(path, what).write(data)


def open_reports(
    paths: dict[str, Path], output_folder: Path | None = None
) -> dict[str, ReportFile]:
    """A :class:`ReportFile` for each ``{what: path}`` (in the run's ``output_folder``, if it
    is to be made, too); if one cannot be made, none is left. Two that would replace one
    file are refused (OptionError): the one written last would be all that is left of both."""
    opened: dict[str, ReportFile] = {}
    try:
        for what, path in paths.items():
            report = ReportFile(path, what, output_folder)
            opened[what] = report
            for other in opened.values():
                into = other.into or report.into  # a device or FIFO takes several reports
                if other is not report and not into and _same_path(other.target, report.target):
                    raise OptionError(
                        f"{path}: the {other.what} and the {what} need names of their own"
                    )
    except BaseException:
        discard_reports(opened)
        raise
    return opened


def write_reports(files: dict[str, ReportFile], contents: dict) -> None:
    """Write each report with the bytes ``contents[what]()`` gives (None: that report is not
    written, and its temporary removed). Every report's content is made before any is
    written, so a failure there leaves none; if a write fails, the rest are discarded."""
    try:
        made = {what: contents[what]() for what in files}
        for what, report in files.items():
            if made[what] is None:
                report.discard()
            else:
                report.write(made[what])
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
