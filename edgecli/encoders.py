"""PNG encoder processes: the GPU path's 1-bit PNGs compressed and written by processes of
their own, each with its own GIL.

Why: a 1-bit PNG is a zlib call and four system calls (open, write, close, rename), each of
which lets go of the GIL and must win it back; on the H200 host, with sixteen worker threads,
the main thread and the JPEG decoder's thread asking for one GIL, the threads encoded and wrote
2400 GPU-decoded 1080p frames in 2.20-2.52 s where processes took 1.98-2.59, and 1.87-2.00 s
against 1.54-1.65 into tmpfs; 10 H.264 clips 2.56-2.63 s against 2.14-2.25
(benchmarks/RESULTS.md, "GPU decoding"). The run's process keeps its GIL for feeding the GPU.

How: each process has a buffer, a memfd this process also maps (its pages exist once written),
and a socket. A worker thread takes an idle process, copies a map's packed scanlines into its
buffer (NumPy lets go of the GIL while it copies: the slab they came from is free again at
once), sends the PNG's path, and waits for the answer: the milliseconds the encoding and the
writing took, or the text of the :class:`OutputError` that stopped it (the one the thread
itself would have raised: the process writes through :func:`edgecli.sinks.write_atomic`). No
pickling; a process imports the standard library, :mod:`edgecli.png_bytes` and
:mod:`edgecli.sinks`, nothing more.

A process that ends early (killed, crashed) is left out from then on, and its PNG is encoded
on the thread, as every PNG is where no process could start. Each runs in a session of its
own, so a Ctrl-C at the terminal reaches only the run (which finishes the PNGs in flight, as
ever); it ends at the end of its socket: when the run closes it, or dies, even by kill -9,
once the PNG it was writing is in place. Linux only (memfd); elsewhere the threads encode.
"""

from __future__ import annotations

import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .errors import OutputError
from .png_bytes import png_from_rows_1bit
from .sinks import write_atomic

# Runs of at least this many still images (or with a video) get encoder processes: starting
# one takes 40-100 ms of a core of its own, which a run of a few PNGs never earns back.
ENCODER_MIN_FILES = 64
# A process's buffer to begin with (a 4K frame's packed rows: 1.04 MB); it grows as needed.
FIRST_BUFFER_BYTES = 4 << 20
# How long closing waits for a process to finish its PNG and end, before it is killed.
CLOSE_TIMEOUT_S = 30.0

_REQUEST = struct.Struct("<QII")  # rows' bytes, width, path's bytes; then the path
_ANSWER = struct.Struct("<BddI")  # 0 written / 1 OutputError, encode ms, write ms, text bytes
_OK, _OUTPUT_ERROR = 0, 1


def unavailable_reason() -> str | None:
    """Why encoder processes cannot run here (None: they can)."""
    if not hasattr(os, "memfd_create"):
        return "no memfd_create (Linux only)"
    if not sys.executable or getattr(sys, "frozen", False):
        return "no Python interpreter to start"
    return None


class _Process:
    """One encoder process, its socket and buffer, as this process sees them."""

    def __init__(self, package_root: str):
        self.buffer_fd = os.memfd_create("edgecli-encoder", os.MFD_CLOEXEC)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        try:
            os.ftruncate(self.buffer_fd, FIRST_BUFFER_BYTES)
            self.mapping = mmap.mmap(self.buffer_fd, FIRST_BUFFER_BYTES)
            env = dict(os.environ)
            # Where this edgecli is, first: a caller may have found it through sys.path alone.
            env["PYTHONPATH"] = os.pathsep.join(
                [package_root, *filter(None, [env.get("PYTHONPATH")])]
            )
            self.popen = subprocess.Popen(
                [sys.executable, "-c", "from edgecli.encoders import serve; serve()",
                 str(theirs.fileno()), str(self.buffer_fd)],
                pass_fds=(theirs.fileno(), self.buffer_fd), env=env, start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException:
            ours.close()
            os.close(self.buffer_fd)
            raise
        finally:
            theirs.close()

    def load(self, rows) -> int:
        """Copy ``rows`` (packed scanlines, a C-contiguous uint8 array) into the buffer,
        growing it (for the process too: it maps the file anew) where they need more; their
        bytes."""
        import numpy as np  # not at the top: the process itself never needs NumPy

        nbytes = rows.nbytes
        if nbytes > len(self.mapping):
            size = max(nbytes, 2 * len(self.mapping))
            os.ftruncate(self.buffer_fd, size)
            self.mapping.close()
            self.mapping = mmap.mmap(self.buffer_fd, size)
        np.copyto(np.frombuffer(self.mapping, np.uint8, nbytes), rows.reshape(-1))
        return nbytes

    def request(self, nbytes: int, width: int, path: Path) -> tuple[float, float]:
        """PNG ``path`` of the ``nbytes`` of rows loaded, written by the process: its (encode,
        write) milliseconds; OutputError as the write raised it; OSError or EOFError where
        the process is gone."""
        name = os.fsencode(path)
        self.sock.sendall(_REQUEST.pack(nbytes, width, len(name)) + name)
        status, encode_ms, write_ms, length = _ANSWER.unpack(_receive(self.sock, _ANSWER.size))
        if status != _OK:
            raise OutputError(_receive(self.sock, length).decode("utf-8", "replace"))
        return encode_ms, write_ms

    def encode_here(self, nbytes: int, width: int, path: Path) -> tuple[float, float]:
        """What :meth:`request` asks of the process, done by the calling thread, from the
        buffer (the process is gone)."""
        return encode_and_write(memoryview(self.mapping)[:nbytes], width, path)

    def close(self) -> None:
        """End the process (at the end of its socket) and forget it."""
        self.sock.close()
        self.mapping.close()
        os.close(self.buffer_fd)


class EncoderProcesses:
    """``count`` encoder processes for one run, started on a thread of their own (spawning
    sixteen took the run's main thread about 0.1 s, and each process 40-100 ms to be ready:
    the threads encode the run's first PNGs meanwhile); :meth:`encode_write` from any
    thread. OSError where they cannot run here (:func:`unavailable_reason`)."""

    def __init__(self, count: int):
        reason = unavailable_reason()
        if reason is not None:
            raise OSError(reason)
        self._idle: list[_Process] = []
        self._all: list[_Process] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._spawner = threading.Thread(
            target=self._spawn, args=(count,), name="edgecli-encoder-spawner", daemon=True
        )
        self._spawner.start()

    def _spawn(self, count: int) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        for _ in range(count):
            if self._closing.is_set():
                return
            try:
                process = _Process(root)
            except OSError:  # a limit on processes or descriptors: the ones started do
                return
            with self._lock:
                self._all.append(process)
                self._idle.append(process)

    @property
    def started(self) -> int:
        """The processes started so far."""
        with self._lock:
            return len(self._all)

    def wait_started(self) -> int:
        """Wait until every process that will start has; how many did."""
        self._spawner.join()
        return self.started

    def encode_write(self, rows, width: int, path: Path, done) -> tuple[float, float] | None:
        """PNG ``path`` of ``rows`` (packed scanlines, C-contiguous uint8), by an idle process,
        ``done()`` called once they are copied; its (encode, write) milliseconds. None, with
        ``done`` not called, where no process is idle (none started yet, or none left): the
        caller encodes it. OutputError as the write raised it. A process found gone is
        dropped, and its PNG made here."""
        with self._lock:
            process = self._idle.pop() if self._idle else None
        if process is None:
            return None
        try:
            nbytes = process.load(rows)
        except OSError:  # no room to grow its buffer: this one is the caller's
            self._give_back(process)
            return None
        done()
        try:
            took = process.request(nbytes, width, path)
        except OutputError:
            self._give_back(process)
            raise
        except (OSError, EOFError):  # the process is gone; its buffer holds the rows still
            return process.encode_here(nbytes, width, path)
        self._give_back(process)
        return took

    def _give_back(self, process: _Process) -> None:
        with self._lock:
            self._idle.append(process)

    def close(self) -> None:
        """End every process: each finishes the PNG it is writing (the run has waited for
        its answer already), sees the end of its socket and exits."""
        self._closing.set()
        self._spawner.join()
        for process in self._all:
            process.close()
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for process in self._all:
            try:
                process.popen.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
        self._idle = []


def encode_and_write(rows, width: int, path: Path) -> tuple[float, float]:
    """The 1-bit PNG of ``rows`` written atomically at ``path``: (encode, write) milliseconds."""
    start = time.perf_counter()
    data = png_from_rows_1bit(rows, width)
    encoded = time.perf_counter()
    write_atomic(path, data)
    return (encoded - start) * 1e3, (time.perf_counter() - encoded) * 1e3


def _receive(sock: socket.socket, count: int) -> bytes:
    """Exactly ``count`` bytes from ``sock``; EOFError at its end."""
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("encoder socket closed")
        data += chunk
    return bytes(data)


def serve() -> None:
    """An encoder process's loop: ``python -c '…serve()' SOCKET_FD BUFFER_FD``. For each
    request, the PNG of the rows in the buffer, written atomically, and the answer; at the
    end of the socket, exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops it, at the end of its socket
    sock = socket.socket(fileno=int(sys.argv[1]))
    buffer_fd = int(sys.argv[2])
    mapping = mmap.mmap(buffer_fd, os.fstat(buffer_fd).st_size)
    while True:
        try:
            nbytes, width, length = _REQUEST.unpack(_receive(sock, _REQUEST.size))
            path = os.fsdecode(_receive(sock, length))
        except (EOFError, OSError):
            return
        if nbytes > len(mapping):  # the run grew the buffer
            mapping.close()
            mapping = mmap.mmap(buffer_fd, os.fstat(buffer_fd).st_size)
        status, took, text = _OK, (0.0, 0.0), b""
        try:
            took = encode_and_write(memoryview(mapping)[:nbytes], width, Path(path))
        except OutputError as exc:
            status, text = _OUTPUT_ERROR, str(exc).encode("utf-8", "replace")
        answer = _ANSWER.pack(status, *took, len(text))
        try:
            sock.sendall(answer + text)
        except OSError:  # the run is gone: its PNG is in place, nothing more to do
            return
