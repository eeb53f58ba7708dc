"""Reading an input file whole (decode.cpu.read_file; read_walked, which walks a JPEG's scans
as it reads them, in C where edgecli._native is built; and ReadBuffers, which reads into
buffers used again) and writing an output atomically
(sinks.write_atomic, in C where edgecli._native is built and in Python): every byte, whatever
the file system does, and never a partial file."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgecli
from edgecli import native
from edgecli.decode.cpu import ReadBuffers, read_file, read_walked
from edgecli.decode.jpeg_header import UNWALKED
from edgecli.errors import FrameError, OutputError
from edgecli.output.sinks import TEMP_PREFIX, TEMP_SUFFIX, write_atomic

from .helpers import dead_runs_temporary, make_folder
from .media import REPO

# ---- read_file and read_walked -----------------------------------------------------------------

# The readers of an input file, by the bytes they give.
READERS = {
    "read_file": read_file,
    "read_walked": lambda path: read_walked(path)[0],
    "ReadBuffers": lambda path: bytes(ReadBuffers().read(path)),
}


@pytest.fixture(params=list(READERS))
def read(request):
    return READERS[request.param]


@pytest.mark.parametrize("size", [1, 4095, 4096, 3 * 1024 * 1024 + 7])
def test_read_file_returns_every_byte(tmp_path, size, read):
    data = os.urandom(size)
    (tmp_path / "f.jpg").write_bytes(data)
    assert read(tmp_path / "f.jpg") == data


def test_read_walked_gives_the_walks_verdict_on_the_bytes(tmp_path):
    """A JPEG, whole and with its scan damaged, and a file that is no JPEG: read_walked's
    verdict is jpeg_scan_damage's on the same bytes, where the C module is built; UNWALKED
    where it is not."""
    whole = (REPO / "sample_frames").glob("*.jpg").__next__().read_bytes()
    sos = whole.index(b"\xff\xda")
    damaged = whole[: sos + 200] + b"\xff\x00" * 3 + b"\xff\xd5" + whole[sos + 208 :]
    for name, data in [("whole.jpg", whole), ("damaged.jpg", damaged), ("x.png", b"\x89PNG..")]:
        (tmp_path / name).write_bytes(data)
        got, walked = read_walked(tmp_path / name)
        assert got == data
        if native.c is None:
            assert walked is UNWALKED
        else:
            assert walked == native.c.jpeg_scan_damage(data)
    if native.c is not None:
        assert isinstance(read_walked(tmp_path / "damaged.jpg")[1], str)
        assert read_walked(tmp_path / "whole.jpg")[1] is None


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.booleans(), st.integers(0, 5), st.integers(1, 300_000)), max_size=40
    )
)
def test_read_buffers_never_lend_a_buffer_twice_and_make_one_only_when_none_fits(
    tmp_path_factory, steps
):
    """Files of every size read into ReadBuffers and given back in any order: each file's bytes
    stay its own until given back (a buffer lent twice would show another file's bytes), and a
    buffer is made only where none given back holds the file, else the smallest that does is
    used again. Where the native reader is missing, the bytes are read_file's."""
    folder = tmp_path_factory.mktemp("reads")
    buffers, held, free = ReadBuffers(), [], []  # free: the sizes of the buffers given back
    made = 0
    real_make = getattr(native.c, "uninitialized", None)

    def counted(size):
        nonlocal made
        made += 1
        return real_make(size)

    with pytest.MonkeyPatch.context() as patch:
        if real_make is not None:
            patch.setattr(native.c, "uninitialized", counted)
        for i, (read_one, which, size) in enumerate(steps):
            if read_one or not held:
                expected, before = os.urandom(size), made
                (folder / f"{i}.png").write_bytes(expected)
                data = buffers.read(folder / f"{i}.png")
                if native.c is None:
                    assert isinstance(data, bytes)
                    capacity = None
                else:
                    capacity = len(data.obj)
                    fitting = [c for c in free if c >= size]
                    assert made == before + (not fitting)
                    if fitting:
                        assert capacity == min(fitting)
                        free.remove(capacity)
                held.append((data, expected, capacity))
            else:
                data, expected, capacity = held.pop(which % len(held))
                assert data == expected
                buffers.give(data)
                if capacity is not None:
                    free.append(capacity)
                    with pytest.raises(ValueError):  # released: its buffer may be another's now
                        bytes(data)
            assert all(data == expected for data, expected, _ in held)


def test_read_buffers_keep_a_buffer_still_exported_out_of_use(tmp_path):
    """A buffer given back while a numpy array still reads it is not lent again: the next file
    read leaves the array's bytes as they were."""
    if native.c is None:
        pytest.skip("edgecli._native is not built: ReadBuffers reads with read_file")
    first, second = os.urandom(5000), os.urandom(4000)
    (tmp_path / "a.png").write_bytes(first)
    (tmp_path / "b.png").write_bytes(second)
    buffers = ReadBuffers()
    data = buffers.read(tmp_path / "a.png")
    array = np.frombuffer(data, np.uint8)
    buffers.give(data)
    assert buffers.read(tmp_path / "b.png") == second
    assert array.tobytes() == first


def test_read_file_reads_on_when_the_file_grew_since_its_size_was_taken(tmp_path, monkeypatch):
    """fstat said fewer bytes than there are (the file grew): every byte is still read."""
    data = os.urandom(3 * 1024 * 1024)
    (tmp_path / "f.jpg").write_bytes(data)
    real_fstat = os.fstat

    def stale_fstat(fd):
        info = real_fstat(fd)
        return os.stat_result((*info[:6], 1000, *info[7:]))  # st_size: 1000

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_file(tmp_path / "f.jpg") == data


def test_read_file_reads_a_pipe_to_its_end(tmp_path, read):
    """A FIFO has no size and gives its bytes in pieces: all of them are read."""
    fifo = tmp_path / "frame.jpg"
    os.mkfifo(fifo)
    data = os.urandom(2 * 1024 * 1024 + 3)

    def writer():
        with open(fifo, "wb") as handle:
            for at in range(0, len(data), 65536):
                handle.write(data[at : at + 65536])
                handle.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert read(fifo) == data
    finally:
        thread.join()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.write_bytes(b""), "empty file"),
        (lambda p: None, "No such file or directory"),
        (lambda p: p.mkdir(), "Is a directory"),
    ],
)
def test_read_file_names_the_file_and_the_reason(tmp_path, make, reason, read):
    path = tmp_path / "frame.png"
    make(path)
    with pytest.raises(FrameError) as raised:
        read(path)
    assert (raised.value.source, raised.value.reason) == (str(path), reason)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_read_file_leaks_no_file_descriptor(tmp_path, read):
    """Reads that succeed and reads that fail (a folder, an empty file) leave this process
    with as many open file descriptors as before: a long run cannot run out of them."""
    (tmp_path / "ok.png").write_bytes(b"x" * 100)
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "dir.png").mkdir()
    before = open_descriptors()
    for _ in range(50):
        assert read(tmp_path / "ok.png") == b"x" * 100
        for bad in ("empty.png", "dir.png", "missing.png"):
            with pytest.raises(FrameError):
                read(tmp_path / bad)
    assert open_descriptors() == before


# ---- write_atomic ------------------------------------------------------------------------------


def temporaries(folder) -> list:
    names = (p.name for p in folder.iterdir())
    return sorted(n for n in names if n.startswith(TEMP_PREFIX) and n.endswith(TEMP_SUFFIX))


@pytest.fixture(params=["C", "Python"])
def writes_in(request, monkeypatch) -> str:
    """Each test twice: with edgecli._native's write_file, and with the Python os calls."""
    if request.param == "C" and native.c is None:
        pytest.skip("edgecli._native is not built (no C compiler or zlib.h at install)")
    if request.param == "Python":
        monkeypatch.setattr(native, "c", None)
    return request.param


@pytest.fixture
def python_calls(monkeypatch) -> None:
    """The Python os calls, which a test replaces to make the system misbehave."""
    monkeypatch.setattr(native, "c", None)


def test_write_atomic_writes_every_byte_when_the_system_writes_a_few_at_a_time(
    tmp_path, monkeypatch, python_calls
):
    data = os.urandom(100_000)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, view: real_write(fd, view[:999]))
    write_atomic(tmp_path / "a.png", data)
    assert (tmp_path / "a.png").read_bytes() == data
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("size", [0, 1, 4096, 5 * 1024 * 1024 + 3])
def test_write_atomic_writes_every_byte(tmp_path, writes_in, size):
    data = os.urandom(size)
    write_atomic(tmp_path / "a.png", data)
    assert (tmp_path / "a.png").read_bytes() == data
    assert temporaries(tmp_path) == []


def test_write_atomic_replaces_an_existing_output(tmp_path, writes_in):
    (tmp_path / "a.png").write_bytes(b"old")
    write_atomic(tmp_path / "a.png", b"new")
    assert (tmp_path / "a.png").read_bytes() == b"new"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_write_atomic_gives_outputs_the_mode_of_any_new_file(tmp_path, writes_in, umask):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "a.png", b"png")
    finally:
        os.umask(old)
    assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o666 & ~umask


# In a fresh process: leftovers named as its own first temporaries would be (its PID reused
# from a dead run), then three writes. argv: the folder, the first temporary number, the host,
# and C or Python (what writes).
WRITE_AMONG_LEFTOVERS = """
import os, sys
from pathlib import Path
import edgecli.native
from edgecli.output.sinks import TEMP_PREFIX, TEMP_SUFFIX, write_atomic
folder, first, host, writes_in = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if writes_in == "Python":
    edgecli.native.c = None
for n in range(first, first + 20):
    (folder / f"{TEMP_PREFIX}{os.getpid()}-{n}@{host}{TEMP_SUFFIX}").write_bytes(b"left %d" % n)
for name in ("a.png", "b.png", "c.png"):
    write_atomic(folder / name, name.encode())
"""


def test_write_atomic_steps_over_a_dead_runs_temporaries_of_the_same_names(tmp_path, writes_in):
    """Leftovers of a dead run named as this process's next temporaries (its PID reused) are
    left alone, byte for byte, and every output is written whole; the next run, which finds
    them dead, removes them all."""
    # A dead run's leftover gives the name a fresh process's first temporary on this host has.
    dead = dead_runs_temporary(tmp_path / "probe")
    _, number_host = dead.name[len(TEMP_PREFIX) : -len(TEMP_SUFFIX)].split("-", 1)
    number, host = number_host.split("@", 1)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", WRITE_AMONG_LEFTOVERS, str(out), number, host, writes_in],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    leftovers = temporaries(out)
    assert len(leftovers) == 20
    for name in leftovers:
        n = int(name[len(TEMP_PREFIX) :].split("@")[0].split("-")[1])
        assert (out / name).read_bytes() == b"left %d" % n, name
    for name in ("a.png", "b.png", "c.png"):
        assert (out / name).read_bytes() == name.encode()
    edgecli.process(make_folder(tmp_path / "in", 1), out, backend="cpu")
    assert temporaries(out) == []


def test_write_atomic_makes_a_missing_folder_only_when_asked(tmp_path, writes_in):
    """A missing folder is made with make_folder (a folder edgecli owns), and otherwise the
    write fails naming the file, with nothing made."""
    with pytest.raises(OutputError, match=r"sub/deeper/a\.png: cannot write \(No such file"):
        write_atomic(tmp_path / "sub" / "deeper" / "a.png", b"png")
    assert list(tmp_path.iterdir()) == []
    write_atomic(tmp_path / "sub" / "deeper" / "a.png", b"png", make_folder=True)
    assert (tmp_path / "sub" / "deeper" / "a.png").read_bytes() == b"png"


@pytest.mark.parametrize(
    ("failing", "error", "reason"),
    [
        ("open", errno.EACCES, "Permission denied"),
        ("write", errno.ENOSPC, "disk full"),
        ("close", errno.EIO, "Input/output error"),
        ("replace", errno.EXDEV, "Invalid cross-device link"),
    ],
)
def test_write_atomic_fails_naming_the_output_and_leaves_no_temporary(
    tmp_path, monkeypatch, python_calls, failing, error, reason
):
    real = getattr(os, failing)

    def fail(*args, **kwargs):
        if failing == "close":
            real(*args, **kwargs)  # the descriptor is released; the error is the close's
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OutputError) as raised:
        write_atomic(tmp_path / "a.png", b"png")
    assert str(raised.value) == f"{tmp_path / 'a.png'}: cannot write ({reason})"
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_below_a_file_fails_naming_the_output(tmp_path, writes_in):
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(OutputError, match=r"file/a\.png: cannot write \(Not a directory\)"):
        write_atomic(tmp_path / "file" / "a.png", b"png")


def test_write_atomic_onto_a_folder_fails_and_leaves_no_temporary(tmp_path, writes_in):
    """The rename fails (a folder holds the name): the temporary, written, is removed."""
    (tmp_path / "a.png").mkdir()
    with pytest.raises(OutputError) as raised:
        write_atomic(tmp_path / "a.png", b"png")
    assert str(raised.value) == f"{tmp_path / 'a.png'}: cannot write (Is a directory)"
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"] and (tmp_path / "a.png").is_dir()


# In a fresh process whose files may grow to 4096 bytes (RLIMIT_FSIZE; Python ignores the
# SIGXFSZ that comes with it): a write of 100,000 bytes. argv: the folder, C or Python.
WRITE_PAST_THE_SIZE_LIMIT = """
import resource, sys
from pathlib import Path
import edgecli.native
from edgecli.errors import OutputError
from edgecli.output.sinks import write_atomic
if sys.argv[2] == "Python":
    edgecli.native.c = None
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write_atomic(Path(sys.argv[1]) / "a.png", bytes(100_000))
except OutputError as error:
    print(error)
"""


def test_write_atomic_past_the_file_size_limit_fails_and_leaves_no_temporary(tmp_path, writes_in):
    """The system writes 4096 bytes, then refuses the rest (EFBIG): the error names the
    output, and neither it nor the temporary is left."""
    done = subprocess.run(
        [sys.executable, "-c", WRITE_PAST_THE_SIZE_LIMIT, str(tmp_path), writes_in],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path / 'a.png'}: cannot write (File too large)\n"
    assert list(tmp_path.iterdir()) == []
