"""Reading an input file whole (sources.read_file) and writing an output atomically
(sinks.write_atomic), in as few system calls as they can: each one lets go of the GIL."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from edgecli import sinks
from edgecli.errors import FrameError, OutputError
from edgecli.sinks import TEMP_PREFIX, TEMP_SUFFIX, write_atomic
from edgecli.sources import read_file


def counting(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` with a wrapper that records each call's arguments."""
    real, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


# ---- read_file ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 4095, 4096, 3 * 1024 * 1024 + 7])
def test_read_file_returns_the_bytes_in_one_read(tmp_path, monkeypatch, size):
    data = os.urandom(size)
    (tmp_path / "f.jpg").write_bytes(data)
    reads = counting(monkeypatch, os, "read")
    assert read_file(tmp_path / "f.jpg") == data
    assert len(reads) == 1


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


def test_read_file_reads_a_pipe_to_its_end(tmp_path):
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
        assert read_file(fifo) == data
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
def test_read_file_names_the_file_and_the_reason(tmp_path, make, reason):
    path = tmp_path / "frame.png"
    make(path)
    with pytest.raises(FrameError) as raised:
        read_file(path)
    assert (raised.value.source, raised.value.reason) == (str(path), reason)


def test_read_file_closes_what_it_opened(tmp_path, monkeypatch):
    """The descriptor is closed on success and on a failed read alike."""
    (tmp_path / "ok.png").write_bytes(b"x" * 100)
    (tmp_path / "dir.png").mkdir()
    opened = counting(monkeypatch, os, "open")
    closed = counting(monkeypatch, os, "close")
    read_file(tmp_path / "ok.png")
    with pytest.raises(FrameError):
        read_file(tmp_path / "dir.png")
    assert len(opened) == len(closed) == 2


# ---- write_atomic ------------------------------------------------------------------------------


def temporaries(folder) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX))


def test_write_atomic_writes_every_byte_when_the_system_writes_a_few_at_a_time(
    tmp_path, monkeypatch
):
    data = os.urandom(100_000)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, view: real_write(fd, view[:999]))
    write_atomic(tmp_path / "a.png", data)
    assert (tmp_path / "a.png").read_bytes() == data
    assert temporaries(tmp_path) == []


def test_write_atomic_replaces_an_existing_output(tmp_path):
    (tmp_path / "a.png").write_bytes(b"old")
    write_atomic(tmp_path / "a.png", b"new")
    assert (tmp_path / "a.png").read_bytes() == b"new"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_write_atomic_gives_outputs_the_mode_of_any_new_file(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "a.png", b"png")
    finally:
        os.umask(old)
    assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o666 & ~umask


def test_write_atomic_steps_over_a_dead_runs_temporary_of_the_same_name(tmp_path, monkeypatch):
    """A leftover whose name this process would take next (its PID reused) is left alone."""
    monkeypatch.setattr(sinks, "_temp_numbers", iter([7, 8]))
    stale = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-7@{sinks._HOST}{TEMP_SUFFIX}"
    stale.write_bytes(b"partial")
    write_atomic(tmp_path / "a.png", b"png")
    assert (tmp_path / "a.png").read_bytes() == b"png"
    assert stale.read_bytes() == b"partial"
    assert temporaries(tmp_path) == [stale.name]


def test_write_atomic_makes_a_missing_folder(tmp_path):
    write_atomic(tmp_path / "sub" / "deeper" / "a.png", b"png")
    assert (tmp_path / "sub" / "deeper" / "a.png").read_bytes() == b"png"


def test_write_atomic_makes_four_system_calls(tmp_path, monkeypatch):
    """open, write, close and rename: no mkdir, stat or chmod a frame."""
    names = ("open", "write", "close", "replace", "mkdir", "fchmod")
    calls = {name: counting(monkeypatch, os, name) for name in names}
    write_atomic(tmp_path / "a.png", b"png")
    assert {name: len(c) for name, c in calls.items()} == {
        "open": 1, "write": 1, "close": 1, "replace": 1, "mkdir": 0, "fchmod": 0,
    }  # fmt: skip


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
    tmp_path, monkeypatch, failing, error, reason
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


def test_write_atomic_below_a_file_fails_naming_the_output(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(OutputError, match=r"file/a\.png: cannot write \(Not a directory\)"):
        write_atomic(tmp_path / "file" / "a.png", b"png")
