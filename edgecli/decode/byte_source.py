"""Bytes of a container file read at offsets, from a file or from memory, and the one error
every container and codec reader raises where the file cannot be read as far as it needs."""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, Protocol

# What reading a file's structures can raise besides Unreadable: a case the checks missed.
MALFORMED = (struct.error, IndexError, ValueError, OverflowError)


class Unreadable(ValueError):
    """The file cannot be read as far as its description needs; the message is the reason."""


class Source(Protocol):
    size: int

    def read(self, offset: int, size: int) -> bytes: ...


class FileSource:
    def __init__(self, f: BinaryIO):
        self._f = f
        self.size = os.fstat(f.fileno()).st_size

    def read(self, offset: int, size: int) -> bytes:
        self._f.seek(offset)
        return self._f.read(size)


class BytesSource:
    def __init__(self, data: bytes):
        self._data = data
        self.size = len(data)

    def read(self, offset: int, size: int) -> bytes:
        return self._data[offset : offset + size]


def read_whole(source: Source, start: int, size: int, name: str, limit: int) -> bytes:
    """The ``size`` bytes at ``start``; Unreadable naming ``name`` (a box, an element) where
    they are more than ``limit`` or the file ends before them."""
    if size > limit:
        raise Unreadable(f"{name} of {size} bytes")
    data = source.read(start, size)
    if len(data) < size:
        raise Unreadable(f"truncated {name}")
    return data
