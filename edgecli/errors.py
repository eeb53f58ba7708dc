"""Exceptions that carry the process exit code the CLI documents.

Library callers catch :class:`EdgecliError`; the CLI turns each one into a one-line
``Error: …`` and its exit code, never a traceback.
"""

from __future__ import annotations

import re

# Exit codes, documented in the README (docs/usage.md in full) and asserted by the CLI tests.
EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_CUDA_UNUSABLE = 4
EXIT_MISMATCH = 5
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


# C0 and C1 control characters, DEL, and the surrogates Python gives a file name's bytes that
# are not UTF-8: each would break a message's one line, move the cursor or recolour the
# terminal, or not print at all.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code - 0xDC00 if code >= 0xDC80 else code:02x}"  # a stray byte: its value


def printable(text: str) -> str:
    """``text`` fit for one line of a terminal: control characters escaped as ``\\n``,
    ``\\r``, ``\\t`` or ``\\xNN`` (ESC is ``\\x1b``), and a file name's bytes that are not
    UTF-8 as ``\\xNN``. Every line edgecli prints passes through it, so a path that holds
    them (a file named with a newline) keeps its message on one line."""
    return _UNPRINTABLE.sub(_escape, text)


class EdgecliError(Exception):
    """Base class: a failure with a message fit to print and an exit code."""

    exit_code = EXIT_RUNTIME


class OptionError(EdgecliError, ValueError):
    """An option has a value edgecli cannot use; the message names the value."""

    exit_code = EXIT_USAGE


class InputError(EdgecliError):
    """The input cannot be read as frames (missing, empty, undecodable, …)."""


class FrameError(InputError):
    """One frame could not be decoded; ``source`` names the file (and frame). ``frames`` is
    how many frames it costs the run: more than one where a video ends before the frames its
    container promises."""

    def __init__(self, source: str, reason: str, frames: int = 1):
        super().__init__(f"{printable(source)}: {reason}")
        self.source = source
        self.reason = reason
        self.frames = frames


class FrameArrayError(InputError, ValueError):
    """An array given as frames (:func:`edgecli.detect_edges`) is not 8-bit gray, BGR or BGRA
    of a shape edgecli takes; the message names its dtype and shape, and the shapes taken."""


class OutputError(EdgecliError):
    """The output folder or a file in it cannot be written."""


class ResourceError(EdgecliError):
    """The system refused what the run needs to start (threads, say); the message says what
    and what to change."""


class CudaUnavailableError(EdgecliError):
    """The CUDA backend was asked for but cannot run here; the message says why."""

    exit_code = EXIT_CUDA_UNUSABLE


class GpuMemoryError(EdgecliError):
    """The GPU (or pinned host memory) could not hold a batch; the message says what to do."""


class KernelBuildError(EdgecliError):
    """The CUDA kernel does not compile or load (NVRTC missing, unsupported device, ...)."""


class KernelResourceError(EdgecliError):
    """The CUDA kernel cannot run with its launch configuration on this device."""


class ClusterError(EdgecliError):
    """The cluster cannot be reached or used, or a task failed there; the message says why."""


class ExpectationError(EdgecliError):
    """The outputs differ from a manifest given with --expect (exit 5)."""

    exit_code = EXIT_MISMATCH
