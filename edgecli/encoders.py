"""PNG encoder processes: the GPU path's 1-bit PNGs compressed and written outside the run's
process, from the packed rows the GPU copies straight into memory the processes share.

Why processes: a 1080p map's PNG is one zlib call and four system calls (open, write, close,
rename), each of which lets go of the GIL and must win it back. With 16 encoder threads, the
main thread, the JPEG decoder's thread and the readers all asking for one GIL, the threads
spent most of their time waiting for it (benchmarks/RESULTS.md, "GPU decoding"); in processes
of their own each has its own GIL, and the run's process keeps its own for feeding the GPU.

Shared memory: each buffer is a memfd, mapped in this process (the slab ring registers it with
CUDA as pinned memory, so the download from the device lands in it directly) and in every
encoder process, which gets its descriptor over its socket (SCM_RIGHTS) as it is made. Nothing
is copied between the processes but the PNG's name and where its rows lie.

Each encoder process runs :func:`serve` on a SOCK_SEQPACKET socket, one pickled message a
packet:

    to it:    ("map", buffer_id, size) with the buffer's descriptor; ("unmap", buffer_id);
              ("png", [(seq, buffer_id, offset, height, width, path), ...])
    from it:  ("ready",) once started; ("done", seq, encode_ms, write_ms, error) a PNG

At the end of the socket (this process closed it, or died, even by kill -9) it finishes what
it was sent and exits. It ignores SIGINT, in a session of its own: a Ctrl-C stops the run
through the run's process, which lets the PNGs already sent be written. Linux only (memfd);
elsewhere the encoders are threads (:class:`EncoderProcesses` cannot start, and says why).
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OutputError
from .png import png_from_rows_1bit, png_row_bytes_1bit
from .sinks import write_atomic

# Largest message either way: a packet of PNG items is cut well below it.
MAX_MESSAGE = 1 << 18
ITEMS_BYTES = 1 << 16
# How long an encoder process may take to start (import NumPy, map its first buffers) before
# the run gives up on it; it has usually started long before the GPU's first batch is back.
START_TIMEOUT_S = 60.0
# How long closing waits for a process to finish the PNGs it was sent, after the socket is
# shut: a PNG takes milliseconds, so only a hung process is ever killed.
CLOSE_TIMEOUT_S = 60.0


class EncodersUnavailable(RuntimeError):
    """The encoder processes cannot run here (no memfd, no interpreter to start): the
    encoders are threads."""


@dataclass
class _Buffer:
    """A shared buffer: this process's mapping and its uint8 view."""

    id: int
    mapping: mmap.mmap
    array: object  # np.ndarray over ``mapping``
    address: int
    size: int


@dataclass
class _Process:
    popen: subprocess.Popen
    sock: socket.socket
    ready: bool = False
    outstanding: dict = field(default_factory=dict)  # seq -> _Item
    send_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Item:
    future: Future
    done: object  # called once the process no longer reads the rows
    written: object  # called with the key and the PNG's milliseconds, once it is in place
    key: str
    path: str


class EncoderProcesses:
    """``count`` PNG encoder processes and the shared buffers they read.

    :meth:`allocate` makes a buffer that every process maps; :meth:`submit` hands it the
    packed rows of PNGs lying in such buffers, each to the process with the fewest waiting,
    and gives a future per PNG, resolved once it is written (or with the OutputError that
    stopped it). :meth:`close` lets each process finish what it
    was sent and waits for it.
    """

    def __init__(self, count: int):
        if not hasattr(os, "memfd_create") or not sys.executable or getattr(sys, "frozen", 0):
            raise EncodersUnavailable("no memfd_create, or no Python interpreter to start")
        self.buffers: dict[int, _Buffer] = {}
        self.processes: list[_Process] = []
        self._ids = 0
        self._seq = 0
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self.failure: str | None = None  # why a process ended early, for its PNGs' errors
        try:
            for _ in range(count):
                self.processes.append(_start())
        except OSError as exc:
            self._kill()
            raise EncodersUnavailable(f"cannot start an encoder process ({exc})") from None
        self.collector = threading.Thread(
            target=self._collect, name="edgecli-encoders", daemon=True
        )
        self.collector.start()

    def allocate(self, nbytes: int):
        """A uint8 array of ``nbytes`` that every encoder process maps too."""
        import numpy as np

        fd = os.memfd_create("edgecli-rows", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            mapping = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            with self._lock:
                self._ids += 1
                buffer_id = self._ids
            message = pickle.dumps(("map", buffer_id, nbytes))
            for process in self.processes:
                with process.send_lock:
                    _send(process.sock, message, [fd])
        finally:
            os.close(fd)
        array = np.frombuffer(mapping, np.uint8, nbytes)
        self.buffers[buffer_id] = _Buffer(buffer_id, mapping, array, array.ctypes.data, nbytes)
        return array

    def free(self, array) -> None:
        """Unmap a buffer :meth:`allocate` gave, once no PNG of it is waiting."""
        found = self._buffer_of(array.ctypes.data)
        if found is None:
            return
        buffer, _ = found
        del self.buffers[buffer.id]
        message = pickle.dumps(("unmap", buffer.id))
        for process in self.processes:
            with process.send_lock:
                _send(process.sock, message)

    def owns(self, rows) -> bool:
        """Whether ``rows`` (an array) lies in one of the shared buffers."""
        return self._buffer_of(rows.ctypes.data) is not None

    def submit(self, items: list[tuple[str, Path, object]], done, written) -> list[Future]:
        """Write each (key, path, PackedEdges) of ``items`` (rows in a shared buffer: see
        :meth:`owns`) as a 1-bit PNG. For each, ``done()`` is called once its rows are no
        longer read, then ``written(key, encode_ms, write_ms)`` once it is in place, before
        its future (one a PNG, in order) resolves."""
        self._wait_ready()
        futures, by_process = [], {}
        with self._lock:
            if self.failure is not None:  # a process ended: nothing more is sent
                raise OutputError(f"cannot write PNGs: {self.failure}")
            for key, path, packed in items:
                buffer, offset = self._buffer_of(packed.rows.ctypes.data)
                process = min(self.processes, key=lambda p: len(p.outstanding))
                self._seq += 1
                future = Future()
                process.outstanding[self._seq] = _Item(future, done, written, key, str(path))
                height = packed.rows.shape[0]
                entry = (self._seq, buffer.id, offset, height, packed.width, str(path))
                by_process.setdefault(id(process), (process, []))[1].append(entry)
                futures.append(future)
        for process, entries in by_process.values():
            for message in _packets(entries):
                try:
                    with process.send_lock:
                        _send(process.sock, message)
                except OSError:
                    pass  # it ended: the collector fails its PNGs
        return futures

    def close(self) -> None:
        """Let every process write what it was sent, then wait for it to exit."""
        for process in self.processes:
            try:
                process.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for process in self.processes:
            try:
                process.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
        self.collector.join()  # it ends with the last process's socket
        for process in self.processes:
            process.sock.close()
        self.buffers.clear()

    def _buffer_of(self, address: int) -> tuple[_Buffer, int] | None:
        for buffer in self.buffers.values():
            if buffer.address <= address < buffer.address + buffer.size:
                return buffer, address - buffer.address
        return None

    def _wait_ready(self) -> None:
        with self._ready:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not all(p.ready for p in self.processes) and self.failure is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.failure = f"an encoder process did not start in {START_TIMEOUT_S:g} s"
                    break
                self._ready.wait(left)
        if self.failure is not None:
            raise OutputError(f"cannot write PNGs: {self.failure}")

    def _collect(self) -> None:
        """The collector thread: each process's replies, until every one has ended."""
        open_ = {p.sock.fileno(): p for p in self.processes}
        while open_:
            readable, _, _ = select.select(list(open_), [], [])
            for fd in readable:
                process = open_[fd]
                try:
                    data = process.sock.recv(MAX_MESSAGE)
                except OSError:
                    data = b""
                if not data:
                    del open_[fd]
                    self._ended(process)
                    continue
                self._reply(process, pickle.loads(data))

    def _reply(self, process: _Process, message: tuple) -> None:
        if message[0] == "ready":
            with self._ready:
                process.ready = True
                self._ready.notify_all()
            return
        _, seq, encode_ms, write_ms, error = message
        with self._lock:
            item = process.outstanding.pop(seq)
        try:
            item.done()
            if error is None:
                item.written(item.key, encode_ms, write_ms)
        except BaseException as exc:  # the run's error, raised where it waits for the PNG
            error = error or exc
        if error is None:
            item.future.set_result(None)
        else:
            item.future.set_exception(error)

    def _ended(self, process: _Process) -> None:
        """A process's socket ended: fine once all it was sent is written; else its PNGs
        fail (it was killed, say), and so does every later submit."""
        code = process.popen.wait()
        with self._ready:
            items = list(process.outstanding.values())
            process.outstanding.clear()
            if items or not process.ready or code != 0:
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                self.failure = (
                    self.failure or f"a PNG encoder process (pid {process.popen.pid}) {how}"
                )
            self._ready.notify_all()
        for item in items:
            item.done()
            item.future.set_exception(OutputError(f"{item.path}: cannot write ({self.failure})"))

    def _kill(self) -> None:
        for process in self.processes:
            process.popen.kill()
            process.popen.wait()
            process.sock.close()


def _start() -> _Process:
    """An encoder process running :func:`serve` on one end of a new socket pair."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        # The run's own import path, so that it imports this edgecli however the run did.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        popen = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from edgecli.encoders import serve; serve(int(sys.argv[1]))",
                str(theirs.fileno()),
            ],  # fmt: skip
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return _Process(popen, ours)


def _packets(entries: list[tuple]) -> list[bytes]:
    """``entries`` as "png" messages, each well below MAX_MESSAGE."""
    packets, chunk, size = [], [], 0
    for entry in entries:
        if chunk and size + len(entry[-1]) + 64 > ITEMS_BYTES:
            packets.append(pickle.dumps(("png", chunk)))
            chunk, size = [], 0
        chunk.append(entry)
        size += len(entry[-1]) + 64
    if chunk:
        packets.append(pickle.dumps(("png", chunk)))
    return packets


def _send(sock: socket.socket, message: bytes, fds: list[int] | None = None) -> None:
    if fds:
        socket.send_fds(sock, [message], fds)
    else:
        sock.send(message)


def serve(fd: int) -> None:
    """An encoder process's loop (see the module's docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    maps: dict[int, mmap.mmap] = {}
    try:
        sock.send(pickle.dumps(("ready",)))
        while True:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
            if not data:
                return
            message = pickle.loads(data)
            if message[0] == "map":
                maps[message[1]] = mmap.mmap(fds[0], message[2], mmap.MAP_SHARED, mmap.PROT_READ)
                os.close(fds[0])
            elif message[0] == "unmap":
                maps.pop(message[1]).close()
            else:
                for seq, buffer_id, offset, height, width, path in message[1]:
                    end = offset + height * png_row_bytes_1bit(width)
                    sock.send(
                        pickle.dumps(_encode_write(maps[buffer_id], offset, end, width, seq, path))
                    )
    except OSError:  # the run's process is gone
        return


def _encode_write(mapping: mmap.mmap, start: int, end: int, width: int, seq: int, path: str):
    """One PNG from the rows at ``mapping[start:end]``: its "done" reply."""
    began = time.perf_counter()
    try:
        with memoryview(mapping) as view, view[start:end] as rows:
            data = png_from_rows_1bit(rows, width)
        encoded = time.perf_counter()
        write_atomic(Path(path), data)
    except OutputError as exc:
        return ("done", seq, 0.0, 0.0, exc)
    except Exception as exc:  # anything else: the run's error, in one line
        return ("done", seq, 0.0, 0.0, OutputError(f"{path}: cannot write ({exc})"))
    written = time.perf_counter()
    return ("done", seq, (encoded - began) * 1e3, (written - encoded) * 1e3, None)
